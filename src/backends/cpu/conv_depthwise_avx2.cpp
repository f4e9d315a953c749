// AVX2 loops of cpu.conv.depthwise (see conv_depthwise_kernels.hpp). Compiled with -mavx2 -mfma;
// entered only after cpu_has_avx2_fma().
#include <immintrin.h>

#include <algorithm>

#include "backends/cpu/conv_depthwise_kernels.hpp"

namespace galley::backends::cpu::depthwise {
namespace {

// Lanes [0, count) set, for the ragged right edge of a row or the last channel vector.
__m256i lane_mask(std::int64_t count) {
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(std::min<std::int64_t>(count, 8))), idx);
}

void store_cols(float* dst, __m256 v, std::int64_t count) {
  if (count >= 8) {
    _mm256_storeu_ps(dst, v);
  } else if (count > 0) {
    _mm256_maskstore_ps(dst, lane_mask(count), v);
  }
}

// kRows output rows x 16 columns per step: 2*kRows independent accumulator chains hide the FMA
// latency; every input vector comes from the L1-resident plane.
template <int kRows>
void rows_block(const ConvShape& s, const Plane& plane, const float* in, const float* w, std::int64_t oh,
                float* out) {
  for (std::int64_t ow = 0; ow < s.wo; ow += 16) {
    __m256 acc[kRows][2];
    #pragma GCC unroll 16
    for (auto& row : acc) row[0] = row[1] = _mm256_setzero_ps();
    for (std::int64_t r = 0; r < s.r; ++r) {
      for (std::int64_t q = 0; q < s.s; ++q) {
        const __m256 wv = _mm256_broadcast_ss(w + r * s.s + q);
        const std::int64_t tap = q * s.dw;
        const float* src = in + (tap % s.sw) * plane.phase_stride + (oh * s.sh + r * s.dh) * plane.row_stride +
                           tap / s.sw + ow;
        #pragma GCC unroll 16
        for (int i = 0; i < kRows; ++i) {
          const float* row = src + i * s.sh * plane.row_stride;
          acc[i][0] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(row), acc[i][0]);
          acc[i][1] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(row + 8), acc[i][1]);
        }
      }
    }
    const std::int64_t left = s.wo - ow;
    #pragma GCC unroll 16
    for (int i = 0; i < kRows; ++i) {
      float* o = out + (oh + i) * s.wo + ow;
      store_cols(o, acc[i][0], left);
      store_cols(o + 8, acc[i][1], left - 8);
    }
  }
}

// Lanes whose input column ow0 + lane + shift lies in [0, W).
__m256i column_mask(std::int64_t ow0, std::int64_t shift, std::int64_t w) {
  const __m256i col = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(ow0 + shift)),
                                       _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  const __m256i ge0 = _mm256_cmpgt_epi32(col, _mm256_set1_epi32(-1));
  const __m256i ltw = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(w)), col);
  return _mm256_and_si256(ge0, ltw);
}

