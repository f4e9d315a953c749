// The packed-plane loop of cpu.conv.depthwise for small 3x3 "same" NCHW planes (see PackedPlane in
// conv_depthwise_kernels.hpp). Compiled with AVX-512 F/BW/VL/DQ; entered only after
// cpu_has_avx512(). A row-per-vector loop fills 7 of 16 lanes on a 7x7 plane and has only a few
// rows' accumulators to overlap; the plane read as one flat run fills every vector but the last,
// and its vectors are independent FMA chains. Each input vector is loaded once; the taps' shifted
// copies are made in registers. Nothing here instantiates a standard-library template (see
// sgemm_avx512.cpp).
#include <immintrin.h>

#include "backends/cpu/avx512_lanes.hpp"
#include "backends/cpu/avx512_post_ops.hpp"
#include "backends/cpu/conv_depthwise_kernels.hpp"

namespace galley::backends::cpu::depthwise {
namespace {

using avx512::lanes;
using avx512::PostOps;

// Vectors [v0, v0 + kNv) of one plane. Tap t reads the plane shifted by (dy*W + dx) floats, which
// for 2 <= W <= 15 lies within one vector either side: the taps above and left (t < 4) take
// their lanes from the vector before and this one, those right and below (t > 4) from this one and
// the one after, each with one two-source permute (`shifts[t]`). Every tap is a masked FMA, so a
// tap outside the image adds nothing, as in the reference (not even 0 * inf).
template <int kNv>
[[gnu::always_inline]] inline void vectors(const ConvShape& s, const PackedPlane& packed, const float* x,
                                           const __m512 (&wv)[9], const __m512i (&shifts)[9], std::int64_t v0,
                                           std::int64_t row, float* y, const PostOps* post) {
  const std::int64_t pixels = s.h * s.w;
  // in[j] is vector v0 - 1 + j of the plane, zero outside it.
  __m512 in[kNv + 2];
#pragma GCC unroll 6
  for (int j = 0; j < kNv + 2; ++j) {
    const std::int64_t first = (v0 - 1 + j) * 16;
    in[j] = first < 0 ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(lanes(pixels - first), x + first);
  }
  __m512 acc[kNv];
#pragma GCC unroll 4
  for (int i = 0; i < kNv; ++i) acc[i] = _mm512_maskz_mul_ps(packed.masks[v0 + i][4], wv[4], in[i + 1]);
#pragma GCC unroll 9
  for (int t = 0; t < 9; ++t) {
    if (t == 4) continue;
#pragma GCC unroll 4
    for (int i = 0; i < kNv; ++i) {
      const __m512 tap = t < 4 ? _mm512_permutex2var_ps(in[i], shifts[t], in[i + 1])
                               : _mm512_permutex2var_ps(in[i + 1], shifts[t], in[i + 2]);
      acc[i] = _mm512_mask3_fmadd_ps(wv[t], tap, acc[i], packed.masks[v0 + i][t]);
    }
  }
  const __mmask16 last = lanes(pixels - (v0 + kNv - 1) * 16);
  if (post != nullptr) avx512::apply_post<kNv>(*post, row, v0 * 16, acc, last);
#pragma GCC unroll 4
  for (int i = 0; i < kNv; ++i)
    _mm512_mask_storeu_ps(y + (v0 + i) * 16, i == kNv - 1 ? last : 0xffff, acc[i]);
}

}  // namespace

void nchw_planes_packed_avx512(const ConvShape& s, const PackedPlane& packed, const float* x, const float* w,
                               std::int64_t planes, float* y, const PostOps* post) {
  const std::int64_t pixels = s.h * s.w;
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  __m512i shifts[9];
#pragma GCC unroll 9
  for (int t = 0; t < 9; ++t) {
    const std::int64_t shift = (t / 3 - 1) * s.w + t % 3 - 1;
    shifts[t] = _mm512_add_epi32(lane, _mm512_set1_epi32(static_cast<int>(t < 4 ? shift + 16 : shift)));
  }
  for (std::int64_t i = 0; i < planes; ++i, x += pixels, y += pixels, w += 9) {
    __m512 wv[9];
#pragma GCC unroll 9
    for (int t = 0; t < 9; ++t) wv[t] = _mm512_set1_ps(w[t]);
    std::int64_t v0 = 0;
    for (; v0 + 4 <= packed.vectors; v0 += 4) vectors<4>(s, packed, x, wv, shifts, v0, i, y, post);
    switch (packed.vectors - v0) {
      case 3:
        vectors<3>(s, packed, x, wv, shifts, v0, i, y, post);
        break;
      case 2:
        vectors<2>(s, packed, x, wv, shifts, v0, i, y, post);
        break;
      case 1:
        vectors<1>(s, packed, x, wv, shifts, v0, i, y, post);
        break;
      default:
        break;
    }
  }
}

}  // namespace galley::backends::cpu::depthwise
