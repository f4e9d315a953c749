// What the single-source eltwise kernels get from the host: the merged broadcast geometry
// (dnn/eltwise_geometry.hpp) as fixed-size arrays with a precomputed divider per dim, and the
// split of that geometry into the dims a reduced input keeps and those it is summed over.
// Indices are 32-bit (check() refuses problems of 2^31 elements or more, so a grid-stride index
// plus its step cannot wrap); offsets are 64-bit.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "dnn/eltwise_geometry.hpp"

#if defined(__CUDACC__) || defined(__HIPCC__)
#define GALLEY_ELTWISE_HD __host__ __device__ __forceinline__
#else
#define GALLEY_ELTWISE_HD inline
#endif

namespace galley::backends::gpu {

/// n / d and n % d for 32-bit n by a multiply and a shift (Granlund and Montgomery): with
/// l = ceil(log2 d) and m = floor(2^32 (2^l - d) / d) + 1, n / d = (umulhi(n, m) + n) >> l, the sum
/// taken in 64 bits so it cannot wrap. Built on the host, used on the device.
struct FastDiv {
  std::uint32_t d = 1, m = 1, l = 0;

  static FastDiv of(std::uint32_t divisor) {
    FastDiv f;
    f.d = divisor;
    while ((std::uint64_t(1) << f.l) < divisor) ++f.l;
    f.m = std::uint32_t(((std::uint64_t(1) << 32) * ((std::uint64_t(1) << f.l) - divisor)) / divisor + 1);
    return f;
  }
  GALLEY_ELTWISE_HD std::uint32_t div(std::uint32_t n) const {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
    return std::uint32_t((std::uint64_t(__umulhi(n, m)) + n) >> l);
#else
    return std::uint32_t((((std::uint64_t(n) * m) >> 32) + n) >> l);
#endif
  }
};

/// A list of dims (outermost first) with the element strides of dst, a and b along each.
struct EltwiseDims {
  int rank = 0;
  FastDiv dims[dnn::kMaxRank];
  std::int64_t out_stride[dnn::kMaxRank] = {};
  std::int64_t a_stride[dnn::kMaxRank] = {};
  std::int64_t b_stride[dnn::kMaxRank] = {};
  std::uint32_t count = 1;  ///< product of the dims
};

/// Forward (and the backward maps): dst elements [0, elements) walked in rows of `inner`.
struct EltwiseMapParams {
  EltwiseDims outer;                      ///< every dim but the innermost
  FastDiv inner;                          ///< the innermost dim
  std::int64_t a_inner = 0, b_inner = 0;  ///< 0 or 1
  std::uint32_t elements = 1;
  float alpha = 1, beta = 1;
};

/// A reduction of dst-shaped gradients into one input: element (k, r), k over the dims that input
/// keeps (its own dense index, innermost fastest), r over those it is broadcast along.
struct EltwiseReduceParams {
  EltwiseDims kept, reduced;
  bool inner_kept = false;     ///< the innermost geometry dim is kept: consecutive k are adjacent in dst
  bool short_sums = false;     ///< few terms per k: one thread per k sums them all (no block per k)
  std::uint32_t segments = 1;  ///< r is cut into this many parts, summed into partials, then in order
  std::uint32_t per_segment = 1;
  float alpha = 1, beta = 1;
};

/// The offsets in a and b of row `row` of a map (every dim but the innermost).
GALLEY_ELTWISE_HD void row_offsets(const EltwiseDims& outer, std::uint32_t row, std::int64_t& oa,
                                   std::int64_t& ob) {
  oa = 0;
  ob = 0;
  for (int k = dnn::kMaxRank - 1; k >= 0; --k) {
    if (k >= outer.rank) continue;
    const std::uint32_t q = outer.dims[k].div(row);
    const std::uint32_t i = row - q * outer.dims[k].d;
    row = q;
    oa += std::int64_t(i) * outer.a_stride[k];
    ob += std::int64_t(i) * outer.b_stride[k];
  }
}

/// The dst, a and b offsets of element (k, r) of a reduction.
GALLEY_ELTWISE_HD void reduce_offsets(const EltwiseReduceParams& p, std::uint32_t k, std::uint32_t r,
                                      std::int64_t& od, std::int64_t& oa, std::int64_t& ob) {
  od = oa = ob = 0;
  for (int d = dnn::kMaxRank - 1; d >= 0; --d) {
    if (d < p.kept.rank) {
      const std::uint32_t q = p.kept.dims[d].div(k);
      const std::uint32_t i = k - q * p.kept.dims[d].d;
      k = q;
      od += std::int64_t(i) * p.kept.out_stride[d];
      oa += std::int64_t(i) * p.kept.a_stride[d];
      ob += std::int64_t(i) * p.kept.b_stride[d];
    }
    if (d < p.reduced.rank) {
      const std::uint32_t q = p.reduced.dims[d].div(r);
      const std::uint32_t i = r - q * p.reduced.dims[d].d;
      r = q;
      od += std::int64_t(i) * p.reduced.out_stride[d];
      oa += std::int64_t(i) * p.reduced.a_stride[d];
      ob += std::int64_t(i) * p.reduced.b_stride[d];
    }
  }
}

/// Why a problem is too large for these kernels, or empty.
inline std::string eltwise_too_large(const dnn::EltwiseGeometry& g) {
  if (g.elements > std::int64_t(INT32_MAX)) {
    return "dst has " + std::to_string(g.elements) + " elements, more than the 2^31 - 1 of 32-bit indexing";
  }
  return {};
}

inline EltwiseDims make_dims(const dnn::EltwiseGeometry& g, const bool* take) {
  EltwiseDims d;
  std::int64_t stride = 1;
  std::int64_t out_stride[dnn::kMaxRank];
  for (int k = g.rank - 1; k >= 0; --k) {
    out_stride[k] = stride;
    stride *= g.dims[k];
  }
  for (int k = 0; k < g.rank; ++k) {
    if (!take[k]) continue;
    d.dims[d.rank] = FastDiv::of(std::uint32_t(g.dims[k]));
    d.out_stride[d.rank] = out_stride[k];
    d.a_stride[d.rank] = g.a_stride[k];
    d.b_stride[d.rank] = g.b_stride[k];
    d.count *= std::uint32_t(g.dims[k]);
    ++d.rank;
  }
  return d;
}

inline EltwiseMapParams make_map_params(const dnn::EltwiseProblem& p, const dnn::EltwiseGeometry& g) {
  EltwiseMapParams m;
  bool take[dnn::kMaxRank] = {};
  for (int k = 0; k + 1 < g.rank; ++k) take[k] = true;
  m.outer = make_dims(g, take);
  m.inner = FastDiv::of(std::uint32_t(g.dims[g.rank - 1]));
  m.a_inner = g.a_stride[g.rank - 1];
  m.b_inner = g.b_stride[g.rank - 1];
  m.elements = std::uint32_t(g.elements);
  m.alpha = p.alpha;
  m.beta = p.beta;
  return m;
}

/// Sums of at most this many terms per gradient element are done one thread per element.
inline constexpr std::uint32_t kShortSum = 64;

/// `which`: 0 reduces into a, 1 into b. Segments are chosen from the sizes alone (about 1024
/// blocks in all), so the summation order, hence the result, is the same on every run and device.
inline EltwiseReduceParams make_reduce_params(const dnn::EltwiseProblem& p, const dnn::EltwiseGeometry& g,
                                              int which) {
  const std::int64_t* xs = which == 0 ? g.a_stride : g.b_stride;
  bool kept[dnn::kMaxRank] = {}, reduced[dnn::kMaxRank] = {};
  for (int k = 0; k < g.rank; ++k) {
    kept[k] = xs[k] != 0;
    reduced[k] = xs[k] == 0;
  }
  EltwiseReduceParams r;
  r.kept = make_dims(g, kept);
  r.reduced = make_dims(g, reduced);
  r.inner_kept = kept[g.rank - 1];
  r.alpha = p.alpha;
  r.beta = p.beta;
  if (r.reduced.count <= kShortSum) {
    r.short_sums = true;
    r.per_segment = r.reduced.count;
    return r;
  }
  const std::uint64_t k_blocks = r.inner_kept ? (r.kept.count + 31) / 32 : r.kept.count;
  const std::uint64_t min_per_segment = r.inner_kept ? 64 : 2048;
  std::uint64_t segments = (1024 + k_blocks - 1) / k_blocks;
  segments = std::min<std::uint64_t>(segments, (r.reduced.count + min_per_segment - 1) / min_per_segment);
  segments = std::max<std::uint64_t>(1, std::min<std::uint64_t>(segments, 65535));
  r.segments = std::uint32_t(segments);
  r.per_segment = std::uint32_t((r.reduced.count + segments - 1) / segments);
  return r;
}

/// The gradient of an input broadcast along the outer dim of a two-dim geometry [rows, cols] and
/// dense along the inner one (a channels-last bias): a column sum. A block of block_cols threads
/// across 16-byte vectors of columns by block_rows lanes down the rows sums one segment of rows;
/// partials are added over segments in order by a second kernel (none when segments == 1).
/// Chosen from the sizes alone, so the summation order is the same on every run and device.
struct EltwiseColumnParams {
  bool applies = false;  ///< the geometry has this shape and cols is a whole number of vectors
  std::uint32_t rows = 0, cols = 0, col_vectors = 0;
  std::uint32_t block_cols = 1, block_rows = 1, col_blocks = 1;
  std::uint32_t segments = 1, rows_per_segment = 0;
  std::int64_t a_row = 0, a_col = 0, b_row = 0, b_col = 0;  ///< strides of a and b over [rows, cols]
};

/// Threads of a column-sum block, and the smallest share of rows one lane of a segment takes.
inline constexpr std::uint32_t kColumnThreads = 256;
inline constexpr std::uint32_t kColumnRowsPerLane = 4;
/// Blocks a column sum aims at, over column blocks and segments.
inline constexpr std::uint32_t kColumnBlocks = 512;

/// `which`: 0 for a, 1 for b; `vec_width` elements per 16-byte vector.
inline EltwiseColumnParams make_column_params(const dnn::EltwiseGeometry& g, int which,
                                              std::uint32_t vec_width) {
  EltwiseColumnParams c;
  const std::int64_t* xs = which == 0 ? g.a_stride : g.b_stride;
  if (g.rank != 2 || xs[0] != 0 || xs[1] != 1 || g.dims[0] < 1 || g.dims[1] % vec_width != 0) return c;
  c.applies = true;
  c.rows = std::uint32_t(g.dims[0]);
  c.cols = std::uint32_t(g.dims[1]);
  c.col_vectors = c.cols / vec_width;
  c.block_cols = std::min<std::uint32_t>(c.col_vectors, 32);
  c.block_rows = kColumnThreads / c.block_cols;
  c.col_blocks = (c.col_vectors + c.block_cols - 1) / c.block_cols;
  const std::uint64_t most = (std::uint64_t(c.rows) + std::uint64_t(c.block_rows) * kColumnRowsPerLane - 1) /
                             (std::uint64_t(c.block_rows) * kColumnRowsPerLane);
  const std::uint64_t wanted = (kColumnBlocks + c.col_blocks - 1) / c.col_blocks;
  const std::uint64_t segments = std::max<std::uint64_t>(1, std::min<std::uint64_t>({most, wanted, 65535}));
  c.rows_per_segment = std::uint32_t((c.rows + segments - 1) / segments);
  c.segments = (c.rows + c.rows_per_segment - 1) / c.rows_per_segment;
  c.a_row = g.a_stride[0];
  c.a_col = g.a_stride[1];
  c.b_row = g.b_stride[0];
  c.b_col = g.b_stride[1];
  return c;
}

}  // namespace galley::backends::gpu
