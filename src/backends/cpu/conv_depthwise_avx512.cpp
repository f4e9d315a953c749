// AVX-512 loops of cpu.conv.depthwise for NCHW planes with width stride 1 or 2, read in place (see
// conv_depthwise_kernels.hpp). Compiled with AVX-512 F/BW/VL/DQ; entered only after
// cpu_has_avx512(). Masked loads read no lane outside the image row (and cannot fault there), so
// the padding columns cost nothing and every 16-column step runs the same code; masked stores end
// the row, after the epilogue's post-ops in registers, so a fused call does not read the plane
// again. Nothing here instantiates a standard-library template (see sgemm_avx512.cpp).
#include <immintrin.h>

#include "backends/cpu/avx512_lanes.hpp"
#include "backends/cpu/avx512_post_ops.hpp"
#include "backends/cpu/conv_depthwise_kernels.hpp"

namespace galley::backends::cpu::depthwise {
namespace {

using avx512::lanes;
using avx512::max64;
using avx512::min64;
using avx512::PostOps;

// Lanes l of a 16-column step whose input column first + l lies in [0, w).
inline __mmask16 inside_mask(std::int64_t first, std::int64_t w) {
  return avx512::lane_range(-first, w - first);
}

// Output row oh, the lanes `store` of the 16 columns from ow, finished by the plane's post-ops
// (element oh * Wo + ow of its one-row C).
[[gnu::always_inline]] inline void store_row(const ConvShape& s, const PostOps* post, float* out,
                                             std::int64_t oh, std::int64_t ow, __mmask16 store, __m512 v) {
  if (post != nullptr) {
    __m512 r[1] = {v};
    avx512::apply_post<1>(*post, 0, oh * s.wo + ow, r, store);
    v = r[0];
  }
  _mm512_mask_storeu_ps(out + oh * s.wo + ow, store, v);
}

// Output row o from column c0 as kNv vectors (the last one's lanes `last`), finished by the
// plane's post-ops.
template <int kNv>
[[gnu::always_inline]] inline void store_row_vectors(const ConvShape& s, const PostOps* post, float* out,
                                                     std::int64_t o, std::int64_t c0, __mmask16 last,
                                                     __m512 (&acc)[kNv]) {
  if (post != nullptr) avx512::apply_post<kNv>(*post, 0, o * s.wo + c0, acc, last);
  float* dst = out + o * s.wo + c0;
#pragma GCC unroll 4
  for (int t = 0; t < kNv; ++t) {
    if (t == kNv - 1) {
      _mm512_mask_storeu_ps(dst + 16 * t, last, acc[t]);
    } else {
      _mm512_storeu_ps(dst + 16 * t, acc[t]);
    }
  }
}

// The filter rows [lo, hi) whose input row lies inside the image for output row oh.
struct FilterRows {
  std::int64_t lo, hi;
  static FilterRows inside(const ConvShape& s, std::int64_t oh) {
    std::int64_t lo = 0, hi = s.r;
    while (lo < s.r && oh * s.sh - s.ph + lo * s.dh < 0) ++lo;
    while (hi > lo && oh * s.sh - s.ph + (hi - 1) * s.dh >= s.h) --hi;
    return {lo, hi};
  }
};

// The output rows [first, end) whose filter rows all lie inside the image: they take the blocked
// loops, the rows above and below them the one-row loop that skips taps in the padding.
struct InteriorRows {
  std::int64_t first, end;
  static InteriorRows of(const ConvShape& s) {
    const std::int64_t first = min64(s.ho, (s.ph + s.sh - 1) / s.sh);
    const std::int64_t last_in = s.h - 1 + s.ph - (s.r - 1) * s.dh;
    return {first, last_in < 0 ? first : max64(first, min64(s.ho, last_in / s.sh + 1))};
  }
};

// 3x3, unit stride and dilation: rows [oh, oh + kRows) x 16 columns from ow. Each input row is
// loaded once per tap column and feeds every output row of the block it reaches; the nine
// weights stay in registers (kRows + 9 + 1 zmm).
template <int kRows, bool kEdge>
void column_3x3(const ConvShape& s, const float* xc, const __m512 wv[9], std::int64_t oh, std::int64_t ow,
                float* out, const PostOps* post) {
  __mmask16 mask[3];
#pragma GCC unroll 3
  for (int q = 0; q < 3; ++q)
    mask[q] = kEdge ? inside_mask(ow + q - s.pw, s.w) : static_cast<__mmask16>(0xffff);
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
  for (int i = 0; i < kRows; ++i) store_row(s, post, out, oh + i, ow, store, acc[i]);
}

template <int kRows>
void rows_3x3(const ConvShape& s, const float* xc, const __m512 wv[9], std::int64_t oh, float* out,
              const PostOps* post) {
  for (std::int64_t ow = 0; ow < s.wo; ow += 16) {
    if (ow - s.pw >= 0 && ow + 17 - s.pw < s.w) {
      column_3x3<kRows, false>(s, xc, wv, oh, ow, out, post);
    } else {
      column_3x3<kRows, true>(s, xc, wv, oh, ow, out, post);
    }
  }
}

void plane_3x3(const ConvShape& s, const float* xc, const float* w, float* out, const PostOps* post) {
  __m512 wv[9];
#pragma GCC unroll 9
  for (int t = 0; t < 9; ++t) wv[t] = _mm512_set1_ps(w[t]);
  constexpr int kRows = 14;  // 14 accumulator chains: enough FMAs in flight to hide their latency
  std::int64_t oh = 0;
  for (; oh + kRows <= s.ho; oh += kRows) rows_3x3<kRows>(s, xc, wv, oh, out, post);
  switch (s.ho - oh) {
    case 13:
      rows_3x3<13>(s, xc, wv, oh, out, post);
      break;
    case 12:
      rows_3x3<12>(s, xc, wv, oh, out, post);
      break;
    case 11:
      rows_3x3<11>(s, xc, wv, oh, out, post);
      break;
    case 10:
      rows_3x3<10>(s, xc, wv, oh, out, post);
      break;
    case 9:
      rows_3x3<9>(s, xc, wv, oh, out, post);
      break;
    case 8:
      rows_3x3<8>(s, xc, wv, oh, out, post);
      break;
    case 7:
      rows_3x3<7>(s, xc, wv, oh, out, post);
      break;
    case 6:
      rows_3x3<6>(s, xc, wv, oh, out, post);
      break;
    case 5:
      rows_3x3<5>(s, xc, wv, oh, out, post);
      break;
    case 4:
      rows_3x3<4>(s, xc, wv, oh, out, post);
      break;
    case 3:
      rows_3x3<3>(s, xc, wv, oh, out, post);
      break;
    case 2:
      rows_3x3<2>(s, xc, wv, oh, out, post);
      break;
    case 1:
      rows_3x3<1>(s, xc, wv, oh, out, post);
      break;
    default:
      break;
  }
}

// Any filter, height stride and dilations (width stride 1): kRows output rows x 16 columns, the
// taps whose input row lies outside the image skipped (kRows == 1 near the top and bottom).
template <int kRows>
void rows_any(const ConvShape& s, const float* xc, const float* w, std::int64_t oh, float* out,
              const PostOps* post) {
  const FilterRows taps = kRows == 1 ? FilterRows::inside(s, oh) : FilterRows{0, s.r};
  const std::int64_t r_lo = taps.lo, r_hi = taps.hi;
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
    for (int i = 0; i < kRows; ++i) store_row(s, post, out, oh + i, ow, store, acc[i]);
  }
}

// 3x3 "same" (padding 1, unit strides and dilation) in strips of at most 64 columns: each input row
// is loaded once as kNv vectors and its column neighbours are made in registers (valignd), and
// it is added to the three output rows it reaches, whose accumulators rotate through three slots.
// Per output row that is kNv loads and stores for 9 * kNv FMAs, where the blocked loop above
// loads every input vector three times at shifted, mostly line-crossing addresses. A strip's
// edge columns come from its neighbours: one more load on each side per row.
template <int kNv>
struct Rolling {
  const ConvShape& s;
  const float* xc;
  const __m512* wv;
  float* out;
  const PostOps* post;
  std::int64_t c0;     // the strip's first column
  __mmask16 last;      // valid lanes of the strip's last vector
  __mmask16 beyond;    // valid lanes of the vector right of the strip (none at the row's end)
  __m512 acc[3][kNv];  // output row o lives in slot o % 3

