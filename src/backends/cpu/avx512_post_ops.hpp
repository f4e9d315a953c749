// PostOps (sgemm_avx512.hpp) applied to accumulators in registers before they are stored, shared
// by the AVX-512 kernels that finish a convolution's output themselves (the SGEMM, the depthwise
// planes). Include it only from files compiled with AVX-512; like the kernels, it instantiates no
// standard-library template (see sgemm_avx512.cpp).
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "backends/cpu/sgemm_avx512.hpp"

namespace galley::backends::cpu::avx512 {

// The post-ops on row `row` of C, columns [col, col + 16 * kNv) held in r (the last vector's
// valid lanes in `last`), in PostOps' order and with dnn::Activation's definitions, NaN included:
// a compare that is false for NaN keeps the input, as the scalar definitions do.
template <int kNv>
[[gnu::always_inline]] inline void apply_post(const PostOps& post, std::int64_t row, std::int64_t col,
                                              __m512 (&r)[kNv], __mmask16 last) {
  if (post.bias != nullptr) {
    if (post.bias_per_row) {
      const __m512 b = _mm512_set1_ps(post.bias[row]);
#pragma GCC unroll 4
      for (int v = 0; v < kNv; ++v) r[v] = _mm512_add_ps(r[v], b);
    } else {
#pragma GCC unroll 4
      for (int v = 0; v < kNv; ++v) {
        const __mmask16 m = v == kNv - 1 ? last : static_cast<__mmask16>(0xffff);
        r[v] = _mm512_add_ps(r[v], _mm512_maskz_loadu_ps(m, post.bias + col + 16 * v));
      }
    }
  }
  if (post.residual != nullptr) {
    const float* res = post.residual + row * post.ld_residual + col;
#pragma GCC unroll 4
    for (int v = 0; v < kNv; ++v) {
      const __mmask16 m = v == kNv - 1 ? last : static_cast<__mmask16>(0xffff);
      r[v] = _mm512_add_ps(r[v], _mm512_maskz_loadu_ps(m, res + 16 * v));
    }
  }
  const __m512 zero = _mm512_setzero_ps();
  switch (post.activation) {
    case PostOps::Activation::none:
      break;
    case PostOps::Activation::relu:
      // x < 0 ? 0 : x. vmaxps returns its second operand when the two compare equal or either is
      // NaN, so with x second NaN and -0 pass through as in the scalar form, in one instruction.
#pragma GCC unroll 4
      for (int v = 0; v < kNv; ++v) r[v] = _mm512_max_ps(zero, r[v]);
      break;
    case PostOps::Activation::leaky_relu: {
      const __m512 slope = _mm512_set1_ps(post.act_alpha);
#pragma GCC unroll 4
      for (int v = 0; v < kNv; ++v) {
        const __m512 negative = _mm512_mul_ps(r[v], slope);
        r[v] = _mm512_mask_mov_ps(negative, _mm512_cmp_ps_mask(r[v], zero, _CMP_GT_OQ), r[v]);
      }
      break;
    }
    case PostOps::Activation::clip: {
      // x < lo ? lo : (x > hi ? hi : x) as min(hi, max(lo, x)), each with the running value
      // second (NaN and ties keep it, as above); equal for every x, signed zeros included, given
      // lo <= hi, which a conv problem's validation ensures.
      const __m512 lo = _mm512_set1_ps(post.act_alpha), hi = _mm512_set1_ps(post.act_beta);
#pragma GCC unroll 4
      for (int v = 0; v < kNv; ++v) r[v] = _mm512_min_ps(hi, _mm512_max_ps(lo, r[v]));
      break;
    }
  }
}

}  // namespace galley::backends::cpu::avx512
