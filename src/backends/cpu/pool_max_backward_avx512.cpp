// See pool_max_backward_avx512.hpp. Compiled with AVX-512 F/BW/VL/DQ; nothing here instantiates a
// standard-library template (see sgemm_avx512.cpp).
//
// Tap kx of output column j is input column j * s + d, d = kx - pad_w: element j + e of stream r,
// where r = d mod s, e = floor(d / s) and stream r holds the columns m * s + r. Finding the maxima
// reads the input's streams at offset e; the gather reads an output row's positions and gradients
// at offset -e for each element of stream r. Every row read at an offset is written in an earlier
// pass over the plane, so no load waits on a recent store it straddles.
#include "backends/cpu/pool_max_backward_avx512.hpp"

#include <immintrin.h>

#include "backends/cpu/avx512_lanes.hpp"
#include "backends/cpu/pool_plane_streams.hpp"

namespace galley::backends::cpu::avx512 {
namespace {

// Where each part of the scratch lies, in 4-byte elements from its 64-byte-aligned start; every
// part is a whole number of vectors. The input rows' streams, each with `in_margin` elements of
// -inf before its data and -inf after; the output rows' positions (-1 around them) and gradients
// (0 around them), each with `out_margin` before; one input row's gradient streams.
struct Layout {
  std::int64_t stream_pitch;  // one stream's elements, rounded up to whole vectors
  std::int64_t out_pitch;     // output columns, rounded up
  std::int64_t in_margin, in_stream, in_row;
  std::int64_t out_margin, out_row;
  std::int64_t streams, positions, grads, dx_streams, total;
};

Layout layout_of(const MaxPoolBackwardPlane& g) {
  Layout l{};
  const std::int64_t s = g.stride_w;
  const PlaneStreams p = plane_streams(g);
  l.stream_pitch = p.stream_pitch;
  l.out_pitch = p.out_pitch;
  l.in_margin = p.in_margin;
  l.in_stream = p.in_stream;
  l.in_row = s * l.in_stream;
  l.out_margin = p.out_margin;
  l.out_row = p.out_row;
  l.streams = 0;
  l.positions = l.streams + g.h * l.in_row;
  l.grads = l.positions + g.oh * l.out_row;
  l.dx_streams = l.grads + g.oh * l.out_row;
  l.total = l.dx_streams + s * l.stream_pitch;
  return l;
}

// Each tap's offset, worked out once per plane: forward, from an input row's streams to the tap's
// element for output column 0; backward, grouped by stream, from an output row to the output
// column that reaches the stream's element 0 through the tap.
struct Taps {
  std::int64_t count;
  std::int64_t forward[kMaxTaps];
  std::int64_t per_stream[2];
  std::int64_t backward[kMaxTaps];
};

Taps taps_of(const MaxPoolBackwardPlane& g, const Layout& l) {
  Taps t{};
  t.count = g.kernel_w;
  std::int64_t n = 0;
  for (std::int64_t r = 0; r < g.stride_w; ++r) {
    const std::int64_t before = n;
    for (std::int64_t kx = 0; kx < g.kernel_w; ++kx) {
      const std::int64_t d = kx - g.pad_w, e = floor_div(d, g.stride_w), stream = d - e * g.stride_w;
      if (r == 0) t.forward[kx] = stream * l.in_stream + l.in_margin + e;
      if (stream == r) t.backward[n++] = l.out_margin - e;
    }
    t.per_stream[r] = n - before;
  }
  return t;
}

const __m512i kIota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
const __m512i kEvens = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
const __m512i kOdds = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
const __m512i kLowPairs = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
const __m512i kHighPairs = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);

inline __m512 load_or_neg_inf(const float* row, std::int64_t c, std::int64_t w) {
  return _mm512_mask_loadu_ps(_mm512_set1_ps(-__builtin_inff()), lanes(w - c), row + c);
}

// The streams of one input row, -inf past w.
void split_row(const MaxPoolBackwardPlane& g, const Layout& l, const float* row, float* out) {
  float* s0 = out + l.in_margin;
  if (g.stride_w == 1) {
    for (std::int64_t c = 0; c < l.stream_pitch; c += 16)
      _mm512_store_ps(s0 + c, load_or_neg_inf(row, c, g.w));
    return;
  }
  float* s1 = s0 + l.in_stream;
  for (std::int64_t m = 0; m < l.stream_pitch; m += 16) {
    const __m512 a = load_or_neg_inf(row, 2 * m, g.w), b = load_or_neg_inf(row, 2 * m + 16, g.w);
    _mm512_store_ps(s0 + m, _mm512_permutex2var_ps(a, kEvens, b));
    _mm512_store_ps(s1 + m, _mm512_permutex2var_ps(a, kOdds, b));
  }
}

// The maximum positions of output row oh, -1 past ow: the forward rule over the window's taps in
// row-major order, starting from the window's first element.
void find_maxima(const MaxPoolBackwardPlane& g, const Layout& l, const Taps& taps, const float* streams,
                 std::int64_t oh, std::int32_t* out) {
  const std::int64_t begin = g.row_begin[oh], end = g.row_end[oh];
  const __m512i lane_cols =
      _mm512_mullo_epi32(kIota, _mm512_set1_epi32(static_cast<std::int32_t>(g.stride_w)));
  for (std::int64_t j = 0; j < l.out_pitch; j += 16) {
    // Column of each lane's first tap, clipped to the row for the window's first element.
    const __m512i first_col =
        _mm512_add_epi32(lane_cols, _mm512_set1_epi32(static_cast<std::int32_t>(j * g.stride_w - g.pad_w)));
    __m512i at = _mm512_add_epi32(_mm512_max_epi32(first_col, _mm512_setzero_si512()),
                                  _mm512_set1_epi32(static_cast<std::int32_t>(begin * g.w)));
    __m512 best = _mm512_set1_ps(-__builtin_inff());
    for (std::int64_t ih = begin; ih < end; ++ih) {
      const float* row = streams + ih * l.in_row + j;
      const __m512i row_pos =
          _mm512_add_epi32(first_col, _mm512_set1_epi32(static_cast<std::int32_t>(ih * g.w)));
      for (std::int64_t kx = 0; kx < taps.count; ++kx) {
        const __m512 v = _mm512_loadu_ps(row + taps.forward[kx]);
        const __mmask16 take =
            _mm512_cmp_ps_mask(v, best, _CMP_GT_OQ) | _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
        best = _mm512_mask_mov_ps(best, take, v);
        at = _mm512_mask_mov_epi32(
            at, take, _mm512_add_epi32(row_pos, _mm512_set1_epi32(static_cast<std::int32_t>(kx))));
      }
    }
    _mm512_store_si512(out + j, _mm512_mask_mov_epi32(_mm512_set1_epi32(-1), lanes(g.ow - j), at));
  }
}

// dx row ih: each element the sum of the gradients of the outputs that reach it through a tap and
// whose maximum position it is.
void gather_row(const MaxPoolBackwardPlane& g, const Layout& l, const Taps& taps,
                const std::int32_t* positions, const float* grads, std::int64_t ih, float* dx_streams,
                float* dx) {
  const std::int64_t s = g.stride_w, first = g.cover_first[ih], last = g.cover_last[ih];
  const __m512i lane_cols = _mm512_mullo_epi32(kIota, _mm512_set1_epi32(static_cast<std::int32_t>(s)));
  const std::int64_t* offsets = taps.backward;
  for (std::int64_t r = 0; r < s; ++r) {
    const std::int64_t n = taps.per_stream[r];
    for (std::int64_t m = 0; m < l.stream_pitch; m += 16) {
      const __m512i pos =
          _mm512_add_epi32(lane_cols, _mm512_set1_epi32(static_cast<std::int32_t>(ih * g.w + m * s + r)));
      __m512 acc = _mm512_setzero_ps();
      for (std::int64_t oh = first; oh <= last; ++oh) {
        const std::int32_t* pr = positions + oh * l.out_row + m;
        const float* gr = grads + oh * l.out_row + m;
        for (std::int64_t i = 0; i < n; ++i) {
          const __mmask16 hit = _mm512_cmpeq_epi32_mask(_mm512_loadu_si512(pr + offsets[i]), pos);
          acc = _mm512_mask_add_ps(acc, hit, acc, _mm512_loadu_ps(gr + offsets[i]));
        }
      }
      if (s == 1) {
        _mm512_mask_storeu_ps(dx + m, lanes(g.w - m), acc);
      } else {
        _mm512_store_ps(dx_streams + r * l.stream_pitch + m, acc);
      }
    }
    offsets += n;
  }
  if (s == 1) return;
  for (std::int64_t m = 0; m < l.stream_pitch; m += 16) {
    const __m512 even = _mm512_load_ps(dx_streams + m), odd = _mm512_load_ps(dx_streams + l.stream_pitch + m);
    const std::int64_t c = 2 * m;
    _mm512_mask_storeu_ps(dx + c, lanes(g.w - c), _mm512_permutex2var_ps(even, kLowPairs, odd));
    _mm512_mask_storeu_ps(dx + c + 16, lanes(g.w - c - 16), _mm512_permutex2var_ps(even, kHighPairs, odd));
  }
}

}  // namespace

