// cpu.pool.direct: pooling on the cpu thread pool. nchw works plane by plane (one task per N*C
// plane), eight outputs of a row at a time where their windows lie inside the row; nhwc works
// output row by output row with the channels innermost, where the compiler vectorises the
// per-channel sums and comparisons. Backward never has two threads write one element: nchw
// scatters into its own plane, nhwc gathers for each input the gradients of the outputs whose
// windows hold it; so the result does not depend on the thread count. Max backward without kept
// indices first finds the maxima again into the workspace, then proceeds as with kept indices.
// On AVX-512 CPUs the f32 nchw forward of max values without indices and of averages over whole
// planes runs the kernels of pool_avx512.hpp instead, and f32 nchw averages over kernel windows of
// column stride 1 or 2, forward and backward, the separable ones of pool_avg_avx512.hpp, and f32
// nchw max backward over such windows the gather of pool_max_backward_avx512.hpp, or, finding the
// maxima again over windows 3 columns wide of stride 2 padded by 1, the one-pass kernel of
// pool_max_backward_k3s2_avx512.hpp. Backward of averages over whole planes broadcasts each
// plane's share.
#include <algorithm>
#include <bit>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "backends/cpu/broadcast_fill.hpp"
#include "backends/cpu/conv_isa.hpp"
#include "backends/cpu/datamove_shares.hpp"
#include "backends/cpu/pool_avg_avx512.hpp"
#include "backends/cpu/pool_avx512.hpp"
#include "backends/cpu/pool_max_backward_avx512.hpp"
#include "backends/cpu/pool_max_backward_k3s2_avx512.hpp"
#include "backends/cpu/pool_solvers.hpp"
#include "backends/cpu/reduce_fill_avx512.hpp"
#include "backends/cpu/thread_pool.hpp"
#include "dnn/pool_geometry.hpp"
#include "galley/core/error.hpp"

