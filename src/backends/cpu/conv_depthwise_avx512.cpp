// AVX-512 loops of cpu.conv.depthwise for NCHW planes with unit width stride, read in place (see
// conv_depthwise_kernels.hpp). Compiled with AVX-512 F/BW/VL/DQ; entered only after
// cpu_has_avx512(). Masked loads read no lane outside the image row (and cannot fault there), so
// the padding columns cost nothing and every 16-column step runs the same code; masked stores end
// the row. Nothing here instantiates a standard-library template (see sgemm_avx512.cpp).
#include <immintrin.h>

#include "backends/cpu/conv_depthwise_kernels.hpp"

namespace galley::backends::cpu::depthwise {
namespace {

inline std::int64_t min64(std::int64_t a, std::int64_t b) { return a < b ? a : b; }
inline std::int64_t max64(std::int64_t a, std::int64_t b) { return a > b ? a : b; }

// Lanes l of a 16-column step whose input column first + l lies in [0, w).
inline __mmask16 inside_mask(std::int64_t first, std::int64_t w) {
  const std::int64_t lo = max64(0, -first), hi = min64(16, w - first);
  if (hi <= lo) return 0;
  const unsigned below_hi = hi >= 16 ? 0xffffu : (1u << hi) - 1u;
  const unsigned below_lo = (1u << lo) - 1u;
  return static_cast<__mmask16>(below_hi & ~below_lo);
}

inline __mmask16 first_lanes(std::int64_t count) {
  if (count <= 0) return 0;
  return count >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << count) - 1u);
}

// 3x3, unit stride and dilation: rows [oh, oh + kRows) x 16 columns from ow. Each input row is
// loaded once per tap column and feeds every output row of the block it reaches; the nine
// weights stay in registers (kRows + 9 + 1 zmm).
template <int kRows, bool kEdge>
void column_3x3(const ConvShape& s, const float* xc, const __m512 wv[9], std::int64_t oh, std::int64_t ow,
                float* out) {
  __mmask16 mask[3];
#pragma GCC unroll 3
  for (int q = 0; q < 3; ++q) mask[q] = kEdge ? inside_mask(ow + q - s.pw, s.w) : static_cast<__mmask16>(0xffff);
  __m512 acc[kRows];
#pragma GCC unroll 16
  for (int i = 0; i < kRows; ++i) acc[i] = _mm512_setzero_ps();
#pragma GCC unroll 16
  for (int j = 0; j < kRows + 2; ++j) {
    const std::int64_t ih = oh - s.ph + j;
    if (ih < 0 || ih >= s.h) continue;  // a padding row adds nothing
    const float* row = xc + ih * s.w + ow - s.pw;
#pragma GCC unroll 3
    for (int q = 0; q < 3; ++q) {
      const __m512 in = kEdge ? _mm512_maskz_loadu_ps(mask[q], row + q) : _mm512_loadu_ps(row + q);
#pragma GCC unroll 16
      for (int i = 0; i < kRows; ++i) {
        const int r = j - i;
        if (r >= 0 && r < 3) acc[i] = _mm512_fmadd_ps(wv[r * 3 + q], in, acc[i]);
      }
    }
  }
  const __mmask16 store = first_lanes(s.wo - ow);
#pragma GCC unroll 16
  for (int i = 0; i < kRows; ++i) _mm512_mask_storeu_ps(out + (oh + i) * s.wo + ow, store, acc[i]);
}

template <int kRows>
void rows_3x3(const ConvShape& s, const float* xc, const __m512 wv[9], std::int64_t oh, float* out) {
  for (std::int64_t ow = 0; ow < s.wo; ow += 16) {
    if (ow - s.pw >= 0 && ow + 17 - s.pw < s.w) {
      column_3x3<kRows, false>(s, xc, wv, oh, ow, out);
    } else {
      column_3x3<kRows, true>(s, xc, wv, oh, ow, out);
    }
  }
}

