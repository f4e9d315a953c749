// The conformance grid covers every value of every axis the issue names (see conv_grid.hpp).
#include "conv_grid.hpp"

#include <gtest/gtest.h>

#include <iostream>
#include <set>
#include <utility>

namespace galley::test {
namespace {

TEST(ConvGrid, CoversEveryAxisValue) {
  const auto grid = conv_grid();
  EXPECT_GE(grid.size(), 60u);
  EXPECT_LE(grid.size(), 120u);
  std::set<std::int64_t> strides, pads, dilations, batches, channels;
  std::set<std::string> groups;
  std::set<std::pair<std::int64_t, std::int64_t>> filters, sizes;
  for (const auto& p : grid) {
    EXPECT_NO_THROW(p.validate()) << p.key();
    strides.insert({p.stride_h, p.stride_w});
    pads.insert({p.pad_h, p.pad_w});
    dilations.insert({p.dilation_h, p.dilation_w});
    batches.insert(p.n);
    channels.insert({p.c, p.k});
    groups.insert(p.is_depthwise() ? "depthwise" : std::to_string(p.groups));
    filters.insert({p.y, p.x});
    sizes.insert({p.h, p.w});
  }
  EXPECT_EQ(strides, (std::set<std::int64_t>{1, 2}));
  EXPECT_EQ(pads, (std::set<std::int64_t>{0, 1, 2}));
  EXPECT_EQ(dilations, (std::set<std::int64_t>{1, 2}));
  EXPECT_TRUE(batches.count(1));
  for (std::int64_t c : {3, 17, 23}) EXPECT_TRUE(channels.count(c)) << c;
  for (const char* g : {"1", "2", "32", "depthwise"}) EXPECT_TRUE(groups.count(g)) << g;
  for (auto f : {std::pair<std::int64_t, std::int64_t>{1, 1}, {3, 3}, {5, 5}, {7, 7}, {1, 7}, {7, 1}}) {
    EXPECT_TRUE(filters.count(f)) << f.first << "x" << f.second;
  }
  EXPECT_TRUE(sizes.count({31, 29}));
  // The same list on every run and machine (a seeded sample).
  const auto again = conv_grid();
  EXPECT_EQ(grid, again);
}

TEST(ConvGrid, StaysCheap) {
  double total = 0;
  for (const auto& p : conv_grid()) total += p.flops();
  // The whole grid in one dtype and layout is a few hundred MFLOP: seconds for the reference.
  EXPECT_LT(total, 600e6);
  std::cout << "  grid: " << conv_grid().size() << " problems, " << total / 1e6
            << " MFLOP per dtype/layout\n";
}

}  // namespace
}  // namespace galley::test
