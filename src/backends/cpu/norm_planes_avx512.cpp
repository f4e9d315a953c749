// See norm_planes_avx512.hpp. Compiled with AVX-512 F/BW/VL/DQ; nothing here instantiates a
// standard-library template (see sgemm_avx512.cpp).
#include "backends/cpu/norm_planes_avx512.hpp"

#include <immintrin.h>

#include "backends/cpu/avx512_lanes.hpp"

namespace galley::backends::cpu::avx512 {
namespace {

// Four accumulators of 8 doubles, merged pairwise.
struct Lanes {
  __m512d a = _mm512_setzero_pd(), b = _mm512_setzero_pd(), c = _mm512_setzero_pd(), d = _mm512_setzero_pd();
  double total() const {
    return _mm512_reduce_add_pd(_mm512_add_pd(_mm512_add_pd(a, b), _mm512_add_pd(c, d)));
  }
};

inline __m512d low_half(__m512 v) { return _mm512_cvtps_pd(_mm512_castps512_ps256(v)); }
inline __m512d high_half(__m512 v) {
  return _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
}

// Floats ahead of the loads that a plane sum asks into L1: one stream per core does not keep
// enough lines in flight for memory's bandwidth from the hardware prefetchers alone.
constexpr std::int64_t kAhead = 1024;

// Asks for the line of v + i + kAhead, clamped to the `readable` floats from v (at least 16, the
// caller's vector at i). Clamped rather than skipped: GCC 12 drops a prefetch under a condition in
// a loop.
inline void prefetch_ahead(const float* v, std::int64_t i, std::int64_t readable) {
  _mm_prefetch(reinterpret_cast<const char*>(v + min64(i + kAhead, readable - 16)), _MM_HINT_T0);
}

}  // namespace

double plane_sum(const float* v, std::int64_t n) {
  Lanes l;
  std::int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 p = _mm512_loadu_ps(v + i), q = _mm512_loadu_ps(v + i + 16);
    l.a = _mm512_add_pd(l.a, low_half(p));
    l.b = _mm512_add_pd(l.b, high_half(p));
    l.c = _mm512_add_pd(l.c, low_half(q));
    l.d = _mm512_add_pd(l.d, high_half(q));
  }
  double tail = 0;
  for (; i < n; ++i) tail += v[i];
  return l.total() + tail;
}

double plane_centered_squares(const float* v, std::int64_t n, double center) {
  Lanes l;
  const __m512d m = _mm512_set1_pd(center);
  const auto add = [&](__m512d& acc, __m512d x) {
    const __m512d d = _mm512_sub_pd(x, m);
    acc = _mm512_fmadd_pd(d, d, acc);
  };
  std::int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 p = _mm512_loadu_ps(v + i), q = _mm512_loadu_ps(v + i + 16);
    add(l.a, low_half(p));
    add(l.b, high_half(p));
    add(l.c, low_half(q));
    add(l.d, high_half(q));
  }
  double tail = 0;
  for (; i < n; ++i) {
    const double d = v[i] - center;
    tail += d * d;
  }
  return l.total() + tail;
}

