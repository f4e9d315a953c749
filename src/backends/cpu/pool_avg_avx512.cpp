// See pool_avg_avx512.hpp. Compiled with AVX-512 F/BW/VL/DQ; nothing here instantiates a
// standard-library template (see sgemm_avx512.cpp).
//
// Tap kx of output column j reads input column j * s + d, d = kx - pad_w, which is element j + e of
// stream r, where r = d mod s and e = floor(d / s) (stream r holds the columns m * s + r). Forward
// reads the streams at offset e; backward, its adjoint, adds the gradient row at offset -e into
// stream r and interleaves the streams back into a row.
#include "backends/cpu/pool_avg_avx512.hpp"

#include <immintrin.h>

#include "backends/cpu/avx512_lanes.hpp"
#include "backends/cpu/pool_plane_streams.hpp"

namespace galley::backends::cpu::avx512 {
namespace {

// Rows written to the scratch before the first of them is read back at a shifted offset: a load
// that straddles two recent stores cannot take their data from the store buffer and waits for them
// to reach the cache, so the stores of a whole batch go first.
constexpr std::int64_t kBatch = 8;

struct Tap {
  std::int64_t stream, shift;
};

inline Tap tap_of(const AvgPoolPlane& g, std::int64_t kx) {
  const std::int64_t d = kx - g.pad_w;
  const std::int64_t e = floor_div(d, g.stride_w);
  return {d - e * g.stride_w, e};
}

// Where in the scratch's first vector a 1 says that backward takes the stem's pass
// (backward_k3s2p1()): prepare() works that out once, rather than backward for every plane.
constexpr std::int64_t kStemPass = 0;

// Where each part of the scratch lies, in floats from its 64-byte-aligned start; every part is a
// whole number of vectors. After the vector of kStemPass, forward: the streams of a batch of
// output rows' row sums, each with `in_margin` zeros before its data. Backward: a batch of scaled
// gradient rows, each with `grad_margin` zeros before it, the spread streams, then the spread rows
// of every output row.
struct Layout {
  std::int64_t stream_pitch;  // one stream's elements, rounded up to whole vectors
  std::int64_t out_pitch;     // output columns, rounded up
  std::int64_t row_pitch;     // stride_w * stream_pitch: a spread row
  std::int64_t in_margin, in_stream;
  std::int64_t grad_margin, grad_row;
  std::int64_t in_streams, grad, spread, rows, total;
};

Layout layout_of(const AvgPoolPlane& g) {
  Layout l{};
  const std::int64_t s = g.stride_w;
  const PlaneStreams p = plane_streams(g);
  l.stream_pitch = p.stream_pitch;
  l.out_pitch = p.out_pitch;
  l.row_pitch = s * l.stream_pitch;
  l.in_margin = p.in_margin;
  l.in_stream = p.in_stream;
  l.grad_margin = p.out_margin;
  l.grad_row = p.out_row;
  l.in_streams = 16;  // after the vector that holds kStemPass
  l.grad = l.in_streams + kBatch * s * l.in_stream;
  l.spread = l.grad + kBatch * l.grad_row;
  l.rows = l.spread + s * l.stream_pitch;
  l.total = l.rows + g.oh * l.row_pitch;
  return l;
}

const __m512i kEvens = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
const __m512i kOdds = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
const __m512i kLowPairs = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
const __m512i kHighPairs = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);

// The sum of rows [begin, end) of x (pitch w) over the 16 columns from c, zeros at and past w.
inline __m512 rows_sum(const float* x, std::int64_t w, std::int64_t begin, std::int64_t end, std::int64_t c) {
  if (begin == end) return _mm512_setzero_ps();
  const float* p = x + begin * w + c;
  if (c + 16 <= w) {
    __m512 acc = _mm512_loadu_ps(p);
    for (std::int64_t ih = begin + 1; ih < end; ++ih) acc = _mm512_add_ps(acc, _mm512_loadu_ps(p += w));
    return acc;
  }
  const __mmask16 m = lanes(w - c);
  __m512 acc = _mm512_maskz_loadu_ps(m, p);
  for (std::int64_t ih = begin + 1; ih < end; ++ih)
    acc = _mm512_add_ps(acc, _mm512_maskz_loadu_ps(m, p += w));
  return acc;
}

// The streams of the sum of input rows [begin, end), zeros past w; the margins stay zero from
// prepare().
void split_rows_sum(const AvgPoolPlane& g, const Layout& l, const float* x, std::int64_t begin,
                    std::int64_t end, float* streams) {
  float* s0 = streams + l.in_margin;
  if (g.stride_w == 1) {
    for (std::int64_t c = 0; c < l.stream_pitch; c += 16)
      _mm512_store_ps(s0 + c, rows_sum(x, g.w, begin, end, c));
    return;
  }
  float* s1 = s0 + l.in_stream;
  for (std::int64_t m = 0; m < l.stream_pitch; m += 16) {
    const std::int64_t c = 2 * m;
    const __m512 a = rows_sum(x, g.w, begin, end, c), b = rows_sum(x, g.w, begin, end, c + 16);
    _mm512_store_ps(s0 + m, _mm512_permutex2var_ps(a, kEvens, b));
    _mm512_store_ps(s1 + m, _mm512_permutex2var_ps(a, kOdds, b));
  }
}

// Each tap's offset into the scratch, worked out once per plane so the loops do not divide:
// forward, from the row's streams to the tap's first element; backward, per stream, from the
// gradient row to the element the stream's first element takes.
struct TapOffsets {
  std::int64_t count;
  std::int64_t forward[kMaxTaps];
  std::int64_t stream_taps[2];  // taps of stream 0 and 1 in `backward`, stream 0's first
  std::int64_t backward[kMaxTaps];
};

TapOffsets tap_offsets(const AvgPoolPlane& g, const Layout& l) {
  TapOffsets o{};
  o.count = g.kernel_w;
  for (std::int64_t kx = 0; kx < g.kernel_w; ++kx) {
    const Tap t = tap_of(g, kx);
    o.forward[kx] = t.stream * l.in_stream + l.in_margin + t.shift;
  }
  std::int64_t n = 0;
  for (std::int64_t r = 0; r < g.stride_w; ++r) {
    for (std::int64_t kx = 0; kx < g.kernel_w; ++kx) {
      const Tap t = tap_of(g, kx);
      if (t.stream == r) o.backward[n++] = l.grad_margin - t.shift;
    }
    o.stream_taps[r] = n - (r == 0 ? 0 : o.stream_taps[0]);
  }
  return o;
}

// y[j] = inv[j] times the sum of the row over output column j's window, for j in [0, ow).
void window_sums(const AvgPoolPlane& g, const TapOffsets& taps, const float* streams, const float* inv,
                 float* y) {
  for (std::int64_t j = 0; j < g.ow; j += 16) {
    __m512 acc = _mm512_loadu_ps(streams + taps.forward[0] + j);
    for (std::int64_t kx = 1; kx < taps.count; ++kx)
      acc = _mm512_add_ps(acc, _mm512_loadu_ps(streams + taps.forward[kx] + j));
    const __mmask16 m = lanes(g.ow - j);
    _mm512_mask_storeu_ps(y + j, m, _mm512_mul_ps(acc, _mm512_maskz_loadu_ps(m, inv + j)));
  }
}

// row[iw] = the sum of grad[j] over the output columns j whose windows hold iw, iw in [0,
// row_pitch); grad has grad_margin zeros before it and zeros past ow.
void spread_row(const AvgPoolPlane& g, const Layout& l, const TapOffsets& taps, const float* grad,
                float* streams, float* row) {
  const std::int64_t s = g.stride_w;
  const std::int64_t* offsets = taps.backward;
  for (std::int64_t r = 0; r < s; ++r) {
    float* out = s == 1 ? row : streams + r * l.stream_pitch;
    const std::int64_t n = taps.stream_taps[r];
    for (std::int64_t m = 0; m < l.stream_pitch; m += 16) {
      __m512 acc = _mm512_setzero_ps();
      for (std::int64_t i = 0; i < n; ++i) acc = _mm512_add_ps(acc, _mm512_loadu_ps(grad + offsets[i] + m));
      _mm512_store_ps(out + m, acc);
    }
    offsets += n;
  }
  if (s == 1) return;
  const float* s0 = streams;
  const float* s1 = streams + l.stream_pitch;
  for (std::int64_t m = 0; m < l.stream_pitch; m += 16) {
    const __m512 even = _mm512_load_ps(s0 + m), odd = _mm512_load_ps(s1 + m);
    _mm512_store_ps(row + 2 * m, _mm512_permutex2var_ps(even, kLowPairs, odd));
    _mm512_store_ps(row + 2 * m + 16, _mm512_permutex2var_ps(even, kHighPairs, odd));
  }
}

// The forward of 3-wide windows of stride 2 padded by 1 (ResNet's), without the scratch: output
// column j's taps are columns 2j - 1, 2j and 2j + 1, the odd stream one lane back and the even and
// odd streams, so one lane shift of registers replaces a store of the streams and three reloads.
void forward_3_wide_stride_2(const AvgPoolPlane& g, const float* x, float* y) {
  for (std::int64_t oh = 0; oh < g.oh; ++oh) {
    const std::int64_t begin = g.row_begin[oh], end = g.row_end[oh];
    const float* inv = g.inverse_divisor + oh * g.ow;
    float* yr = y + oh * g.ow;
    __m512i prev_odd = _mm512_setzero_si512();  // column -1 is padding
    for (std::int64_t j = 0; j < g.ow; j += 16) {
      const __m512 a = rows_sum(x, g.w, begin, end, 2 * j), b = rows_sum(x, g.w, begin, end, 2 * j + 16);
      const __m512 even = _mm512_permutex2var_ps(a, kEvens, b), odd = _mm512_permutex2var_ps(a, kOdds, b);
      const __m512i odd_bits = _mm512_castps_si512(odd);
      const __m512 left = _mm512_castsi512_ps(_mm512_alignr_epi32(odd_bits, prev_odd, 15));
      prev_odd = odd_bits;
      const __mmask16 m = lanes(g.ow - j);
      const __m512 sum = _mm512_add_ps(_mm512_add_ps(left, even), odd);
      _mm512_mask_storeu_ps(yr + j, m, _mm512_mul_ps(sum, _mm512_maskz_loadu_ps(m, inv + j)));
    }
  }
}

// rows[oh] = output row oh's scaled gradient spread over its windows' columns, every output row.
void spread_rows(const AvgPoolPlane& g, const Layout& l, const float* dy, float* base, float* rows) {
  float* grad = base + l.grad;
  float* streams = base + l.spread;
  const TapOffsets taps = tap_offsets(g, l);
  for (std::int64_t oh0 = 0; oh0 < g.oh; oh0 += kBatch) {
    const std::int64_t count = min64(kBatch, g.oh - oh0);
    for (std::int64_t b = 0; b < count; ++b) {
      const float* gr = dy + (oh0 + b) * g.ow;
      const float* inv = g.inverse_divisor + (oh0 + b) * g.ow;
      float* out = grad + b * l.grad_row + l.grad_margin;
      for (std::int64_t j = 0; j < l.out_pitch; j += 16) {
        const __mmask16 m = lanes(g.ow - j);
        _mm512_store_ps(out + j,
                        _mm512_mul_ps(_mm512_maskz_loadu_ps(m, gr + j), _mm512_maskz_loadu_ps(m, inv + j)));
      }
    }
    for (std::int64_t b = 0; b < count; ++b)
      spread_row(g, l, taps, grad + b * l.grad_row, streams, rows + (oh0 + b) * l.row_pitch);
  }
}

// spread_rows() for 3-wide windows of stride 2 padded by 1, in registers: input column 2m takes
// output m's gradient, column 2m + 1 those of outputs m and m + 1.
void spread_3_wide_stride_2(const AvgPoolPlane& g, const Layout& l, const float* dy, float* rows) {
  const auto scaled = [&](std::int64_t oh, std::int64_t j) {
    const __mmask16 m = lanes(g.ow - j);
    return _mm512_castps_si512(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, dy + oh * g.ow + j),
                                             _mm512_maskz_loadu_ps(m, g.inverse_divisor + oh * g.ow + j)));
  };
  for (std::int64_t oh = 0; oh < g.oh; ++oh) {
    float* row = rows + oh * l.row_pitch;
    __m512i cur = scaled(oh, 0);
    for (std::int64_t m = 0; m < l.stream_pitch; m += 16) {
      const __m512i next = scaled(oh, m + 16);
      const __m512 even = _mm512_castsi512_ps(cur);
      const __m512 odd = _mm512_add_ps(even, _mm512_castsi512_ps(_mm512_alignr_epi32(next, cur, 1)));
      _mm512_store_ps(row + 2 * m, _mm512_permutex2var_ps(even, kLowPairs, odd));
      _mm512_store_ps(row + 2 * m + 16, _mm512_permutex2var_ps(even, kHighPairs, odd));
      cur = next;
    }
  }
}

