// Hand-written AVX-512 f32 loops for the activations whose cost is their elementary functions
// (sigmoid, silu, gelu with erf or tanh), used by cpu.activ.blocked in place of the compiler-vectorised
// functor loops (activ_kernels.hpp). Those loops are bound by the number of vector instructions,
// and these take a third fewer. Entered only after cpu_has_avx512(); the definitions are in
// activ_spans_avx512.cpp.
//
// They compute the functors' formulas (activation_math.hpp) with these elementary parts:
// - exp: n = round(t / ln 2), r = t - n ln 2 in one fused step, a degree-5 fit of e^r, and
//   e^r * 2^n by scalef, which rounds correctly into the denormals and saturates to 0 or inf:
//   within 2-3 ulp where the result is above 1e-9, 7 ulp at worst near the denormals;
// - sigmoid and silu forward as 1 / (1 + exp(-x)) and x / (1 + exp(-x)), one division each (the
//   divider works beside the pipes the exp keeps busy, so it costs less than rcp14 and a Newton
//   step); silu's derivative from z = exp(-|x|), which never overflows, so that s and 1 - s each
//   keep their relative accuracy;
// - erf as the scalar VectorMath::erf's rational fit, with gelu's factors folded into it;
// - gelu's tanh form as x sigmoid(2u), silu's kernel on 2u (1 + tanh(u) = 2 sigmoid(2u)).
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
