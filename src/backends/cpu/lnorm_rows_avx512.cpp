// See lnorm_rows_avx512.hpp. Compiled with AVX-512 F/BW/VL/DQ; nothing here instantiates a
// standard-library template (see sgemm_avx512.cpp).
#include "backends/cpu/lnorm_rows_avx512.hpp"

#include <immintrin.h>

#include "backends/cpu/avx512_lanes.hpp"

namespace galley::backends::cpu::avx512 {
namespace {

// Vectors summed in f32 before their sum moves to double: a run adds kRun values a lane, so its
// f32 error stays within a few ulp of the run's own magnitude.
constexpr std::int64_t kRun = 4;

inline __m512d low_half(__m512 v) { return _mm512_cvtps_pd(_mm512_castps512_ps256(v)); }
inline __m512d high_half(__m512 v) {
  return _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
}

// Two double accumulators of 8 lanes for one sum.
struct DoubleSum {
  __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
  void add(__m512 v) {
    lo = _mm512_add_pd(lo, low_half(v));
    hi = _mm512_add_pd(hi, high_half(v));
  }
  double total() const { return _mm512_reduce_add_pd(_mm512_add_pd(lo, hi)); }
};

// step(i, mask) over [0, n) in vectors of 16 floats, the last one masked to the row.
template <class Step>
inline void for_each_vector(std::int64_t n, const Step& step) {
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16) step(i, 0xffff);
  if (i < n) step(i, lanes(n - i));
}

// Two sums over a row, added up in f32 over runs of kRun vectors and then in double: a += u,
// b += v * w per vector.
class TwoRunSums {
 public:
  void add(__m512 u, __m512 v, __m512 w) {
    run_a_ = _mm512_add_ps(run_a_, u);
    run_b_ = _mm512_fmadd_ps(v, w, run_b_);
    if (++in_run_ == kRun) flush();
  }
  void finish(double& a, double& b) {
    flush();
    a = a_.total();
    b = b_.total();
  }

 private:
  void flush() {
    a_.add(run_a_);
    b_.add(run_b_);
    run_a_ = run_b_ = _mm512_setzero_ps();
    in_run_ = 0;
  }
  DoubleSum a_, b_;
  __m512 run_a_ = _mm512_setzero_ps(), run_b_ = _mm512_setzero_ps();
  std::int64_t in_run_ = 0;
};

}  // namespace

void lnorm_row_moments(const float* x, std::int64_t n, float pivot, double& s1, double& s2) {
  const __m512 vp = _mm512_set1_ps(pivot);
  TwoRunSums sums;
  const auto step = [&](std::int64_t i, __mmask16 k) {
    // Lanes past the row are zero, not -pivot.
    const __m512 d = _mm512_maskz_sub_ps(k, _mm512_maskz_loadu_ps(k, x + i), vp);
    sums.add(d, d, d);
  };
  for_each_vector(n, step);
  sums.finish(s1, s2);
}

void lnorm_row_affine(const float* x, const float* scale, const float* shift, float* y, std::int64_t n,
                      float m, float m_lo, float r) {
  const __m512 vm = _mm512_set1_ps(m), vlo = _mm512_set1_ps(m_lo), vr = _mm512_set1_ps(r);
  const auto step = [&](std::int64_t i, __mmask16 k) {
    const __m512 t =
        _mm512_mul_ps(_mm512_sub_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i), vm), vlo), vr);
    _mm512_mask_storeu_ps(
        y + i, k,
        _mm512_fmadd_ps(t, _mm512_maskz_loadu_ps(k, scale + i), _mm512_maskz_loadu_ps(k, shift + i)));
  };
  for_each_vector(n, step);
}

void lnorm_row_gradient_sums(const float* x, const float* dy, const float* scale, std::int64_t n, float m,
                             float r, double& sum_g, double& sum_gx, float* dscale, float* dshift) {
  const __m512 vm = _mm512_set1_ps(m), vr = _mm512_set1_ps(r);
  TwoRunSums sums;
  const auto step = [&](std::int64_t i, __mmask16 k) {
    const __m512 d = _mm512_maskz_loadu_ps(k, dy + i);
    const __m512 xhat = _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i), vm), vr);
    const __m512 g = _mm512_mul_ps(d, _mm512_maskz_loadu_ps(k, scale + i));
    sums.add(g, g, xhat);
    _mm512_mask_storeu_ps(dscale + i, k, _mm512_fmadd_ps(d, xhat, _mm512_maskz_loadu_ps(k, dscale + i)));
    _mm512_mask_storeu_ps(dshift + i, k, _mm512_add_ps(d, _mm512_maskz_loadu_ps(k, dshift + i)));
  };
  for_each_vector(n, step);
  sums.finish(sum_g, sum_gx);
}

void lnorm_row_dx(const float* x, const float* dy, const float* scale, float* dx, std::int64_t n, float m,
                  float r, float kg, float kx) {
  const __m512 vm = _mm512_set1_ps(m), vr = _mm512_set1_ps(r), vkg = _mm512_set1_ps(kg),
               vrkx = _mm512_set1_ps(r * kx);
  const auto step = [&](std::int64_t i, __mmask16 k) {
    const __m512 g = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, dy + i), _mm512_maskz_loadu_ps(k, scale + i));
    const __m512 centered = _mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i), vm);
    const __m512 t = _mm512_fnmadd_ps(centered, vrkx, _mm512_sub_ps(g, vkg));
    _mm512_mask_storeu_ps(dx + i, k, _mm512_mul_ps(vr, t));
  };
  for_each_vector(n, step);
}

}  // namespace galley::backends::cpu::avx512
