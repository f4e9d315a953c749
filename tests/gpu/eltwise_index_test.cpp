// The index arithmetic of the single-source eltwise kernels, run on the host (it needs no device):
// the multiply-and-shift division against '/', and the offsets the map and reduction kernels
// compute for each element against offsets found independently from the tensors' descriptors,
// every dst element visited exactly once; the column sum's plan likewise.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "backends/gpu/eltwise_params.hpp"

namespace galley::backends::gpu {
namespace {

using Shape = std::vector<std::int64_t>;

TEST(EltwiseFastDiv, MatchesDivisionOverEdgeCases) {
  std::mt19937 rng(5);
  const std::uint32_t divisors[] = {1u,          2u,          3u,          5u,         7u,     17u,
                                    255u,        256u,        3136u,       65535u,     65537u, 1u << 20,
                                    0x7fffffffu, 0x80000000u, 0xfffffffeu, 0xffffffffu};
  for (std::uint32_t d : divisors) {
    const FastDiv f = FastDiv::of(d);
    std::vector<std::uint32_t> ns = {0u,        1u,          d - 1,       d,          d + 1,
                                     2 * d - 1, 0x7fffffffu, 0x80000000u, 0xffffffffu};
    for (int i = 0; i < 2000; ++i) ns.push_back(rng());
    for (std::uint32_t n : ns) ASSERT_EQ(f.div(n), n / d) << n << " / " << d;
  }
}

// Memory offsets of one logical dst index in dst, a and b, from the descriptors alone.
struct Offsets {
  std::int64_t dst, a, b;
};

std::vector<Offsets> expected_offsets(const dnn::EltwiseProblem& p) {
  const dnn::TensorDesc od = p.dst_desc(), ad = p.a_desc(), bd = p.b_desc();
  std::vector<Offsets> out;
  std::int64_t idx[dnn::kMaxRank] = {};
  const auto offset = [&](const dnn::TensorDesc& in) {
    std::int64_t off = 0;
    for (int i = 0; i < in.rank; ++i) {
      if (in.dims[i] != 1) off += idx[i + od.rank - in.rank] * in.strides[i];
    }
    return off;
  };
  for (std::int64_t e = 0; e < od.elements(); ++e) {
    out.push_back({offset(od), offset(ad), offset(bd)});
    for (int i = od.rank - 1; i >= 0; --i) {
      if (++idx[i] < od.dims[i]) break;
      idx[i] = 0;
    }
  }
  return out;
}

dnn::EltwiseProblem problem(Shape a, Shape b, dnn::Layout layout = dnn::Layout::nchw) {
  dnn::EltwiseProblem p;
  p.a = std::move(a);
  p.b = std::move(b);
  p.layout = layout;
  return p;
}

std::vector<dnn::EltwiseProblem> problems() {
  return {problem({2, 3, 5, 7}, {1, 3, 1, 1}),
          problem({2, 3, 5, 7}, {1, 3, 1, 1}, dnn::Layout::nhwc),
          problem({1, 3, 1, 7}, {2, 1, 5, 1}),
          problem({1, 3, 1, 7}, {2, 1, 5, 1}, dnn::Layout::nhwc),
          problem({2, 3, 1, 5, 1, 3}, {4, 1, 2, 1}),
          problem({3, 17}, {1}),
          problem({1}, {4, 1, 6}),
          problem({7, 1, 9}, {7, 5, 1}),
          problem({2, 1, 2, 1, 2, 1}, {1, 3, 1, 3, 1, 3})};
}

TEST(EltwiseKernelIndex, MapOffsetsMatchTheDescriptors) {
  for (const dnn::EltwiseProblem& p : problems()) {
    const dnn::EltwiseGeometry g = dnn::eltwise_geometry(p);
    const EltwiseMapParams m = make_map_params(p, g);
    std::vector<int> seen(static_cast<std::size_t>(g.elements), 0);
    for (const Offsets& want : expected_offsets(p)) {
      const auto e = static_cast<std::uint32_t>(want.dst);
      const std::uint32_t row = m.inner.div(e);
      const std::uint32_t col = e - row * m.inner.d;
      std::int64_t oa, ob;
      row_offsets(m.outer, row, oa, ob);
      EXPECT_EQ(oa + col * m.a_inner, want.a) << p.key() << " element " << e;
      EXPECT_EQ(ob + col * m.b_inner, want.b) << p.key() << " element " << e;
      ++seen[e];
    }
    for (int s : seen) ASSERT_EQ(s, 1) << p.key();
  }
}

TEST(EltwiseKernelIndex, ReductionVisitsEveryElementOnceAtTheRightOffsets) {
  for (const dnn::EltwiseProblem& p : problems()) {
    const dnn::EltwiseGeometry g = dnn::eltwise_geometry(p);
    std::vector<Offsets> by_dst(static_cast<std::size_t>(g.elements));
    for (const Offsets& o : expected_offsets(p)) by_dst[static_cast<std::size_t>(o.dst)] = o;
    for (int which = 0; which < 2; ++which) {
      const EltwiseReduceParams r = make_reduce_params(p, g, which);
      EXPECT_EQ(std::int64_t(r.kept.count), which == 0 ? g.a_elements : g.b_elements) << p.key();
      EXPECT_EQ(std::int64_t(r.kept.count) * r.reduced.count, g.elements) << p.key();
      EXPECT_GE(std::int64_t(r.segments) * r.per_segment, std::int64_t(r.reduced.count)) << p.key();
      std::vector<int> seen(static_cast<std::size_t>(g.elements), 0);
      for (std::uint32_t k = 0; k < r.kept.count; ++k) {
        for (std::uint32_t i = 0; i < r.reduced.count; ++i) {
          std::int64_t od, oa, ob;
          reduce_offsets(r, k, i, od, oa, ob);
          ASSERT_GE(od, 0);
          ASSERT_LT(od, g.elements);
          const Offsets& want = by_dst[static_cast<std::size_t>(od)];
          EXPECT_EQ(oa, want.a) << p.key();
          EXPECT_EQ(ob, want.b) << p.key();
          // The reduced input's own offset is k: its gradient element.
          EXPECT_EQ(which == 0 ? want.a : want.b, std::int64_t(k)) << p.key();
          ++seen[static_cast<std::size_t>(od)];
        }
      }
      for (int s : seen) ASSERT_EQ(s, 1) << p.key() << " input " << which;
    }
  }
}

// The column sum's plan: blocks of at most kColumnThreads threads covering every vector of columns,
// segments covering every row once, and the a and b offsets it computes from its strides matching
// the descriptors, for channels-last biases (either input) of many sizes; other shapes refused.
TEST(EltwiseKernelIndex, ColumnSumCoversEveryElementOnceAtTheRightOffsets) {
  std::vector<dnn::EltwiseProblem> columns;
  for (const std::int64_t c : {8, 16, 24, 256, 264, 520}) {
    for (const Shape& nhw : std::vector<Shape>{{1, 1, 1}, {1, 3, 5}, {2, 7, 9}, {3, 31, 29}}) {
      columns.push_back(problem({nhw[0], c, nhw[1], nhw[2]}, {1, c, 1, 1}, dnn::Layout::nhwc));
      columns.push_back(problem({1, c, 1, 1}, {nhw[0], c, nhw[1], nhw[2]}, dnn::Layout::nhwc));
    }
  }
  for (const dnn::EltwiseProblem& p : columns) {
    const dnn::EltwiseGeometry g = dnn::eltwise_geometry(p);
    const int which = g.a_full() ? 1 : 0;
    std::vector<Offsets> by_dst(static_cast<std::size_t>(g.elements));
    for (const Offsets& o : expected_offsets(p)) by_dst[static_cast<std::size_t>(o.dst)] = o;
    for (const std::uint32_t width : {4u, 8u}) {
      const EltwiseColumnParams c = make_column_params(g, which, width);
      if (g.elements == p.dst_shape()[1]) {
        // One row: the geometry has one dim and nothing is broadcast along rows.
        EXPECT_FALSE(c.applies) << p.key();
        continue;
      }
      ASSERT_TRUE(c.applies) << p.key();
      EXPECT_FALSE(make_column_params(g, 1 - which, width).applies) << p.key();
      EXPECT_LE(c.block_cols * c.block_rows, kColumnThreads);
      EXPECT_GE(c.col_blocks * c.block_cols, c.col_vectors);
      EXPECT_LT((c.col_blocks - 1) * c.block_cols, c.col_vectors);
      EXPECT_GE(std::int64_t(c.segments) * c.rows_per_segment, std::int64_t(c.rows));
      EXPECT_LT(std::int64_t(c.segments - 1) * c.rows_per_segment, std::int64_t(c.rows));
      EXPECT_EQ(std::int64_t(c.rows) * c.cols, g.elements);
      std::vector<int> seen(static_cast<std::size_t>(g.elements), 0);
      for (std::uint32_t s = 0; s < c.segments; ++s) {
        for (std::uint32_t lane = 0; lane < c.block_rows; ++lane) {
          for (std::uint32_t r = s * c.rows_per_segment + lane;
               r < std::min(c.rows, (s + 1) * c.rows_per_segment); r += c.block_rows) {
            for (std::uint32_t col = 0; col < c.cols; ++col) {
              const std::int64_t e = std::int64_t(r) * c.cols + col;
              const Offsets& want = by_dst[static_cast<std::size_t>(e)];
              EXPECT_EQ(r * c.a_row + col * c.a_col, want.a) << p.key();
              EXPECT_EQ(r * c.b_row + col * c.b_col, want.b) << p.key();
              ++seen[static_cast<std::size_t>(e)];
            }
          }
        }
      }
      for (int n : seen) ASSERT_EQ(n, 1) << p.key();
    }
  }
  // Channels not a whole number of vectors, channels-first biases, broadcasts along two dims.
  for (const dnn::EltwiseProblem& p :
       {problem({2, 12, 3, 3}, {1, 12, 1, 1}, dnn::Layout::nhwc), problem({2, 16, 3, 3}, {1, 16, 1, 1}),
        problem({1, 3, 1, 8}, {2, 1, 5, 8}, dnn::Layout::nchw)}) {
    const dnn::EltwiseGeometry g = dnn::eltwise_geometry(p);
    EXPECT_FALSE(make_column_params(g, 0, 8).applies) << p.key();
    EXPECT_FALSE(make_column_params(g, 1, 8).applies) << p.key();
  }
}

}  // namespace
}  // namespace galley::backends::gpu