// The backward of the stem's windows (3 columns wide, column stride 2, column padding 1; 3 rows
// tall, row stride 2, row padding 1) in one pass that writes each dx row once, straight from dy:
// output row oh's window holds dx rows 2oh - 1, 2oh and 2oh + 1, so dx row 2oh takes output row
// oh's gradients alone and dx row 2oh + 1 those of output rows oh and oh + 1; along a row, dx
// column 2j takes output j's and column 2j + 1 those of outputs j and j + 1. Each output row's
// scaled gradients are spread over its columns once (16 outputs into the even and odd column
// streams of 32 dx columns), kept in registers for the next output row, and interleaved into its
// two dx rows. The sums are the general pass's, in its order (the compiler may fuse an odd column's
// second product into its add). Writing each dx line once, in order, and asking for the lines a
// little ahead is what counts here: the pass is bound by moving dx's lines into L1, not by its
// arithmetic.

// Where a block of 16 outputs lies, which sets how it treats the ends: kInside for one whose
// outputs and shifted outputs all lie in the row, kRowEnd for a row's last block away from the
// plane's end (whole vectors, the lanes past the row zeroed on load and overwritten by later rows
// on store: masked stores cost several times a plain one on some AVX-512 CPUs), kPlaneEnd for a
// last block whose vectors may pass the end of dy, of the divisors or of dx (masked there).
enum class Edge { kInside, kRowEnd, kPlaneEnd };

