// Hand-written AVX-512 f32 loops for the activations whose cost is their elementary functions
// (sigmoid, silu, gelu with erf), used by cpu.activ.blocked in place of the compiler-vectorised
// functor loops (activ_kernels.hpp), which a division and select-heavy exp leave about twice as long
// per vector. Entered only after cpu_has_avx512(); the definitions are in activ_spans_avx512.cpp.
//
// They compute the functors' formulas (activation_math.hpp) with these elementary parts:
// - exp: n = round(t / ln 2), r = t - n ln 2 in two parts, Cephes' expf polynomial for e^r, and
//   e^r * 2^n by scalef, which rounds correctly into the denormals and saturates to 0 or inf;
// - sigmoid from z = exp(-|x|), which never overflows: 1 / (1 + z) for x >= 0 and z / (1 + z) below,
//   with the reciprocal as rcp14 and one Newton step (2^-28 relative before rounding), so the tail
//   keeps its relative accuracy where 1 / (1 + exp(-x)) has none left;
// - erf as the scalar VectorMath::erf's rational fit, the quotient by rcp14 and a residual step.
// NaN propagates through each; -inf and +inf give what the functor's formula gives.
#pragma once

#include <cstdint>

#include "galley/dnn/activation.hpp"

namespace galley::backends::cpu::avx512 {

/// One f32 span of `activation` in `direction`: forward out = f(in0); backward out = dx from
/// in0 = dy and in1 = x. Returns false, touching nothing, for an activation without a loop here.
/// out may be in0 or in1 (the same index is read before it is written).
bool activ_span(dnn::Activation activation, dnn::ActivDirection direction, const float* in0, const float* in1,
                float* out, std::int64_t n);

}  // namespace galley::backends::cpu::avx512
