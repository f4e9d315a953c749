// See im2col_avx512.hpp. Compiled with AVX-512 F/BW/VL/DQ; nothing here instantiates a
// standard-library template (see sgemm_avx512.cpp).
#include "backends/cpu/im2col_avx512.hpp"

#include <immintrin.h>

#include "backends/cpu/avx512_lanes.hpp"

namespace galley::backends::cpu::avx512 {
namespace {

// out[i] for i in [0, count): in[(i + first) * stride] when i + first lies in [a, b), else 0.
// Masked loads touch no lane outside [a, b), so nothing past the input row is read.
void row_segment(const float* in, std::int64_t stride, std::int64_t first, std::int64_t count, std::int64_t a,
                 std::int64_t b, float* out) {
  const __m512i evens = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  for (std::int64_t i = 0; i < count; i += 16) {
    const std::int64_t ow = first + i;
    const __mmask16 store = lane_range(0, count - i);
    // Valid lanes [l0, l1): inside both the segment and [a, b).
    const std::int64_t l0 = max64(0, a - ow), l1 = min64(min64(16, count - i), b - ow);
    __m512 v;
    if (stride == 1) {
      v = _mm512_maskz_loadu_ps(lane_range(l0, l1), in + ow);
    } else if (stride == 2) {
      // Lanes 2l of the 32 floats from in + 2*ow: two masked loads and one permute.
      const __m512 lo = _mm512_maskz_loadu_ps(lane_range(2 * l0, 2 * l1 - 1), in + 2 * ow);
      const __m512 hi = _mm512_maskz_loadu_ps(lane_range(2 * l0 - 16, 2 * l1 - 17), in + 2 * ow + 16);
      v = _mm512_permutex2var_ps(lo, evens, hi);
    } else {
      alignas(64) float tmp[16];
      for (std::int64_t l = 0; l < 16; ++l) tmp[l] = l >= l0 && l < l1 ? in[(ow + l) * stride] : 0.0f;
      v = _mm512_load_ps(tmp);
    }
    _mm512_mask_storeu_ps(out + i, store, v);
  }
}

// Stride 1 with Wo == W (a "same" padded row): pixel p of the output reads input flat index
// p + (r*dh - ph)*W + shift, so a whole column row is one run over the flat plane with the lanes
// whose input column falls outside the row masked off. No per-output-row bookkeeping: a 28x28
// layer would otherwise pay it for every 28 floats, a 7x7 one for every 7.
void flat_rows(const ConvShape& s, const float* xn, std::int64_t p0, std::int64_t p1, float* col, std::int64_t ld) {
  const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i width = _mm512_set1_epi32(static_cast<int>(s.w));
  const std::int64_t plane = s.h * s.w;
  for (std::int64_t c = 0; c < s.cg; ++c) {
    const float* xc = xn + c * plane;
    for (std::int64_t r = 0; r < s.r; ++r) {
      for (std::int64_t q = 0; q < s.s; ++q) {
        float* row = col + ((c * s.r + r) * s.s + q) * ld - p0;
        const std::int64_t shift = q * s.dw - s.pw;
        const std::int64_t offset = (r * s.dh - s.ph) * s.w + shift;  // input flat index - p
        const float* in = xc + offset;
        // Columns ow with 0 <= ow + shift < W; pixels whose flat input index lies in the plane.
        const __m512i col_lo = _mm512_set1_epi32(static_cast<int>(-shift));
        const __m512i col_hi = _mm512_set1_epi32(static_cast<int>(s.w - shift));
        const std::int64_t p_lo = -offset, p_hi = plane - offset;
        std::int64_t ow = p0 % s.w;
        const std::int64_t step = 16 % s.w;
        for (std::int64_t p = p0; p < p1; p += 16) {
          __m512i cols = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(ow)), iota);
          // ow + 15 < W + 15: ceil(15 / W) subtractions bring every lane below W (one for W >= 16).
          for (std::int64_t over = 15; over > 0; over -= s.w) {
            cols = _mm512_mask_sub_epi32(cols, _mm512_cmpge_epi32_mask(cols, width), cols, width);
          }
          const __mmask16 store = lane_range(0, p1 - p);
          const __mmask16 take = _mm512_cmpge_epi32_mask(cols, col_lo) & _mm512_cmplt_epi32_mask(cols, col_hi) &
                                 lane_range(p_lo - p, p_hi - p) & store;
          // Plain loads and stores where every lane takes part: the masked forms are slower here.
          const __m512 v = take == 0xffff ? _mm512_loadu_ps(in + p) : _mm512_maskz_loadu_ps(take, in + p);
          if (store == 0xffff) {
            _mm512_storeu_ps(row + p, v);
          } else {
            _mm512_mask_storeu_ps(row + p, store, v);
          }
          ow += step;  // ow + 16 reduced mod W with one compare: step < W and ow < W
          if (ow >= s.w) ow -= s.w;
        }
      }
    }
  }
}