// The most blocks of 16 outputs a strip of columns holds: their dx streams, kept from one output
// row to the next, take two registers each.
constexpr int kStripBlocks = 4;

// One plane of the stem's pass, with what its blocks at the row's and the plane's end need.
struct StemPlane {
  std::int64_t h, w, oh, ow;
  const float* dy;
  const float* dy_end;
  const float* inv;
  const float* inv_end;
  float* dx;
  float* dx_end;
  std::int64_t blocks;     // blocks of 16 outputs (32 dx columns) that reach dx's columns
  __mmask16 last_outputs;  // the outputs of the last block inside the row, and of its shifted ones
  __mmask16 last_shifted_outputs;
  bool last_high_store;  // whether the last block's dx columns [c + 16, c + 32) start inside the row
  // Output rows [0, inside_end) take whole vectors at the row's end; [0, middle_end) have a dx
  // row 2oh.
  std::int64_t inside_end, middle_end;
};

// Whether output row oh's window is rows 2oh - 1, 2oh and 2oh + 1 clipped to the plane, for every
// oh, the windows holding every row of it.
bool rows_k3s2p1(const AvgPoolPlane& g) {
  for (std::int64_t oh = 0; oh < g.oh; ++oh) {
    if (g.row_begin[oh] != max64(0, 2 * oh - 1) || g.row_end[oh] != min64(g.h, 2 * oh + 2)) return false;
  }
  return g.h <= 2 * g.oh && 2 * g.oh - 3 < g.h;
}

