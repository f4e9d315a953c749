#include "backends/cpu/conv_blas.hpp"

#include <cblas.h>

#include <climits>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "backends/cpu/conv_isa.hpp"
#include "backends/cpu/sgemm_avx512.hpp"
#include "backends/cpu/thread_pool.hpp"
#include "galley/core/error.hpp"

// cblas.h of the pthread and openmp OpenBLAS flavours declares this; the reference cblas does
// not, so declare it here (OpenBLAS is what libgalley links).
extern "C" void openblas_set_num_threads(int num_threads);

namespace galley::backends::cpu {

// Single-threaded OpenBLAS split over the pool rather than OpenBLAS's own threads: on bare GEMMs
// the two ways are about even, but inside a convolution the split wins: each worker's im2col
// buffer stays in its core's cache, the 7x7-plane GEMMs split over rows of W, and OpenBLAS's idle
// workers, which spin for up to 2^28 cycles after a threaded call, never fight the pool for the
// cores. Build with -DGALLEY_CPU_BLAS_THREADED to measure the other way.
#ifdef GALLEY_CPU_BLAS_THREADED
constexpr bool kThreaded = true;
#else
constexpr bool kThreaded = false;
#endif

bool blas_threaded() { return kThreaded; }

bool sgemm_applies_post_ops() { return cpu_has_avx512() && !kThreaded; }

std::int64_t gemm_workers() { return kThreaded ? 1 : pool_size(); }

void for_gemm_tasks(std::int64_t begin, std::int64_t end, const std::function<void(std::int64_t, std::int64_t)>& body) {
  if (kThreaded) {
    if (begin < end) body(begin, end);
  } else {
    parallel_for(begin, end, body);
  }
}

namespace {
void blas_setup() {
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(kThreaded ? pool_size() : 1); });
}

// The calling thread's packing buffer for avx512::sgemm, 64-byte aligned. Kept for the life of
// the thread (pool workers live as long as the process) so a GEMM never allocates.
float* pack_buffer() {
  thread_local std::vector<float> storage(static_cast<std::size_t>(avx512::kPackFloats + 16));
  const auto addr = reinterpret_cast<std::uintptr_t>(storage.data());
  return reinterpret_cast<float*>((addr + 63) & ~std::uintptr_t{63});
}
}  // namespace

void sgemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
           const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c,
           std::int64_t ldc, const avx512::PostOps* post) {
  for (const std::int64_t v : {m, n, k, lda, ldb, ldc}) {
    if (v < 0 || v > INT_MAX) {
      throw Error(Status::internal, "sgemm: dimension " + std::to_string(v) + " does not fit OpenBLAS's int (m=" +
                                        std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k) + ")");
    }
  }
  if (m == 0 || n == 0) return;
  // OpenBLAS 0.3.21 as Debian builds it runs its Haswell (AVX2) kernels on AVX-512 CPUs; Galley's
  // packed AVX-512 kernel beats it there.
  if (sgemm_applies_post_ops()) {
    avx512::sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, pack_buffer(), post);
    return;
  }
  if (post != nullptr) throw Error(Status::internal, "sgemm: post-ops given to the OpenBLAS path");
  blas_setup();
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha, a, static_cast<int>(lda), b,
              static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
}

std::size_t packed_group_floats(std::int64_t rows, std::int64_t depth) {
  return (static_cast<std::size_t>(avx512::packed_a_floats(rows, depth)) + 15) / 16 * 16;
}

void pack_weight_groups(const float* w, std::int64_t groups, std::int64_t rows, std::int64_t depth, float* out) {
  if (!sgemm_applies_post_ops()) throw Error(Status::internal, "pack_weight_groups: the AVX-512 SGEMM is not in use");
  const std::size_t group_floats = packed_group_floats(rows, depth);
  // Blocks of kMc rows (a multiple of kMr, as pack_a_rows wants) of every group.
  const std::int64_t row_blocks = (rows + avx512::kMc - 1) / avx512::kMc;
  parallel_for(0, groups * row_blocks, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t t = lo; t < hi; ++t) {
      const std::int64_t gi = t / row_blocks, r0 = t % row_blocks * avx512::kMc;
      avx512::pack_a_rows(w + gi * rows * depth, depth, rows, depth, r0, r0 + avx512::kMc,
                          out + static_cast<std::size_t>(gi) * group_floats);
    }
  });
}

void sgemm_packed_rows(std::int64_t whole_rows, std::int64_t r0, std::int64_t m, std::int64_t n, std::int64_t depth,
                       const float* a_packed, const float* b, std::int64_t ldb, float* c, std::int64_t ldc,
                       const avx512::PostOps* post) {
  if (!sgemm_applies_post_ops()) throw Error(Status::internal, "sgemm_packed_rows: the AVX-512 SGEMM is not in use");
  if (r0 % avx512::kMr != 0 || r0 < 0 || m < 0 || r0 + m > whole_rows) {
    throw Error(Status::internal, "sgemm_packed_rows: rows [" + std::to_string(r0) + ", " + std::to_string(r0 + m) +
                                      ") of " + std::to_string(whole_rows) + " do not start on a multiple of " +
                                      std::to_string(avx512::kMr) + " inside the packed A");
  }
  if (m == 0 || n == 0) return;
  avx512::sgemm_packed_a_rows(whole_rows, r0, m, n, depth, 1.0f, a_packed, b, ldb, 0.0f, c, ldc, pack_buffer(), post);
}

}  // namespace galley::backends::cpu
