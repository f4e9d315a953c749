// See pool_max_backward_k3s2_avx512.hpp. Compiled with AVX-512 F/BW/VL/DQ; nothing here
// instantiates a standard-library template (see sgemm_avx512.cpp).
//
// Output column j's taps are input columns 2j - 1, 2j and 2j + 1: lane j of the odd stream one
// lane back (column -1 is padding), of the even stream and of the odd stream. Without NaNs the
// rule is "take when strictly greater", so a tap's lane mask is one compare, and the running
// maximum one max instruction (its choice between +0 and -0 does not matter: they compare equal).
#include "backends/cpu/pool_max_backward_k3s2_avx512.hpp"

#include <immintrin.h>

#include "backends/cpu/avx512_lanes.hpp"

namespace galley::backends::cpu::avx512 {
namespace {

const __m512i kEvens = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
const __m512i kOdds = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
const __m512i kLowPairs = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
const __m512i kHighPairs = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);

// The most rows any output row's window holds.
std::int64_t window_rows(const PoolPlaneWindows& g) {
  std::int64_t most = 0;
  for (std::int64_t oh = 0; oh < g.oh; ++oh) most = max64(most, g.row_end[oh] - g.row_begin[oh]);
  return most;
}

// Where each part of the scratch lies, in 4-byte elements from its 64-byte-aligned start, all
// whole vectors: every input row's three-column maxima and which column gave each (kLeft, kEven,
// kOdd; 16 outputs a vector); the gradient sums, as even and odd column streams, of the dx rows a
// later output row's window still holds (a ring of window_rows() rows); one output row's codes of
// where each maximum lies, and a block of no position after them.
struct Layout {
  std::int64_t blocks;  // vectors of 16 outputs in a row
  std::int64_t ring;    // rows in the ring of open dx rows
  std::int64_t row_maxima, columns, open_rows, codes, total;
};

Layout layout_of(const PoolPlaneWindows& g) {
  Layout l{};
  l.blocks = (g.ow + 15) / 16;
  l.ring = window_rows(g);
  l.row_maxima = 0;
  l.columns = l.row_maxima + g.h * l.blocks * 16;
  l.open_rows = l.columns + g.h * l.blocks * 16;
  l.codes = l.open_rows + l.ring * l.blocks * 32;
  l.total = l.codes + (l.blocks + 1) * 16;
  return l;
}

float* aligned(float* scratch) {
  const auto line = reinterpret_cast<std::uintptr_t>(scratch) % 64;
  return scratch + (line == 0 ? 0 : (64 - line) / sizeof(float));
}

// Which of output j's taps holds the maximum of its row: column 2j - 1, 2j or 2j + 1. Codes of
// a window position are 4 * (row in the window) + tap; kNowhere matches none.
constexpr int kLeft = 0, kEven = 1, kOdd = 2, kNowhere = -1;

// Masked loads and stores cost several times a plain one on some AVX-512 CPUs (AMD Zen 4), so
// the row ends take plain ones wherever the vector stays inside the plane: a load then blends the
// columns past the row away, and a store writes past the row into the next ones, which are written
// after it (rows go out in order); only the plane's end is masked.

// The 16 floats p[0, 16) with those from `valid` on (past the row) replaced by fill; end is the
// plane's end.
inline __m512 load_row(const float* p, std::int64_t valid, const float* end, __m512 fill) {
  if (valid >= 16) return _mm512_loadu_ps(p);
  if (p + 16 <= end) return _mm512_mask_mov_ps(fill, lanes(valid), _mm512_loadu_ps(p));
  return _mm512_mask_loadu_ps(fill, lanes(valid), p);
}

// 16 gradients from p, whatever lies past the row: the lanes past ow have no position and take
// none of them.
inline __m512 load_gradients(const float* p, const float* end) {
  if (p + 16 <= end) return _mm512_loadu_ps(p);
  return _mm512_maskz_loadu_ps(lanes(end - p), p);
}

// p[0, valid) = v's first lanes, and past the row whatever v holds where the plane goes on.
inline void store_row(float* p, std::int64_t valid, const float* end, __m512 v) {
  if (valid >= 16 || p + 16 <= end) {
    _mm512_storeu_ps(p, v);
  } else {
    _mm512_mask_storeu_ps(p, lanes(valid), v);
  }
}

// Every input row's three-column maxima and their taps; false when x holds a NaN.
bool reduce_rows(const PoolPlaneWindows& g, const Layout& l, const float* x, float* maxima,
                 std::int32_t* columns) {
  const __m512 neg_inf = _mm512_set1_ps(-__builtin_inff());
  const __m512i left_tap = _mm512_set1_epi32(kLeft), even_tap = _mm512_set1_epi32(kEven),
                odd_tap = _mm512_set1_epi32(kOdd);
  const float* const x_end = x + g.h * g.w;
  __mmask16 nan = 0;
  for (std::int64_t ih = 0; ih < g.h; ++ih) {
    const float* row = x + ih * g.w;
    __m512i prev_odd = _mm512_castps_si512(neg_inf);
    for (std::int64_t m = 0; m < l.blocks; ++m) {
      const std::int64_t c = 32 * m;
      const __m512 a = load_row(row + c, g.w - c, x_end, neg_inf);
      const __m512 b = load_row(row + c + 16, g.w - c - 16, x_end, neg_inf);
      nan |= _mm512_cmp_ps_mask(a, b, _CMP_UNORD_Q);
      const __m512 even = _mm512_permutex2var_ps(a, kEvens, b);
      const __m512 odd = _mm512_permutex2var_ps(a, kOdds, b);
      const __m512i odd_bits = _mm512_castps_si512(odd);
      const __m512 left = _mm512_castsi512_ps(_mm512_alignr_epi32(odd_bits, prev_odd, 15));
      prev_odd = odd_bits;
      // Output 0's first tap is the padding column, which any element of the row beats.
      const __mmask16 take_even = _mm512_cmp_ps_mask(even, left, _CMP_GT_OQ) | (m == 0 ? 1 : 0);
      const __m512 best = _mm512_max_ps(even, left);
      const __mmask16 take_odd = _mm512_cmp_ps_mask(odd, best, _CMP_GT_OQ);
      const std::int64_t at = (ih * l.blocks + m) * 16;
      _mm512_store_ps(maxima + at, _mm512_max_ps(odd, best));
      _mm512_store_si512(
          columns + at,
          _mm512_mask_mov_epi32(_mm512_mask_mov_epi32(left_tap, take_even, even_tap), take_odd, odd_tap));
    }
  }
  return nan == 0;
}

// codes[m]: where the maximum of each output of block m of output row oh lies, kNowhere past ow;
// the window's rows [begin, begin + rows) in order, the first row holding the largest row maximum.
void find_codes(const PoolPlaneWindows& g, const Layout& l, const float* maxima, const std::int32_t* columns,
                std::int64_t begin, std::int64_t rows, std::int32_t* codes) {
  for (std::int64_t m = 0; m < l.blocks; ++m) {
    const std::int64_t top = (begin * l.blocks + m) * 16, pitch = l.blocks * 16;
    __m512 best = _mm512_load_ps(maxima + top);
    __m512i code = _mm512_load_si512(columns + top);
    for (std::int64_t r = 1; r < rows; ++r) {
      const __m512 v = _mm512_load_ps(maxima + top + r * pitch);
      const __mmask16 take = _mm512_cmp_ps_mask(v, best, _CMP_GT_OQ);
      best = _mm512_max_ps(v, best);
      code = _mm512_mask_add_epi32(code, take, _mm512_load_si512(columns + top + r * pitch),
                                   _mm512_set1_epi32(static_cast<std::int32_t>(4 * r)));
    }
    _mm512_store_si512(codes + 16 * m,
                       _mm512_mask_mov_epi32(_mm512_set1_epi32(kNowhere), lanes(g.ow - 16 * m), code));
  }
  _mm512_store_si512(codes + 16 * l.blocks, _mm512_set1_epi32(kNowhere));
}

// Output row oh's gradients `dy` into the dx rows [begin, begin + rows) of its window, begin's row
// of the ring being begin_slot. A row whose sums started at an earlier output row continues them
// from the ring; a row no later output row
// reaches is interleaved into dx, the others go to the ring (whole aligned vectors, which a later
// load takes straight from the store buffer, where a masked store to dx read back would wait).
void spread_output_row(const PoolPlaneWindows& g, const Layout& l, const std::int32_t* codes, const float* dy,
                       const float* dy_end, std::int64_t oh, std::int64_t written, float* ring,
                       std::int64_t begin_slot, float* dx) {
  const float* const dx_end = dx + g.h * g.w;
  const std::int64_t begin = g.row_begin[oh], rows = g.row_end[oh] - begin;
  const std::int64_t next_begin = oh + 1 < g.oh ? g.row_begin[oh + 1] : g.h;
  std::int64_t slot = begin_slot;
  for (std::int64_t r = 0; r < rows; ++r, slot = slot + 1 == l.ring ? 0 : slot + 1) {
    const std::int64_t ih = begin + r;
    float* sums = ring + slot * l.blocks * 32;
    float* out = dx + ih * g.w;
    const bool continued = ih < written, last = ih < next_begin;
    const auto row_code = [&](int tap) { return _mm512_set1_epi32(static_cast<std::int32_t>(4 * r + tap)); };
    const __m512i left_code = row_code(kLeft), even_code = row_code(kEven), odd_code = row_code(kOdd);
    __m512i code = _mm512_load_si512(codes);
    __m512 grad = load_gradients(dy, dy_end);
    for (std::int64_t m = 0; m < l.blocks; ++m, sums += 32) {
      const std::int64_t j = 16 * m, c = 2 * j;
      const __m512i next_code = _mm512_load_si512(codes + j + 16);
      const __m512 next_grad = load_gradients(dy + j + 16, dy_end);
      // Lane j: output j + 1's gradient and code, for column 2j + 1, output j + 1's left tap.
      const __m512 shifted = _mm512_castsi512_ps(
          _mm512_alignr_epi32(_mm512_castps_si512(next_grad), _mm512_castps_si512(grad), 1));
      const __m512i shifted_code = _mm512_alignr_epi32(next_code, code, 1);
      // The sums run in the general kernel's order, so kept indices (which take that kernel) and
      // finding the maxima again give the same bits: from +0, each output row in turn, output
      // j + 1 (through its left tap) before output j.
      __m512 even = _mm512_setzero_ps(), odd = _mm512_setzero_ps();
      if (continued) even = _mm512_load_ps(sums), odd = _mm512_load_ps(sums + 16);
      even = _mm512_mask_add_ps(even, _mm512_cmpeq_epi32_mask(code, even_code), even, grad);
      odd = _mm512_mask_add_ps(odd, _mm512_cmpeq_epi32_mask(shifted_code, left_code), odd, shifted);
      odd = _mm512_mask_add_ps(odd, _mm512_cmpeq_epi32_mask(code, odd_code), odd, grad);
      code = next_code;
      grad = next_grad;
      if (!last) {
        _mm512_store_ps(sums, even);
        _mm512_store_ps(sums + 16, odd);
        continue;
      }
      const __m512 lo = _mm512_permutex2var_ps(even, kLowPairs, odd);
      const __m512 hi = _mm512_permutex2var_ps(even, kHighPairs, odd);
      store_row(out + c, g.w - c, dx_end, lo);
      if (c + 16 < g.w) store_row(out + c + 16, g.w - c - 16, dx_end, hi);
    }
  }
}

void zero_rows(const PoolPlaneWindows& g, std::int64_t begin, std::int64_t end, float* dx) {
  for (std::int64_t i = begin * g.w; i < end * g.w; i += 16)
    _mm512_mask_storeu_ps(dx + i, lanes(end * g.w - i), _mm512_setzero_ps());
}

// The windows of 3 rows, row stride 2 and row padding 1 (ResNet's stem), which one pass over the
// plane takes: output row oh holds rows 2oh - 1, 2oh and 2oh + 1 (its top, middle and bottom row,
// clipped to the plane), so a dx row of even index takes the gradients of one output row and a dx
// row of odd index those of two, its upper and then its lower one. Each output row reduces its
// middle and bottom rows once, keeps the bottom row's maxima for the next output row (whose top row
// it is) and sums into that row's dx until the next output row completes it; dx rows go out in
// order, each once, with no ring and no pass over stored row maxima.
bool rows_k3s2p1(const PoolPlaneWindows& g) {
  for (std::int64_t oh = 0; oh < g.oh; ++oh) {
    if (g.row_begin[oh] != max64(0, 2 * oh - 1) || g.row_end[oh] != min64(g.h, 2 * oh + 2)) return false;
  }
  return true;
}

// What the output rows of a plane under the windows rows_k3s2p1() takes share: sizes, where x, dy
// and dx lie, and of a row's last block of 16 outputs, which lanes of its input columns and of its
// outputs lie inside the row.
struct PlaneK3s2p1 {
  std::int64_t h, w, oh, ow;
  const float* x;
  const float* x_end;
  const float* dy;
  const float* dy_end;
  float* dx;
  const float* dx_end;
  float* open;  // kOpenFloats per block
  NextPlane next;
  std::int64_t blocks, x_step, dy_step;
  __mmask16 last_low_columns, last_high_columns, last_outputs;
  bool last_high_store;  // whether the last block's dx columns [c + 16, c + 32) start inside the row
};

// Per block of 16 outputs, the open row's (the last output row's bottom row) maxima, taps and the
// sums of its dx even and odd column streams.
constexpr std::int64_t kOpenFloats = 64;

// One input row's three-column maxima of 16 outputs and which column gave each (kLeft, kEven or
// kOdd), offset by the row's place in the window (4 per row) once merged into a code.
struct RowBlock {
  __m512 maxima;
  __m512i taps;
};

// Where a block lies in its row, which sets how its loads and stores treat the row's ends: kFirst
// for a row's first block (left of it the padding column), kInside for one wholly inside the row,
// kRowEnd for a row's last block away from the plane's end (whole vectors, the columns past the
// row blended away on load and overwritten by later rows on store), kPlaneEnd for a last block
// whose vectors may pass the plane's end (masked there). A row of one block takes its last block's.
enum class Edge { kFirst, kInside, kRowEnd, kPlaneEnd };

// Outputs [16m, 16m + 16) of the row at `row`; nan gathers the lanes where its columns hold a NaN.
// Output 0's left tap is the padding column, which any element beats: a NaN stands for it, which
// "not less or equal" takes and the max passes over (a NaN of x sends the plane to the general
// kernel, whatever this block makes of it).
template <Edge kEdge>
inline RowBlock reduce_block(const PlaneK3s2p1& p, const float* row, std::int64_t m, __mmask16& nan) {
  const std::int64_t c = 32 * m, w = p.w;
  const __m512 neg_inf = _mm512_set1_ps(-__builtin_inff());
  __m512 a = _mm512_loadu_ps(row + c), b;
  if (kEdge == Edge::kFirst || kEdge == Edge::kInside) {
    b = _mm512_loadu_ps(row + c + 16);
  } else if (kEdge == Edge::kRowEnd) {
    a = _mm512_mask_mov_ps(neg_inf, p.last_low_columns, a);
    b = _mm512_mask_mov_ps(neg_inf, p.last_high_columns, _mm512_loadu_ps(row + c + 16));
  } else {
    a = load_row(row + c, w - c, p.x_end, neg_inf);
    b = load_row(row + c + 16, w - c - 16, p.x_end, neg_inf);
  }
  nan |= _mm512_cmp_ps_mask(a, b, _CMP_UNORD_Q);
  const __m512 even = _mm512_permutex2var_ps(a, kEvens, b);
  const __m512 odd = _mm512_permutex2var_ps(a, kOdds, b);
  const bool first = kEdge == Edge::kFirst || (kEdge != Edge::kInside && m == 0);
  const __m512 before = first ? _mm512_set1_ps(__builtin_nanf("")) : _mm512_set1_ps(row[c - 1]);
  const __m512 left =
      _mm512_castsi512_ps(_mm512_alignr_epi32(_mm512_castps_si512(odd), _mm512_castps_si512(before), 15));
  const __mmask16 take_even = _mm512_cmp_ps_mask(even, left, _CMP_NLE_UQ);
  const __m512 best = _mm512_max_ps(left, even);
  const __mmask16 take_odd = _mm512_cmp_ps_mask(odd, best, _CMP_GT_OQ);
  const __m512i taps = _mm512_mask_mov_epi32(_mm512_maskz_mov_epi32(take_even, _mm512_set1_epi32(kEven)),
                                             take_odd, _mm512_set1_epi32(kOdd));
  return {_mm512_max_ps(odd, best), taps};
}

// Adds 16 outputs' gradients into one dx row's even and odd column streams where their codes put
// the maximum in the window's row `r`, in the general kernel's order (output j + 1 through its
// left tap before output j). kFirst: the streams start here, from +0, which the gradients carry
// already (+0 + g: a -0 gradient gives +0, as the general kernel's sums from +0 do); a sum from +0
// is never -0, so adding it +0 where no output takes the element leaves it as it is.
template <bool kFirst>
inline void add_row_gradients(int r, __m512i code, __m512i shifted_code, __m512 grad, __m512 shifted_grad,
                              __m512& even, __m512& odd) {
  const auto row_code = [&](int tap) { return _mm512_set1_epi32(4 * r + tap); };
  const __mmask16 at_even = _mm512_cmpeq_epi32_mask(code, row_code(kEven));
  const __mmask16 at_left = _mm512_cmpeq_epi32_mask(shifted_code, row_code(kLeft));
  if (kFirst) {
    even = _mm512_maskz_mov_ps(at_even, grad);
    odd = _mm512_maskz_mov_ps(at_left, shifted_grad);
  } else {
    even = _mm512_mask_add_ps(even, at_even, even, grad);
    odd = _mm512_mask_add_ps(odd, at_left, odd, shifted_grad);
  }
  odd = _mm512_mask_add_ps(odd, _mm512_cmpeq_epi32_mask(code, row_code(kOdd)), odd, grad);
}

// Columns [c, c + 32) of the dx row at out from its even and odd column streams.
template <Edge kEdge>
inline void store_dx_block(const PlaneK3s2p1& p, float* out, std::int64_t c, __m512 even, __m512 odd) {
  const __m512 low = _mm512_permutex2var_ps(even, kLowPairs, odd);
  const __m512 high = _mm512_permutex2var_ps(even, kHighPairs, odd);
  if (kEdge == Edge::kFirst || kEdge == Edge::kInside) {
    _mm512_storeu_ps(out + c, low);
    _mm512_storeu_ps(out + c + 16, high);
  } else if (kEdge == Edge::kRowEnd) {
    _mm512_storeu_ps(out + c, low);
    if (p.last_high_store) _mm512_storeu_ps(out + c + 16, high);
  } else {
    const std::int64_t w = p.w;
    store_row(out + c, w - c, p.dx_end, low);
    if (c + 16 < w) store_row(out + c + 16, w - c - 16, p.dx_end, high);
  }
}

// Block m of output row oh, whose window holds its top row when kTop (all but output row 0), its
// middle row when kMiddle and its bottom row when kBottom; right_code is the next block's codes
// (kNowhere past the row). Returns this block's codes.
template <bool kTop, bool kMiddle, bool kBottom, Edge kEdge>
inline __m512i output_block(const PlaneK3s2p1& p, std::int64_t oh, std::int64_t m, __m512i right_code,
                            __mmask16& nan) {
  const std::int64_t w = p.w, j = 16 * m, c = 2 * j;
  const float* const middle_row = p.x + 2 * oh * w;
  const float* const dy_row = p.dy + oh * p.ow;
  float* const top_out = p.dx + (2 * oh - 1) * w;
  float* const state = p.open + kOpenFloats * m;
  RowBlock middle{}, bottom{};
  if (kMiddle) middle = reduce_block<kEdge>(p, middle_row, m, nan);
  if (kBottom) bottom = reduce_block<kEdge>(p, middle_row + w, m, nan);
  __m512i code;
  __m512 best;
  if (kTop) {
    best = _mm512_load_ps(state);
    code = _mm512_load_si512(state + 16);
    if (kMiddle) {
      const __mmask16 take = _mm512_cmp_ps_mask(middle.maxima, best, _CMP_GT_OQ);
      best = _mm512_max_ps(middle.maxima, best);
      code = _mm512_mask_add_epi32(code, take, middle.taps, _mm512_set1_epi32(4));
    }
  } else {
    best = middle.maxima;
    code = _mm512_add_epi32(middle.taps, _mm512_set1_epi32(4));
  }
  if (kBottom) {
    const __mmask16 take = _mm512_cmp_ps_mask(bottom.maxima, best, _CMP_GT_OQ);
    code = _mm512_mask_add_epi32(code, take, bottom.taps, _mm512_set1_epi32(8));
  }
  __m512 grad, shifted_grad;
  if (kEdge == Edge::kPlaneEnd) {
    grad = load_gradients(dy_row + j, p.dy_end);
    shifted_grad = load_gradients(dy_row + j + 1, p.dy_end);
  } else {
    grad = _mm512_loadu_ps(dy_row + j);
    shifted_grad = _mm512_loadu_ps(dy_row + j + 1);
  }
  if (kEdge == Edge::kRowEnd || kEdge == Edge::kPlaneEnd)
    code = _mm512_mask_mov_epi32(_mm512_set1_epi32(kNowhere), p.last_outputs, code);
  grad = _mm512_add_ps(grad, _mm512_setzero_ps());
  shifted_grad = _mm512_add_ps(shifted_grad, _mm512_setzero_ps());
  // Lane j: output j + 1's gradient and code, for column 2j + 1, output j + 1's left tap.
  const __m512i shifted_code = _mm512_alignr_epi32(right_code, code, 1);
  if (kTop) {
    __m512 even = _mm512_load_ps(state + 32), odd = _mm512_load_ps(state + 48);
    add_row_gradients<false>(0, code, shifted_code, grad, shifted_grad, even, odd);
    store_dx_block<kEdge>(p, top_out, c, even, odd);
  }
  if (kMiddle) {
    __m512 even, odd;
    add_row_gradients<true>(1, code, shifted_code, grad, shifted_grad, even, odd);
    store_dx_block<kEdge>(p, top_out + w, c, even, odd);
  }
  if (kBottom) {
    __m512 even, odd;
    add_row_gradients<true>(2, code, shifted_code, grad, shifted_grad, even, odd);
    _mm512_store_ps(state, bottom.maxima);
    _mm512_store_si512(state + 16, bottom.taps);
    _mm512_store_ps(state + 32, even);
    _mm512_store_ps(state + 48, odd);
  }
  return code;
}

// Output rows [begin, end), with windows as output_block() takes, kLastEdge for their last block;
// false, at the first output row whose rows hold a NaN, for one. A row's blocks go from its end to
// its start, so that the codes of the block to the right (for the left taps) are at hand, and the
// store of a dx row's last block that reaches into the next dx row comes before that row's first
// block.
template <bool kTop, bool kMiddle, bool kBottom, Edge kLastEdge>
bool output_rows(const PlaneK3s2p1& plane, std::int64_t begin, std::int64_t end) {
  // A copy, which the compiler knows no store to dx changes.
  const PlaneK3s2p1 p = plane;
  for (std::int64_t oh = begin; oh < end; ++oh) {
    if (p.next.x != nullptr) {
      prefetch_lines(p.next.x, p.h * p.w, oh * p.x_step, (oh + 1) * p.x_step);
      prefetch_lines(p.next.dy, p.oh * p.ow, oh * p.dy_step, (oh + 1) * p.dy_step);
      prefetch_lines(p.next.dx, p.h * p.w, oh * p.x_step, (oh + 1) * p.x_step);
    }
    // dx's lines a few rows ahead, so that the stores find them in L1 rather than wait, in order,
    // for each line to come.
    prefetch_lines(p.dx, p.h * p.w, (2 * oh + 5) * p.w / 16, ((2 * oh + 7) * p.w + 15) / 16);
    __mmask16 nan = 0;
    __m512i code = output_block<kTop, kMiddle, kBottom, kLastEdge>(p, oh, p.blocks - 1,
                                                                   _mm512_set1_epi32(kNowhere), nan);
    if (p.blocks > 1) {
      for (std::int64_t m = p.blocks - 2; m > 0; --m)
        code = output_block<kTop, kMiddle, kBottom, Edge::kInside>(p, oh, m, code, nan);
      output_block<kTop, kMiddle, kBottom, Edge::kFirst>(p, oh, 0, code, nan);
    }
    if (nan != 0) return false;
  }
  return true;
}

// Whether the n floats at a and the m at b share no byte.
bool apart(const float* a, std::int64_t n, const float* b, std::int64_t m) {
  const auto a_begin = reinterpret_cast<std::uintptr_t>(a), b_begin = reinterpret_cast<std::uintptr_t>(b);
  return a_begin + n * sizeof(float) <= b_begin || b_begin + m * sizeof(float) <= a_begin;
}

// The plane under the windows rows_k3s2p1() takes, dx sharing no storage with x and dy; false for
// a NaN in x. The blocks' loads see the rows [0, 2 oh) that the windows hold, the rows past them
// are searched first. A NaN found on the way leaves dx partly written, which the general kernel
// then writes all of, from x and dy as they were.
bool plane_k3s2p1(const PoolPlaneWindows& g, const float* x, const float* dy, float* dx,
                  const NextPlane& next, float* scratch) {
  const std::int64_t held_rows = min64(g.h, 2 * g.oh);
  if (holds_nan(x + held_rows * g.w, (g.h - held_rows) * g.w)) return false;
  const std::int64_t blocks = (g.ow + 15) / 16, last_j = 16 * (blocks - 1), last_c = 2 * last_j;
  const std::int64_t x_lines = (g.h * g.w + 15) / 16, dy_lines = (g.oh * g.ow + 15) / 16;
  const PlaneK3s2p1 p{g.h,
                      g.w,
                      g.oh,
                      g.ow,
                      x,
                      x + g.h * g.w,
                      dy,
                      dy + g.oh * g.ow,
                      dx,
                      dx + g.h * g.w,
                      aligned(scratch),
                      next,
                      blocks,
                      (x_lines + g.oh - 1) / g.oh,
                      (dy_lines + g.oh - 1) / g.oh,
                      lanes(g.w - last_c),
                      lanes(g.w - last_c - 16),
                      lanes(g.ow - last_j),
                      last_c + 16 < g.w};
  // The output rows whose last blocks' whole vectors stay inside the plane: those of x's bottom
  // row (and so of dx's middle row above it) and of dy's row (one further for the shifted
  // gradients).
  std::int64_t inside_end = g.oh;
  while (inside_end > 0) {
    const std::int64_t oh = inside_end - 1;
    if ((2 * oh + 1) * g.w + last_c + 32 <= g.h * g.w && oh * g.ow + last_j + 17 <= g.oh * g.ow) break;
    --inside_end;
  }
  // Output rows [0, full_end) hold a bottom row; output row 0 has no top row.
  const std::int64_t full_end = min64(g.oh, g.h / 2);
  bool no_nan;
  if (full_end == 0) {
    no_nan = output_rows<false, true, false, Edge::kPlaneEnd>(p, 0, 1);
  } else if (inside_end > 0) {
    no_nan = output_rows<false, true, true, Edge::kRowEnd>(p, 0, 1);
  } else {
    no_nan = output_rows<false, true, true, Edge::kPlaneEnd>(p, 0, 1);
  }
  const std::int64_t inside_full_end = max64(1, min64(full_end, inside_end));
  no_nan = no_nan && output_rows<true, true, true, Edge::kRowEnd>(p, 1, inside_full_end) &&
           output_rows<true, true, true, Edge::kPlaneEnd>(p, inside_full_end, full_end);
  for (std::int64_t oh = max64(1, full_end); no_nan && oh < g.oh; ++oh) {
    if (2 * oh < g.h) {
      no_nan = output_rows<true, true, false, Edge::kPlaneEnd>(p, oh, oh + 1);
    } else {
      no_nan = output_rows<true, false, false, Edge::kPlaneEnd>(p, oh, oh + 1);
    }
  }
  if (!no_nan) return false;
  // The last output row's bottom row, which no later output row completes.
  const std::int64_t open_row = 2 * g.oh - 1;
  if (open_row < g.h) {
    for (std::int64_t m = 0; m < blocks; ++m) {
      const float* state = p.open + kOpenFloats * m;
      store_dx_block<Edge::kPlaneEnd>(p, dx + open_row * g.w, 32 * m, _mm512_load_ps(state + 32),
                                      _mm512_load_ps(state + 48));
    }
  }
  zero_rows(g, held_rows, g.h, dx);
  return true;
}

}  // namespace