namespace galley::backends::cpu {
namespace {

using dnn::PoolArgs;
using dnn::PoolAxis;
using dnn::PoolMode;
using dnn::PoolProblem;

struct Half {
  std::uint16_t bits;
};
struct BFloat {
  std::uint16_t bits;
};
inline float ld(float v) { return v; }
inline float ld(Half v) { return half_to_float(v.bits); }
inline float ld(BFloat v) {
  const std::uint32_t u = std::uint32_t(v.bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
template <class T>
T st(float v);
template <>
float st<float>(float v) {
  return v;
}
template <>
Half st<Half>(float v) {
  return {float_to_half(v)};
}
template <>
BFloat st<BFloat>(float v) {
  return {float_to_bfloat16(v)};
}

// Scratch floats of one thread's share of a call, kept by the thread between calls up to
// kKeptFloats: a fresh allocation per share (and the page faults of memory the allocator handed
// back to the system) shows in profiles of problems of a megabyte. Two slots, for a share that
// needs two scratches at once; no kernel runs another pooling call inside its share, so a slot has
// one user at a time.
class ThreadScratch {
 public:
  enum Slot { kFirst, kSecond };
  explicit ThreadScratch(Slot slot) : slot_(slot) {}
  // At least `floats` floats; their contents on return are whatever the slot held.
  float* get(std::int64_t floats) {
    const auto n = static_cast<std::size_t>(floats);
    if (n > kKeptFloats) {
      if (own_size_ < n) own_ = std::make_unique_for_overwrite<float[]>(n), own_size_ = n;
      return own_.get();
    }
    thread_local std::unique_ptr<float[]> kept[2];
    thread_local std::size_t kept_size[2] = {0, 0};
    if (kept_size[slot_] < n) {
      kept[slot_] = std::make_unique_for_overwrite<float[]>(n);
      kept_size[slot_] = n;
    }
    return kept[slot_].get();
  }

 private:
  static constexpr std::size_t kKeptFloats = std::size_t{1} << 18;
  Slot slot_;
  std::unique_ptr<float[]> own_;
  std::size_t own_size_ = 0;
};

struct Cover {
  std::int64_t first, last;
};

// The problem's sizes and, per row and column, its windows and the outputs covering each input:
// tables made once per call, so no loop divides.
struct Shape {
  std::int64_t n, c, h, w, oh, ow;
  PoolAxis ah, aw;
  PoolMode mode;
  bool nhwc;
  std::vector<PoolAxis::Span> span_h, span_w;
  std::vector<Cover> cover_h, cover_w;
  // Output columns [ow_lo, ow_hi) whose windows are whole kernels inside the row (nchw fast path).
  std::int64_t ow_lo = 0, ow_hi = 0;
  // The AVX-512 plane kernels' row tables: each output row's first and past-the-end input rows
  // (window_rows[oh], window_rows[oh + oh_count]) and each input row's first and last covering
  // output rows (window_covers[ih], window_covers[h + ih]).
  std::vector<std::int64_t> window_rows, window_covers;
};

Shape shape_of(const PoolProblem& p) {
  Shape s{p.n,
          p.c,
          p.h,
          p.w,
          p.out_h(),
          p.out_w(),
          dnn::pool_axis_h(p),
          dnn::pool_axis_w(p),
          p.mode,
          p.layout == dnn::Layout::nhwc,
          {},
          {},
          {},
          {},
          0,
          0,
          {},
          {}};
  for (std::int64_t o = 0; o < s.oh; ++o) s.span_h.push_back(s.ah.span(o));
  for (std::int64_t o = 0; o < s.ow; ++o) s.span_w.push_back(s.aw.span(o));
  const auto covers = [](const PoolAxis& axis, std::vector<Cover>& out) {
    out.resize(static_cast<std::size_t>(axis.in));
    for (std::int64_t i = 0; i < axis.in; ++i) axis.covering(i, out[i].first, out[i].last);
  };
  covers(s.ah, s.cover_h);
  covers(s.aw, s.cover_w);
  if (!s.aw.adaptive) {
    while (s.ow_lo < s.ow && s.ow_lo * s.aw.stride - s.aw.pad < 0) ++s.ow_lo;
    s.ow_hi = s.ow_lo;
    while (s.ow_hi < s.ow && s.ow_hi * s.aw.stride - s.aw.pad + s.aw.kernel <= s.w) ++s.ow_hi;
  }
  s.window_rows.resize(static_cast<std::size_t>(2 * s.oh));
  s.window_covers.resize(static_cast<std::size_t>(2 * s.h));
  for (std::int64_t oh = 0; oh < s.oh; ++oh) {
    s.window_rows[static_cast<std::size_t>(oh)] = s.span_h[oh].begin;
    s.window_rows[static_cast<std::size_t>(s.oh + oh)] = s.span_h[oh].end;
  }
  for (std::int64_t ih = 0; ih < s.h; ++ih) {
    s.window_covers[static_cast<std::size_t>(ih)] = s.cover_h[ih].first;
    s.window_covers[static_cast<std::size_t>(s.h + ih)] = s.cover_h[ih].last;
  }
  return s;
}

// 1 / divisor of every output position of a plane (the same for every plane). Both divisors are a
// row factor times a column factor; while their products are exact in f32 the table is one
// vectorisable loop of those factors rather than a division chain per output.
std::vector<float> inverse_divisors(const Shape& s) {
  std::vector<float> inv(static_cast<std::size_t>(s.oh * s.ow), 1.0f);
  if (s.mode == PoolMode::max) return inv;
  const PoolAxis::Span whole{0, 1, 1};
  std::vector<float> fh(static_cast<std::size_t>(s.oh)), fw(static_cast<std::size_t>(s.ow));
  std::int64_t largest_h = 0, largest_w = 0;
  for (std::int64_t oh = 0; oh < s.oh; ++oh) {
    const std::int64_t d = dnn::pool_divisor(s.mode, s.span_h[oh], whole);
    fh[static_cast<std::size_t>(oh)] = static_cast<float>(d);
    largest_h = std::max(largest_h, d);
  }
  for (std::int64_t ow = 0; ow < s.ow; ++ow) {
    const std::int64_t d = dnn::pool_divisor(s.mode, whole, s.span_w[ow]);
    fw[static_cast<std::size_t>(ow)] = static_cast<float>(d);
    largest_w = std::max(largest_w, d);
  }
  if (largest_h * largest_w < (std::int64_t{1} << 24)) {
    for (std::int64_t oh = 0; oh < s.oh; ++oh) {
      float* row = inv.data() + oh * s.ow;
      const float h = fh[static_cast<std::size_t>(oh)];
      for (std::int64_t ow = 0; ow < s.ow; ++ow) row[ow] = 1.0f / (h * fw[static_cast<std::size_t>(ow)]);
    }
    return inv;
  }
  for (std::int64_t oh = 0; oh < s.oh; ++oh) {
    const PoolAxis::Span& sh = s.span_h[oh];
    for (std::int64_t ow = 0; ow < s.ow; ++ow) {
      inv[oh * s.ow + ow] = 1.0f / static_cast<float>(dnn::pool_divisor(s.mode, sh, s.span_w[ow]));
    }
  }
  return inv;
}

// Runs body(p0, p1) over the f32 planes of s, split as datamove_shares.hpp says: planes that stay
// in the caches go in one contiguous share per pool thread, the same on every call of a problem,
// and planes that come from memory anyway in the pool's finer chunks.
template <class Body>
void for_plane_shares(const Shape& s, const Body& body) {
  const std::int64_t planes = s.n * s.c;
  parallel_for_shares(planes, planes * (s.h * s.w + s.oh * s.ow) * static_cast<std::int64_t>(sizeof(float)),
                      body);
}

// Whether a problem's f32 nchw averages take the separable kernels of pool_avg_avx512.hpp.
bool avg_takes_avx512(const Shape& s) {
  return s.mode != PoolMode::max && !s.nhwc && !s.aw.adaptive &&
         avx512::pool_plane_fits(s.aw.stride, s.aw.kernel) && cpu_has_avx512();
}

// The AVX-512 plane kernels' windows, pointing into s's row tables.
avx512::PoolPlaneWindows plane_windows(const Shape& s) {
  return {s.h,
          s.w,
          s.oh,
          s.ow,
          s.aw.kernel,
          s.aw.stride,
          s.aw.pad,
          s.window_rows.data(),
          s.window_rows.data() + s.oh,
          s.window_covers.data(),
          s.window_covers.data() + s.h};
}

// Runs body(geometry, scratch, p0, p1) over the planes [p0, p1) of each thread's share, with the
// window tables pool_avg_avx512.hpp takes and scratch prepared once per share.
template <class Body>
void for_avg_planes(const Shape& s, const std::vector<float>& inv, const Body& body) {
  const avx512::AvgPoolPlane g{plane_windows(s), inv.data()};
  for_plane_shares(s, [&](std::int64_t p0, std::int64_t p1) {
    ThreadScratch slot(ThreadScratch::kFirst);
    float* scratch = slot.get(avx512::avg_pool_plane_scratch(g));
    avx512::avg_pool_plane_prepare(g, scratch);
    body(g, scratch, p0, p1);
  });
}

// Whether (v, i) beats the maximum so far (best, at) under the problem's rule, in a form that does
// not depend on visiting order, so partial maxima can be merged: a NaN beats any number and an
// earlier NaN, a larger value wins, and among equal values the earlier position.
inline bool beats(float v, std::int32_t i, float best, std::int32_t at) {
  if (v != v) return best == best || i > at;
  if (best != best) return false;
  return v > best || (v == best && i < at);
}

// Row reductions of the nchw path. Wide rows (global and adaptive windows) keep 8 independent
// partials, which the compiler turns into vector lanes; the partials merge in a fixed order, so
// the result does not depend on the thread count.
constexpr std::int64_t kLanes = 8;

template <class T>
float row_sum(const T* row, std::int64_t begin, std::int64_t end) {
  float sum = 0;
  std::int64_t iw = begin;
  if (end - begin >= 2 * kLanes) {
    float part[kLanes] = {};
    for (; iw + kLanes <= end; iw += kLanes) {
      for (std::int64_t l = 0; l < kLanes; ++l) part[l] += ld(row[iw + l]);
    }
    for (std::int64_t l = 0; l < kLanes; ++l) sum += part[l];
  }
  for (; iw < end; ++iw) sum += ld(row[iw]);
  return sum;
}

// Folds row[begin, end) (positions base + iw) into (best, at), the maximum of the earlier rows by
// the scanning rule. A wide row gives each of 32 lanes every 32nd element (two AVX-512 vectors,
// where the cpu has them), then what is left to 8 lanes (two SSE2 vectors, the x86-64 baseline,
// with blends instead of the branches that random data mispredicts); a lane scans its elements in
// order by the same rule, starting from its first element, and beats() merges the lanes.
template <class T>
void row_max(const T* row, std::int64_t base, std::int64_t begin, std::int64_t end, float& best,
             std::int32_t& at) {
  std::int64_t iw = begin;
  if constexpr (std::is_same_v<T, float>) {
    if (end - begin >= avx512::kRowMaxLanes && cpu_has_avx512()) {
      const std::int64_t n = (end - begin) / avx512::kRowMaxLanes * avx512::kRowMaxLanes;
      float pb[avx512::kRowMaxLanes];
      std::int32_t pa[avx512::kRowMaxLanes];
      avx512::row_max_lanes(row + begin, base + begin, n, pb, pa);
      for (std::int64_t l = 0; l < avx512::kRowMaxLanes; ++l) {
        if (beats(pb[l], pa[l], best, at)) best = pb[l], at = pa[l];
      }
      iw += n;
    }
  }
  if (end - iw >= 2 * kLanes) {
    float pb[kLanes];
    std::int32_t pa[kLanes];
#if defined(__SSE2__)
    __m128 b0 = _mm_set1_ps(-std::numeric_limits<float>::infinity()), b1 = b0;
    const auto first = static_cast<std::int32_t>(base + iw);
    __m128i pos0 = _mm_setr_epi32(first, first + 1, first + 2, first + 3);
    __m128i pos1 = _mm_add_epi32(pos0, _mm_set1_epi32(4));
    __m128i a0 = pos0, a1 = pos1;
    const __m128i step = _mm_set1_epi32(kLanes);
    for (; iw + kLanes <= end; iw += kLanes) {
      __m128 v0, v1;
      if constexpr (std::is_same_v<T, float>) {
        v0 = _mm_loadu_ps(row + iw), v1 = _mm_loadu_ps(row + iw + 4);
      } else {
        float buf[kLanes];
        for (std::int64_t l = 0; l < kLanes; ++l) buf[l] = ld(row[iw + l]);
        v0 = _mm_loadu_ps(buf), v1 = _mm_loadu_ps(buf + 4);
      }
      const __m128 t0 = _mm_or_ps(_mm_cmpgt_ps(v0, b0), _mm_cmpunord_ps(v0, v0));
      const __m128 t1 = _mm_or_ps(_mm_cmpgt_ps(v1, b1), _mm_cmpunord_ps(v1, v1));
      b0 = _mm_or_ps(_mm_and_ps(t0, v0), _mm_andnot_ps(t0, b0));
      b1 = _mm_or_ps(_mm_and_ps(t1, v1), _mm_andnot_ps(t1, b1));
      const __m128i m0 = _mm_castps_si128(t0), m1 = _mm_castps_si128(t1);
      a0 = _mm_or_si128(_mm_and_si128(m0, pos0), _mm_andnot_si128(m0, a0));
      a1 = _mm_or_si128(_mm_and_si128(m1, pos1), _mm_andnot_si128(m1, a1));
      pos0 = _mm_add_epi32(pos0, step);
      pos1 = _mm_add_epi32(pos1, step);
    }
    _mm_storeu_ps(pb, b0);
    _mm_storeu_ps(pb + 4, b1);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(pa), a0);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(pa + 4), a1);
#else
    for (std::int64_t l = 0; l < kLanes; ++l) {
      pb[l] = -std::numeric_limits<float>::infinity(), pa[l] = static_cast<std::int32_t>(base + iw + l);
    }
    for (; iw + kLanes <= end; iw += kLanes) {
      for (std::int64_t l = 0; l < kLanes; ++l) {
        const float v = ld(row[iw + l]);
        const bool take = (v > pb[l]) | (v != v);
        pb[l] = take ? v : pb[l];
        pa[l] = take ? static_cast<std::int32_t>(base + iw + l) : pa[l];
      }
    }
#endif
    for (std::int64_t l = 0; l < kLanes; ++l) {
      if (beats(pb[l], pa[l], best, at)) best = pb[l], at = pa[l];
    }
  }
  // Narrow rows (kernel windows): the same rule with integer blends, so no branch depends on data.
  auto best_bits = std::bit_cast<std::uint32_t>(best);
  auto at_bits = static_cast<std::uint32_t>(at);
  for (; iw < end; ++iw) {
    const float v = ld(row[iw]);
    const std::uint32_t take =
        0u - static_cast<std::uint32_t>((v > std::bit_cast<float>(best_bits)) | (v != v));
    best_bits = (best_bits & ~take) | (std::bit_cast<std::uint32_t>(v) & take);
    at_bits = (at_bits & ~take) | (static_cast<std::uint32_t>(base + iw) & take);
  }
  best = std::bit_cast<float>(best_bits);
  at = static_cast<std::int32_t>(at_bits);
}

// One output of the nchw forward, window by window (edges, adaptive and global windows). A window
// of whole rows (global pooling, adaptive pooling to one column) is one contiguous run of the
// plane, scanned as a single wide row: its order is row-major order and its positions are the
// plane's, so the maximum and index are the row-by-row scan's, and small planes (7x7) get the wide
// rows' vector partials instead of a serial chain per 7-element row.
template <class T>
void forward_one(const Shape& s, const T* xp, const PoolAxis::Span& sh, const PoolAxis::Span& sw, float inv,
                 T* y, std::int32_t* idx) {
  const bool whole_rows = sw.begin == 0 && sw.end == s.w;
  if (s.mode == PoolMode::max) {
    float best = -std::numeric_limits<float>::infinity();
    auto at = static_cast<std::int32_t>(sh.begin * s.w + sw.begin);
    if (whole_rows) {
      row_max(xp, 0, sh.begin * s.w, sh.end * s.w, best, at);
    } else {
      for (std::int64_t ih = sh.begin; ih < sh.end; ++ih)
        row_max(xp + ih * s.w, ih * s.w, sw.begin, sw.end, best, at);
    }
    if (y != nullptr) *y = st<T>(best);
    if (idx != nullptr) *idx = at;
  } else {
    float sum = 0;
    if (whole_rows) {
      sum = row_sum(xp, sh.begin * s.w, sh.end * s.w);
    } else {
      for (std::int64_t ih = sh.begin; ih < sh.end; ++ih) sum += row_sum(xp + ih * s.w, sw.begin, sw.end);
    }
    *y = st<T>(sum * inv);
  }
}

// kBlock outputs of one row whose windows are whole kernels inside the row: the lanes are
// independent outputs, each scanning its window by the rule, so the compare-and-blend chains of
// neighbouring outputs overlap instead of one output's taps waiting on each other.
constexpr std::int64_t kBlock = 8;
template <class T>
void forward_block(const Shape& s, const T* xp, const PoolAxis::Span& sh, std::int64_t ow0, const float* inv,
                   T* y, std::int32_t* idx) {
  const std::int64_t sw = s.aw.stride, k = s.aw.kernel;
  const std::int64_t iw0 = ow0 * sw - s.aw.pad;
  if (s.mode == PoolMode::max) {
    float best[kBlock];
    std::int32_t at[kBlock];
#if defined(__SSE2__)
    // Two SSE2 vectors of 4 outputs: the x86-64 baseline, with blends for the rule.
    __m128 b0 = _mm_set1_ps(-std::numeric_limits<float>::infinity()), b1 = b0;
    const auto first = static_cast<std::int32_t>(sh.begin * s.w + iw0);
    const auto st32 = static_cast<std::int32_t>(sw);
    const __m128i lane0 = _mm_setr_epi32(0, st32, 2 * st32, 3 * st32);
    const __m128i lane1 = _mm_add_epi32(lane0, _mm_set1_epi32(4 * st32));
    __m128i a0 = _mm_add_epi32(_mm_set1_epi32(first), lane0),
            a1 = _mm_add_epi32(_mm_set1_epi32(first), lane1);
    for (std::int64_t ih = sh.begin; ih < sh.end; ++ih) {
      const T* row = xp + ih * s.w + iw0;
      for (std::int64_t kx = 0; kx < k; ++kx) {
        float buf[kBlock];
        for (std::int64_t l = 0; l < kBlock; ++l) buf[l] = ld(row[l * sw + kx]);
        const __m128 v0 = _mm_loadu_ps(buf), v1 = _mm_loadu_ps(buf + 4);
        const __m128i pos = _mm_set1_epi32(static_cast<std::int32_t>(ih * s.w + iw0 + kx));
        const __m128 t0 = _mm_or_ps(_mm_cmpgt_ps(v0, b0), _mm_cmpunord_ps(v0, v0));
        const __m128 t1 = _mm_or_ps(_mm_cmpgt_ps(v1, b1), _mm_cmpunord_ps(v1, v1));
        b0 = _mm_or_ps(_mm_and_ps(t0, v0), _mm_andnot_ps(t0, b0));
        b1 = _mm_or_ps(_mm_and_ps(t1, v1), _mm_andnot_ps(t1, b1));
        const __m128i m0 = _mm_castps_si128(t0), m1 = _mm_castps_si128(t1);
        a0 = _mm_or_si128(_mm_and_si128(m0, _mm_add_epi32(pos, lane0)), _mm_andnot_si128(m0, a0));
        a1 = _mm_or_si128(_mm_and_si128(m1, _mm_add_epi32(pos, lane1)), _mm_andnot_si128(m1, a1));
      }
    }
    _mm_storeu_ps(best, b0);
    _mm_storeu_ps(best + 4, b1);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(at), a0);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(at + 4), a1);
#else
    for (std::int64_t l = 0; l < kBlock; ++l) {
      best[l] = -std::numeric_limits<float>::infinity();
      at[l] = static_cast<std::int32_t>(sh.begin * s.w + iw0 + l * sw);
    }
    for (std::int64_t ih = sh.begin; ih < sh.end; ++ih) {
      const T* row = xp + ih * s.w + iw0;
      for (std::int64_t kx = 0; kx < k; ++kx) {
        for (std::int64_t l = 0; l < kBlock; ++l) {
          const float v = ld(row[l * sw + kx]);
          const bool take = (v > best[l]) | (v != v);
          best[l] = take ? v : best[l];
          at[l] = take ? static_cast<std::int32_t>(ih * s.w + iw0 + l * sw + kx) : at[l];
        }
      }
    }
#endif
    for (std::int64_t l = 0; l < kBlock; ++l) {
      if (y != nullptr) y[l] = st<T>(best[l]);
      if (idx != nullptr) idx[l] = at[l];
    }
  } else {
    float sum[kBlock] = {};
    for (std::int64_t ih = sh.begin; ih < sh.end; ++ih) {
      const T* row = xp + ih * s.w + iw0;
      for (std::int64_t kx = 0; kx < k; ++kx) {
        for (std::int64_t l = 0; l < kBlock; ++l) sum[l] += ld(row[l * sw + kx]);
      }
    }
    for (std::int64_t l = 0; l < kBlock; ++l) y[l] = st<T>(sum[l] * inv[l]);
  }
}

