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

// Where each part of the scratch lies, in floats from its 64-byte-aligned start; every part is a
// whole number of vectors. Forward: the streams of a batch of output rows' row sums, each with
// `in_margin` zeros before its data. Backward: a batch of scaled gradient
// rows, each with `grad_margin` zeros before it, the spread streams, then the spread rows of every
// output row.
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
  l.in_streams = 0;
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

}  // namespace

std::int64_t avg_pool_plane_scratch(const AvgPoolPlane& g) { return layout_of(g).total + 16; }

void avg_pool_plane_prepare(const AvgPoolPlane& g, float* scratch) {
  float* base = aligned(scratch);
  const std::int64_t total = layout_of(g).total;
  for (std::int64_t i = 0; i < total; i += 16) _mm512_store_ps(base + i, _mm512_setzero_ps());
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
  const Layout l = layout_of(g);
  float* base = aligned(scratch);
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