bool max_pool_backward_k3s2_fits(const PoolPlaneWindows& g) {
  if (g.kernel_w != 3 || g.stride_w != 2 || g.pad_w != 1) return false;
  for (std::int64_t oh = 0; oh < g.oh; ++oh) {
    const std::int64_t rows = g.row_end[oh] - g.row_begin[oh];
    if (rows < 1) return false;
  }
  return true;
}

std::int64_t max_pool_backward_k3s2_scratch(const PoolPlaneWindows& g) {
  return max64(layout_of(g).total, (g.ow + 15) / 16 * kOpenFloats) + 16;
}

bool max_pool_plane_backward_k3s2(const PoolPlaneWindows& g, const float* x, const float* dy, float* dx,
                                  const NextPlane& next, float* scratch) {
  // The general windows' pass reads all of x before it writes dx, so it also takes a dx stored over
  // x or dy.
  if (rows_k3s2p1(g) && apart(dx, g.h * g.w, x, g.h * g.w) && apart(dx, g.h * g.w, dy, g.oh * g.ow))
    return plane_k3s2p1(g, x, dy, dx, next, scratch);
  const Layout l = layout_of(g);
  float* base = aligned(scratch);
  float* maxima = base + l.row_maxima;
  auto* columns = reinterpret_cast<std::int32_t*>(base + l.columns);
  auto* codes = reinterpret_cast<std::int32_t*>(base + l.codes);
  if (!reduce_rows(g, l, x, maxima, columns)) return false;
  // The next plane's lines, a share with each output row, so that their misses overlap this
  // plane's work: left to the hardware, a plane's first loads and stores wait for memory.
  const std::int64_t x_lines = (g.h * g.w + 15) / 16, dy_lines = (g.oh * g.ow + 15) / 16;
  const std::int64_t x_step = (x_lines + g.oh - 1) / g.oh, dy_step = (dy_lines + g.oh - 1) / g.oh;
  std::int64_t written = 0;  // the rows below it have their sums begun, in the ring or in dx
  // Row ih's place in the ring is ih mod l.ring, followed as the windows move down rather than
  // divided for: a division per row costs as much as a row's work.
  std::int64_t begin_slot = g.row_begin[0] % l.ring;
  for (std::int64_t oh = 0; oh < g.oh; ++oh) {
    if (next.x != nullptr) {
      prefetch_lines(next.x, g.h * g.w, oh * x_step, (oh + 1) * x_step);
      prefetch_lines(next.dy, g.oh * g.ow, oh * dy_step, (oh + 1) * dy_step);
      prefetch_lines(next.dx, g.h * g.w, oh * x_step, (oh + 1) * x_step);
    }
    const std::int64_t begin = g.row_begin[oh], end = g.row_end[oh];
    if (begin > written) zero_rows(g, written, begin, dx);
    if (oh > 0) {
      for (begin_slot += begin - g.row_begin[oh - 1]; begin_slot >= l.ring;) begin_slot -= l.ring;
    }
    find_codes(g, l, maxima, columns, begin, end - begin, codes);
    spread_output_row(g, l, codes, dy + oh * g.ow, dy + g.oh * g.ow, oh, written, base + l.open_rows,
                      begin_slot, dx);
    written = max64(written, end);
  }
  zero_rows(g, written, g.h, dx);
  return true;
}

}  // namespace galley::backends::cpu::avx512