// Forward. `y` or `idx` may be null (finding the maxima for backward writes indices only).
template <class T>
void forward_nchw(const Shape& s, const T* x, T* y, std::int32_t* idx, const std::vector<float>& inv) {
  const std::int64_t plane_in = s.h * s.w, plane_out = s.oh * s.ow;
  if constexpr (std::is_same_v<T, float>) {
    // f32 max values alone (inference): whole vectors of outputs, no index beside each value.
    if (s.mode == PoolMode::max && y != nullptr && idx == nullptr && !s.aw.adaptive &&
        avx512::max_pool_plane_fits(s.aw.stride) && cpu_has_avx512()) {
      const avx512::MaxPoolPlane g = plane_windows(s);
      std::vector<std::uint16_t> masks(static_cast<std::size_t>(avx512::max_pool_plane_masks(g)));
      avx512::max_pool_plane_edge_masks(g, masks.data());
      // Prefetching the next plane pays where the planes come from memory (as for backward).
      const bool prefetch =
          s.n * s.c * plane_in * static_cast<std::int64_t>(sizeof(float)) > kThreadShareBytes;
      for_plane_shares(s, [&](std::int64_t p0, std::int64_t p1) {
        // Written before read, so its contents on entry do not matter.
        ThreadScratch slot(ThreadScratch::kFirst);
        float* scratch = slot.get(avx512::max_pool_plane_scratch(g));
        for (std::int64_t pl = p0; pl < p1; ++pl) {
          const float* next = prefetch && pl + 1 < p1 ? x + (pl + 1) * plane_in : nullptr;
          avx512::max_pool_plane(g, masks.data(), x + pl * plane_in, y + pl * plane_out, scratch, next);
        }
      });
      return;
    }
    if (y != nullptr && avg_takes_avx512(s)) {
      for_avg_planes(s, inv,
                     [&](const avx512::AvgPoolPlane& g, float* scratch, std::int64_t p0, std::int64_t p1) {
                       for (std::int64_t pl = p0; pl < p1; ++pl)
                         avx512::avg_pool_plane_forward(g, x + pl * plane_in, y + pl * plane_out, scratch);
                     });
      return;
    }
    // f32 averages over whole planes (global pooling): the plane is one contiguous run.
    const bool whole_plane = s.oh == 1 && s.ow == 1 && s.span_h[0].begin == 0 && s.span_h[0].end == s.h &&
                             s.span_w[0].begin == 0 && s.span_w[0].end == s.w;
    // f32 global maxima by value alone: a vmaxps reduction, without the index per lane that the
    // scan under the rule keeps (which made it compute-bound); a plane holding a NaN or whose largest value
    // is a zero takes the scan under the full rule. Planes from memory fetch the next plane of the share as
    // they go.
    if (s.mode == PoolMode::max && whole_plane && y != nullptr && idx == nullptr && cpu_has_avx512()) {
      const bool prefetch =
          s.n * s.c * plane_in * static_cast<std::int64_t>(sizeof(float)) > kThreadShareBytes;
      for_plane_shares(s, [&](std::int64_t p0, std::int64_t p1) {
        for (std::int64_t pl = p0; pl < p1; ++pl) {
          const float* xp = x + pl * plane_in;
          const float* next = prefetch && pl + 1 < p1 ? xp + plane_in : nullptr;
          if (!avx512::plane_max(xp, plane_in, next, y[pl]))
            forward_one(s, xp, s.span_h[0], s.span_w[0], inv[0], y + pl, nullptr);
        }
      });
      return;
    }
    if (s.mode != PoolMode::max && whole_plane && cpu_has_avx512()) {
      const float k = inv[0];
      for_plane_shares(s, [&](std::int64_t p0, std::int64_t p1) {
        for (std::int64_t pl = p0; pl < p1; ++pl) y[pl] = avx512::sum(x + pl * plane_in, plane_in) * k;
      });
      return;
    }
  }
  parallel_for(0, s.n * s.c, [&](std::int64_t p0, std::int64_t p1) {
    for (std::int64_t pl = p0; pl < p1; ++pl) {
      const T* xp = x + pl * plane_in;
      for (std::int64_t oh = 0; oh < s.oh; ++oh) {
        const PoolAxis::Span& sh = s.span_h[oh];
        const std::int64_t row = pl * plane_out + oh * s.ow;
        const float* irow = inv.data() + oh * s.ow;
        T* yrow = y != nullptr ? y + row : nullptr;
        std::int32_t* irow_idx = idx != nullptr ? idx + row : nullptr;
        std::int64_t ow = 0;
        const auto one = [&](std::int64_t o) {
          forward_one(s, xp, sh, s.span_w[o], irow[o], yrow != nullptr ? yrow + o : nullptr,
                      irow_idx != nullptr ? irow_idx + o : nullptr);
        };
        for (; ow < s.ow_lo; ++ow) one(ow);
        for (; ow + kBlock <= s.ow_hi; ow += kBlock) {
          forward_block(s, xp, sh, ow, irow + ow, yrow != nullptr ? yrow + ow : nullptr,
                        irow_idx != nullptr ? irow_idx + ow : nullptr);
        }
        for (; ow < s.ow; ++ow) one(ow);
      }
    }
  });
}