void plane_shifted_moments(const float* v, std::int64_t n, std::int64_t readable, double center, double& s1,
                           double& s2) {
  // Differences, their sums and their squares' sums in f32 over runs of kRun vectors, each run's
  // sums then added in double: per vector a subtraction, an addition and an fma instead of four
  // conversions and six double operations. A run sums 8 values a lane, so its f32 error is within
  // 8 ulp of the sum of |d| (of d^2: all positive, so of the result itself); about the pivot, |d|
  // is on the scale of the deviation, so the mean and variance keep about 1e-6 of it at worst.
  // The differences are about the pivot rounded to f32 (exactly the pivot when it is a data
  // value), and the sums moved to the pivot itself at the end.
  constexpr std::int64_t kRun = 8;
  const float pivot = static_cast<float>(center);
  const __m512 m = _mm512_set1_ps(pivot);
  Lanes l1, l2;
  std::int64_t i = 0;
  for (; i + 16 * kRun <= n; i += 16 * kRun) {
    __m512 a1 = _mm512_setzero_ps(), b1 = _mm512_setzero_ps(), a2 = _mm512_setzero_ps(),
           b2 = _mm512_setzero_ps();
    for (std::int64_t k = 0; k < kRun; k += 2) {
      prefetch_ahead(v, i + 16 * k, readable);
      prefetch_ahead(v, i + 16 * k + 16, readable);
      const __m512 d = _mm512_sub_ps(_mm512_loadu_ps(v + i + 16 * k), m);
      const __m512 e = _mm512_sub_ps(_mm512_loadu_ps(v + i + 16 * k + 16), m);
      a1 = _mm512_add_ps(a1, d);
      a2 = _mm512_fmadd_ps(d, d, a2);
      b1 = _mm512_add_ps(b1, e);
      b2 = _mm512_fmadd_ps(e, e, b2);
    }
    const __m512 r1 = _mm512_add_ps(a1, b1), r2 = _mm512_add_ps(a2, b2);
    l1.a = _mm512_add_pd(l1.a, low_half(r1));
    l1.b = _mm512_add_pd(l1.b, high_half(r1));
    l2.a = _mm512_add_pd(l2.a, low_half(r2));
    l2.b = _mm512_add_pd(l2.b, high_half(r2));
  }
  double tail1 = 0, tail2 = 0;
  for (; i < n; ++i) {
    const double d = static_cast<double>(v[i]) - pivot;
    tail1 += d;
    tail2 += d * d;
  }
  const double sum1 = l1.total() + tail1, sum2 = l2.total() + tail2;
  // sum (v - center) = sum1 + n t and sum (v - center)^2 = sum2 + 2 t sum1 + n t^2, t = pivot - center.
  const double t = static_cast<double>(pivot) - center;
  s1 = sum1 + static_cast<double>(n) * t;
  s2 = sum2 + 2 * t * sum1 + static_cast<double>(n) * t * t;
}

void plane_gradient_sums(const float* g, const float* x, std::int64_t n, std::int64_t readable, double center,
                         double& sum_g, double& sum_gx) {
  Lanes sg, sx;
  const __m512d m = _mm512_set1_pd(center);
  const auto add = [&](__m512d& acc_g, __m512d& acc_x, __m512d gv, __m512d xv) {
    acc_g = _mm512_add_pd(acc_g, gv);
    acc_x = _mm512_fmadd_pd(gv, _mm512_sub_pd(xv, m), acc_x);
  };
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    prefetch_ahead(g, i, readable);
    prefetch_ahead(x, i, readable);
    const __m512 gp = _mm512_loadu_ps(g + i), xp = _mm512_loadu_ps(x + i);
    add(sg.a, sx.a, low_half(gp), low_half(xp));
    add(sg.b, sx.b, high_half(gp), high_half(xp));
  }
  double tail_g = 0, tail_x = 0;
  for (; i < n; ++i) {
    tail_g += g[i];
    tail_x += static_cast<double>(g[i]) * (x[i] - center);
  }
  sum_g = sg.total() + tail_g;
  sum_gx = sx.total() + tail_x;
}

namespace {

// f(i, mask) -> the 16 (or masked) outputs from element i, stored to o[0, n): with plain stores, or
// streamed (non-temporal) from the first 64-byte boundary of o on, its head and tail masked, then
// fenced so that the caller's later stores and the pool's hand-over see them.
template <bool kStream, class F>
inline void store_span(float* o, std::int64_t n, const F& f) {
  std::int64_t i = 0;
  if constexpr (kStream) {
    const auto misaligned = static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(o) % 64);
    const std::int64_t head = min64(n, misaligned == 0 ? 0 : (64 - misaligned) / 4);
    if (head > 0) {
      const __mmask16 m = lanes(head);
      _mm512_mask_storeu_ps(o, m, f(0, m));
      i = head;
    }
    for (; i + 16 <= n; i += 16) _mm512_stream_ps(o + i, f(i, __mmask16(0xffff)));
  } else {
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(o + i, f(i, __mmask16(0xffff)));
  }
  if (i < n) {
    const __mmask16 m = lanes(n - i);
    _mm512_mask_storeu_ps(o + i, m, f(i, m));
  }
  if constexpr (kStream) _mm_sfence();
}

}  // namespace

void plane_map_one(const float* u, float* o, std::int64_t n, float a, float center, float center_lo, float c0,
                   bool stream) {
  // a * ((x - center) - center_lo) + c0 as a * (x - center) + (c0 - a * center_lo): x - center is
  // exact for x near the centre, where it matters, and the fused step rounds once.
  const __m512 ka = _mm512_set1_ps(a), km = _mm512_set1_ps(center), kc = _mm512_set1_ps(c0 - a * center_lo);
  const auto map = [&](std::int64_t i, __mmask16 m) {
    return _mm512_fmadd_ps(ka, _mm512_sub_ps(_mm512_maskz_loadu_ps(m, u + i), km), kc);
  };
  if (stream) {
    store_span<true>(o, n, map);
  } else {
    store_span<false>(o, n, map);
  }
}

