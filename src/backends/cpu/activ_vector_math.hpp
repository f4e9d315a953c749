// Float exp, expm1, tanh and erf written without calls or branches, so that the compiler vectorises
// a plain loop over an activation_math functor that uses them (a libm call in the loop body keeps
// it scalar, and then sigmoid, silu, gelu and elu run far below memory bandwidth). The formulas
// of each activation stay in activation_math.hpp; only these elementary functions differ, as
// PyTorch's own vectorised cpu kernels (Sleef) differ from its CUDA ones.
//
// Accuracy: exp and expm1 within 2 ulp (Cephes' expf polynomial after a two-part ln 2 reduction;
// expm1 by its Taylor series below |x| = 0.5, so it keeps its relative accuracy near 0); tanh from
// expm1, so also accurate near 0; erf within 5e-7 absolute and relative (a rational fit, below),
// which is what gelu's 1 + erf(x) needs. NaN propagates through all four; exp is exactly inf
// above 88.72 and 0 below -87.3 (where the true value is a denormal).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace galley::backends::cpu {

/// `Isa` is a tag each including file declares in an unnamed namespace: the functions (and every
/// activation_math functor instantiated with them) then have internal linkage, so the AVX2 file's
/// copies and the baseline file's can never be merged by the linker into one that needs AVX2.
template <class Isa>
struct VectorMath {
  static std::uint32_t bits_of(float v) {
    std::uint32_t b;
    std::memcpy(&b, &v, sizeof b);
    return b;
  }
  static float float_of(std::uint32_t b) {
    float v;
    std::memcpy(&v, &b, sizeof v);
    return v;
  }

  static float exp(float x) {
    // Round x / ln 2 to the nearest integer n by the 1.5 * 2^23 trick (no rounding call); n also
    // sits in the low bits of t, read as an integer without a float-to-int conversion, which
    // would be undefined for the NaN and huge inputs that the selects below replace anyway.
    const float t = x * 1.44269504088896341f + 12582912.f;
    const float n = t - 12582912.f;
    float r = x - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    const float y = (p * r + 1.f) * r + 1.f;
    // e^r times 2^n by adding n to e^r's exponent field: one integer add, where multiplying by
    // 2^n needs two factors (2^128, for x up to 88.72, is not a float). In range, e^r's exponent
    // (126 or 127) plus n stays within the normal floats, except where the true result is
    // already a denormal; outside it the selects below decide.
    const std::uint32_t ni = bits_of(t) - 0x4B400000u;
    float out = float_of(bits_of(y) + (ni << 23));
    out = x > 88.7228f ? std::numeric_limits<float>::infinity() : out;
    out = x < -87.3f ? 0.f : out;
    return x == x ? out : x;
  }

  static float expm1(float x) {
    float s = 1.f / 40320.f;
    s = s * x + 1.f / 5040.f;
    s = s * x + 1.f / 720.f;
    s = s * x + 1.f / 120.f;
    s = s * x + 1.f / 24.f;
    s = s * x + 1.f / 6.f;
    s = s * x + 0.5f;
    s = s * x + 1.f;
    const float small = s * x;
    const float big = exp(x) - 1.f;
    return std::fabs(x) < 0.5f ? small : big;
  }

  static float tanh(float x) {
    const float ax = std::fabs(x);
    const float t = expm1(2.f * ax);
    // Past 9 tanh is 1 in float; selecting it also avoids inf / inf for huge |x|.
    const float q = t / (t + 2.f);
    const float r = ax > 9.f ? 1.f : q;
    return std::copysign(r, x);
  }

  static float erf(float x) {
    // x * P(x^2) / Q(x^2) on [-4, 4] (the rational minimax fit of Eigen and XLA); past 4 erf is
    // +-1 in float. No exp, so it costs about half what 1 - poly(t) * exp(-x^2) does. NaN fails
    // both comparisons and goes through the polynomials as NaN.
    const float xc = x < -4.f ? -4.f : (x > 4.f ? 4.f : x);
    const float x2 = xc * xc;
    float p = -2.72614225801306e-10f;
    p = p * x2 + 2.77068142495902e-08f;
    p = p * x2 - 2.10102402082508e-06f;
    p = p * x2 - 5.69250639462346e-05f;
    p = p * x2 - 7.34990630326855e-04f;
    p = p * x2 - 2.95459980854025e-03f;
    p = p * x2 - 1.60960333262415e-02f;
    float q = -1.45660718464996e-05f;
    q = q * x2 - 2.13374055278905e-04f;
    q = q * x2 - 1.68282697438203e-03f;
    q = q * x2 - 7.37332916720468e-03f;
    q = q * x2 - 1.42647390514189e-02f;
    return xc * p / q;
  }
};

}  // namespace galley::backends::cpu