template <class T>
void forward_nhwc(const Shape& s, const T* x, T* y, std::int32_t* idx, const std::vector<float>& inv) {
  const std::int64_t C = s.c;
  parallel_for(0, s.n * s.oh, [&](std::int64_t r0, std::int64_t r1) {
    std::vector<float> acc(static_cast<std::size_t>(C));
    std::vector<std::int32_t> at(static_cast<std::size_t>(C));
    float* a = acc.data();
    std::int32_t* ai = at.data();
    for (std::int64_t r = r0; r < r1; ++r) {
      const std::int64_t n = r / s.oh, oh = r % s.oh;
      const PoolAxis::Span& sh = s.span_h[oh];
      for (std::int64_t ow = 0; ow < s.ow; ++ow) {
        const PoolAxis::Span& sw = s.span_w[ow];
        const std::int64_t o = (r * s.ow + ow) * C;
        if (s.mode == PoolMode::max) {
          const auto first = static_cast<std::int32_t>(sh.begin * s.w + sw.begin);
          std::fill(a, a + C, -std::numeric_limits<float>::infinity());
          std::fill(ai, ai + C, first);
          for (std::int64_t ih = sh.begin; ih < sh.end; ++ih) {
            for (std::int64_t iw = sw.begin; iw < sw.end; ++iw) {
              const T* xr = x + ((n * s.h + ih) * s.w + iw) * C;
              const auto pos = static_cast<std::int32_t>(ih * s.w + iw);
              for (std::int64_t c = 0; c < C; ++c) {
                const float v = ld(xr[c]);
                const bool take = v > a[c] || v != v;
                a[c] = take ? v : a[c];
                ai[c] = take ? pos : ai[c];
              }
            }
          }
          if (y != nullptr) {
            for (std::int64_t c = 0; c < C; ++c) y[o + c] = st<T>(a[c]);
          }
          if (idx != nullptr) std::copy(ai, ai + C, idx + o);
        } else {
          std::fill(a, a + C, 0.0f);
          for (std::int64_t ih = sh.begin; ih < sh.end; ++ih) {
            for (std::int64_t iw = sw.begin; iw < sw.end; ++iw) {
              const T* xr = x + ((n * s.h + ih) * s.w + iw) * C;
              for (std::int64_t c = 0; c < C; ++c) a[c] += ld(xr[c]);
            }
          }
          const float k = inv[oh * s.ow + ow];
          for (std::int64_t c = 0; c < C; ++c) y[o + c] = st<T>(a[c] * k);
        }
      }
    }
  });
}

