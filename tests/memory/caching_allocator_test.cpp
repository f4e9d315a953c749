// Pools, rounding, best fit, split/merge, configuration effects and empty_cache, over a fake device.
#include "memory/caching_allocator.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <vector>

#include "memory/fake_device.hpp"

namespace galley::memory {
namespace {

using testing::FakeDevice;
constexpr std::size_t kKiB = 1024;
constexpr std::size_t kMiB = 1024 * 1024;

struct Fixture : ::testing::Test {
  FakeDevice fake{std::size_t{1} << 30};
  std::unique_ptr<testing::FakeStream> s = fake.make_stream();
  CachingAllocator alloc{fake, AllocatorConfig{}, "fake:0"};

  std::size_t block_size_of(const Buffer& b) {
    const auto snap = nlohmann::json::parse(alloc.snapshot_json());
    for (const auto& seg : snap["segments"]) {
      for (const auto& blk : seg["blocks"]) {
        if (blk["address"].get<std::uintptr_t>() == reinterpret_cast<std::uintptr_t>(b.data())) {
          return blk["size"].get<std::size_t>();
        }
      }
    }
    ADD_FAILURE() << "buffer not in snapshot";
    return 0;
  }
};

TEST_F(Fixture, RoundsTo512AndUsesSmallSegments) {
  Buffer b = alloc.allocate(1, s.get());
  ASSERT_TRUE(b);
  EXPECT_EQ(b.size(), 1u);
  const auto st = alloc.stats();
  EXPECT_EQ(st.allocated_bytes.all.current, 512);
  EXPECT_EQ(st.requested_bytes.all.current, 1);
  EXPECT_EQ(st.reserved_bytes.all.current, static_cast<std::int64_t>(2 * kMiB));
  EXPECT_EQ(st.segment.small_pool.current, 1);
  EXPECT_EQ(st.segment.large_pool.current, 0);
  Buffer c = alloc.allocate(513, s.get());
  EXPECT_EQ(block_size_of(c), 1024u);
  // The second request split the same segment.
  EXPECT_EQ(alloc.stats().segment.all.current, 1);
  EXPECT_EQ(static_cast<char*>(c.data()) - static_cast<char*>(b.data()), 512);
  alloc.check_invariants();
}

TEST_F(Fixture, LargePoolSegmentSizesFollowPyTorch) {
  Buffer one = alloc.allocate(kMiB + 1, s.get());  // > 1 MiB: large pool, 20 MiB segment
  EXPECT_EQ(alloc.stats().reserved_bytes.large_pool.current, static_cast<std::int64_t>(20 * kMiB));
  Buffer two = alloc.allocate(9 * kMiB, s.get());  // fits in the rest of that segment
  EXPECT_EQ(alloc.stats().segment.all.current, 1);
  Buffer big = alloc.allocate(12 * kMiB + 1, s.get());  // >= 10 MiB: own segment rounded to 2 MiB
  EXPECT_EQ(alloc.stats().reserved_bytes.all.current, static_cast<std::int64_t>((20 + 14) * kMiB));
  EXPECT_EQ(block_size_of(big), 12 * kMiB + 512);
  alloc.check_invariants();
}

TEST_F(Fixture, FreedBlockIsReusedAtOnceOnItsStream) {
  void* first = nullptr;
  {
    Buffer b = alloc.allocate(4 * kKiB, s.get());
    first = b.data();
    s->enqueue();  // work still pending on the stream: stream order makes reuse safe anyway
  }
  Buffer again = alloc.allocate(4 * kKiB, s.get());
  EXPECT_EQ(again.data(), first);
  const auto st = alloc.stats();
  EXPECT_EQ(st.cache_hits, 1u);
  EXPECT_EQ(st.cache_misses, 1u);
  EXPECT_DOUBLE_EQ(st.hit_rate(), 0.5);
  EXPECT_EQ(fake.records, 0) << "plain alloc/free must not record events";
  EXPECT_EQ(fake.events_created, 0);
}

TEST_F(Fixture, SplitAndMergeRestoreWholeSegment) {
  std::vector<Buffer> bufs;
  for (int i = 0; i < 4; ++i) bufs.push_back(alloc.allocate(64 * kKiB, s.get()));
  EXPECT_EQ(alloc.stats().segment.all.current, 1);
  bufs[1].reset();
  auto st = alloc.stats();
  EXPECT_EQ(st.inactive_split.all.current, 2);  // the hole at [1] and the tail of the segment
  EXPECT_EQ(st.inactive_split_bytes.all.current, static_cast<std::int64_t>(2 * kMiB - 3 * 64 * kKiB));
  bufs[2].reset();  // merges with the hole before it
  EXPECT_EQ(alloc.stats().inactive_split.all.current, 2);
  alloc.check_invariants();
  bufs[0].reset();
  bufs[3].reset();  // everything merges back into one free block
  st = alloc.stats();
  EXPECT_EQ(st.inactive_split.all.current, 0);
  EXPECT_EQ(st.allocated_bytes.all.current, 0);
  const auto snap = nlohmann::json::parse(alloc.snapshot_json());
  ASSERT_EQ(snap["segments"].size(), 1u);
  ASSERT_EQ(snap["segments"][0]["blocks"].size(), 1u);
  EXPECT_EQ(snap["segments"][0]["blocks"][0]["state"], "inactive");
  EXPECT_EQ(snap["segments"][0]["blocks"][0]["size"], 2 * kMiB);
  alloc.check_invariants();
}

TEST_F(Fixture, BestFitTakesTheSmallestFreeBlock) {
  // Three holes of 8, 32 and 16 KiB separated by live blocks.
  Buffer a = alloc.allocate(8 * kKiB, s.get());
  Buffer keep1 = alloc.allocate(512, s.get());
  Buffer b = alloc.allocate(32 * kKiB, s.get());
  Buffer keep2 = alloc.allocate(512, s.get());
  Buffer c = alloc.allocate(16 * kKiB, s.get());
  Buffer keep3 = alloc.allocate(512, s.get());
  void* hole16 = c.data();
  void* hole32 = b.data();
  a.reset();
  b.reset();
  c.reset();
  Buffer x = alloc.allocate(12 * kKiB, s.get());
  EXPECT_EQ(x.data(), hole16);
  Buffer y = alloc.allocate(20 * kKiB, s.get());
  EXPECT_EQ(y.data(), hole32);
  alloc.check_invariants();
}

TEST_F(Fixture, RoundupPower2Divisions) {
  AllocatorConfig config = AllocatorConfig::parse("roundup_power2_divisions:4");
  CachingAllocator rounded{fake, config, "fake:0"};
  Buffer b = rounded.allocate(kMiB + 1, s.get());
  EXPECT_EQ(rounded.stats().allocated_bytes.all.current, static_cast<std::int64_t>(kMiB + kMiB / 4));
  Buffer c = rounded.allocate(1000, s.get());  // below 512 * 4: plain 512 rounding
  EXPECT_EQ(rounded.stats().allocated_bytes.small_pool.current, 1024);
  rounded.check_invariants();
}

TEST_F(Fixture, MaxSplitKeepsLargeBlocksWhole) {
  CachingAllocator limited{fake, AllocatorConfig::parse("max_split_mb:32"), "fake:0"};
  void* big_ptr = nullptr;
  {
    Buffer big = limited.allocate(60 * kMiB, s.get());
    big_ptr = big.data();
  }
  {
    // Below max_split: must not carve the cached 60 MiB block.
    Buffer medium = limited.allocate(12 * kMiB, s.get());
    EXPECT_NE(medium.data(), big_ptr);
  }
  {
    // Above max_split and wasting less than max_non_split_rounding (20 MiB): takes it whole.
    Buffer near = limited.allocate(45 * kMiB, s.get());
    EXPECT_EQ(near.data(), big_ptr);
    EXPECT_EQ(limited.stats().allocated_bytes.all.current, static_cast<std::int64_t>(60 * kMiB));
  }
  {
    // Wasting 25 MiB of it: a new segment instead.
    Buffer far = limited.allocate(35 * kMiB, s.get());
    EXPECT_NE(far.data(), big_ptr);
    EXPECT_EQ(limited.stats().allocated_bytes.all.current, static_cast<std::int64_t>(36 * kMiB));
  }
  limited.check_invariants();
}

TEST_F(Fixture, EmptyCacheReleasesOnlyWhollyFreeSegments) {
  Buffer live = alloc.allocate(64 * kKiB, s.get());
  { Buffer gone = alloc.allocate(2 * kMiB, s.get()); }  // 20 MiB segment, now wholly free
  { Buffer gone = alloc.allocate(30 * kMiB, s.get()); }
  EXPECT_EQ(alloc.stats().segment.all.current, 3);
  const int syncs = fake.synchronize_calls;
  alloc.empty_cache();
  EXPECT_GT(fake.synchronize_calls, syncs) << "cached memory may still be in use by stream work";
  const auto st = alloc.stats();
  EXPECT_EQ(st.segment.all.current, 1);
  EXPECT_EQ(st.reserved_bytes.all.current, static_cast<std::int64_t>(2 * kMiB));
  EXPECT_EQ(fake.used(), 2 * kMiB);
  EXPECT_EQ(st.num_device_free, 2u);
  EXPECT_EQ(st.num_sync_all_streams, 1u);
  live.reset();
  alloc.empty_cache();
  EXPECT_EQ(fake.used(), 0u);
  EXPECT_EQ(fake.bad_frees, 0);
  alloc.check_invariants();
}

TEST_F(Fixture, PeaksAndReset) {
  {
    Buffer a = alloc.allocate(kMiB, s.get());
    Buffer b = alloc.allocate(kMiB, s.get());
  }
  auto st = alloc.stats();
  EXPECT_EQ(st.allocated_bytes.all.current, 0);
  EXPECT_EQ(st.allocated_bytes.all.peak, static_cast<std::int64_t>(2 * kMiB));
  EXPECT_EQ(st.allocation.all.allocated, 2);
  EXPECT_EQ(st.allocation.all.freed, 2);
  alloc.reset_peak();
  st = alloc.stats();
  EXPECT_EQ(st.allocated_bytes.all.peak, 0);
  EXPECT_EQ(st.reserved_bytes.all.peak, st.reserved_bytes.all.current);
  const auto json = nlohmann::json::parse(st.to_json());
  EXPECT_EQ(json["allocated_bytes.all.peak"], 0);
  EXPECT_EQ(json["cache_misses"], 1);  // both 1 MiB blocks came from one 2 MiB small segment
  EXPECT_EQ(json["cache_hits"], 1);
}

TEST_F(Fixture, ZeroBytesGivesAnEmptyBufferWithoutAllocating) {
  Buffer z = alloc.allocate(0, s.get());
  EXPECT_FALSE(z);
  EXPECT_EQ(z.data(), nullptr);
  EXPECT_EQ(z.size(), 0u);
  EXPECT_EQ(fake.raw_alloc_calls, 0);
  EXPECT_EQ(alloc.stats().allocation.all.allocated, 0);
}

TEST_F(Fixture, MovedBufferFreesOnce) {
  Buffer a = alloc.allocate(kKiB, s.get());
  Buffer b = std::move(a);
  EXPECT_FALSE(a);  // NOLINT(bugprone-use-after-move): moved-from state is specified
  EXPECT_TRUE(b);
  Buffer c;
  c = std::move(b);
  EXPECT_EQ(alloc.stats().allocation.all.current, 1);
  c.reset();
  c.reset();
  EXPECT_EQ(alloc.stats().allocation.all.current, 0);
  EXPECT_EQ(alloc.stats().allocation.all.freed, 1);
  alloc.check_invariants();
}

TEST_F(Fixture, DeviceOfBareAllocatorIsAClearError) {
  Buffer b = alloc.allocate(kKiB, s.get());
  EXPECT_THROW((void)b.device(), Error);
  EXPECT_EQ(alloc.device_name(), "fake:0");
  Buffer empty;
  EXPECT_THROW((void)empty.device(), Error);
}

}  // namespace
}  // namespace galley::memory