  // Input row j into the slots of output rows j+1 (filter row 0), j (1) and j-1 (2); the slot of
  // row j+1 starts here. Then output row j-1 is complete and stored.
  template <int kSlot>
  void row(std::int64_t j) {
    constexpr int kNext = (kSlot + 1) % 3, kPrev = (kSlot + 2) % 3;
    const float* in = xc + j * s.w + c0;
    __m512 v[kNv + 1];
#pragma GCC unroll 4
    for (int t = 0; t < kNv; ++t)
      v[t] = t == kNv - 1 ? _mm512_maskz_loadu_ps(last, in + 16 * t) : _mm512_loadu_ps(in + 16 * t);
    // The columns beside the strip: the neighbours of its first and last outputs.
    v[kNv] = _mm512_maskz_loadu_ps(beyond, in + 16 * kNv);
    const __m512 left_of_strip = c0 > 0 ? _mm512_loadu_ps(in - 16) : _mm512_setzero_ps();
    const bool has_next = j + 1 < s.ho, has_prev = j >= 1;
#pragma GCC unroll 4
    for (int t = 0; t < kNv; ++t) {
      const __m512 before = t == 0 ? left_of_strip : v[t - 1];
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
    store_row_vectors<kNv>(s, post, out, o, c0, last, acc[kSlotOut]);
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
      case 0:
        store<0>(s.h - 1);
        break;
      case 1:
        store<1>(s.h - 1);
        break;
      default:
        store<2>(s.h - 1);
        break;
    }
  }
};

bool rolling_fits(const ConvShape& s) {
  return s.r == 3 && s.s == 3 && s.sh == 1 && s.sw == 1 && s.dh == 1 && s.dw == 1 && s.ph == 1 && s.pw == 1 &&
         s.wo == s.w && s.ho == s.h;
}

void plane_3x3_rolling(const ConvShape& s, const float* xc, const float* w, float* out, const PostOps* post) {
  __m512 wv[9];
#pragma GCC unroll 9
  for (int t = 0; t < 9; ++t) wv[t] = _mm512_set1_ps(w[t]);
  // Strips of at most 64 columns (4 vectors): 3 x 4 accumulators, 9 weights and 5 input vectors fill
  // the 32 registers.
  for (std::int64_t c0 = 0; c0 < s.w; c0 += 64) {
    const std::int64_t vectors = min64(4, (s.w - c0 + 15) / 16);
    const __mmask16 last = lanes(s.w - c0 - 16 * (vectors - 1));
    const __mmask16 beyond = lanes(s.w - c0 - 16 * vectors);
    switch (vectors) {
      case 4:
        Rolling<4>{s, xc, wv, out, post, c0, last, beyond, {}}.plane();
        break;
      case 3:
        Rolling<3>{s, xc, wv, out, post, c0, last, beyond, {}}.plane();
        break;
      case 2:
        Rolling<2>{s, xc, wv, out, post, c0, last, beyond, {}}.plane();
        break;
      default:
        Rolling<1>{s, xc, wv, out, post, c0, last, beyond, {}}.plane();
        break;
    }
  }
}

// Width stride 2, unit width dilation: rows [oh, oh + kRows) x 16 columns from ow (kRows == 1
// skips the taps whose input row lies in the padding). Output column ow + l, tap q reads input
// column 2 (ow + l) + q - pw: lane l of the even (q even) or odd (q odd) columns of the 32 from
// 2 ow + (q & ~1) - pw, so one pair of masked loads and two permutes serve taps q and q + 1.
template <int kRows>
void rows_s2(const ConvShape& s, const float* xc, const float* w, std::int64_t oh, float* out,
             const PostOps* post) {
  const FilterRows taps = kRows == 1 ? FilterRows::inside(s, oh) : FilterRows{0, s.r};
  const std::int64_t r_lo = taps.lo, r_hi = taps.hi;
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  const std::int64_t row_step = s.sh * s.w;
  for (std::int64_t ow = 0; ow < s.wo; ow += 16) {
    __m512 acc[kRows];
#pragma GCC unroll 8
    for (int i = 0; i < kRows; ++i) acc[i] = _mm512_setzero_ps();
    for (std::int64_t q = 0; q < s.s; q += 2) {
      const std::int64_t first = 2 * ow + q - s.pw;
      const __mmask16 low = inside_mask(first, s.w), high = inside_mask(first + 16, s.w);
      const bool pair = q + 1 < s.s;
      for (std::int64_t r = r_lo; r < r_hi; ++r) {
        const __m512 w_even = _mm512_set1_ps(w[r * s.s + q]);
        const __m512 w_odd = pair ? _mm512_set1_ps(w[r * s.s + q + 1]) : _mm512_setzero_ps();
        const float* src = xc + (oh * s.sh - s.ph + r * s.dh) * s.w + first;
#pragma GCC unroll 8
        for (int i = 0; i < kRows; ++i) {
          const __m512 a = _mm512_maskz_loadu_ps(low, src + i * row_step);
          const __m512 b = _mm512_maskz_loadu_ps(high, src + i * row_step + 16);
          acc[i] = _mm512_fmadd_ps(w_even, _mm512_permutex2var_ps(a, even, b), acc[i]);
          if (pair) acc[i] = _mm512_fmadd_ps(w_odd, _mm512_permutex2var_ps(a, odd, b), acc[i]);
        }
      }
    }
    const __mmask16 store = lanes(s.wo - ow);
#pragma GCC unroll 8
    for (int i = 0; i < kRows; ++i) store_row(s, post, out, oh + i, ow, store, acc[i]);
  }
}

// 3x3, stride 2, padding 1 (MobileNet's downsampling layers) on output rows of at most 64
// columns: each input row is loaded once as kNv pairs of vectors and split into its even and odd
// columns (two permutes), and the odd columns shifted by one lane give the left taps, so a row
// costs 2 loads and 3 shuffles per 16 outputs where rows_s2 spends 4 loads and 3 permutes per
// output row and filter row. Odd input rows serve two output rows: row 2oh + 1 finishes output
// row oh (filter row 2) and starts row oh + 1 (filter row 0), kept in `carry`.
template <int kNv>
struct RollingS2 {
  const ConvShape& s;
  const float* xc;
  const __m512* wv;
  float* out;
  const PostOps* post;
  __mmask16 low[kNv], high[kNv];  // valid lanes of the two input vectors of each block
  __mmask16 last;                 // valid output lanes of the last block