void plane_map_two(const float* u, const float* v, float* o, std::int64_t n, float a, float b, float center,
                   float c0, bool stream) {
  const __m512 ka = _mm512_set1_ps(a), kb = _mm512_set1_ps(b), km = _mm512_set1_ps(center),
               kc = _mm512_set1_ps(c0);
  const auto map = [&](std::int64_t i, __mmask16 m) {
    return _mm512_fmadd_ps(ka, _mm512_maskz_loadu_ps(m, u + i),
                           _mm512_fmadd_ps(kb, _mm512_sub_ps(_mm512_maskz_loadu_ps(m, v + i), km), kc));
  };
  if (stream) {
    store_span<true>(o, n, map);
  } else {
    store_span<false>(o, n, map);
  }
}

namespace {

// Rows per run of row_sums_in_runs(): each channel's sums of a run add up in f32 (8 values a lane,
// within 8 ulp of the run's own magnitude), then in double.
constexpr std::int64_t kRowRun = 8;

// Bytes of x (and dy) per block of rows that every chunk of channels walks before the next block:
// the first chunk's walk brings the block into L1, the other chunks' walks find it there. Without
// blocks each chunk walked all rows, so a tensor wider than the caches came from memory once per
// chunk.
constexpr std::int64_t kRowBlockBytes = 32 << 10;

// One chunk of NV vectors of channels from k0 over rows [r_begin, r_end) (r_begin a multiple of
// kRowRun): the pivots (the centres rounded to f32) and the double sums stay in registers, the f32
// run sums of kRowRun rows go into them; the double sums continue acc0 and acc1, so blocks of rows
// taken in order add up exactly as all rows at once would.
template <RowSum kWhat, int NV>
inline void row_sums_chunk(const float* x, const float* dy, std::int64_t r_begin, std::int64_t r_end,
                           std::int64_t ahead, std::int64_t rows, std::int64_t c, std::int64_t k0,
                           const double* center, double* acc0, double* acc1) {
  __m512 pivot[NV];
  __mmask16 mask[NV];
  __m512d sums[NV][4];  // acc0 low and high 8 lanes, acc1 low and high
#pragma GCC unroll 4
  for (int v = 0; v < NV; ++v) {
    const std::int64_t k = k0 + 16 * v;
    mask[v] = lanes(c - k);
    const auto m_lo = static_cast<__mmask8>(mask[v]), m_hi = static_cast<__mmask8>(mask[v] >> 8);
    pivot[v] =
        _mm512_insertf32x8(_mm512_castps256_ps512(_mm512_cvtpd_ps(_mm512_maskz_loadu_pd(m_lo, center + k))),
                           _mm512_cvtpd_ps(_mm512_maskz_loadu_pd(m_hi, center + k + 8)), 1);
    sums[v][0] = _mm512_maskz_loadu_pd(m_lo, acc0 + k);
    sums[v][1] = _mm512_maskz_loadu_pd(m_hi, acc0 + k + 8);
    sums[v][2] = _mm512_maskz_loadu_pd(m_lo, acc1 + k);
    sums[v][3] = _mm512_maskz_loadu_pd(m_hi, acc1 + k + 8);
  }
  for (std::int64_t r0 = r_begin; r0 < r_end; r0 += kRowRun) {
    const std::int64_t r1 = min64(r_end, r0 + kRowRun);
    __m512 a[NV], b[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) a[v] = b[v] = _mm512_setzero_ps();
    for (std::int64_t r = r0; r < r1; ++r) {
      if (r + ahead < rows) {
        // This chunk's lines of the next block's row, in L1 by the time the walk gets there.
        const std::int64_t next = (r + ahead) * c + k0;
        _mm_prefetch(reinterpret_cast<const char*>(x + next), _MM_HINT_T0);
        if (NV == 2) _mm_prefetch(reinterpret_cast<const char*>(x + next + 16), _MM_HINT_T0);
        if constexpr (kWhat == RowSum::gradient) {
          _mm_prefetch(reinterpret_cast<const char*>(dy + next), _MM_HINT_T0);
          if (NV == 2) _mm_prefetch(reinterpret_cast<const char*>(dy + next + 16), _MM_HINT_T0);
        }
      }
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) {
        const std::int64_t at = r * c + k0 + 16 * v;
        const __m512 d = _mm512_maskz_sub_ps(mask[v], _mm512_maskz_loadu_ps(mask[v], x + at), pivot[v]);
        if constexpr (kWhat == RowSum::shifted_moments) {
          a[v] = _mm512_add_ps(a[v], d);
          b[v] = _mm512_fmadd_ps(d, d, b[v]);
        } else {
          const __m512 g = _mm512_maskz_loadu_ps(mask[v], dy + at);
          a[v] = _mm512_add_ps(a[v], g);
          b[v] = _mm512_fmadd_ps(g, d, b[v]);
        }
      }
    }
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      sums[v][0] = _mm512_add_pd(sums[v][0], low_half(a[v]));
      sums[v][1] = _mm512_add_pd(sums[v][1], high_half(a[v]));
      sums[v][2] = _mm512_add_pd(sums[v][2], low_half(b[v]));
      sums[v][3] = _mm512_add_pd(sums[v][3], high_half(b[v]));
    }
  }
