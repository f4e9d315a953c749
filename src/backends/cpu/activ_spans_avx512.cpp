// See activ_spans_avx512.hpp. Compiled with AVX-512 F/BW/VL/DQ; nothing here instantiates a
// standard-library template (see sgemm_avx512.cpp).
#include "backends/cpu/activ_spans_avx512.hpp"

#include <immintrin.h>

#include "backends/cpu/avx512_exp.hpp"
#include "backends/cpu/avx512_lanes.hpp"

namespace galley::backends::cpu::avx512 {
namespace {

using dnn::Activation;
using dnn::ActivDirection;

/// For the derivative: sigmoid(x) and 1 - sigmoid(x) = sigmoid(-x), each to its own relative
/// accuracy, from z = exp(-|x|), which never overflows: sigmoid is 1 / (1 + z) for x >= 0 and
/// z / (1 + z) below, and 1 - sigmoid swaps the numerators.
struct SigmoidParts {
  __m512 z, denominator;
  __mmask16 negative;
  explicit SigmoidParts(__m512 x)
      : z(exp_nonpositive(negative_abs(x))),
        denominator(_mm512_add_ps(splat(1.f), z)),
        negative(sign_set(x)) {}
  /// The numerator of sigmoid(x) times v: v for x >= 0, v * z below.
  __m512 numerator_times(__m512 v) const { return _mm512_mask_mul_ps(v, negative, v, z); }
  /// The numerator of sigmoid(-x) times v.
  __m512 complement_numerator_times(__m512 v) const {
    return _mm512_mask_mul_ps(v, static_cast<__mmask16>(~negative), v, z);
  }
};

// VectorMath::erf's rational fit, erf(w) = w P(w^2) / Q(w^2) on [-4, 4], lowest power first.
constexpr double kErfP[] = {-1.60960333262415e-02, -2.95459980854025e-03, -7.34990630326855e-04,
                            -5.69250639462346e-05, -2.10102402082508e-06, 2.77068142495902e-08,
                            -2.72614225801306e-10};
constexpr double kErfQ[] = {-1.42647390514189e-02, -7.37332916720468e-03, -1.68282697438203e-03,
                            -2.13374055278905e-04, -1.45660718464996e-05};
constexpr double kSqrtHalf = 0.70710678118654752440;

// gelu needs erf(x / sqrt 2) / 2 = x P'(x^2) / Q'(x^2): the powers of 1/2 and the factor
// sqrt(1/2) / 2 are folded into the coefficients, which saves two products a vector.
constexpr float erf_half_p(int k) { return static_cast<float>(kErfP[k] * kSqrtHalf * 0.5 / (1 << k)); }
constexpr float erf_half_q(int k) { return static_cast<float>(kErfQ[k] / (1 << k)); }

/// erf(x / sqrt 2) / 2 from x and x2 = x * x. The fit is evaluated at x2 clamped to 32 (x = 4 sqrt 2,
/// where erf is 1 in float) and its value then clamped to [-1/2, 1/2]. Past the clamp x P'(32) /
/// Q'(32) only grows with |x| (to inf for infinite x), so the result is exactly +-1/2 there; at the
/// clamp the fit overshoots 1/2 by an ulp, so it is +-1/2 there too. Hence 1/2 + erf / 2 is exactly 0
/// for very negative x, as the functor's libm erf gives, not a remainder that x would magnify.
/// NaN stays NaN through both clamps.
inline __m512 half_erf_of_scaled(__m512 x, __m512 x2) {
  const __m512 w = at_most(32.f, x2);
  __m512 p = splat(erf_half_p(6));
  for (int k = 5; k >= 0; --k) p = _mm512_fmadd_ps(p, w, splat(erf_half_p(k)));
  __m512 q = splat(erf_half_q(4));
  for (int k = 3; k >= 0; --k) q = _mm512_fmadd_ps(q, w, splat(erf_half_q(k)));
  return at_most(0.5f, at_least(-0.5f, _mm512_div_ps(_mm512_mul_ps(x, p), q)));
}

// ln(1 / sqrt(2 pi)): exp(-x^2 / 2 + it) is the normal pdf.
constexpr float kLogInvSqrt2Pi = -0.91893853320467274178f;

// Each kernel maps up to 16 lanes; the loops below run it over a span, the last vector masked.
// 1 / (1 + exp(-x)) as the functors write it: accurate everywhere, and exp's inf for x < -88.7
// gives exactly 0. A division: on the cpus this runs on the divider works beside the pipes that
// the exp keeps busy, and costs less than a reciprocal estimate and its Newton step.
struct SigmoidForward {
  static __m512 of(__m512 x) { return _mm512_div_ps(splat(1.f), _mm512_add_ps(splat(1.f), exp_of_minus(x))); }
};
struct SiluForward {
  // x / (1 + exp(-x)); -inf gives -inf / inf = NaN, as in PyTorch.
  static __m512 of(__m512 x) { return _mm512_div_ps(x, _mm512_add_ps(splat(1.f), exp_of_minus(x))); }
};
struct SiluBackward {
  // dy * s * (1 + x * (1 - s)) = dy * a * (d + x * b) / d^2 with s = a / d and 1 - s = b / d.
  static __m512 of(__m512 dy, __m512 x) {
    const SigmoidParts s(x);
    const __m512 d = s.denominator;
    const __m512 top =
        _mm512_mul_ps(s.numerator_times(dy), _mm512_fmadd_ps(x, s.complement_numerator_times(splat(1.f)), d));
    return _mm512_div_ps(top, _mm512_mul_ps(d, d));
  }
};
struct GeluErfForward {
  // x * (1/2 + erf(x / sqrt 2) / 2).
  static __m512 of(__m512 x) {
    return _mm512_mul_ps(x, _mm512_add_ps(splat(0.5f), half_erf_of_scaled(x, _mm512_mul_ps(x, x))));
  }
};
struct GeluErfBackward {
  // dy * (cdf + x * pdf).
  static __m512 of(__m512 dy, __m512 x) {
    const __m512 x2 = _mm512_mul_ps(x, x);
    const __m512 cdf = _mm512_add_ps(splat(0.5f), half_erf_of_scaled(x, x2));
    const __m512 pdf = exp_nonpositive(_mm512_fmadd_ps(x2, splat(-0.5f), splat(kLogInvSqrt2Pi)));
    return _mm512_mul_ps(dy, _mm512_fmadd_ps(x, pdf, cdf));
  }
};

// gelu's tanh form through the sigmoid: x (1 + tanh(u)) / 2 = x sigmoid(2u), with
// 2u = 2 sqrt(2/pi) x (1 + 0.044715 x^2), so one exp and one division as silu, where tanh would take
// an exp and a division of its own and then the product.
constexpr float kTwoSqrt2OverPi = 1.59576912160573071176f;
constexpr float kGeluTanhKappa = 0.044715f;
inline __m512 gelu_tanh_two_u(__m512 x, __m512 x2) {
  return _mm512_mul_ps(_mm512_mul_ps(x, splat(kTwoSqrt2OverPi)),
                       _mm512_fmadd_ps(x2, splat(kGeluTanhKappa), splat(1.f)));
}
struct GeluTanhForward {
  // x / (1 + exp(-2u)); x^3 overflowing makes 2u infinite, which gives x (or -0 below); -inf gives
  // -inf / inf = NaN, as the tanh form's -inf * 0 does.
  static __m512 of(__m512 x) {
    const __m512 two_u = gelu_tanh_two_u(x, _mm512_mul_ps(x, x));
    return _mm512_div_ps(x, _mm512_add_ps(splat(1.f), exp_of_minus(two_u)));
  }
};
struct GeluTanhBackward {
  // dy (s + x s (1 - s) (2u)') = dy * a * (d + x (2u)' b) / d^2 with s = a / d, 1 - s = b / d and
  // (2u)' = 2 sqrt(2/pi) (1 + 3 * 0.044715 x^2). Where s or 1 - s is 0 (tanh saturated) the second
  // term is 0, as the functor makes it: x (2u)' may be infinite there.
  static __m512 of(__m512 dy, __m512 x) {
    const __m512 x2 = _mm512_mul_ps(x, x);
    const SigmoidParts s(gelu_tanh_two_u(x, x2));
    const __m512 d = s.denominator;
    const __m512 a = s.numerator_times(splat(1.f)), b = s.complement_numerator_times(splat(1.f));
    const __m512 slope = _mm512_mul_ps(
        x, _mm512_mul_ps(splat(kTwoSqrt2OverPi), _mm512_fmadd_ps(x2, splat(3 * kGeluTanhKappa), splat(1.f))));
    // a * b is 0 only where a factor is; NaN compares unordered, so it stays live and propagates.
    const __mmask16 live = _mm512_cmp_ps_mask(_mm512_mul_ps(a, b), _mm512_setzero_ps(), _CMP_NEQ_UQ);
    const __m512 term = _mm512_maskz_mul_ps(live, slope, b);
    return _mm512_div_ps(_mm512_mul_ps(_mm512_mul_ps(dy, a), _mm512_add_ps(d, term)), _mm512_mul_ps(d, d));
  }
};

template <class K>
void forward_loop(const float* x, float* y, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, K::of(_mm512_loadu_ps(x + i)));
  if (i < n) {
    const __mmask16 m = lanes(n - i);
    _mm512_mask_storeu_ps(y + i, m, K::of(_mm512_maskz_loadu_ps(m, x + i)));
  }
}

template <class K>
void backward_loop(const float* dy, const float* x, float* dx, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm512_storeu_ps(dx + i, K::of(_mm512_loadu_ps(dy + i), _mm512_loadu_ps(x + i)));
  }
  if (i < n) {
    const __mmask16 m = lanes(n - i);
    _mm512_mask_storeu_ps(dx + i, m,
                          K::of(_mm512_maskz_loadu_ps(m, dy + i), _mm512_maskz_loadu_ps(m, x + i)));
  }
}

}  // namespace

bool activ_span(Activation activation, ActivDirection direction, const float* in0, const float* in1,
                float* out, std::int64_t n) {
  const bool forward = direction == ActivDirection::forward;
  switch (activation) {
    case Activation::sigmoid:
      // Backward reads y and is one product; the generic loop is already at memory speed.
      if (!forward) return false;
      forward_loop<SigmoidForward>(in0, out, n);
      return true;
    case Activation::silu:
      forward ? forward_loop<SiluForward>(in0, out, n) : backward_loop<SiluBackward>(in0, in1, out, n);
      return true;
    case Activation::gelu_erf:
      forward ? forward_loop<GeluErfForward>(in0, out, n) : backward_loop<GeluErfBackward>(in0, in1, out, n);
      return true;
    case Activation::gelu_tanh:
      forward ? forward_loop<GeluTanhForward>(in0, out, n)
              : backward_loop<GeluTanhBackward>(in0, in1, out, n);
      return true;
    default:
      return false;
  }
}

}  // namespace galley::backends::cpu::avx512