void plane_3x3(const ConvShape& s, const float* xc, const float* w, float* out) {
  __m512 wv[9];
#pragma GCC unroll 9
  for (int t = 0; t < 9; ++t) wv[t] = _mm512_set1_ps(w[t]);
  constexpr int kRows = 14;  // 14 accumulator chains: enough FMAs in flight to hide their latency
  std::int64_t oh = 0;
  for (; oh + kRows <= s.ho; oh += kRows) rows_3x3<kRows>(s, xc, wv, oh, out);
  switch (s.ho - oh) {
    case 13: rows_3x3<13>(s, xc, wv, oh, out); break;
    case 12: rows_3x3<12>(s, xc, wv, oh, out); break;
    case 11: rows_3x3<11>(s, xc, wv, oh, out); break;
    case 10: rows_3x3<10>(s, xc, wv, oh, out); break;
    case 9: rows_3x3<9>(s, xc, wv, oh, out); break;
    case 8: rows_3x3<8>(s, xc, wv, oh, out); break;
    case 7: rows_3x3<7>(s, xc, wv, oh, out); break;
    case 6: rows_3x3<6>(s, xc, wv, oh, out); break;
    case 5: rows_3x3<5>(s, xc, wv, oh, out); break;
    case 4: rows_3x3<4>(s, xc, wv, oh, out); break;
    case 3: rows_3x3<3>(s, xc, wv, oh, out); break;
    case 2: rows_3x3<2>(s, xc, wv, oh, out); break;
    case 1: rows_3x3<1>(s, xc, wv, oh, out); break;
    default: break;
  }
}

// Any filter, height stride and dilations (width stride 1): kRows output rows x 16 columns, the
// taps whose input row lies outside the image skipped (kRows == 1 near the top and bottom).
template <int kRows>
void rows_any(const ConvShape& s, const float* xc, const float* w, std::int64_t oh, float* out) {
  std::int64_t r_lo = 0, r_hi = s.r;
  if (kRows == 1) {
    while (r_lo < s.r && oh * s.sh - s.ph + r_lo * s.dh < 0) ++r_lo;
    while (r_hi > r_lo && oh * s.sh - s.ph + (r_hi - 1) * s.dh >= s.h) --r_hi;
  }
  const std::int64_t row_step = s.sh * s.w;
  for (std::int64_t ow = 0; ow < s.wo; ow += 16) {
    __m512 acc[kRows];
#pragma GCC unroll 8
    for (int i = 0; i < kRows; ++i) acc[i] = _mm512_setzero_ps();
    for (std::int64_t q = 0; q < s.s; ++q) {
      const std::int64_t shift = q * s.dw - s.pw;
      const __mmask16 mask = inside_mask(ow + shift, s.w);
      for (std::int64_t r = r_lo; r < r_hi; ++r) {
        const __m512 wv = _mm512_set1_ps(w[r * s.s + q]);
        const float* src = xc + (oh * s.sh - s.ph + r * s.dh) * s.w + ow + shift;
#pragma GCC unroll 8
        for (int i = 0; i < kRows; ++i) {
          acc[i] = _mm512_fmadd_ps(wv, _mm512_maskz_loadu_ps(mask, src + i * row_step), acc[i]);
        }
      }
    }
    const __mmask16 store = first_lanes(s.wo - ow);
#pragma GCC unroll 8
    for (int i = 0; i < kRows; ++i) _mm512_mask_storeu_ps(out + (oh + i) * s.wo + ow, store, acc[i]);
  }
}

}  // namespace

void nchw_plane_s1_avx512(const ConvShape& s, const float* xc, const float* w, float* out) {
  if (s.r == 3 && s.s == 3 && s.sh == 1 && s.dh == 1 && s.dw == 1) {
    plane_3x3(s, xc, w, out);
    return;
  }
  // Output rows whose filter rows all lie inside the image take the blocked loop.
  const std::int64_t first = min64(s.ho, (s.ph + s.sh - 1) / s.sh);
  const std::int64_t last_in = s.h - 1 + s.ph - (s.r - 1) * s.dh;
  const std::int64_t end = last_in < 0 ? first : max64(first, min64(s.ho, last_in / s.sh + 1));
  std::int64_t oh = 0;
  for (; oh < first; ++oh) rows_any<1>(s, xc, w, oh, out);
  for (; oh + 4 <= end; oh += 4) rows_any<4>(s, xc, w, oh, out);
  for (; oh < s.ho; ++oh) rows_any<1>(s, xc, w, oh, out);
}

}  // namespace galley::backends::cpu::depthwise
