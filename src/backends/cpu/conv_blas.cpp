#include "backends/cpu/conv_blas.hpp"

#include <cblas.h>

#include <climits>
#include <mutex>
#include <string>

#include "galley/core/error.hpp"

// cblas.h of the pthread and openmp OpenBLAS flavours declares this; the reference cblas does
// not, so declare it here (OpenBLAS is what libgalley links).
extern "C" void openblas_set_num_threads(int num_threads);

namespace galley::backends::cpu {

void blas_single_threaded() {
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });
}

void sgemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
           const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c,
           std::int64_t ldc) {
  for (const std::int64_t v : {m, n, k, lda, ldb, ldc}) {
    if (v < 0 || v > INT_MAX) {
      throw Error(Status::internal, "sgemm: dimension " + std::to_string(v) + " does not fit OpenBLAS's int (m=" +
                                        std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k) + ")");
    }
  }
  if (m == 0 || n == 0) return;
  blas_single_threaded();
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha, a, static_cast<int>(lda), b,
              static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
}

}  // namespace galley::backends::cpu
