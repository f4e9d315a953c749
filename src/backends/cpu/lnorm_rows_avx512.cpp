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
                  float r, float kg, float kx, bool stream) {
  const __m512 vm = _mm512_set1_ps(m), vr = _mm512_set1_ps(r), vkg = _mm512_set1_ps(kg),
               vrkx = _mm512_set1_ps(r * kx);
  const auto value = [&](std::int64_t i, __mmask16 k) {
    const __m512 g = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, dy + i), _mm512_maskz_loadu_ps(k, scale + i));
    const __m512 centered = _mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i), vm);
    return _mm512_mul_ps(vr, _mm512_fnmadd_ps(centered, vrkx, _mm512_sub_ps(g, vkg)));
  };
  if (stream) {
    for (std::int64_t i = 0; i < n; i += 16) _mm512_stream_ps(dx + i, value(i, 0xffff));
    return;
  }
  for_each_vector(n, [&](std::int64_t i, __mmask16 k) { _mm512_mask_storeu_ps(dx + i, k, value(i, k)); });
}

void lnorm_stream_fence() { _mm_sfence(); }

namespace {

// R rows (n floats apart) of V vectors each (the last `tail` lanes, 1..16) in registers: the mean
// of x - pivot, then the sum of squares about that mean (two passes, over registers), then the
// affine map. Padding lanes are zero after each masked step, so they add nothing. Two rows at once
// (V <= 8) give the core two independent chains of horizontal sums to overlap.
template <int V, int R>
void short_rows_forward(const float* x, const float* scale, const float* shift, float* y, std::int64_t n,
                        int tail, double epsilon, float* mean_out, float* invstd_out, bool stream) {
  const __mmask16 last = lanes(tail);
  __m512 d[R][V];
  __m512 vr[R];
#pragma GCC unroll 2
  for (int r = 0; r < R; ++r) {
    const float* row = x + r * n;
    const float pivot = row[0];
    const __m512 vp = _mm512_set1_ps(pivot);
    __m512 s1 = _mm512_setzero_ps();
#pragma GCC unroll 16
    for (int i = 0; i < V; ++i) {
      const __mmask16 k = i + 1 < V ? __mmask16(0xffff) : last;
      d[r][i] = _mm512_maskz_sub_ps(k, _mm512_maskz_loadu_ps(k, row + i * 16), vp);
      s1 = _mm512_add_ps(s1, d[r][i]);
    }
    const float shift_mean = _mm512_reduce_add_ps(s1) / static_cast<float>(n);
    const __m512 vmean = _mm512_set1_ps(shift_mean);
    __m512 s2 = _mm512_setzero_ps();
#pragma GCC unroll 16
    for (int i = 0; i < V; ++i) {
      const __mmask16 k = i + 1 < V ? __mmask16(0xffff) : last;
      d[r][i] = _mm512_maskz_sub_ps(k, d[r][i], vmean);
      s2 = _mm512_fmadd_ps(d[r][i], d[r][i], s2);
    }
    const double var = static_cast<double>(_mm512_reduce_add_ps(s2)) / static_cast<double>(n);
    mean_out[r] = static_cast<float>(static_cast<double>(pivot) + shift_mean);
    invstd_out[r] = static_cast<float>(1.0 / __builtin_sqrt(var + epsilon));
    vr[r] = _mm512_set1_ps(invstd_out[r]);
  }
#pragma GCC unroll 2
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
    for (int i = 0; i < V; ++i) {
      const __mmask16 k = i + 1 < V ? __mmask16(0xffff) : last;
      const __m512 t = _mm512_mul_ps(d[r][i], vr[r]);
      const __m512 out = _mm512_fmadd_ps(t, _mm512_maskz_loadu_ps(k, scale + i * 16),
                                         _mm512_maskz_loadu_ps(k, shift + i * 16));
      if (stream) {
        _mm512_stream_ps(y + r * n + i * 16, out);
      } else {
        _mm512_mask_storeu_ps(y + r * n + i * 16, k, out);
      }
    }
  }
}

using ShortRows = void (*)(const float*, const float*, const float*, float*, std::int64_t, int, double,
                           float*, float*, bool);
constexpr ShortRows kShortRows[] = {
    short_rows_forward<1, 1>,  short_rows_forward<2, 1>,  short_rows_forward<3, 1>,
    short_rows_forward<4, 1>,  short_rows_forward<5, 1>,  short_rows_forward<6, 1>,
    short_rows_forward<7, 1>,  short_rows_forward<8, 1>,  short_rows_forward<9, 1>,
    short_rows_forward<10, 1>, short_rows_forward<11, 1>, short_rows_forward<12, 1>,
    short_rows_forward<13, 1>, short_rows_forward<14, 1>, short_rows_forward<15, 1>,
    short_rows_forward<16, 1>};