// Whether the n floats at a and the m at b share no byte.
bool apart(const float* a, std::int64_t n, const float* b, std::int64_t m) {
  const auto a_begin = reinterpret_cast<std::uintptr_t>(a), b_begin = reinterpret_cast<std::uintptr_t>(b);
  return a_begin + n * sizeof(float) <= b_begin || b_begin + m * sizeof(float) <= a_begin;
}

// 16 floats from p, the lanes outside `keep` zero; end is the array's end.
template <Edge kEdge>
[[gnu::always_inline]] inline __m512 load_kept(const float* p, const float* end, __mmask16 keep) {
  if (kEdge == Edge::kInside) return _mm512_loadu_ps(p);
  if (kEdge == Edge::kRowEnd || p + 16 <= end) return _mm512_maskz_mov_ps(keep, _mm512_loadu_ps(p));
  return _mm512_maskz_loadu_ps(keep & lanes(end - p), p);
}

// Output row oh's scaled gradients spread over the 32 dx columns of outputs [j, j + 16), as their
// even and odd column streams.
template <Edge kEdge>
[[gnu::always_inline]] inline void spread_block(const StemPlane& p, std::int64_t oh, std::int64_t j,
                                                __m512& even, __m512& odd) {
  const std::int64_t at = oh * p.ow + j;
  const __mmask16 outputs = kEdge == Edge::kInside ? 0xffff : p.last_outputs;
  const __mmask16 shifted_outputs = kEdge == Edge::kInside ? 0xffff : p.last_shifted_outputs;
  even = _mm512_mul_ps(load_kept<kEdge>(p.dy + at, p.dy_end, outputs),
                       load_kept<kEdge>(p.inv + at, p.inv_end, outputs));
  const __m512 shifted = _mm512_mul_ps(load_kept<kEdge>(p.dy + at + 1, p.dy_end, shifted_outputs),
                                       load_kept<kEdge>(p.inv + at + 1, p.inv_end, shifted_outputs));
  odd = _mm512_add_ps(even, shifted);
}