// Stride 2 with output rows of at most kRowVectors * 16 pixels (ResNet's 56, 28, 14 and 7): a
// whole output row is one to four masked pairs of loads and a permute per 16 pixels, the padding's
// zeros included, with the masks worked out once per filter column. The plain loops below would
// run their 7- or 14-float rows element by element.
constexpr int kRowVectors = 4;
constexpr std::int64_t kMaskedTaps = 16;  // filter widths the masks are kept for

struct Stride2Masks {
  __mmask16 lo[kRowVectors], hi[kRowVectors];  // input lanes of the even and odd halves
};

// Output columns [ow_lo, ow_hi) read inside the input row; the others are zero.
Stride2Masks stride2_masks(std::int64_t wo, std::int64_t ow_lo, std::int64_t ow_hi) {
  Stride2Masks m{};
  for (int j = 0; j < kRowVectors; ++j) {
    const std::int64_t ow = 16 * j;
    const std::int64_t l0 = max64(0, ow_lo - ow), l1 = min64(min64(16, wo - ow), ow_hi - ow);
    m.lo[j] = lane_range(2 * l0, 2 * l1 - 1);
    m.hi[j] = lane_range(2 * l0 - 16, 2 * l1 - 17);
  }
  return m;
}

bool stride2_rows_fit(const ConvShape& s) {
  return s.sw == 2 && s.wo <= 16 * kRowVectors && s.s <= kMaskedTaps;
}

// Output pixels [p0, p1) of one column-buffer row (channel plane xc, filter tap r, q), whose
// first and last output rows may be partial: those go through row_segment, whole rows through the
// masks.
void stride2_row(const ConvShape& s, const float* xc, std::int64_t r, std::int64_t shift,
                 const Stride2Masks& m, std::int64_t ow_lo, std::int64_t ow_hi, std::int64_t p0,
                 std::int64_t p1, float* out) {
  const __m512i evens = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const int vectors = static_cast<int>((s.wo + 15) / 16);
  __mmask16 store[kRowVectors];
  for (int j = 0; j < kRowVectors; ++j) store[j] = lanes(s.wo - 16 * j);
  std::int64_t oh = p0 / s.wo, ow0 = p0 % s.wo;
  for (std::int64_t p = p0; p < p1; ++oh, ow0 = 0) {
    const std::int64_t count = min64(s.wo - ow0, p1 - p);
    const std::int64_t ih = oh * s.sh - s.ph + r * s.dh;
    const bool inside = ih >= 0 && ih < s.h;
    float* row = out + (p - p0);
    if (count != s.wo) {
      row_segment(xc + (inside ? ih : 0) * s.w + shift, 2, ow0, count, inside ? ow_lo : 0, inside ? ow_hi : 0,
                  row);
    } else if (!inside) {
      for (int j = 0; j < vectors; ++j) _mm512_mask_storeu_ps(row + 16 * j, store[j], _mm512_setzero_ps());
    } else {
      const float* in = xc + ih * s.w + shift;
      for (int j = 0; j < vectors; ++j) {
        const __m512 lo = _mm512_maskz_loadu_ps(m.lo[j], in + 32 * j);
        const __m512 hi = _mm512_maskz_loadu_ps(m.hi[j], in + 32 * j + 16);
        _mm512_mask_storeu_ps(row + 16 * j, store[j], _mm512_permutex2var_ps(lo, evens, hi));
      }
    }
    p += count;
  }
}

}  // namespace

