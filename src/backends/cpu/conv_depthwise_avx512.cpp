// AVX-512 loops of cpu.conv.depthwise for NCHW planes with unit width stride, read in place (see
// conv_depthwise_kernels.hpp). Compiled with AVX-512 F/BW/VL/DQ; entered only after
// cpu_has_avx512(). Masked loads read no lane outside the image row (and cannot fault there), so
// the padding columns cost nothing and every 16-column step runs the same code; masked stores end
// the row. Nothing here instantiates a standard-library template (see sgemm_avx512.cpp).
#include <immintrin.h>

// GCC 12's _mm512_alignr_epi32 builds its pass-through operand from _mm512_undefined_epi32(), whose
// deliberate self-initialisation trips -Wmaybe-uninitialized at every inlined use (a false positive:
// the unmasked intrinsic never reads it). Silenced for this file only, so CI logs stay readable.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include "backends/cpu/avx512_lanes.hpp"
#include "backends/cpu/conv_depthwise_kernels.hpp"

namespace galley::backends::cpu::depthwise {
namespace {

using avx512::lanes;
using avx512::max64;
using avx512::min64;

// Lanes l of a 16-column step whose input column first + l lies in [0, w).
inline __mmask16 inside_mask(std::int64_t first, std::int64_t w) { return avx512::lane_range(-first, w - first); }


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
  const __mmask16 store = lanes(s.wo - ow);
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
    const __mmask16 store = lanes(s.wo - ow);
#pragma GCC unroll 8
    for (int i = 0; i < kRows; ++i) _mm512_mask_storeu_ps(out + (oh + i) * s.wo + ow, store, acc[i]);
  }
}

// 3x3 "same" (padding 1, unit strides and dilation) on rows of at most 64 columns: each input row
// is loaded once as kNv vectors and its column neighbours are made in registers (valignd), and
// it is added to the three output rows it reaches, whose accumulators rotate through three slots.
// Per output row that is kNv loads and stores for 9 * kNv FMAs, where the blocked loop above
// loads every input vector three times at shifted, mostly line-crossing addresses.
template <int kNv>
struct Rolling {
  const ConvShape& s;
  const float* xc;
  const __m512* wv;
  float* out;
  __mmask16 last;     // valid lanes of the last vector of a row
  __m512 acc[3][kNv];  // output row o lives in slot o % 3

  // Input row j into the slots of output rows j+1 (filter row 0), j (1) and j-1 (2); the slot of
  // row j+1 starts here. Then output row j-1 is complete and stored.
  template <int kSlot>
  void row(std::int64_t j) {
    constexpr int kNext = (kSlot + 1) % 3, kPrev = (kSlot + 2) % 3;
    const float* in = xc + j * s.w;
    __m512 v[kNv + 1];
#pragma GCC unroll 4
    for (int t = 0; t < kNv; ++t) v[t] = t == kNv - 1 ? _mm512_maskz_loadu_ps(last, in + 16 * t) : _mm512_loadu_ps(in + 16 * t);
    v[kNv] = _mm512_setzero_ps();
    const bool has_next = j + 1 < s.ho, has_prev = j >= 1;
#pragma GCC unroll 4
    for (int t = 0; t < kNv; ++t) {
      const __m512 before = t == 0 ? _mm512_setzero_ps() : v[t - 1];
      // Columns c-1, c, c+1 of the 16 outputs at c = 16t.
      const __m512 left = _mm512_castsi512_ps(
          _mm512_alignr_epi32(_mm512_castps_si512(v[t]), _mm512_castps_si512(before), 15));
      const __m512 right = _mm512_castsi512_ps(
          _mm512_alignr_epi32(_mm512_castps_si512(v[t + 1]), _mm512_castps_si512(v[t]), 1));
      if (has_next) {
        acc[kNext][t] = _mm512_mul_ps(wv[0], left);
        acc[kNext][t] = _mm512_fmadd_ps(wv[1], v[t], acc[kNext][t]);
        acc[kNext][t] = _mm512_fmadd_ps(wv[2], right, acc[kNext][t]);
      }
      acc[kSlot][t] = _mm512_fmadd_ps(wv[3], left, acc[kSlot][t]);
      acc[kSlot][t] = _mm512_fmadd_ps(wv[4], v[t], acc[kSlot][t]);
      acc[kSlot][t] = _mm512_fmadd_ps(wv[5], right, acc[kSlot][t]);
      if (has_prev) {
        acc[kPrev][t] = _mm512_fmadd_ps(wv[6], left, acc[kPrev][t]);
        acc[kPrev][t] = _mm512_fmadd_ps(wv[7], v[t], acc[kPrev][t]);
        acc[kPrev][t] = _mm512_fmadd_ps(wv[8], right, acc[kPrev][t]);
      }
    }
    if (has_prev) store<kPrev>(j - 1);
  }

  template <int kSlotOut>
  void store(std::int64_t o) {
    float* dst = out + o * s.wo;
#pragma GCC unroll 4
    for (int t = 0; t < kNv; ++t) {
      if (t == kNv - 1) {
        _mm512_mask_storeu_ps(dst + 16 * t, last, acc[kSlotOut][t]);
      } else {
        _mm512_storeu_ps(dst + 16 * t, acc[kSlotOut][t]);
      }
    }
  }

  void plane() {
#pragma GCC unroll 4
    for (int t = 0; t < kNv; ++t) acc[0][t] = _mm512_setzero_ps();  // output row 0 has no row above
    std::int64_t j = 0;
    for (; j + 3 <= s.h; j += 3) {
      row<0>(j);
      row<1>(j + 1);
      row<2>(j + 2);
    }
    if (j < s.h) row<0>(j++);
    if (j < s.h) row<1>(j++);
    // The last output row (H - 1) had its row below in the padding.
    switch ((s.h - 1) % 3) {
      case 0: store<0>(s.h - 1); break;
      case 1: store<1>(s.h - 1); break;
      default: store<2>(s.h - 1); break;
    }
  }
};

bool rolling_fits(const ConvShape& s) {
  return s.r == 3 && s.s == 3 && s.sh == 1 && s.sw == 1 && s.dh == 1 && s.dw == 1 && s.ph == 1 && s.pw == 1 &&
         s.wo == s.w && s.ho == s.h && s.w <= 64;
}

void plane_3x3_rolling(const ConvShape& s, const float* xc, const float* w, float* out) {
  __m512 wv[9];
#pragma GCC unroll 9
  for (int t = 0; t < 9; ++t) wv[t] = _mm512_set1_ps(w[t]);
  const std::int64_t vectors = (s.w + 15) / 16;
  const __mmask16 last = lanes(s.w - 16 * (vectors - 1));
  switch (vectors) {
    case 4: Rolling<4>{s, xc, wv, out, last, {}}.plane(); break;
    case 3: Rolling<3>{s, xc, wv, out, last, {}}.plane(); break;
    case 2: Rolling<2>{s, xc, wv, out, last, {}}.plane(); break;
    default: Rolling<1>{s, xc, wv, out, last, {}}.plane(); break;
  }
}

}  // namespace

void nchw_plane_s1_avx512(const ConvShape& s, const float* xc, const float* w, float* out) {
  if (rolling_fits(s)) {
    plane_3x3_rolling(s, xc, w, out);
    return;
  }
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
