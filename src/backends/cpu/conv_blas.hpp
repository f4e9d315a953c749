// The one door from the cpu conv solvers to OpenBLAS.
//
// Threading: Galley parallelises over its own pool and calls OpenBLAS single-threaded from each
// pool thread (see bench/RESULTS.md "OpenBLAS threading" for the measurement). OpenBLAS's pthread
// workers spin after every call; mixed with the pool (im2col, transforms) they would fight it for
// the same cores, and a per-worker GEMM keeps the column buffer it just wrote in that core's cache.
#pragma once

#include <cstdint>

namespace galley::backends::cpu {

/// Row-major C[m x n] = alpha * op(A)[m x k] * op(B)[k x n] + beta * C on the calling thread.
/// `trans_a`/`trans_b` select the transposed operand. Sizes are checked (Error(internal) when
/// they do not fit OpenBLAS's int) and a zero-sized product only scales C.
void sgemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
           const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c,
           std::int64_t ldc);

/// Puts OpenBLAS in single-threaded mode once per process (openblas_set_num_threads(1)): every
/// cpu solver calls it before its first GEMM.
void blas_single_threaded();

}  // namespace galley::backends::cpu