void im2col_nchw(const ConvShape& s, const float* xn, std::int64_t p0, std::int64_t p1, float* col,
                 std::int64_t ld) {
  // The flat run beats per-row segments once rows are 14 or more wide; on 7-wide rows a row segment
  // is one vector anyway and the per-row loop is faster.
  if (s.sw == 1 && s.sh == 1 && s.wo == s.w && s.w >= 14) {
    flat_rows(s, xn, p0, p1, col, ld);
    return;
  }
  if (stride2_rows_fit(s)) {
    std::int64_t ow_lo[kMaskedTaps], ow_hi[kMaskedTaps];
    Stride2Masks masks[kMaskedTaps];
    for (std::int64_t q = 0; q < s.s; ++q) {
      const std::int64_t shift = q * s.dw - s.pw;
      ow_lo[q] = min64(s.wo, max64(0, (-shift + 1) / 2));
      const std::int64_t last = s.w - 1 - shift;
      ow_hi[q] = last < 0 ? ow_lo[q] : max64(ow_lo[q], min64(s.wo, last / 2 + 1));
      masks[q] = stride2_masks(s.wo, ow_lo[q], ow_hi[q]);
    }
    for (std::int64_t c = 0; c < s.cg; ++c) {
      for (std::int64_t r = 0; r < s.r; ++r) {
        for (std::int64_t q = 0; q < s.s; ++q) {
          stride2_row(s, xn + c * s.h * s.w, r, q * s.dw - s.pw, masks[q], ow_lo[q], ow_hi[q], p0, p1,
                      col + ((c * s.r + r) * s.s + q) * ld);
        }
      }
    }
    return;
  }
  const std::int64_t oh_first = p0 / s.wo, ow_first = p0 % s.wo;
  for (std::int64_t c = 0; c < s.cg; ++c) {
    const float* xc = xn + c * s.h * s.w;
    for (std::int64_t r = 0; r < s.r; ++r) {
      for (std::int64_t q = 0; q < s.s; ++q) {
        float* row = col + ((c * s.r + r) * s.s + q) * ld;
        // Output columns [ow_lo, ow_hi) read inside the image row.
        const std::int64_t shift = q * s.dw - s.pw;
        const std::int64_t ow_lo = min64(s.wo, max64(0, (-shift + s.sw - 1) / s.sw));
        const std::int64_t last = s.w - 1 - shift;
        const std::int64_t ow_hi = last < 0 ? ow_lo : max64(ow_lo, min64(s.wo, last / s.sw + 1));
        std::int64_t oh = oh_first, ow0 = ow_first;
        for (std::int64_t p = p0; p < p1; ++oh, ow0 = 0) {
          const std::int64_t count = min64(s.wo - ow0, p1 - p);
          const std::int64_t ih = oh * s.sh - s.ph + r * s.dh;
          // A row outside the image reads nothing: an empty [a, b) writes zeros.
          const bool inside = ih >= 0 && ih < s.h;
          if (s.sw <= 2 && inside) {
            // Plain loops: what GCC makes of them here (unmasked loads, for stride 2 a permute per
            // vector, the row's ends apart) runs faster than row_segment's masked loads with lane
            // ranges worked out each step.
            float* out = row + (p - p0);
            const float* in = xc + ih * s.w + shift;
            const std::int64_t a = max64(ow0, min64(ow_lo, ow0 + count)), b = max64(a, min64(ow_hi, ow0 + count));
            for (std::int64_t ow = ow0; ow < a; ++ow) out[ow - ow0] = 0.0f;
            if (s.sw == 1) {
              for (std::int64_t ow = a; ow < b; ++ow) out[ow - ow0] = in[ow];
            } else {
              for (std::int64_t ow = a; ow < b; ++ow) out[ow - ow0] = in[2 * ow];
            }
            for (std::int64_t ow = b; ow < ow0 + count; ++ow) out[ow - ow0] = 0.0f;
          } else {
            row_segment(xc + (inside ? ih : 0) * s.w + shift, s.sw, ow0, count, inside ? ow_lo : 0, inside ? ow_hi : 0,
                        row + (p - p0));
          }
          p += count;
        }
      }
    }
  }
}

void copy_every_second(const float* __restrict in, std::int64_t count, float* __restrict out) {
  for (std::int64_t i = 0; i < count; ++i) out[i] = in[2 * i];
}

bool implicit_gemm_fits(const ConvShape& s) {
  return !s.nhwc && s.sw == 1 && s.sh == 1 && s.wo == s.w && s.ho == s.h && s.w >= 16 && s.kg <= 16;
}