// Columns [c, c + 32) of the dx row at `out` from their even and odd column streams.
template <Edge kEdge>
[[gnu::always_inline]] inline void store_dx_block(const StemPlane& p, float* out, std::int64_t c, __m512 even,
                                                  __m512 odd) {
  const __m512 low = _mm512_permutex2var_ps(even, kLowPairs, odd);
  const __m512 high = _mm512_permutex2var_ps(even, kHighPairs, odd);
  if (kEdge == Edge::kInside) {
    _mm512_storeu_ps(out + c, low);
    _mm512_storeu_ps(out + c + 16, high);
  } else if (kEdge == Edge::kRowEnd) {
    _mm512_storeu_ps(out + c, low);
    if (p.last_high_store) _mm512_storeu_ps(out + c + 16, high);
  } else {
    const auto store = [&](float* at, std::int64_t valid, __m512 v) {
      if (valid >= 16 || at + 16 <= p.dx_end) {
        _mm512_storeu_ps(at, v);
      } else {
        _mm512_mask_storeu_ps(at, lanes(valid), v);
      }
    };
    store(out + c, p.w - c, low);
    if (c + 16 < p.w) store(out + c + 16, p.w - c - 16, high);
  }
}

// Block m of output row oh: its columns of dx row 2oh - 1 (kTop: all output rows but the first),
// from the streams of the row above kept in even and odd, and of dx row 2oh (kMiddle: unless the
// plane ends before it), whose streams it leaves in even and odd for dx row 2oh + 1.
template <bool kTop, bool kMiddle, Edge kEdge>
[[gnu::always_inline]] inline void output_block(const StemPlane& p, std::int64_t oh, std::int64_t m,
                                                __m512& even, __m512& odd) {
  const std::int64_t c = 32 * m;
  __m512 row_even, row_odd;
  spread_block<kEdge>(p, oh, 16 * m, row_even, row_odd);
  float* const middle = p.dx + 2 * oh * p.w;
  if (kTop)
    store_dx_block<kEdge>(p, middle - p.w, c, _mm512_add_ps(even, row_even), _mm512_add_ps(odd, row_odd));
  if (kMiddle) store_dx_block<kEdge>(p, middle, c, row_even, row_odd);
  even = row_even;
  odd = row_odd;
}

// Asks for the cache lines that hold the n floats at p.
[[gnu::always_inline]] inline void prefetch_span(const float* p, std::int64_t n) {
  const auto first = reinterpret_cast<std::uintptr_t>(p) & ~std::uintptr_t{63};
  const auto end = reinterpret_cast<std::uintptr_t>(p + n);
  for (std::uintptr_t line = first; line < end; line += 64)
    _mm_prefetch(reinterpret_cast<const char*>(line), _MM_HINT_T0);
}