// Rows [oh, oh + kRows) whose taps all lie inside the image vertically (or kRows == 1 with
// the taps outside skipped), 16 columns per step.
template <int kRows>
void rows_s1(const ConvShape& s, const float* xc, const float* w, std::int64_t oh, float* out) {
  std::int64_t r_lo = 0, r_hi = s.r;
  if (kRows == 1) {
    while (r_lo < s.r && oh * s.sh - s.ph + r_lo * s.dh < 0) ++r_lo;
    while (r_hi > r_lo && oh * s.sh - s.ph + (r_hi - 1) * s.dh >= s.h) --r_hi;
  }
  const std::int64_t row_step = s.sh * s.w;
  for (std::int64_t ow = 0; ow < s.wo; ow += 16) {
    __m256 acc[kRows][2];
    #pragma GCC unroll 16
    for (auto& row : acc) row[0] = row[1] = _mm256_setzero_ps();
    // All 16 lanes of every tap inside the row: plain loads.
    const bool inside = ow - s.pw >= 0 && ow + 15 + (s.s - 1) * s.dw - s.pw < s.w;
    for (std::int64_t r = r_lo; r < r_hi; ++r) {
      const float* in = xc + (oh * s.sh - s.ph + r * s.dh) * s.w + ow - s.pw;
      for (std::int64_t q = 0; q < s.s; ++q) {
        const __m256 wv = _mm256_broadcast_ss(w + r * s.s + q);
        const float* src = in + q * s.dw;
        if (inside) {
          #pragma GCC unroll 16
          for (int i = 0; i < kRows; ++i) {
            acc[i][0] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(src + i * row_step), acc[i][0]);
            acc[i][1] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(src + i * row_step + 8), acc[i][1]);
          }
        } else {
          // maskload never touches masked-out lanes, so columns outside the row are safe.
          const std::int64_t shift = q * s.dw - s.pw;
          const __m256i m0 = column_mask(ow, shift, s.w), m1 = column_mask(ow + 8, shift, s.w);
          #pragma GCC unroll 16
          for (int i = 0; i < kRows; ++i) {
            acc[i][0] = _mm256_fmadd_ps(wv, _mm256_maskload_ps(src + i * row_step, m0), acc[i][0]);
            acc[i][1] = _mm256_fmadd_ps(wv, _mm256_maskload_ps(src + i * row_step + 8, m1), acc[i][1]);
          }
        }
      }
    }
    const std::int64_t left = s.wo - ow;
    #pragma GCC unroll 16
    for (int i = 0; i < kRows; ++i) {
      float* o = out + (oh + i) * s.wo + ow;
      store_cols(o, acc[i][0], left);
      store_cols(o + 8, acc[i][1], left - 8);
    }
  }
}

// The MobileNet case, 3x3 with unit stride and dilation: each input row is loaded once per tap
// column and feeds every output row of the block it touches, and the nine weights stay in
// registers, so the loop does about one load per three FMAs instead of one per FMA.
template <int kRows, bool kEdge>
void column_3x3(const ConvShape& s, const float* xc, const __m256 wv[9], std::int64_t oh, std::int64_t ow,
                float* out) {
  __m256i mask[3];
  if constexpr (kEdge) {
#pragma GCC unroll 3
    for (int q = 0; q < 3; ++q) mask[q] = column_mask(ow, q - s.pw, s.w);
  }
  __m256 acc[kRows];
#pragma GCC unroll 8
  for (int i = 0; i < kRows; ++i) acc[i] = _mm256_setzero_ps();
#pragma GCC unroll 10
  for (int j = 0; j < kRows + 2; ++j) {
    const std::int64_t ih = oh - s.ph + j;
    if (ih < 0 || ih >= s.h) continue;  // a padding row adds nothing
    const float* row = xc + ih * s.w + ow - s.pw;
#pragma GCC unroll 3
    for (int q = 0; q < 3; ++q) {
      __m256 in;
      if constexpr (kEdge) {
        in = _mm256_maskload_ps(row + q, mask[q]);
      } else {
        in = _mm256_loadu_ps(row + q);
      }
#pragma GCC unroll 8
      for (int i = 0; i < kRows; ++i) {
        const int r = j - i;
        if (r >= 0 && r < 3) acc[i] = _mm256_fmadd_ps(wv[r * 3 + q], in, acc[i]);
      }
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < kRows; ++i) store_cols(out + (oh + i) * s.wo + ow, acc[i], s.wo - ow);
}

template <int kRows>
void rows_3x3(const ConvShape& s, const float* xc, const __m256 wv[9], std::int64_t oh, float* out) {
  for (std::int64_t ow = 0; ow < s.wo; ow += 8) {
    // Every lane of every tap inside the row (and the vector inside the output row).
    if (ow - s.pw >= 0 && ow + 9 - s.pw < s.w && ow + 8 <= s.wo) {
      column_3x3<kRows, false>(s, xc, wv, oh, ow, out);
    } else {
      column_3x3<kRows, true>(s, xc, wv, oh, ow, out);
    }
  }
}

void plane_3x3(const ConvShape& s, const float* xc, const float* w, float* out) {
  __m256 wv[9];
#pragma GCC unroll 9
  for (int t = 0; t < 9; ++t) wv[t] = _mm256_broadcast_ss(w + t);
  constexpr int kRows = 6;
  std::int64_t oh = 0;
  for (; oh + kRows <= s.ho; oh += kRows) rows_3x3<kRows>(s, xc, wv, oh, out);
  switch (s.ho - oh) {
    case 5: rows_3x3<5>(s, xc, wv, oh, out); break;
    case 4: rows_3x3<4>(s, xc, wv, oh, out); break;
    case 3: rows_3x3<3>(s, xc, wv, oh, out); break;
    case 2: rows_3x3<2>(s, xc, wv, oh, out); break;
    case 1: rows_3x3<1>(s, xc, wv, oh, out); break;
    default: break;
  }
}

}  // namespace

