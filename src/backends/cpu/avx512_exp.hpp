// e^t on 16 f32 lanes for the kernels compiled with AVX-512 (include it only from those files): the
// activation loops (activ_spans_avx512.cpp) and the softmax rows (softmax_reduce_kernels.inc's
// AVX-512 build). Plain inline code: like the kernels, it instantiates no standard-library template
// (see sgemm_avx512.cpp).
//
// n = round(t / ln 2), r = t - n ln 2 in one fused step, a degree-5 fit of e^r, and e^r * 2^n by
// scalef, which rounds correctly into the denormals and saturates to 0 or inf: within 2-3 ulp
// where the result is above 1e-9, 7 ulp at worst near the denormals.
#pragma once

#include <immintrin.h>

#include <cstdint>

// Also silences GCC 12's false uninitialised-operand warnings of the AVX-512 intrinsics.
#include "backends/cpu/avx512_lanes.hpp"

namespace galley::backends::cpu::avx512 {

inline __m512 splat(float v) { return _mm512_set1_ps(v); }

// max and min return their second operand when either is NaN; the input goes second so NaN stays.
inline __m512 at_least(float lo, __m512 v) { return _mm512_max_ps(splat(lo), v); }
inline __m512 at_most(float hi, __m512 v) { return _mm512_min_ps(splat(hi), v); }

/// -|v|: the sign bit set.
inline __m512 negative_abs(__m512 v) {
  return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(v), _mm512_set1_epi32(INT32_MIN)));
}

/// Lanes whose sign bit is set (negative numbers and -0).
inline __mmask16 sign_set(__m512 v) { return _mm512_movepi32_mask(_mm512_castps_si512(v)); }

/// e^(sign * v), sign = -1 or +1, for v already clamped so that sign * v lies in [-104, 89]: below
/// -104 e^t is 0 in float (under half the smallest denormal), above 88.73 it is inf, and the clamp
/// keeps n and r finite for infinite inputs. NaN goes through as NaN. The negation is folded into
/// the reduction rather than spent on its own instruction: these loops are bound by instruction
/// count, so each one saved counts.
template <int kSign>
inline __m512 exp_of_clamped(__m512 v) {
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(v, splat(kSign * 1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  // r = sign * v - n ln 2 in one fused step with ln 2 rounded to f32. Its rounding error, 1.9e-9,
  // times n is the result's extra relative error: under an ulp while |n| <= 30 (results above
  // 1e-9), 3e-7 at worst (n = -150, results near the denormals), where these activations' tails
  // need no more; the second step of Cephes' two-part ln 2 would cost a tenth of the loop.
  const __m512 r = kSign < 0 ? _mm512_fnmsub_ps(n, splat(0.693147180559945f), v)
                             : _mm512_fnmadd_ps(n, splat(0.693147180559945f), v);
  // e^r on [-ln 2 / 2, ln 2 / 2]: a degree-5 fit of relative error 9e-8 (1.5 ulp), one term fewer
  // than Cephes' expf.
  __m512 p = splat(8.29031261e-3f);
  p = _mm512_fmadd_ps(p, r, splat(4.18979303e-2f));
  p = _mm512_fmadd_ps(p, r, splat(1.66676362e-1f));
  p = _mm512_fmadd_ps(p, r, splat(4.99991495e-1f));
  p = _mm512_fmadd_ps(p, r, splat(9.99999707e-1f));
  p = _mm512_fmadd_ps(p, r, splat(1.f));
  return _mm512_scalef_ps(p, n);
}

/// e^t for t <= 0.
inline __m512 exp_nonpositive(__m512 t) { return exp_of_clamped<1>(at_least(-104.f, t)); }

/// e^-x for any x.
inline __m512 exp_of_minus(__m512 x) { return exp_of_clamped<-1>(at_most(104.f, at_least(-89.f, x))); }

}  // namespace galley::backends::cpu::avx512