// Backward. nchw scatters each output's gradient into a float copy of its plane (one task owns a
// plane, so nothing is shared and the order is fixed): O(outputs) for max, where a gather would
// visit every input's covering outputs. Max adds its gradient at the kept or found index only when
// that index lies in the output's own window, the problem's rule for foreign indices.
template <class T>
void backward_nchw(const Shape& s, const T* dy, const std::int32_t* idx, T* dx,
                   const std::vector<float>& inv) {
  const std::int64_t plane_in = s.h * s.w, plane_out = s.oh * s.ow;
  const bool whole_plane = s.oh == 1 && s.ow == 1 && s.span_h[0].begin == 0 && s.span_h[0].end == s.h &&
                           s.span_w[0].begin == 0 && s.span_w[0].end == s.w;
  if (whole_plane && (s.mode != PoolMode::max || idx != nullptr)) {
    // A window of the whole plane (global pooling): every input gets the output's share (average),
    // or 0 but the kept or found maximum, which gets the output's gradient (max; an index outside
    // the plane is in no window, so the plane stays 0).
    const bool bypass_cache =
        s.n * s.c * plane_in * static_cast<std::int64_t>(sizeof(T)) >= kBypassCacheBytes;
    const bool avx512_fill = std::is_same_v<T, float> && cpu_has_avx512();
    const bool is_max = s.mode == PoolMode::max;
    for_plane_shares(s, [&](std::int64_t p0, std::int64_t p1) {
      for (std::int64_t pl = p0; pl < p1; ++pl) {
        T* out = dx + pl * plane_in;
        const float value = is_max ? 0.0f : ld(dy[pl]) * inv[0];
        if constexpr (std::is_same_v<T, float>) {
          if (avx512_fill) {
            avx512::fill_f32(out, plane_in, value, bypass_cache);
          } else {
            fill_f32(out, plane_in, value, bypass_cache);
          }
        } else {
          std::fill_n(out, plane_in, st<T>(value));
        }
        if (is_max) {
          const std::int64_t at = idx[pl];
          // 0 + g, as the scatter into a zeroed plane gives (a -0 gradient lands as +0).
          if (at >= 0 && at < plane_in) out[at] = st<T>(0.0f + ld(dy[pl]));
        }
      }
    });
    return;
  }
  if constexpr (std::is_same_v<T, float>) {
    if (avg_takes_avx512(s)) {
      for_avg_planes(s, inv,
                     [&](const avx512::AvgPoolPlane& g, float* scratch, std::int64_t p0, std::int64_t p1) {
                       for (std::int64_t pl = p0; pl < p1; ++pl)
                         avx512::avg_pool_plane_backward(g, dy + pl * plane_out, dx + pl * plane_in, scratch);
                     });
      return;
    }
  }
  parallel_for(0, s.n * s.c, [&](std::int64_t p0, std::int64_t p1) {
    std::vector<float> acc(static_cast<std::size_t>(plane_in));
    for (std::int64_t pl = p0; pl < p1; ++pl) {
      const T* g = dy + pl * plane_out;
      const std::int32_t* ip = idx != nullptr ? idx + pl * plane_out : nullptr;
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (std::int64_t oh = 0; oh < s.oh; ++oh) {
        const PoolAxis::Span& sh = s.span_h[oh];
        for (std::int64_t ow = 0; ow < s.ow; ++ow) {
          const PoolAxis::Span& sw = s.span_w[ow];
          const std::int64_t o = oh * s.ow + ow;
          const float go = ld(g[o]);
          if (ip != nullptr) {
            const std::int64_t at = ip[o];
            for (std::int64_t ih = sh.begin; ih < sh.end; ++ih) {
              const std::int64_t col = at - ih * s.w;
              if (col >= sw.begin && col < sw.end) {
                acc[static_cast<std::size_t>(at)] += go;
                break;
              }
            }
          } else {
            const float share = go * inv[o];
            for (std::int64_t ih = sh.begin; ih < sh.end; ++ih) {
              float* row = acc.data() + ih * s.w;
              for (std::int64_t iw = sw.begin; iw < sw.end; ++iw) row[iw] += share;
            }
          }
        }
      }
      T* out = dx + pl * plane_in;
      for (std::int64_t i = 0; i < plane_in; ++i) out[i] = st<T>(acc[i]);
    }
  });
}