  // Input row j as the left (column 2c - 1), middle (2c) and right (2c + 1) taps of the output
  // columns c of every block.
  [[gnu::always_inline]] void taps(std::int64_t j, __m512 left[kNv], __m512 mid[kNv],
                                   __m512 right[kNv]) const {
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    const float* in = xc + j * s.w;
    __m512 before = _mm512_setzero_ps();  // column -1 is padding
#pragma GCC unroll 4
    for (int t = 0; t < kNv; ++t) {
      const __m512 a = _mm512_maskz_loadu_ps(low[t], in + 32 * t);
      const __m512 b = _mm512_maskz_loadu_ps(high[t], in + 32 * t + 16);
      mid[t] = _mm512_permutex2var_ps(a, even, b);
      right[t] = _mm512_permutex2var_ps(a, odd, b);
      left[t] = _mm512_castsi512_ps(
          _mm512_alignr_epi32(_mm512_castps_si512(right[t]), _mm512_castps_si512(before), 15));
      before = right[t];
    }
  }

  void plane() const {
    __m512 carry[kNv];  // output row oh's sum over input row 2oh - 1 (filter row 0)
#pragma GCC unroll 4
    for (int t = 0; t < kNv; ++t) carry[t] = _mm512_setzero_ps();
    for (std::int64_t oh = 0; oh < s.ho; ++oh) {
      __m512 left[kNv], mid[kNv], right[kNv], acc[kNv];
      taps(2 * oh, left, mid, right);
#pragma GCC unroll 4
      for (int t = 0; t < kNv; ++t) {
        acc[t] = _mm512_fmadd_ps(wv[3], left[t], carry[t]);
        acc[t] = _mm512_fmadd_ps(wv[4], mid[t], acc[t]);
        acc[t] = _mm512_fmadd_ps(wv[5], right[t], acc[t]);
      }
      if (2 * oh + 1 < s.h) {
        taps(2 * oh + 1, left, mid, right);
#pragma GCC unroll 4
        for (int t = 0; t < kNv; ++t) {
          // Filter row 2 in a chain of its own, added once, so that a row's sum waits on three
          // dependent FMAs and an add instead of six FMAs.
          __m512 below = _mm512_mul_ps(wv[6], left[t]);
          below = _mm512_fmadd_ps(wv[7], mid[t], below);
          below = _mm512_fmadd_ps(wv[8], right[t], below);
          acc[t] = _mm512_add_ps(acc[t], below);
          carry[t] = _mm512_mul_ps(wv[0], left[t]);
          carry[t] = _mm512_fmadd_ps(wv[1], mid[t], carry[t]);
          carry[t] = _mm512_fmadd_ps(wv[2], right[t], carry[t]);
        }
      }
      store_row_vectors<kNv>(s, post, out, oh, 0, last, acc);
    }
  }
};

bool rolling_s2_fits(const ConvShape& s) {
  return s.r == 3 && s.s == 3 && s.sh == 2 && s.sw == 2 && s.dh == 1 && s.dw == 1 && s.ph == 1 && s.pw == 1 &&
         s.ho == (s.h - 1) / 2 + 1 && s.wo == (s.w - 1) / 2 + 1 && s.wo <= 64;
}

template <int kNv>
void plane_3x3_s2_rolling(const ConvShape& s, const float* xc, const __m512 wv[9], float* out,
                          const PostOps* post) {
  RollingS2<kNv> rolling{s, xc, wv, out, post, {}, {}, lanes(s.wo - 16 * (kNv - 1))};
#pragma GCC unroll 4
  for (int t = 0; t < kNv; ++t) {
    rolling.low[t] = lanes(s.w - 32 * t);
    rolling.high[t] = lanes(s.w - 32 * t - 16);
  }
  rolling.plane();
}

void plane_3x3_s2(const ConvShape& s, const float* xc, const float* w, float* out, const PostOps* post) {
  __m512 wv[9];
#pragma GCC unroll 9
  for (int t = 0; t < 9; ++t) wv[t] = _mm512_set1_ps(w[t]);
  switch ((s.wo + 15) / 16) {
    case 4:
      plane_3x3_s2_rolling<4>(s, xc, wv, out, post);
      break;
    case 3:
      plane_3x3_s2_rolling<3>(s, xc, wv, out, post);
      break;
    case 2:
      plane_3x3_s2_rolling<2>(s, xc, wv, out, post);
      break;
    default:
      plane_3x3_s2_rolling<1>(s, xc, wv, out, post);
      break;
  }
}

}  // namespace