#pragma GCC unroll 4
  for (int v = 0; v < NV; ++v) {
    const std::int64_t k = k0 + 16 * v;
    const __mmask8 ms[2] = {static_cast<__mmask8>(mask[v]), static_cast<__mmask8>(mask[v] >> 8)};
    for (int h = 0; h < 2; ++h) {
      _mm512_mask_storeu_pd(acc0 + k + 8 * h, ms[h], sums[v][h]);
      _mm512_mask_storeu_pd(acc1 + k + 8 * h, ms[h], sums[v][2 + h]);
    }
  }
}

// shifted_moments and gradient about the centres rounded to f32, two vectors of channels at a time
// over a block of rows (row_sums_chunk), block after block, then moved to the centres themselves;
// acc0 and acc1 start at 0. With t = pivot - centre and d = x - pivot: sum (x - centre) = sum d + n t,
// sum (x - centre)^2 = sum d^2 + 2 t sum d + n t^2, and sum dy (x - centre) = sum dy d + t sum dy.
template <RowSum kWhat>
void row_sums_in_runs(const float* x, const float* dy, std::int64_t rows, std::int64_t c,
                      const double* center, double* acc0, double* acc1) {
  static_assert(kWhat == RowSum::shifted_moments || kWhat == RowSum::gradient);
  const std::int64_t row_bytes = c * 4 * (kWhat == RowSum::gradient ? 2 : 1);
  const std::int64_t block = max64(kRowRun, kRowBlockBytes / row_bytes / kRowRun * kRowRun);
  for (std::int64_t r0 = 0; r0 < rows; r0 += block) {
    const std::int64_t r1 = min64(rows, r0 + block);
    for (std::int64_t k0 = 0; k0 < c; k0 += 32) {
      if (c - k0 > 16) {
        row_sums_chunk<kWhat, 2>(x, dy, r0, r1, block, rows, c, k0, center, acc0, acc1);
      } else {
        row_sums_chunk<kWhat, 1>(x, dy, r0, r1, block, rows, c, k0, center, acc0, acc1);
      }
    }
  }
  const auto n = static_cast<double>(rows);
  for (std::int64_t k = 0; k < c; ++k) {
    const double t = static_cast<double>(static_cast<float>(center[k])) - center[k];
    if constexpr (kWhat == RowSum::shifted_moments) {
      acc1[k] += 2 * t * acc0[k] + n * t * t;
      acc0[k] += n * t;
    } else {
      acc1[k] += t * acc0[k];
    }
  }
}

}  // namespace

void nhwc_row_sums(RowSum what, const float* x, const float* dy, std::int64_t rows, std::int64_t c,
                   const double* center, double* acc0, double* acc1) {
  switch (what) {
    case RowSum::shifted_moments:
      return row_sums_in_runs<RowSum::shifted_moments>(x, dy, rows, c, center, acc0, acc1);
    case RowSum::gradient:
      return row_sums_in_runs<RowSum::gradient>(x, dy, rows, c, center, acc0, acc1);
  }
}