template <class T>
void backward_nhwc(const Shape& s, const T* dy, const std::int32_t* idx, T* dx,
                   const std::vector<float>& inv) {
  const std::int64_t C = s.c;
  parallel_for(0, s.n * s.h, [&](std::int64_t r0, std::int64_t r1) {
    std::vector<float> acc(static_cast<std::size_t>(C));
    float* a = acc.data();
    for (std::int64_t r = r0; r < r1; ++r) {
      const std::int64_t n = r / s.h, ih = r % s.h;
      const std::int64_t oh0 = s.cover_h[ih].first, oh1 = s.cover_h[ih].last;
      for (std::int64_t iw = 0; iw < s.w; ++iw) {
        const std::int64_t ow0 = s.cover_w[iw].first, ow1 = s.cover_w[iw].last;
        const auto pos = static_cast<std::int32_t>(ih * s.w + iw);
        std::fill(a, a + C, 0.0f);
        for (std::int64_t oh = oh0; oh <= oh1; ++oh) {
          for (std::int64_t ow = ow0; ow <= ow1; ++ow) {
            const std::int64_t o = ((n * s.oh + oh) * s.ow + ow) * C;
            const T* g = dy + o;
            if (idx != nullptr) {
              const std::int32_t* ip = idx + o;
              for (std::int64_t c = 0; c < C; ++c) a[c] += ip[c] == pos ? ld(g[c]) : 0.0f;
            } else {
              const float k = inv[oh * s.ow + ow];
              for (std::int64_t c = 0; c < C; ++c) a[c] += ld(g[c]) * k;
            }
          }
        }
        T* out = dx + ((n * s.h + ih) * s.w + iw) * C;
        for (std::int64_t c = 0; c < C; ++c) out[c] = st<T>(a[c]);
      }
    }
  });
}

