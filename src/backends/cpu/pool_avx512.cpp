// See pool_avx512.hpp. Compiled with AVX-512 F/BW/VL/DQ; nothing here instantiates a
// standard-library template (see sgemm_avx512.cpp).
//
// Why the separable order keeps the rule: over a sequence, the rule leaves the last NaN if there is
// one and otherwise the first maximum, which is also what it leaves when applied to the results of
// consecutive pieces of the sequence in order. A window's rows are consecutive pieces of its
// row-major order, so folding each row's columns left to right and then the rows top to bottom
// gives the bits of the window scanned as a whole. (Columns first would not: a -0 in the second
// row's first column would come before a +0 in the first row's second column.)
#include "backends/cpu/pool_avx512.hpp"

#include <immintrin.h>

#include "backends/cpu/avx512_lanes.hpp"

namespace galley::backends::cpu::avx512 {
namespace {

// acc, then v later in the window: v replaces acc when larger. max(v, acc) returns its first
// operand only when it compares greater, so without NaNs this is the rule exactly, in one
// instruction.
struct NumbersOnly {
  static __m512 fold(__m512 acc, __m512 v) { return _mm512_max_ps(v, acc); }
};

// The rule with NaNs: v replaces acc when larger or NaN; an equal value, or a number after a NaN,
// leaves it.
struct WithNaNs {
  static __m512 fold(__m512 acc, __m512 v) {
    const __mmask16 take = _mm512_cmp_ps_mask(v, acc, _CMP_GT_OQ) | _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    return _mm512_mask_mov_ps(acc, take, v);
  }
};

// Which vectors of 16 output columns have windows reaching past the row's ends: blocks [0, lead)
// and [trail, blocks), trail >= lead; the blocks between load without masks.
struct Edges {
  std::int64_t blocks, lead, trail;
};

template <int kStride>
Edges edges_of(const MaxPoolPlane& g) {
  Edges e{max_pool_plane_pitch(g) / 16, 0, 0};
  const auto inside = [&](std::int64_t b) {
    const std::int64_t o = b * 16 * kStride - g.pad_w;
    return o >= 0 && o + 16 * kStride + g.kernel_w - 1 <= g.w;
  };
  while (e.lead < e.blocks && !inside(e.lead)) ++e.lead;
  e.trail = e.blocks;
  while (e.trail > e.lead && !inside(e.trail - 1)) --e.trail;
  return e;
}

// The rule over tap(0), ..., tap(kernel - 1), each the 16 lanes' next column.
template <class Rule, class Tap>
inline __m512 fold_taps(std::int64_t kernel, const Tap& tap) {
  __m512 acc = tap(0);
  for (std::int64_t kx = 1; kx < kernel; ++kx) acc = Rule::fold(acc, tap(kx));
  return acc;
}

// out[j] = the rule over row[j * kStride - pad + [0, kernel)) clipped to [0, w), for j in
// [0, pitch): the row's column maxima, -inf where a window holds no column. Stride 2 reduces every
// start position of two vectors (32 consecutive starts) and keeps the even ones with one permute,
// instead of permuting every tap. masks[(b * kStride + half) * kernel + kx] selects the columns
// inside the row for tap kx of edge block b (numbered over blocks, unused for inner ones).
template <class Rule, int kStride>
void column_maxima(const MaxPoolPlane& g, const Edges& e, const __mmask16* masks, const float* row,
                   float* out) {
  const std::int64_t kernel = g.kernel_w;
  const __m512i evens = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512 neg_inf = _mm512_set1_ps(-__builtin_inff());
  const auto block = [&](std::int64_t b, const auto& tap) {
    const float* p = row + b * 16 * kStride - g.pad_w;
    const auto window_max = [&](int half) {
      return fold_taps<Rule>(kernel, [&](std::int64_t kx) { return tap(b, half, p + 16 * half + kx, kx); });
    };
    if constexpr (kStride == 1) {
      _mm512_storeu_ps(out + b * 16, window_max(0));
    } else {
      _mm512_storeu_ps(out + b * 16, _mm512_permutex2var_ps(window_max(0), evens, window_max(1)));
    }
  };
  const auto clipped = [&](std::int64_t b, int half, const float* at, std::int64_t kx) {
    return _mm512_mask_loadu_ps(neg_inf, masks[(b * kStride + half) * kernel + kx], at);
  };
  const auto whole = [](std::int64_t, int, const float* at, std::int64_t) { return _mm512_loadu_ps(at); };
  for (std::int64_t b = 0; b < e.lead; ++b) block(b, clipped);
  for (std::int64_t b = e.lead; b < e.trail; ++b) block(b, whole);
  for (std::int64_t b = e.trail; b < e.blocks; ++b) block(b, clipped);
}

// The 16 floats row[c, c + 16), -inf for those at or past w (c >= 0).
inline __m512 load_row(const float* row, std::int64_t c, std::int64_t w) {
  if (c + 16 <= w) return _mm512_loadu_ps(row + c);
  return _mm512_mask_loadu_ps(_mm512_set1_ps(-__builtin_inff()), lanes(w - c), row + c);
}

// lo's lanes [kShift, 16) and then hi's [0, kShift).
template <int kShift>
inline __m512 align(__m512 hi, __m512 lo) {
  return _mm512_castsi512_ps(_mm512_alignr_epi32(_mm512_castps_si512(hi), _mm512_castps_si512(lo), kShift));
}

// Tap kx of the 16 outputs of a block, from the kStride streams (see column_maxima_fixed()) of the
// block before, this one and the next: output j's column j * kStride + d, d = kx - kPad, is stream
// d mod kStride shifted by floor(d / kStride) lanes.
template <int kStride, int kPad, int kx>
inline __m512 fixed_tap(const __m512* prev, const __m512* cur, const __m512* next) {
  constexpr int d = kx - kPad;
  constexpr int s = (d % kStride + kStride) % kStride;
  constexpr int e = (d - s) / kStride;
  static_assert(e >= -16 && e <= 16, "a tap reaches one block to either side");
  if constexpr (e == 0) {
    return cur[s];
  } else if constexpr (e == -16) {
    return prev[s];
  } else if constexpr (e < 0) {
    return align<16 + e>(cur[s], prev[s]);
  } else if constexpr (e == 16) {
    return next[s];
  } else {
    return align<e>(next[s], cur[s]);
  }
}

template <int kStride, int kKernel, int kPad, int kx = 1>
inline __m512 fold_fixed_taps(__m512 acc, const __m512* prev, const __m512* cur, const __m512* next) {
  if constexpr (kx == kKernel) {
    return acc;
  } else {
    acc = NumbersOnly::fold(acc, fixed_tap<kStride, kPad, kx>(prev, cur, next));
    return fold_fixed_taps<kStride, kKernel, kPad, kx + 1>(acc, prev, cur, next);
  }
}

// column_maxima() without NaNs for a kernel width and padding fixed at compile time, with every
// input element loaded once: the row is split into kStride streams (even and odd columns for
// stride 2, by one permute each), and each tap is a stream shifted by a constant number of lanes
// (one align), where column_maxima() loads every tap, mostly across cache lines. Returns whether
// the row holds a NaN, and then out is to be reduced again under the full rule.
//
// Always inlined: a row of a small plane is a few vectors, and a call per row (which the compiler
// otherwise makes once plane() grows) costs planes in cache a tenth of their speed.
template <int kStride, int kKernel, int kPad>
[[gnu::always_inline]] inline bool column_maxima_fixed(const MaxPoolPlane& g, const float* row, float* out) {
  const std::int64_t w = g.w, blocks = max_pool_plane_pitch(g) / 16;
  const __m512i evens = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odds = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  __mmask16 nan = 0;
  // stream[s] of block m: columns (16 m + l) * kStride + s, -inf past the row. Every column a tap
  // reads comes through here, so testing the loads for NaNs tests every column a window holds.
  const auto load_block = [&](std::int64_t m, __m512* stream) {
    if constexpr (kStride == 1) {
      stream[0] = load_row(row, 16 * m, w);
      nan |= _mm512_cmp_ps_mask(stream[0], stream[0], _CMP_UNORD_Q);
    } else {
      const __m512 a = load_row(row, 32 * m, w), b = load_row(row, 32 * m + 16, w);
      nan |= _mm512_cmp_ps_mask(a, b, _CMP_UNORD_Q);
      stream[0] = _mm512_permutex2var_ps(a, evens, b);
      stream[1] = _mm512_permutex2var_ps(a, odds, b);
    }
  };
  __m512 prev[kStride], cur[kStride], next[kStride];
  for (int s = 0; s < kStride; ++s) prev[s] = _mm512_set1_ps(-__builtin_inff());
  load_block(0, cur);
  for (std::int64_t m = 0; m < blocks; ++m) {
    // A block past the row's end is all -inf; loading it would cost as much as a block of data.
    if ((m + 1) * 16 * kStride < w) {
      load_block(m + 1, next);
    } else {
      for (int s = 0; s < kStride; ++s) next[s] = _mm512_set1_ps(-__builtin_inff());
    }
    const __m512 first = fixed_tap<kStride, kPad, 0>(prev, cur, next);
    _mm512_storeu_ps(out + 16 * m, fold_fixed_taps<kStride, kKernel, kPad>(first, prev, cur, next));
    for (int s = 0; s < kStride; ++s) prev[s] = cur[s], cur[s] = next[s];
  }
  return nan != 0;
}

// y[j] = the rule over cols[ih * pitch + j] for ih in [begin, end), j in [0, ow); -inf when empty.
template <class Rule>
void output_row(const float* cols, std::int64_t pitch, std::int64_t begin, std::int64_t end, std::int64_t ow,
                float* y) {
  const float* top = cols + begin * pitch;
  const std::int64_t rows = end - begin;
  for (std::int64_t j0 = 0; j0 < ow; j0 += 16) {
    __m512 acc = _mm512_set1_ps(-__builtin_inff());
    for (std::int64_t r = 0; r < rows; ++r) acc = Rule::fold(acc, _mm512_loadu_ps(top + r * pitch + j0));
    if (j0 + 16 <= ow) {
      _mm512_storeu_ps(y + j0, acc);
    } else {
      _mm512_mask_storeu_ps(y + j0, lanes(ow - j0), acc);
    }
  }
}

// Each input row a window holds is checked for NaNs and reduced once, as the first output row
// that needs it comes up; a row with a NaN is reduced under the full rule, and from then on the
// output rows fold under it too (on numbers alone both rules give the same bits, so switching
// early is harmless). numbers_only(row, out) reduces a row under the rule without NaNs and says
// whether the row holds one.
//
// next_x, when not null, is the plane the caller takes after this one: each output row asks for its
// share of that plane's cache lines, so that the plane is on its way from memory while this one
// computes, where otherwise each row's loads would wait for memory in turn.
template <int kStride, class RowWithoutNaNs>
void plane(const MaxPoolPlane& g, const Edges& e, const __mmask16* masks, const float* x, float* y,
           float* cols, const float* next_x, const RowWithoutNaNs& numbers_only) {
  const std::int64_t pitch = max_pool_plane_pitch(g);
  const std::int64_t x_lines = (g.h * g.w + 15) / 16, x_step = (x_lines + g.oh - 1) / g.oh;
  bool nan_seen = false;
  std::int64_t reduced_to = 0;  // the rows below it that windows hold have their column maxima
  for (std::int64_t oh = 0; oh < g.oh; ++oh) {
    if (next_x != nullptr) prefetch_lines(next_x, g.h * g.w, oh * x_step, (oh + 1) * x_step);
    const std::int64_t begin = g.row_begin[oh], end = g.row_end[oh];
    for (std::int64_t ih = max64(begin, reduced_to); ih < end; ++ih) {
      const float* row = x + ih * g.w;
      if (numbers_only(row, cols + ih * pitch)) {
        nan_seen = true;
        column_maxima<WithNaNs, kStride>(g, e, masks, row, cols + ih * pitch);
      }
    }
    reduced_to = max64(reduced_to, end);
    if (nan_seen) {
      output_row<WithNaNs>(cols, pitch, begin, end, g.ow, y + oh * g.ow);
    } else {
      output_row<NumbersOnly>(cols, pitch, begin, end, g.ow, y + oh * g.ow);
    }
  }
}

// The common windows (3 wide padded by 1 or 0, 2 wide unpadded) take column_maxima_fixed().
template <int kStride>
void plane_of(const MaxPoolPlane& g, const float* x, float* y, float* cols, const __mmask16* masks,
              const float* next_x) {
  const Edges e = edges_of<kStride>(g);
  const auto run = [&](const auto& numbers_only) {
    plane<kStride>(g, e, masks, x, y, cols, next_x, numbers_only);
  };
  if (g.kernel_w == 3 && g.pad_w == 1) {
    run([&](const float* row, float* out) { return column_maxima_fixed<kStride, 3, 1>(g, row, out); });
  } else if (g.kernel_w == 3 && g.pad_w == 0) {
    run([&](const float* row, float* out) { return column_maxima_fixed<kStride, 3, 0>(g, row, out); });
  } else if (g.kernel_w == 2 && g.pad_w == 0) {
    run([&](const float* row, float* out) { return column_maxima_fixed<kStride, 2, 0>(g, row, out); });
  } else {
    // The columns some window holds; a NaN elsewhere in the row does not reach an output.
    const std::int64_t used = min64(g.w, (g.ow - 1) * kStride - g.pad_w + g.kernel_w);
    run([&](const float* row, float* out) {
      if (holds_nan(row, used)) return true;
      column_maxima<NumbersOnly, kStride>(g, e, masks, row, out);
      return false;
    });
  }
}

}  // namespace

void max_pool_plane_edge_masks(const MaxPoolPlane& g, std::uint16_t* masks) {
  const std::int64_t blocks = max_pool_plane_pitch(g) / 16;
  for (std::int64_t b = 0; b < blocks; ++b) {
    for (std::int64_t half = 0; half < g.stride_w; ++half) {
      for (std::int64_t kx = 0; kx < g.kernel_w; ++kx) {
        const std::int64_t c = b * 16 * g.stride_w - g.pad_w + 16 * half + kx;
        masks[(b * g.stride_w + half) * g.kernel_w + kx] = lane_range(-c, g.w - c);
      }
    }
  }
}

void max_pool_plane(const MaxPoolPlane& g, const std::uint16_t* masks, const float* x, float* y,
                    float* scratch, const float* next_x) {
  // Whole cache lines for the column maxima: a vector stored across two lines and loaded back soon
  // after is slower to forward.
  const auto line = reinterpret_cast<std::uintptr_t>(scratch) % 64;
  float* cols = scratch + (line == 0 ? 0 : (64 - line) / sizeof(float));
  if (g.stride_w == 2) {
    plane_of<2>(g, x, y, cols, masks, next_x);
  } else {
    plane_of<1>(g, x, y, cols, masks, next_x);
  }
}

void row_max_lanes(const float* row, std::int64_t base, std::int64_t n, float* best, std::int32_t* at) {
  __m512 b0 = _mm512_set1_ps(-__builtin_inff()), b1 = b0;
  const auto first = static_cast<std::int32_t>(base);
  __m512i pos0 = _mm512_add_epi32(_mm512_set1_epi32(first),
                                  _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
  __m512i pos1 = _mm512_add_epi32(pos0, _mm512_set1_epi32(16));
  __m512i a0 = pos0, a1 = pos1;
  const __m512i step = _mm512_set1_epi32(static_cast<std::int32_t>(kRowMaxLanes));
  for (std::int64_t i = 0; i + kRowMaxLanes <= n; i += kRowMaxLanes) {
    const __m512 v0 = _mm512_loadu_ps(row + i), v1 = _mm512_loadu_ps(row + i + 16);
    // Larger, or a NaN: the later element takes over.
    const __mmask16 t0 = _mm512_cmp_ps_mask(v0, b0, _CMP_GT_OQ) | _mm512_cmp_ps_mask(v0, v0, _CMP_UNORD_Q);
    const __mmask16 t1 = _mm512_cmp_ps_mask(v1, b1, _CMP_GT_OQ) | _mm512_cmp_ps_mask(v1, v1, _CMP_UNORD_Q);
    b0 = _mm512_mask_mov_ps(b0, t0, v0);
    b1 = _mm512_mask_mov_ps(b1, t1, v1);
    a0 = _mm512_mask_mov_epi32(a0, t0, pos0);
    a1 = _mm512_mask_mov_epi32(a1, t1, pos1);
    pos0 = _mm512_add_epi32(pos0, step);
    pos1 = _mm512_add_epi32(pos1, step);
  }
  _mm512_storeu_ps(best, b0);
  _mm512_storeu_ps(best + 16, b1);
  _mm512_storeu_si512(at, a0);
  _mm512_storeu_si512(at + 16, a1);
}

bool plane_max(const float* x, std::int64_t n, const float* next_x, float& out) {
  const __m512 lowest = _mm512_set1_ps(-__builtin_inff());
  __m512 a = lowest, b = lowest;
  __mmask16 nan = 0;
  std::int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    // The next plane's two lines as this one's two are read: the planes of a thread's share follow
    // each other, but a plane passes 4 KB pages, at whose ends the hardware prefetchers stop.
    if (next_x != nullptr) {
      _mm_prefetch(reinterpret_cast<const char*>(next_x + i), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(next_x + i + 16), _MM_HINT_T0);
    }
    const __m512 v0 = _mm512_loadu_ps(x + i), v1 = _mm512_loadu_ps(x + i + 16);
    // One comparison tests both vectors for NaNs.
    nan |= _mm512_cmp_ps_mask(v0, v1, _CMP_UNORD_Q);
    a = _mm512_max_ps(v0, a);
    b = _mm512_max_ps(v1, b);
  }
  if (next_x != nullptr) prefetch_lines(next_x, n, i / 16, (n + 15) / 16);
  for (; i < n; i += 16) {
    const __m512 v = _mm512_mask_loadu_ps(lowest, lanes(n - i), x + i);
    nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    a = _mm512_max_ps(v, a);
  }
  out = _mm512_reduce_max_ps(_mm512_max_ps(a, b));
  return nan == 0 && out != 0.0f;
}

float sum(const float* x, std::int64_t n) {
  // Two accumulators, so consecutive vectors' additions overlap.
  __m512 a = _mm512_setzero_ps(), b = _mm512_setzero_ps();
  std::int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    a = _mm512_add_ps(a, _mm512_loadu_ps(x + i));
    b = _mm512_add_ps(b, _mm512_loadu_ps(x + i + 16));
  }
  if (i + 16 <= n) a = _mm512_add_ps(a, _mm512_loadu_ps(x + i)), i += 16;
  if (i < n) b = _mm512_add_ps(b, _mm512_maskz_loadu_ps(lanes(n - i), x + i));
  return _mm512_reduce_add_ps(_mm512_add_ps(a, b));
}

}  // namespace galley::backends::cpu::avx512
