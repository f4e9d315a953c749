// Float exp, expm1, tanh and erf written without calls or branches, so that the compiler vectorises
// a plain loop over an activation_math functor that uses them (a libm call in the loop body keeps
// it scalar, and then sigmoid, silu, gelu and elu run far below memory bandwidth). The formulas
// of each activation stay in activation_math.hpp; only these elementary functions differ, as
// PyTorch's own vectorised cpu kernels (Sleef) differ from its CUDA ones.
//
// Accuracy: exp and expm1 within 2 ulp (Cephes' expf polynomial after a two-part ln 2 reduction;
// expm1 by its Taylor series below |x| = 0.5, so it keeps its relative accuracy near 0); tanh from
// expm1, so also accurate near 0; erf within 4e-7 absolute (Abramowitz and Stegun 7.1.26, 1.5e-7
// in exact arithmetic), which is what gelu's 1 + erf(x) needs. NaN propagates through all four; exp is exactly inf
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
  static float exp(float x) {
    // Clamped to where exp is a normal float or just overflows (n in [-126, 128]); results outside
    // are selected after. NaN computes on 0 (a NaN converted to int is undefined) and is returned.
    const float xc = x < -87.3f ? -87.3f : (x > 88.7228f ? 88.7228f : (x == x ? x : 0.f));
    // Round x / ln 2 to the nearest integer by the 1.5 * 2^23 trick (no rounding call).
    const float n = (xc * 1.44269504088896341f + 12582912.f) - 12582912.f;
    float r = xc - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    const float y = p * r * r + r + 1.f;
    // 2^n as two normal halves, since 2^128 (for x up to 88.72) is not a float.
    const std::int32_t ni = static_cast<std::int32_t>(n);
    const std::int32_t half = ni >> 1;
    const std::uint32_t bits1 = static_cast<std::uint32_t>(half + 127) << 23;
    const std::uint32_t bits2 = static_cast<std::uint32_t>(ni - half + 127) << 23;
    float scale1, scale2;
    std::memcpy(&scale1, &bits1, sizeof scale1);
    std::memcpy(&scale2, &bits2, sizeof scale2);
    float out = (y * scale1) * scale2;
    out = x > 88.7228f ? std::numeric_limits<float>::infinity() : out;
    out = x == x ? out : x;
    return x < -87.3f ? 0.f : out;
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
    const float ax = std::fabs(x);
    const float t = 1.f / (1.f + 0.3275911f * ax);
    float p = 1.061405429f;
    p = p * t - 1.453152027f;
    p = p * t + 1.421413741f;
    p = p * t - 0.284496736f;
    p = p * t + 0.254829592f;
    const float y = 1.f - p * t * exp(-ax * ax);
    return std::copysign(y, x);
  }
};

}  // namespace galley::backends::cpu