// f32 nchw max backward on the AVX-512 kernels: without kept indices, windows 3 columns wide of
// column stride 2 padded by 1 take the one-pass kernel of pool_max_backward_k3s2_avx512.hpp, and its
// planes holding a NaN and all other windows the gather of pool_max_backward_avx512.hpp, with the
// kept indices or finding the maxima from x; false where neither takes the problem.
bool max_backward_avx512(const Shape& s, const float* x, const std::int32_t* kept, const float* dy,
                         float* dx) {
  if (s.mode != PoolMode::max || s.nhwc || s.aw.adaptive ||
      !avx512::pool_plane_fits(s.aw.stride, s.aw.kernel) || !cpu_has_avx512())
    return false;
  const avx512::MaxPoolBackwardPlane g = plane_windows(s);
  const std::int64_t plane_in = s.h * s.w, plane_out = s.oh * s.ow;
  const bool one_pass = kept == nullptr && avx512::max_pool_backward_k3s2_fits(g);
  // Prefetching the next plane pays where the planes come from memory; within the caches its
  // instructions cost a tenth of the kernel.
  const bool prefetch = s.n * s.c * plane_in * static_cast<std::int64_t>(sizeof(float)) > kThreadShareBytes;
  for_plane_shares(s, [&](std::int64_t p0, std::int64_t p1) {
    ThreadScratch gather_scratch(ThreadScratch::kFirst), one_pass_scratch(ThreadScratch::kSecond);
    bool gather_prepared = false;
    float* const one_pass_floats =
        one_pass ? one_pass_scratch.get(avx512::max_pool_backward_k3s2_scratch(g)) : nullptr;
    const auto gather = [&](std::int64_t pl) {
      float* scratch = gather_scratch.get(avx512::max_pool_backward_scratch(g));
      if (!gather_prepared) avx512::max_pool_backward_prepare(g, scratch), gather_prepared = true;
      avx512::max_pool_plane_backward(g, kept == nullptr ? x + pl * plane_in : nullptr,
                                      kept == nullptr ? nullptr : kept + pl * plane_out, dy + pl * plane_out,
                                      dx + pl * plane_in, scratch);
    };
    for (std::int64_t pl = p0; pl < p1; ++pl) {
      if (one_pass) {
        avx512::NextPlane next;
        if (prefetch && pl + 1 < p1)
          next = {x + (pl + 1) * plane_in, dy + (pl + 1) * plane_out, dx + (pl + 1) * plane_in};
        if (avx512::max_pool_plane_backward_k3s2(g, x + pl * plane_in, dy + pl * plane_out,
                                                 dx + pl * plane_in, next, one_pass_floats))
          continue;
      }
      gather(pl);
    }
  });
  return true;
}