// Output rows [begin, end) over the strip of kBlocks blocks from block m0, the last of them the
// row's last when kRowEnd (then of edge kLastEdge). A row's blocks go from its end to its start, so
// that the stores of a dx row's last block that reach into the next dx rows come before those rows'
// first blocks.
template <int kBlocks, bool kRowEnd, bool kTop, bool kMiddle, Edge kLastEdge>
[[gnu::always_inline]] inline void strip_rows(const StemPlane& p, std::int64_t m0, std::int64_t begin,
                                              std::int64_t end, __m512 (&even)[kBlocks],
                                              __m512 (&odd)[kBlocks]) {
  const std::int64_t c0 = 32 * m0, columns = min64(p.w, 32 * (m0 + kBlocks)) - c0;
  for (std::int64_t oh = begin; oh < end; ++oh) {
    // dx's lines a couple of rows ahead, so that the stores find them in L1 rather than wait, in
    // order, for each line to come.
    for (std::int64_t r = 2 * oh + 2; r < min64(2 * oh + 4, p.h); ++r)
      prefetch_span(p.dx + r * p.w + c0, columns);
#pragma GCC unroll 4
    for (int i = kBlocks - 1; i >= 0; --i) {
      if (kRowEnd && i == kBlocks - 1) {
        output_block<kTop, kMiddle, kLastEdge>(p, oh, m0 + i, even[i], odd[i]);
      } else {
        output_block<kTop, kMiddle, Edge::kInside>(p, oh, m0 + i, even[i], odd[i]);
      }
    }
  }
}

// Every output row over the strip of kBlocks blocks from block m0 (dx columns [32 m0, 32 (m0 +
// kBlocks))), the row's last strip when kRowEnd; the strip's streams stay in registers from one
// output row to the next.
template <int kBlocks, bool kRowEnd>
void strip(const StemPlane& plane, std::int64_t m0) {
  // A copy, which the compiler knows no store to dx changes.
  const StemPlane p = plane;
  __m512 even[kBlocks], odd[kBlocks];
  for (int i = 0; i < kBlocks; ++i) even[i] = odd[i] = _mm512_setzero_ps();
  if (p.inside_end > 0) {
    strip_rows<kBlocks, kRowEnd, false, true, Edge::kRowEnd>(p, m0, 0, 1, even, odd);
  } else {
    strip_rows<kBlocks, kRowEnd, false, true, Edge::kPlaneEnd>(p, m0, 0, 1, even, odd);
  }
  const std::int64_t inside_middle_end = max64(1, min64(p.middle_end, p.inside_end));
  strip_rows<kBlocks, kRowEnd, true, true, Edge::kRowEnd>(p, m0, 1, inside_middle_end, even, odd);
  strip_rows<kBlocks, kRowEnd, true, true, Edge::kPlaneEnd>(p, m0, inside_middle_end, p.middle_end, even,
                                                            odd);
  strip_rows<kBlocks, kRowEnd, true, false, Edge::kPlaneEnd>(p, m0, max64(1, p.middle_end), p.oh, even, odd);
  // The last output row's bottom row, which no later output row completes.
  const std::int64_t open_row = 2 * p.oh - 1;
  if (open_row >= p.h) return;
#pragma GCC unroll 4
  for (int i = kBlocks - 1; i >= 0; --i) {
    if (kRowEnd && i == kBlocks - 1) {
      store_dx_block<Edge::kPlaneEnd>(p, p.dx + open_row * p.w, 32 * (m0 + i), even[i], odd[i]);
    } else {
      store_dx_block<Edge::kInside>(p, p.dx + open_row * p.w, 32 * (m0 + i), even[i], odd[i]);
    }
  }
}

void backward_k3s2p1(const AvgPoolPlane& g, const float* dy, float* dx) {
  const std::int64_t blocks = (g.w + 31) / 32, last_j = 16 * (blocks - 1), last_c = 2 * last_j;
  StemPlane p{g.h,
              g.w,
              g.oh,
              g.ow,
              dy,
              dy + g.oh * g.ow,
              g.inverse_divisor,
              g.inverse_divisor + g.oh * g.ow,
              dx,
              dx + g.h * g.w,
              blocks,
              lanes(g.ow - last_j),
              lanes(g.ow - last_j - 1),
              last_c + 16 < g.w,
              g.oh,
              min64(g.oh, (g.h + 1) / 2)};
  // The output rows whose last blocks' whole vectors stay inside dy, the divisors (one further for
  // the shifted outputs) and dx (to the end of dx row 2oh).
  while (p.inside_end > 0) {
    const std::int64_t oh = p.inside_end - 1;
    if (oh * g.ow + last_j + 17 <= g.oh * g.ow && 2 * oh * g.w + last_c + 32 <= g.h * g.w) break;
    --p.inside_end;
  }
  // Strips from the row's end, whose last block's stores reach into the next row's first columns,
  // which the first strip writes later.
  const std::int64_t end_blocks = blocks - (blocks - 1) / kStripBlocks * kStripBlocks;
  const std::int64_t m0 = blocks - end_blocks;
  switch (end_blocks) {
    case 1:
      strip<1, true>(p, m0);
      break;
    case 2:
      strip<2, true>(p, m0);
      break;
    case 3:
      strip<3, true>(p, m0);
      break;
    default:
      strip<4, true>(p, m0);
      break;
  }
  for (std::int64_t m = m0 - kStripBlocks; m >= 0; m -= kStripBlocks) strip<kStripBlocks, false>(p, m);
}

}  // namespace

