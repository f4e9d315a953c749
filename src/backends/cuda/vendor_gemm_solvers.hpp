// The cuda plugin's vendor gemm solver (cuBLAS), placed in the list by gemm_list.cpp.
#pragma once

#include <memory>

#include "galley/dnn/gemm_solver.hpp"

namespace galley::backends::cuda {

/// cuda.gemm.cublas: cublasGemmStridedBatchedEx, CUBLAS_COMPUTE_32F (no TF32 for f32).
std::unique_ptr<dnn::GemmSolver> make_cublas_gemm_solver();

}  // namespace galley::backends::cuda