constexpr ShortRows kShortRowPairs[] = {
    short_rows_forward<1, 2>, short_rows_forward<2, 2>, short_rows_forward<3, 2>, short_rows_forward<4, 2>,
    short_rows_forward<5, 2>, short_rows_forward<6, 2>, short_rows_forward<7, 2>, short_rows_forward<8, 2>};

// The backward of a row of V vectors held in registers: xhat and g = dy * scale once, their sums,
// the column sums, then dx = r * (g - mean(g) - xhat * mean(g * xhat)).
template <int V>
void short_row_backward(const float* x, const float* dy, const float* scale, float* dx, std::int64_t n,
                        int tail, float m, float r, float* dscale, float* dshift) {
  const __mmask16 last = lanes(tail);
  const __m512 vm = _mm512_set1_ps(m), vr = _mm512_set1_ps(r);
  __m512 xhat[V], g[V];
  __m512 sg = _mm512_setzero_ps(), sgx = _mm512_setzero_ps();
#pragma GCC unroll 16
  for (int i = 0; i < V; ++i) {
    const __mmask16 k = i + 1 < V ? __mmask16(0xffff) : last;
    const __m512 d = _mm512_maskz_loadu_ps(k, dy + i * 16);
    xhat[i] = _mm512_maskz_mul_ps(k, _mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i * 16), vm), vr);
    g[i] = _mm512_mul_ps(d, _mm512_maskz_loadu_ps(k, scale + i * 16));
    sg = _mm512_add_ps(sg, g[i]);
    sgx = _mm512_fmadd_ps(g[i], xhat[i], sgx);
    _mm512_mask_storeu_ps(dscale + i * 16, k,
                          _mm512_fmadd_ps(d, xhat[i], _mm512_maskz_loadu_ps(k, dscale + i * 16)));
    _mm512_mask_storeu_ps(dshift + i * 16, k, _mm512_add_ps(d, _mm512_maskz_loadu_ps(k, dshift + i * 16)));
  }
  const __m512 kg = _mm512_set1_ps(_mm512_reduce_add_ps(sg) / static_cast<float>(n));
  const __m512 kx = _mm512_set1_ps(_mm512_reduce_add_ps(sgx) / static_cast<float>(n));
#pragma GCC unroll 16
  for (int i = 0; i < V; ++i) {
    const __mmask16 k = i + 1 < V ? __mmask16(0xffff) : last;
    _mm512_mask_storeu_ps(dx + i * 16, k,
                          _mm512_mul_ps(vr, _mm512_fnmadd_ps(xhat[i], kx, _mm512_sub_ps(g[i], kg))));
  }
}

using ShortRowBackward = void (*)(const float*, const float*, const float*, float*, std::int64_t, int, float,
                                  float, float*, float*);
constexpr ShortRowBackward kShortRowsBackward[] = {
    short_row_backward<1>, short_row_backward<2>, short_row_backward<3>, short_row_backward<4>,
    short_row_backward<5>, short_row_backward<6>, short_row_backward<7>, short_row_backward<8>};

}  // namespace

void lnorm_short_rows_backward(const float* x, const float* dy, const float* scale, float* dx,
                               std::int64_t rows, std::int64_t n, const float* mean, const float* invstd,
                               float* dscale, float* dshift) {
  const int vectors = static_cast<int>((n + 15) / 16);
  const ShortRowBackward row = kShortRowsBackward[vectors - 1];
  const int tail = static_cast<int>(n - (vectors - 1) * 16);
  for (std::int64_t r = 0; r < rows; ++r)
    row(x + r * n, dy + r * n, scale, dx + r * n, n, tail, mean[r], invstd[r], dscale, dshift);
}

void lnorm_short_rows_forward(const float* x, const float* scale, const float* shift, float* y,
                              std::int64_t rows, std::int64_t n, double epsilon, float* mean, float* invstd,
                              bool stream) {
  const int vectors = static_cast<int>((n + 15) / 16);
  const int tail = static_cast<int>(n - (vectors - 1) * 16);
  std::int64_t r = 0;
  if (vectors <= 8) {
    const ShortRows pair = kShortRowPairs[vectors - 1];
    for (; r + 2 <= rows; r += 2)
      pair(x + r * n, scale, shift, y + r * n, n, tail, epsilon, mean + r, invstd + r, stream);
  }
  const ShortRows one = kShortRows[vectors - 1];
  for (; r < rows; ++r)
    one(x + r * n, scale, shift, y + r * n, n, tail, epsilon, mean + r, invstd + r, stream);
  if (stream) _mm_sfence();
}

}  // namespace galley::backends::cpu::avx512
