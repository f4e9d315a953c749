// The cuda plugin's vendor conv solvers (cuDNN, cuBLAS). The plugin registers them through
// gpu::register_plugin_conv_solvers (backends/gpu/register_conv_solvers.hpp).
#pragma once

#include <memory>

#include "galley/dnn/solver.hpp"

namespace galley::backends::cuda {

/// Registers cuda.conv.cudnn_graph (rank 19), cuda.conv.cudnn (rank 20) and cuda.conv.cublas_gemm
/// (rank 40) on the "cuda" backend.
void register_vendor_conv_solvers();

std::unique_ptr<dnn::ConvSolver> make_cudnn_conv_solver();
std::unique_ptr<dnn::ConvSolver> make_cudnn_graph_conv_solver();
std::unique_ptr<dnn::ConvSolver> make_cublas_gemm_conv_solver();

}  // namespace galley::backends::cuda
