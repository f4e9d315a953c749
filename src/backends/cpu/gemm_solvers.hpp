// The cpu backend's GEMM solvers, as factories; gemm_list.cpp sets their order.
#pragma once

#include <memory>

#include "galley/dnn/gemm_solver.hpp"

namespace galley::backends::cpu {

/// cpu.gemm.avx512: Galley's packed AVX-512 sgemm (sgemm_avx512.hpp) split over the pool; refuses
/// CPUs without AVX-512.
std::unique_ptr<dnn::GemmSolver> make_gemm_avx512();
/// cpu.gemm.openblas: OpenBLAS's cblas_sgemm, split over the pool as the conv solvers split it.
std::unique_ptr<dnn::GemmSolver> make_gemm_openblas();

}  // namespace galley::backends::cpu
