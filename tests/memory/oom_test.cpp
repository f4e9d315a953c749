// Out of memory through a fake device with a capacity limit: release-and-retry, the message, the
// counters, and that the allocator stays usable and consistent. Also bad sizes and backend errors.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "memory/caching_allocator.hpp"
#include "memory/fake_device.hpp"

namespace galley::memory {
namespace {

using testing::FakeDevice;
constexpr std::size_t kMiB = 1024 * 1024;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(Oom, ReleasesCachedSegmentsAndRetriesOnce) {
  FakeDevice fake{64 * kMiB};
  auto s = fake.make_stream();
  CachingAllocator alloc{fake, AllocatorConfig{}, "fake:0"};
  {
    std::vector<Buffer> held;
    for (int i = 0; i < 3; ++i) held.push_back(alloc.allocate(20 * kMiB, s.get()));
  }  // three cached 20 MiB segments
  EXPECT_EQ(alloc.stats().reserved_bytes.all.current, static_cast<std::int64_t>(60 * kMiB));
  Buffer big = alloc.allocate(40 * kMiB, s.get());
  ASSERT_TRUE(big);
  const auto st = alloc.stats();
  EXPECT_EQ(st.num_alloc_retries, 1u);
  EXPECT_EQ(st.num_ooms, 0u);
  EXPECT_EQ(st.reserved_bytes.all.current, static_cast<std::int64_t>(40 * kMiB));
  EXPECT_EQ(fake.used(), 40 * kMiB);
  alloc.check_invariants();
}

TEST(Oom, ErrorNamesEveryFigureAndTheSetting) {
  FakeDevice fake{64 * kMiB};
  auto s = fake.make_stream();
  CachingAllocator alloc{fake, AllocatorConfig{}, "fake:0"};
  Buffer held = alloc.allocate(60 * kMiB, s.get());
  try {
    alloc.allocate(10 * kMiB, s.get());
    FAIL() << "expected out_of_memory";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::out_of_memory);
    const std::string m = e.what();
    EXPECT_TRUE(contains(m, "fake:0")) << m;
    EXPECT_TRUE(contains(m, "10.00 MiB")) << m;        // requested
    EXPECT_TRUE(contains(m, "total 64.00 MiB")) << m;  // device total
    EXPECT_TRUE(contains(m, "free 4.00 MiB")) << m;    // device free
    EXPECT_TRUE(contains(m, "60.00 MiB allocated")) << m;
    EXPECT_TRUE(contains(m, "60.00 MiB reserved")) << m;
    EXPECT_TRUE(contains(m, "largest free block")) << m;
    EXPECT_TRUE(contains(m, "GALLEY_ALLOC_CONF")) << m;
  }
  const auto st = alloc.stats();
  EXPECT_EQ(st.num_ooms, 1u);
  EXPECT_EQ(st.num_alloc_retries, 1u);
  alloc.check_invariants();
  // Still usable: a small request fits in the remaining 4 MiB, and frees work.
  Buffer small = alloc.allocate(kMiB, s.get());
  EXPECT_TRUE(small);
  held.reset();
  Buffer again = alloc.allocate(50 * kMiB, s.get());
  EXPECT_TRUE(again);
  alloc.check_invariants();
}

TEST(Oom, FragmentationSuggestsMaxSplit) {
  FakeDevice fake{40 * kMiB};
  auto s = fake.make_stream();
  CachingAllocator alloc{fake, AllocatorConfig{}, "fake:0"};
  // Two 20 MiB segments cut into 2 MiB blocks; keeping every other one pins both segments.
  std::vector<Buffer> blocks;
  for (int i = 0; i < 20; ++i) blocks.push_back(alloc.allocate(2 * kMiB, s.get()));
  ASSERT_EQ(alloc.stats().segment.all.current, 2);
  for (int i = 0; i < 20; i += 2) blocks[i].reset();
  try {
    alloc.allocate(12 * kMiB, s.get());
    FAIL() << "expected out_of_memory";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::out_of_memory);
    EXPECT_TRUE(contains(e.what(), "fragmented")) << e.what();
    EXPECT_TRUE(contains(e.what(), "max_split_mb:")) << e.what();
    EXPECT_TRUE(contains(e.what(), "largest free block 2.00 MiB")) << e.what();
  }
  alloc.check_invariants();
}

TEST(Oom, MemoryFractionCapsReserved) {
  FakeDevice fake{64 * kMiB};
  auto s = fake.make_stream();
  CachingAllocator alloc{fake, AllocatorConfig::parse("memory_fraction:0.5"), "fake:0"};
  Buffer a = alloc.allocate(30 * kMiB, s.get());
  try {
    alloc.allocate(10 * kMiB, s.get());
    FAIL() << "expected out_of_memory";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::out_of_memory);
    EXPECT_TRUE(contains(e.what(), "memory_fraction")) << e.what();
  }
  EXPECT_EQ(fake.used(), 30 * kMiB);
  alloc.check_invariants();
}

TEST(Oom, HugeSizesAreClearErrorsNotCrashes) {
  FakeDevice fake{64 * kMiB};
  auto s = fake.make_stream();
  CachingAllocator alloc{fake, AllocatorConfig{}, "fake:0"};
  for (std::size_t bytes : {SIZE_MAX, SIZE_MAX - 511, SIZE_MAX / 2}) {
    try {
      alloc.allocate(bytes, s.get());
      FAIL() << "expected an error for " << bytes;
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), Status::invalid_argument);
      EXPECT_TRUE(contains(e.what(), std::to_string(bytes))) << e.what();
    }
  }
  // The largest accepted size goes to the backend and fails as out of memory.
  EXPECT_THROW(alloc.allocate(std::size_t{1} << 62, s.get()), Error);
  EXPECT_EQ(alloc.stats().num_ooms, 1u);
  alloc.check_invariants();
  Buffer ok = alloc.allocate(1024, s.get());
  EXPECT_TRUE(ok);
}

TEST(Oom, OtherBackendErrorsPropagateAndLeaveNoTrace) {
  FakeDevice fake{64 * kMiB};
  auto s = fake.make_stream();
  CachingAllocator alloc{fake, AllocatorConfig{}, "fake:0"};
  fake.fail_next_with = Status::backend_error;
  try {
    alloc.allocate(1024, s.get());
    FAIL() << "expected backend_error";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::backend_error);
  }
  EXPECT_EQ(alloc.stats().num_alloc_retries, 0u);
  EXPECT_EQ(alloc.stats().segment.all.current, 0);
  alloc.check_invariants();
  Buffer ok = alloc.allocate(1024, s.get());
  EXPECT_TRUE(ok);
}

TEST(Oom, UncachedModeReportsToo) {
  FakeDevice fake{8 * kMiB};
  AllocatorConfig config;
  config.caching = false;
  CachingAllocator alloc{fake, config, "fake:0"};
  try {
    alloc.allocate(9 * kMiB);
    FAIL() << "expected out_of_memory";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::out_of_memory);
    EXPECT_TRUE(contains(e.what(), "GALLEY_NO_CACHING=1")) << e.what();
  }
  alloc.check_invariants();
}

}  // namespace
}  // namespace galley::memory
