// The cuda plugin's conv solvers: the single-source gpu.conv.* set plus the vendor solvers.
#pragma once

#include <memory>

#include "galley/dnn/solver.hpp"

namespace galley::backends::cuda {

/// Registers gpu.conv.* (backends/gpu) and cuda.conv.cudnn (rank 20) and cuda.conv.cublas_gemm
/// (rank 40) on the "cuda" backend. Called once from galley_plugin_register.
void register_cuda_conv_solvers();

std::unique_ptr<dnn::ConvSolver> make_cudnn_conv_solver();
std::unique_ptr<dnn::ConvSolver> make_cublas_gemm_conv_solver();

}  // namespace galley::backends::cuda