// A problem's sizes, window tables and inverse divisors.
struct Tables {
  PoolProblem problem;
  Shape shape;
  std::vector<float> inv;
  explicit Tables(const PoolProblem& p) : problem(p), shape(shape_of(p)), inv(inverse_divisors(shape)) {}
};

// The tables of p, kept by the calling thread for the last few problems it ran: models and
// benchmarks run the same problems again and again (forward and backward in turn), and remaking
// the tables, with their divisions per row, column and output, costs about a microsecond per call.
// Tables of more outputs than kKeptOutputs are made for the call alone, so a thread keeps little
// memory.
class TablesCache {
 public:
  const Tables& get(const PoolProblem& p) {
    if (p.out_h() * p.out_w() > kKeptOutputs) return *(alone_ = std::make_unique<Tables>(p));
    for (const auto& t : kept_) {
      if (t && t->problem == p) return *t;
    }
    auto& slot = kept_[next_];
    next_ = (next_ + 1) % kSlots;
    slot = std::make_unique<Tables>(p);
    return *slot;
  }

 private:
  static constexpr std::int64_t kKeptOutputs = std::int64_t{1} << 16;
  static constexpr std::size_t kSlots = 4;
  std::unique_ptr<Tables> kept_[kSlots];
  std::size_t next_ = 0;
  std::unique_ptr<Tables> alone_;
};

template <class T>
void compute(const PoolProblem& p, const PoolArgs& a) {
  thread_local TablesCache cache;
  const Tables& tables = cache.get(p);
  const Shape& s = tables.shape;
  const std::vector<float>& inv = tables.inv;
  const auto fwd = s.nhwc ? forward_nhwc<T> : forward_nchw<T>;
  const auto bwd = s.nhwc ? backward_nhwc<T> : backward_nchw<T>;
  if (p.direction == dnn::PoolDirection::forward) {
    fwd(s, static_cast<const T*>(a.src), static_cast<T*>(a.dst),
        p.keep_indices ? static_cast<std::int32_t*>(a.indices) : nullptr, inv);
    return;
  }
  if constexpr (std::is_same_v<T, float>) {
    if (max_backward_avx512(s, static_cast<const float*>(a.src),
                            p.keep_indices ? static_cast<const std::int32_t*>(a.indices) : nullptr,
                            static_cast<const float*>(a.diff_dst), static_cast<float*>(a.diff_src)))
      return;
  }
  const std::int32_t* idx = nullptr;
  if (p.mode == PoolMode::max) {
    if (p.keep_indices) {
      idx = static_cast<const std::int32_t*>(a.indices);
    } else {
      auto* found = static_cast<std::int32_t*>(a.workspace);
      fwd(s, static_cast<const T*>(a.src), nullptr, found, inv);
      idx = found;
    }
  }
  bwd(s, static_cast<const T*>(a.diff_dst), idx, static_cast<T*>(a.diff_src), inv);
}

class PoolDirect final : public dnn::PoolSolver {
 public:
  std::string_view name() const override { return "cpu.pool.direct"; }
  dnn::Applicability check(const PoolProblem&, const runtime::Device& device) const override {
    if (!device.is_cpu()) return dnn::Applicability::no("runs on the cpu backend only, not " + device.name());
    return dnn::Applicability::yes();
  }
  std::size_t workspace_bytes(const PoolProblem& p, const runtime::Device&) const override {
    if (p.direction != dnn::PoolDirection::backward || !p.recomputes_indices()) return 0;
    return static_cast<std::size_t>(p.dst_desc().elements()) * sizeof(std::int32_t);
  }
  void run(runtime::Stream& stream, const PoolProblem& problem, const PoolArgs& args) const override {
    const std::size_t need = workspace_bytes(problem, stream.device());
    if (args.workspace_bytes < need) {
      throw Error(Status::invalid_argument, std::string(name()) + ": workspace of " +
                                                std::to_string(args.workspace_bytes) + " bytes, needs " +
                                                std::to_string(need));
    }
    stream.launch(name(), [&] {
      stream.host_task([problem, args] {
        switch (problem.dtype) {
          case DType::f32:
            compute<float>(problem, args);
            return;
          case DType::f16:
            compute<Half>(problem, args);
            return;
          case DType::bf16:
            compute<BFloat>(problem, args);
            return;
          default:
            throw Error(Status::unsupported,
                        "cpu.pool.direct: dtype " + std::string(to_string(problem.dtype)));
        }
      });
    });
  }
  std::string detail(const PoolProblem& p, const runtime::Device&) const override {
    return p.layout == dnn::Layout::nhwc ? "rows, channels innermost" : "planes";
  }
};

}  // namespace

std::unique_ptr<dnn::PoolSolver> make_pool_direct() { return std::make_unique<PoolDirect>(); }

}  // namespace galley::backends::cpu