namespace {

// Rows a block of which goes through one chunk of channels before the next chunk: the chunk's
// coefficients stay in registers across the block's rows, whose lines stay in L1 for the next chunk.
constexpr std::int64_t kMapRows = 16;
constexpr int kMapVectors = 4;  // 64 channels a chunk

// One chunk of NV vectors of channels from channel k0 over rows [r0, r1): coefficients loaded once
// (NV fixed, so they live in registers), then row(at, m, coef) for each row's vectors.
template <int NV, int kCoefs, class LoadCoefs, class MapRow>
inline void chunk_rows(std::int64_t r0, std::int64_t r1, std::int64_t c, std::int64_t k0,
                       const LoadCoefs& coefficients, const MapRow& row) {
  __m512 coef[NV][kCoefs];
  __mmask16 mask[NV];
#pragma GCC unroll 4
  for (int v = 0; v < NV; ++v) {
    mask[v] = lanes(c - k0 - 16 * v);
    coefficients(k0 + 16 * v, mask[v], coef[v]);
  }
  for (std::int64_t r = r0; r < r1; ++r) {
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) row(r * c + k0 + 16 * v, mask[v], coef[v]);
  }
}

// For each block of kMapRows rows and each chunk of up to kMapVectors vectors of channels:
// coefficients(k, m, coef) loads vector k's coefficients (lanes m), then row(at, m, coef) maps the
// vector of a row at element `at`.
template <int kCoefs, class LoadCoefs, class MapRow>
inline void rows_by_chunks(std::int64_t rows, std::int64_t c, const LoadCoefs& coefficients,
                           const MapRow& row) {
  for (std::int64_t r0 = 0; r0 < rows; r0 += kMapRows) {
    const std::int64_t r1 = min64(rows, r0 + kMapRows);
    for (std::int64_t k0 = 0; k0 < c; k0 += 16 * kMapVectors) {
      switch (min64(kMapVectors, (c - k0 + 15) / 16)) {
        case 1:
          chunk_rows<1, kCoefs>(r0, r1, c, k0, coefficients, row);
          break;
        case 2:
          chunk_rows<2, kCoefs>(r0, r1, c, k0, coefficients, row);
          break;
        case 3:
          chunk_rows<3, kCoefs>(r0, r1, c, k0, coefficients, row);
          break;
        default:
          chunk_rows<4, kCoefs>(r0, r1, c, k0, coefficients, row);
          break;
      }
    }
  }
}

// A vector of a row map's output: streamed (whole and 64-byte aligned, which the caller ensures)
// or stored through its lane mask.
inline void store_vector(float* p, __mmask16 m, __m512 v, bool stream) {
  if (stream) {
    _mm512_stream_ps(p, v);
  } else {
    _mm512_mask_storeu_ps(p, m, v);
  }
}

}  // namespace

void nhwc_rows_map_one(const float* u, float* o, std::int64_t rows, std::int64_t c, const float* a,
                       const float* center, const float* center_lo, const float* c0, bool stream) {
  const auto coefficients = [&](std::int64_t k, __mmask16 m, __m512* coef) {
    coef[0] = _mm512_maskz_loadu_ps(m, a + k);
    coef[1] = _mm512_maskz_loadu_ps(m, center + k);
    coef[2] = center_lo != nullptr ? _mm512_maskz_loadu_ps(m, center_lo + k) : _mm512_setzero_ps();
    coef[3] = _mm512_maskz_loadu_ps(m, c0 + k);
  };
  rows_by_chunks<4>(rows, c, coefficients, [&](std::int64_t at, __mmask16 m, const __m512* coef) {
    const __m512 t = _mm512_sub_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, u + at), coef[1]), coef[2]);
    store_vector(o + at, m, _mm512_fmadd_ps(coef[0], t, coef[3]), stream);
  });
  if (stream) _mm_sfence();
}

void nhwc_rows_map_two(const float* u, const float* v, float* o, std::int64_t rows, std::int64_t c,
                       const float* a, const float* b, const float* center, const float* c0, bool stream) {
  const auto coefficients = [&](std::int64_t k, __mmask16 m, __m512* coef) {
    coef[0] = _mm512_maskz_loadu_ps(m, a + k);
    coef[1] = _mm512_maskz_loadu_ps(m, b + k);
    coef[2] = _mm512_maskz_loadu_ps(m, center + k);
    coef[3] = _mm512_maskz_loadu_ps(m, c0 + k);
  };
  rows_by_chunks<4>(rows, c, coefficients, [&](std::int64_t at, __mmask16 m, const __m512* coef) {
    const __m512 t = _mm512_sub_ps(_mm512_maskz_loadu_ps(m, v + at), coef[2]);
    const __m512 inner = _mm512_fmadd_ps(coef[1], t, coef[3]);
    store_vector(o + at, m, _mm512_fmadd_ps(coef[0], _mm512_maskz_loadu_ps(m, u + at), inner), stream);
  });
  if (stream) _mm_sfence();
}

}  // namespace galley::backends::cpu::avx512
