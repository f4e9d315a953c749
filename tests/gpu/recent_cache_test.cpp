// backends/gpu/recent_cache.hpp: the per-plan cache of cuDNN variant packs (host logic only).
#include "backends/gpu/recent_cache.hpp"

#include <gtest/gtest.h>

#include <array>
#include <memory>
#include <string>

namespace galley::backends::gpu {
namespace {

TEST(RecentCache, FindsWhatWasInsertedAndMissesTheRest) {
  RecentCache<int, std::string> cache(3);
  EXPECT_EQ(cache.find(1), nullptr);
  cache.insert(1, "one");
  cache.insert(2, "two");
  ASSERT_NE(cache.find(1), nullptr);
  EXPECT_EQ(*cache.find(1), "one");
  EXPECT_EQ(*cache.find(2), "two");
  EXPECT_EQ(cache.find(3), nullptr);
  EXPECT_EQ(cache.size(), 2u);
}

TEST(RecentCache, DropsTheLeastRecentlyUsedWhenFull) {
  RecentCache<int, int> cache(3);
  cache.insert(1, 10);
  cache.insert(2, 20);
  cache.insert(3, 30);
  ASSERT_NE(cache.find(1), nullptr);  // 1 is now the most recent; 2 the least
  cache.insert(4, 40);
  EXPECT_EQ(cache.size(), 3u);
  EXPECT_EQ(cache.find(2), nullptr);
  EXPECT_EQ(*cache.find(1), 10);
  EXPECT_EQ(*cache.find(3), 30);
  EXPECT_EQ(*cache.find(4), 40);
}

TEST(RecentCache, KeysOfPointersAndMoveOnlyValues) {
  // The cuDNN solver's use: four pointers of a call, and an owning handle per entry.
  using Pointers = std::array<const void*, 4>;
  int a = 0, b = 0, c = 0;
  RecentCache<Pointers, std::unique_ptr<int>> cache(2);
  cache.insert(Pointers{&a, &b, &c, nullptr}, std::make_unique<int>(1));
  cache.insert(Pointers{&b, &a, &c, nullptr}, std::make_unique<int>(2));
  ASSERT_NE(cache.find(Pointers{&a, &b, &c, nullptr}), nullptr);
  EXPECT_EQ(**cache.find(Pointers{&a, &b, &c, nullptr}), 1);
  EXPECT_EQ(cache.find(Pointers{&a, &b, &c, &a}), nullptr);  // another workspace is another call
  int values = 0;
  cache.for_each_value([&](std::unique_ptr<int>& v) { values += *v; });
  EXPECT_EQ(values, 3);
}

TEST(RecentCache, CapacityZeroStillKeepsOne) {
  RecentCache<int, int> cache(0);
  cache.insert(1, 1);
  EXPECT_NE(cache.find(1), nullptr);
  cache.insert(2, 2);
  EXPECT_EQ(cache.find(1), nullptr);
  EXPECT_EQ(cache.size(), 1u);
}

}  // namespace
}  // namespace galley::backends::gpu