void nchw_plane_s1_avx2(const ConvShape& s, const float* xc, const float* w, float* out) {
  if (s.r == 3 && s.s == 3 && s.sh == 1 && s.dh == 1 && s.dw == 1) {
    plane_3x3(s, xc, w, out);
    return;
  }
  // Output rows whose filter rows all lie inside the image.
  const std::int64_t first = std::min(s.ho, (s.ph + s.sh - 1) / s.sh);
  const std::int64_t last_in = s.h - 1 + s.ph - (s.r - 1) * s.dh;
  const std::int64_t end = last_in < 0 ? first : std::max(first, std::min(s.ho, last_in / s.sh + 1));
  std::int64_t oh = 0;
  for (; oh < first; ++oh) rows_s1<1>(s, xc, w, oh, out);
  for (; oh + 4 <= end; oh += 4) rows_s1<4>(s, xc, w, oh, out);
  for (; oh < s.ho; ++oh) rows_s1<1>(s, xc, w, oh, out);
}

void nchw_plane_avx2(const ConvShape& s, const Plane& plane, const float* in, const float* w, float* out) {
  std::int64_t oh = 0;
  for (; oh + 4 <= s.ho; oh += 4) rows_block<4>(s, plane, in, w, oh, out);
  for (; oh < s.ho; ++oh) rows_block<1>(s, plane, in, w, oh, out);
}

void nhwc_row_avx2(const ConvShape& s, const float* xn, const float* wt, std::int64_t oh, float* y_row) {
  // Taps whose input row lies inside the image are the same for the whole output row.
  std::int64_t r_lo = 0, r_hi = s.r;
  while (r_lo < s.r && oh * s.sh - s.ph + r_lo * s.dh < 0) ++r_lo;
  while (r_hi > r_lo && oh * s.sh - s.ph + (r_hi - 1) * s.dh >= s.h) --r_hi;
  for (std::int64_t ow = 0; ow < s.wo; ++ow) {
    float* o = y_row + ow * s.c;
    for (std::int64_t c = 0; c < s.c; c += 32) {
      const std::int64_t left = s.c - c;
      const __m256i m[4] = {lane_mask(left), lane_mask(left - 8), lane_mask(left - 16), lane_mask(left - 24)};
      __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
      for (std::int64_t r = r_lo; r < r_hi; ++r) {
        const std::int64_t ih = oh * s.sh - s.ph + r * s.dh;
        for (std::int64_t q = 0; q < s.s; ++q) {
          const std::int64_t iw = ow * s.sw - s.pw + q * s.dw;
          if (iw < 0 || iw >= s.w) continue;
          const float* in = xn + (ih * s.w + iw) * s.c + c;
          const float* wv = wt + (r * s.s + q) * s.c + c;
          if (left >= 32) {
            #pragma GCC unroll 16
            for (int v = 0; v < 4; ++v) {
              acc[v] = _mm256_fmadd_ps(_mm256_loadu_ps(wv + 8 * v), _mm256_loadu_ps(in + 8 * v), acc[v]);
            }
          } else {
            // maskload never touches the lanes it leaves out, so reading past C is safe.
            #pragma GCC unroll 16
            for (int v = 0; v < 4; ++v) {
              acc[v] = _mm256_fmadd_ps(_mm256_maskload_ps(wv + 8 * v, m[v]), _mm256_maskload_ps(in + 8 * v, m[v]),
                                       acc[v]);
            }
          }
        }
      }
      #pragma GCC unroll 16
      for (int v = 0; v < 4; ++v) store_cols(o + c + 8 * v, acc[v], left - 8 * v);
    }
  }
}

}  // namespace galley::backends::cpu::depthwise