std::int64_t avg_pool_plane_scratch(const AvgPoolPlane& g) { return layout_of(g).total + 16; }

void avg_pool_plane_prepare(const AvgPoolPlane& g, float* scratch) {
  float* base = aligned(scratch);
  const Layout l = layout_of(g);
  for (std::int64_t i = 0; i < l.total; i += 16) _mm512_store_ps(base + i, _mm512_setzero_ps());
  base[kStemPass] = g.kernel_w == 3 && g.stride_w == 2 && g.pad_w == 1 && rows_k3s2p1(g) ? 1.0f : 0.0f;
}

void avg_pool_plane_forward(const AvgPoolPlane& g, const float* x, float* y, float* scratch) {
  if (g.kernel_w == 3 && g.stride_w == 2 && g.pad_w == 1) {
    forward_3_wide_stride_2(g, x, y);
    return;
  }
  const Layout l = layout_of(g);
  float* streams = aligned(scratch) + l.in_streams;
  const TapOffsets taps = tap_offsets(g, l);
  // Rows first: each output row sums its window's rows once, then splits and sums that one row over
  // the columns, so the column taps run once per output row rather than once per input row.
  const std::int64_t batch_pitch = g.stride_w * l.in_stream;
  for (std::int64_t oh0 = 0; oh0 < g.oh; oh0 += kBatch) {
    const std::int64_t count = min64(kBatch, g.oh - oh0);
    for (std::int64_t b = 0; b < count; ++b)
      split_rows_sum(g, l, x, g.row_begin[oh0 + b], g.row_end[oh0 + b], streams + b * batch_pitch);
    for (std::int64_t b = 0; b < count; ++b) {
      const std::int64_t oh = oh0 + b;
      window_sums(g, taps, streams + b * batch_pitch, g.inverse_divisor + oh * g.ow, y + oh * g.ow);
    }
  }
}

void avg_pool_plane_backward(const AvgPoolPlane& g, const float* dy, float* dx, float* scratch) {
  float* base = aligned(scratch);
  // The stem's pass reads dy's rows after it has written dx rows below them; the general pass reads
  // all of dy first, so it also takes a dx stored over dy.
  if (base[kStemPass] != 0.0f && apart(dx, g.h * g.w, dy, g.oh * g.ow)) {
    backward_k3s2p1(g, dy, dx);
    return;
  }
  const Layout l = layout_of(g);
  float* rows = base + l.rows;
  if (g.kernel_w == 3 && g.stride_w == 2 && g.pad_w == 1) {
    spread_3_wide_stride_2(g, l, dy, rows);
  } else {
    spread_rows(g, l, dy, base, rows);
  }
  // Rows go out in order, so a row's last vector may run on into the next row, which is written
  // after it: only the plane's end takes a masked store (several times a plain one's cost on some
  // AVX-512 CPUs).
  float* const dx_end = dx + g.h * g.w;
  for (std::int64_t ih = 0; ih < g.h; ++ih) {
    const std::int64_t first = g.cover_first[ih], last = g.cover_last[ih];
    float* out = dx + ih * g.w;
    for (std::int64_t c = 0; c < g.w; c += 16) {
      __m512 acc = _mm512_setzero_ps();
      for (std::int64_t oh = first; oh <= last; ++oh)
        acc = _mm512_add_ps(acc, _mm512_load_ps(rows + oh * l.row_pitch + c));
      if (out + c + 16 <= dx_end) {
        _mm512_storeu_ps(out + c, acc);
      } else {
        _mm512_mask_storeu_ps(out + c, lanes(g.w - c), acc);
      }
    }
  }
}

}  // namespace galley::backends::cpu::avx512