void prefetch_for_write_avx512(const void* p, std::int64_t bytes) {
  const char* line = static_cast<const char*>(p);
  // Inline assembly: GCC emits PREFETCHW for __builtin_prefetch only with -mprfchw, which this
  // file's AVX-512 flags do not imply although every AVX-512 CPU has the instruction.
  for (std::int64_t b = 0; b < bytes; b += 64) __asm__ volatile("prefetchw (%0)" : : "r"(line + b));
}

void nchw_plane_s1_avx512(const ConvShape& s, const float* xc, const float* w, float* out,
                          const PostOps* post) {
  if (rolling_fits(s)) {
    plane_3x3_rolling(s, xc, w, out, post);
    return;
  }
  if (s.r == 3 && s.s == 3 && s.sh == 1 && s.dh == 1 && s.dw == 1) {
    plane_3x3(s, xc, w, out, post);
    return;
  }
  const InteriorRows rows = InteriorRows::of(s);
  std::int64_t oh = 0;
  for (; oh < rows.first; ++oh) rows_any<1>(s, xc, w, oh, out, post);
  for (; oh + 4 <= rows.end; oh += 4) rows_any<4>(s, xc, w, oh, out, post);
  for (; oh < s.ho; ++oh) rows_any<1>(s, xc, w, oh, out, post);
}

// Eight rows at a time where the plane has them: eight accumulator chains keep the FMA units busy
// while the permutes, not the loads, bound the loop.
void nchw_plane_s2_avx512(const ConvShape& s, const float* xc, const float* w, float* out,
                          const PostOps* post) {
  if (rolling_s2_fits(s)) {
    plane_3x3_s2(s, xc, w, out, post);
    return;
  }
  const InteriorRows rows = InteriorRows::of(s);
  std::int64_t oh = 0;
  for (; oh < rows.first; ++oh) rows_s2<1>(s, xc, w, oh, out, post);
  for (; oh + 8 <= rows.end; oh += 8) rows_s2<8>(s, xc, w, oh, out, post);
  for (; oh + 4 <= rows.end; oh += 4) rows_s2<4>(s, xc, w, oh, out, post);
  for (; oh < s.ho; ++oh) rows_s2<1>(s, xc, w, oh, out, post);
}

}  // namespace galley::backends::cpu::depthwise