std::int64_t max_pool_backward_scratch(const MaxPoolBackwardPlane& g) { return layout_of(g).total + 16; }

void max_pool_backward_prepare(const MaxPoolBackwardPlane& g, float* scratch) {
  const Layout l = layout_of(g);
  float* base = aligned(scratch);
  const __m512 neg_inf = _mm512_set1_ps(-__builtin_inff());
  for (std::int64_t i = l.streams; i < l.positions; i += 16) _mm512_store_ps(base + i, neg_inf);
  for (std::int64_t i = l.positions; i < l.grads; i += 16)
    _mm512_store_si512(base + i, _mm512_set1_epi32(-1));
  for (std::int64_t i = l.grads; i < l.total; i += 16) _mm512_store_ps(base + i, _mm512_setzero_ps());
}

void max_pool_plane_backward(const MaxPoolBackwardPlane& g, const float* x, const std::int32_t* indices,
                             const float* dy, float* dx, float* scratch) {
  const Layout l = layout_of(g);
  const Taps taps = taps_of(g, l);
  float* base = aligned(scratch);
  auto* positions = reinterpret_cast<std::int32_t*>(base + l.positions);
  float* grads = base + l.grads;
  if (indices == nullptr) {
    // Every input row once: rows no window holds are few (the ceil-mode edge) and cost one pass.
    for (std::int64_t ih = 0; ih < g.h; ++ih) split_row(g, l, x + ih * g.w, base + l.streams + ih * l.in_row);
  }
  for (std::int64_t oh = 0; oh < g.oh; ++oh) {
    std::int32_t* pr = positions + oh * l.out_row + l.out_margin;
    if (indices == nullptr) {
      find_maxima(g, l, taps, base + l.streams, oh, pr);
    } else {
      for (std::int64_t j = 0; j < l.out_pitch; j += 16) {
        const __mmask16 m = lanes(g.ow - j);
        _mm512_store_si512(pr + j,
                           _mm512_mask_loadu_epi32(_mm512_set1_epi32(-1), m, indices + oh * g.ow + j));
      }
    }
    float* gr = grads + oh * l.out_row + l.out_margin;
    for (std::int64_t j = 0; j < l.out_pitch; j += 16)
      _mm512_store_ps(gr + j, _mm512_maskz_loadu_ps(lanes(g.ow - j), dy + oh * g.ow + j));
  }
  for (std::int64_t ih = 0; ih < g.h; ++ih)
    gather_row(g, l, taps, positions, grads, ih, base + l.dx_streams, dx + ih * g.w);
}

}  // namespace galley::backends::cpu::avx512