namespace {

// Output channels [k0, k0 + kK) x pixels [p, p + 48) of one image and group (see
// implicit_gemm_nchw); `xg` is the group's first input channel, `wk` the first filter.
template <int kK>
void implicit_block(const ConvShape& s, const float* xg, const float* wk, float* yk, std::int64_t p,
                    std::int64_t p1) {
  constexpr int kV = 3;
  const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i width = _mm512_set1_epi32(static_cast<int>(s.w));
  const std::int64_t plane = s.h * s.w, filter = s.cg * s.r * s.s;
  __m512i cols[kV];  // output column of every lane
  __mmask16 store[kV];
  {
    std::int64_t ow = p % s.w;
#pragma GCC unroll 3
    for (int v = 0; v < kV; ++v) {
      cols[v] = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(ow)), iota);
      cols[v] = _mm512_mask_sub_epi32(cols[v], _mm512_cmpge_epi32_mask(cols[v], width), cols[v], width);
      store[v] = lane_range(0, p1 - p - 16 * v);
      ow += 16;
      if (ow >= s.w) ow -= s.w;
    }
  }
  __m512 acc[kK][kV];
#pragma GCC unroll 8
  for (int k = 0; k < kK; ++k) {
#pragma GCC unroll 3
    for (int v = 0; v < kV; ++v) acc[k][v] = _mm512_setzero_ps();
  }
  for (std::int64_t r = 0; r < s.r; ++r) {
    for (std::int64_t q = 0; q < s.s; ++q) {
      const std::int64_t shift = q * s.dw - s.pw;
      const std::int64_t offset = (r * s.dh - s.ph) * s.w + shift;
      const __m512i col_lo = _mm512_set1_epi32(static_cast<int>(-shift));
      const __m512i col_hi = _mm512_set1_epi32(static_cast<int>(s.w - shift));
      __mmask16 take[kV];
#pragma GCC unroll 3
      for (int v = 0; v < kV; ++v) {
        const std::int64_t pv = p + 16 * v;
        take[v] = _mm512_cmpge_epi32_mask(cols[v], col_lo) & _mm512_cmplt_epi32_mask(cols[v], col_hi) &
                  lane_range(-offset - pv, plane - offset - pv) & store[v];
      }
      const float* in = xg + offset + p;
      const float* wt = wk + r * s.s + q;
      for (std::int64_t c = 0; c < s.cg; ++c, in += plane, wt += s.r * s.s) {
        __m512 xv[kV];
#pragma GCC unroll 3
        for (int v = 0; v < kV; ++v) xv[v] = _mm512_maskz_loadu_ps(take[v], in + 16 * v);
#pragma GCC unroll 8
        for (int k = 0; k < kK; ++k) {
          const __m512 wv = _mm512_set1_ps(wt[k * filter]);
#pragma GCC unroll 3
          for (int v = 0; v < kV; ++v) acc[k][v] = _mm512_fmadd_ps(wv, xv[v], acc[k][v]);
        }
      }
    }
  }
#pragma GCC unroll 8
  for (int k = 0; k < kK; ++k) {
#pragma GCC unroll 3
    for (int v = 0; v < kV; ++v) _mm512_mask_storeu_ps(yk + k * plane + p + 16 * v, store[v], acc[k][v]);
  }
}

template <int kK>
void implicit_run(const ConvShape& s, const float* xg, const float* wk, float* yk, std::int64_t p0, std::int64_t p1) {
  for (std::int64_t p = p0; p < p1; p += 48) implicit_block<kK>(s, xg, wk, yk, p, p1);
}

}  // namespace

void implicit_gemm_nchw(const ConvShape& s, const float* x, const float* w, float* y, std::int64_t n,
                        std::int64_t gi, std::int64_t p0, std::int64_t p1) {
  const std::int64_t plane = s.h * s.w, filter = s.cg * s.r * s.s;
  const float* xg = x + (n * s.c + gi * s.cg) * plane;
  for (std::int64_t k0 = 0; k0 < s.kg; k0 += 8) {
    const float* wk = w + (gi * s.kg + k0) * filter;
    float* yk = y + (n * s.k + gi * s.kg + k0) * plane;
    switch (min64(8, s.kg - k0)) {
      case 8: implicit_run<8>(s, xg, wk, yk, p0, p1); break;
      case 7: implicit_run<7>(s, xg, wk, yk, p0, p1); break;
      case 6: implicit_run<6>(s, xg, wk, yk, p0, p1); break;
      case 5: implicit_run<5>(s, xg, wk, yk, p0, p1); break;
      case 4: implicit_run<4>(s, xg, wk, yk, p0, p1); break;
      case 3: implicit_run<3>(s, xg, wk, yk, p0, p1); break;
      case 2: implicit_run<2>(s, xg, wk, yk, p0, p1); break;
      default: implicit_run<1>(s, xg, wk, yk, p0, p1); break;
    }
  }
}

}  // namespace galley::backends::cpu::avx512
