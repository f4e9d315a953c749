// See pool_avx512.hpp. Compiled with AVX-512 F/BW/VL/DQ; nothing here instantiates a
// standard-library template (see sgemm_avx512.cpp).
#include "backends/cpu/pool_avx512.hpp"

#include <immintrin.h>

#include "backends/cpu/avx512_lanes.hpp"

namespace galley::backends::cpu::avx512 {
namespace {

// x[start + l * stride] for the 16 lanes l, -inf where that column lies outside [0, w): masked
// loads read nothing outside the row.
template <int kStride>
inline __m512 taps(const float* row, std::int64_t start, std::int64_t w, __m512 neg_inf) {
  if constexpr (kStride == 1) {
    return _mm512_mask_loadu_ps(neg_inf, lane_range(-start, w - start), row + start);
  } else {
    const __m512i evens = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512 lo = _mm512_mask_loadu_ps(neg_inf, lane_range(-start, w - start), row + start);
    const __m512 hi =
        _mm512_mask_loadu_ps(neg_inf, lane_range(-start - 16, w - start - 16), row + start + 16);
    return _mm512_permutex2var_ps(lo, evens, hi);
  }
}

template <int kStride>
void plane(const MaxPoolPlane& g, const float* x, float* y) {
  const __m512 neg_inf = _mm512_set1_ps(-__builtin_inff());
  for (std::int64_t oh = 0; oh < g.oh; ++oh) {
    float* yrow = y + oh * g.ow;
    for (std::int64_t ow0 = 0; ow0 < g.ow; ow0 += 16) {
      __m512 best = neg_inf;
      for (std::int64_t ih = g.row_begin[oh]; ih < g.row_end[oh]; ++ih) {
        const float* row = x + ih * g.w;
        for (std::int64_t kx = 0; kx < g.kernel_w; ++kx) {
          const __m512 v = taps<kStride>(row, ow0 * kStride - g.pad_w + kx, g.w, neg_inf);
          // A tap replaces the maximum when larger or NaN; an equal one, or any number after a NaN,
          // leaves it.
          const __mmask16 take =
              _mm512_cmp_ps_mask(v, best, _CMP_GT_OQ) | _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
          best = _mm512_mask_mov_ps(best, take, v);
        }
      }
      _mm512_mask_storeu_ps(yrow + ow0, lane_range(0, g.ow - ow0), best);
    }
  }
}

}  // namespace

void max_pool_plane(const MaxPoolPlane& g, const float* x, float* y) {
  if (g.stride_w == 2) {
    plane<2>(g, x, y);
  } else {
    plane<1>(g, x, y);
  }
}

}  // namespace galley::backends::cpu::avx512
