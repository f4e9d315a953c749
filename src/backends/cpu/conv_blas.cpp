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

}  // namespace galley::backends::cpu
