// The one door from the cpu conv solvers to a GEMM: Galley's packed AVX-512 kernel
// (sgemm_avx512.hpp) where cpu_isa() is avx512, else OpenBLAS.
//
// Threading: Galley parallelises over its own pool and calls OpenBLAS single-threaded from each
// pool thread. OpenBLAS's pthread workers spin after every threaded call; mixed with the pool (im2col,
// transforms) they would fight it for the same cores, and a per-worker GEMM keeps the column
// buffer it just wrote in that core's cache.
#pragma once

#include <cstdint>
#include <functional>

#include "backends/cpu/sgemm_avx512.hpp"

namespace galley::backends::cpu {

/// Row-major C[m x n] = alpha * op(A)[m x k] * op(B)[k x n] + beta * C on the calling thread
/// (C is not read when beta == 0).
/// `trans_a`/`trans_b` select the transposed operand. Sizes are checked (Error(internal) when
/// they do not fit OpenBLAS's int) and a zero-sized product only scales C. `post` (null: none)
/// is applied in the AVX-512 kernel's stores; only when sgemm_applies_post_ops(), else
/// Error(internal).
void sgemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
           const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c,
           std::int64_t ldc, const avx512::PostOps* post = nullptr);

/// Floats one group's weights [rows x depth] take packed by pack_weight_groups(): what
/// avx512::pack_a_rows() writes, rounded up to a cache line so each group starts on one.
std::size_t packed_group_floats(std::int64_t rows, std::int64_t depth);

/// Packs `groups` row-major weight matrices [rows x depth], consecutive in `w`, into `out`
/// (packed_group_floats() apart) for sgemm_packed_rows(), split over the pool. Only where
/// sgemm_applies_post_ops().
void pack_weight_groups(const float* w, std::int64_t groups, std::int64_t rows, std::int64_t depth, float* out);

/// C[m x n] = A[r0 .. r0 + m) * B on the calling thread, A being one group packed by
/// pack_weight_groups() (`whole_rows` rows, r0 a multiple of avx512::kMr) and B plain [depth x n]
/// (rows ldb apart): a GEMM whose weights were packed once for every GEMM that reads them. Only
/// where sgemm_applies_post_ops(), else Error(internal).
void sgemm_packed_rows(std::int64_t whole_rows, std::int64_t r0, std::int64_t m, std::int64_t n, std::int64_t depth,
                       const float* a_packed, const float* b, std::int64_t ldb, float* c, std::int64_t ldc,
                       const avx512::PostOps* post = nullptr);

/// True when sgemm() runs Galley's AVX-512 kernel, which applies post-ops as it stores C;
/// OpenBLAS cannot, and its callers apply them after.
bool sgemm_applies_post_ops();

/// True when OpenBLAS runs its own threads (one GEMM call uses every core), false when it is
/// single-threaded and the solvers split GEMMs over the pool. sgemm() sets OpenBLAS up to match
/// on first use.
bool blas_threaded();

/// Workers a GEMM-based solver should plan its GEMM tasks for: 1 when OpenBLAS threads each
/// call itself, else the pool size.
std::int64_t gemm_workers();

/// Runs body(lo, hi) over [begin, end): one call on this thread when OpenBLAS threads its GEMMs
/// (they must not be issued concurrently), else parallel_for over the pool.
void for_gemm_tasks(std::int64_t begin, std::int64_t end, const std::function<void(std::int64_t, std::int64_t)>& body);

}  // namespace galley::backends::cpu
