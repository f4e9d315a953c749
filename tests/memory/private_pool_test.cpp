// Private pools (graph capture): isolation from every other user while the pool lives, reuse
// inside it, release to the general cache, the named errors of misuse, and no device-wide wait
// while a stream allocates to a pool. Over a fake device, and once over the cpu device's allocator.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "galley/core/error.hpp"
#include "galley/runtime/device.hpp"
#include "galley/runtime/stream.hpp"
#include "memory/caching_allocator.hpp"
#include "memory/fake_device.hpp"

namespace galley::memory {
namespace {

using testing::FakeDevice;
using testing::FakeStream;
constexpr std::size_t kKiB = 1024;
constexpr std::size_t kMiB = 1024 * 1024;

template <class Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

struct PoolFixture : ::testing::Test {
  FakeDevice fake{std::size_t{1} << 30};
  std::unique_ptr<FakeStream> s = fake.make_stream();
  std::unique_ptr<FakeStream> t = fake.make_stream();
  CachingAllocator alloc{fake, AllocatorConfig{}, "fake:0"};

  // The private pool id of the segment holding `ptr` (0: the general cache).
  std::uint64_t pool_of(const void* ptr) {
    const auto snap = nlohmann::json::parse(alloc.snapshot_json());
    const auto p = reinterpret_cast<std::uintptr_t>(ptr);
    for (const auto& seg : snap["segments"]) {
      const auto base = seg["address"].get<std::uintptr_t>();
      if (p >= base && p < base + seg["total_size"].get<std::uintptr_t>())
        return seg["private_pool"].get<std::uint64_t>();
    }
    ADD_FAILURE() << "address not in any segment";
    return 0;
  }
};

TEST_F(PoolFixture, AllocationsOfTheRoutedStreamComeFromThePoolsOwnSegments) {
  Buffer general = alloc.allocate(4 * kKiB, s.get());  // a general segment with room to spare
  PrivatePool pool(alloc);
  {
    PrivatePoolScope scope(pool, *s);
    Buffer small = alloc.allocate(4 * kKiB, s.get());
    Buffer large = alloc.allocate(3 * kMiB, s.get());
    EXPECT_EQ(pool_of(small.data()), pool.id());
    EXPECT_EQ(pool_of(large.data()), pool.id());
    // Other streams and stream-less requests are not routed.
    Buffer other = alloc.allocate(4 * kKiB, t.get());
    Buffer none = alloc.allocate(4 * kKiB);
    EXPECT_EQ(pool_of(other.data()), 0u);
    EXPECT_EQ(pool_of(none.data()), 0u);
    alloc.check_invariants();
  }
  EXPECT_EQ(pool.reserved_bytes(), 2 * kMiB + 20 * kMiB);
  alloc.check_invariants();
}

TEST_F(PoolFixture, ABlockFreedInsideThePoolIsNeverHandedOutsideWhileThePoolLives) {
  PrivatePool pool(alloc);
  void* freed = nullptr;
  {
    PrivatePoolScope scope(pool, *s);
    Buffer b = alloc.allocate(64 * kKiB, s.get());
    freed = b.data();
  }  // b freed inside the scope: back to the pool
  // Outside the pool every kind of request misses it, even on the same stream, the best fit.
  Buffer same_stream = alloc.allocate(64 * kKiB, s.get());
  Buffer other_stream = alloc.allocate(64 * kKiB, t.get());
  Buffer no_stream = alloc.allocate(64 * kKiB);
  for (const Buffer* b : {&same_stream, &other_stream, &no_stream}) {
    EXPECT_NE(b->data(), freed);
    EXPECT_EQ(pool_of(b->data()), 0u);
  }
  // After a device-wide wait every cached block is free for every stream: still not the pool's.
  alloc.empty_cache();
  Buffer after_sync = alloc.allocate(64 * kKiB, t.get());
  EXPECT_NE(after_sync.data(), freed);
  // Routed again, the stream reuses the block in stream order (what a capture preserves).
  {
    PrivatePoolScope scope(pool, *s);
    Buffer again = alloc.allocate(64 * kKiB, s.get());
    EXPECT_EQ(again.data(), freed);
  }
  alloc.check_invariants();
}

TEST_F(PoolFixture, FreesReturnToTheOwnerOfTheBlockWhateverTheRouting) {
  Buffer general = alloc.allocate(64 * kKiB, s.get());
  void* general_ptr = general.data();
  PrivatePool pool(alloc);
  Buffer pooled;
  {
    PrivatePoolScope scope(pool, *s);
    pooled = alloc.allocate(64 * kKiB, s.get());
    general.reset();  // a general block freed while the stream is routed stays general
  }
  void* pooled_ptr = pooled.data();
  pooled.reset();  // a pool block freed after the scope still goes to the pool
  Buffer outside = alloc.allocate(64 * kKiB, s.get());
  EXPECT_EQ(outside.data(), general_ptr);
  {
    PrivatePoolScope scope(pool, *s);
    Buffer inside = alloc.allocate(64 * kKiB, s.get());
    EXPECT_EQ(inside.data(), pooled_ptr);
  }
  alloc.check_invariants();
}

TEST_F(PoolFixture, EmptyCacheKeepsThePoolsSegmentsReleaseHandsThemToTheCache) {
  PrivatePool pool(alloc);
  void* freed = nullptr;
  {
    PrivatePoolScope scope(pool, *s);
    Buffer b = alloc.allocate(3 * kMiB, s.get());
    freed = b.data();
  }
  const auto reserved = alloc.stats().reserved_bytes.all.current;
  const int frees = fake.raw_free_calls;
  alloc.empty_cache();
  EXPECT_EQ(fake.raw_free_calls, frees) << "a graph may still replay into the pool's segments";
  EXPECT_EQ(alloc.stats().reserved_bytes.all.current, reserved);

  pool.release();
  EXPECT_FALSE(pool);
  alloc.check_invariants();
  // In the general cache now, keyed to the stream it was freed on: reused there at once.
  Buffer reused = alloc.allocate(3 * kMiB, s.get());
  EXPECT_EQ(reused.data(), freed);
  EXPECT_EQ(pool_of(reused.data()), 0u);
  reused.reset();
  alloc.empty_cache();
  EXPECT_EQ(alloc.stats().reserved_bytes.all.current, 0);
  alloc.check_invariants();
}

TEST_F(PoolFixture, BlocksStillAllocatedAtReleaseJoinTheGeneralCacheWhenFreed) {
  Buffer live;
  {
    PrivatePool pool(alloc);
    PrivatePoolScope scope(pool, *s);
    live = alloc.allocate(8 * kKiB, s.get());
    Buffer neighbour = alloc.allocate(8 * kKiB, s.get());
  }  // scope ends first, then the pool is released with `live` still allocated
  void* ptr = live.data();
  EXPECT_EQ(pool_of(ptr), 0u);
  live.reset();
  alloc.check_invariants();
  Buffer again = alloc.allocate(8 * kKiB, s.get());
  EXPECT_EQ(again.data(), ptr);
  alloc.check_invariants();
}

TEST_F(PoolFixture, StatisticsAndPeaksCountPoolMemory) {
  alloc.reset_peak();
  PrivatePool pool(alloc);
  {
    PrivatePoolScope scope(pool, *s);
    Buffer a = alloc.allocate(100 * kKiB, s.get());
    Buffer b = alloc.allocate(200 * kKiB, s.get());
  }
  const auto st = alloc.stats();
  EXPECT_EQ(st.allocated_bytes.all.current, 0);
  EXPECT_EQ(st.allocated_bytes.all.peak, static_cast<std::int64_t>(300 * kKiB));
  EXPECT_EQ(st.reserved_bytes.all.current, static_cast<std::int64_t>(2 * kMiB));
}

TEST_F(PoolFixture, ABlockUsedOnAnotherStreamInsideThePoolWaitsForTheRelease) {
  PrivatePool pool(alloc);
  void* ptr = nullptr;
  {
    PrivatePoolScope scope(pool, *s);
    Buffer b = alloc.allocate(16 * kKiB, s.get());
    alloc.record_stream(b, *t);
    ptr = b.data();
    b.reset();
    // No stream order covers the use on t, and a capture allows no event: not reused in the pool.
    Buffer next = alloc.allocate(16 * kKiB, s.get());
    EXPECT_NE(next.data(), ptr);
    alloc.check_invariants();
  }
  EXPECT_EQ(fake.records, 0) << "no event may be recorded on a stream that may be capturing";
  pool.release();
  alloc.check_invariants();
  Buffer after = alloc.allocate(16 * kKiB, s.get());
  EXPECT_EQ(after.data(), ptr);
}

TEST_F(PoolFixture, OutOfMemoryWhileRoutedDoesNotWaitForTheDevice) {
  FakeDevice small_device{64 * kMiB};
  auto stream = small_device.make_stream();
  CachingAllocator a{small_device, AllocatorConfig{}, "fake:1"};
  {
    Buffer cached = a.allocate(40 * kMiB, stream.get());  // freed: cached, free for its stream only
  }
  PrivatePool pool(a);
  PrivatePoolScope scope(pool, *stream);
  const int syncs = small_device.synchronize_calls;
  EXPECT_THROW(a.allocate(40 * kMiB, stream.get()), Error);
  EXPECT_EQ(small_device.synchronize_calls, syncs) << "a device-wide wait would break the capture";
  a.empty_cache();
  EXPECT_EQ(small_device.synchronize_calls, syncs);
  a.check_invariants();
}

TEST_F(PoolFixture, MisuseIsAnErrorThatSaysWhat) {
  PrivatePool pool(alloc);
  PrivatePool other(alloc);
  {
    PrivatePoolScope scope(pool, *s);
    EXPECT_NE(error_of([&] { PrivatePoolScope nested(other, *s); }).find("do not nest"), std::string::npos);
    EXPECT_NE(error_of([&] { pool.release(); }).find("still allocate to private pool"), std::string::npos);
    EXPECT_NE(error_of([&] {
                alloc.end_allocate_to_pool(other.id(), *s);
              }).find("allocates to private pool " + std::to_string(pool.id())),
              std::string::npos);
  }
  EXPECT_NE(error_of([&] { alloc.end_allocate_to_pool(pool.id(), *s); }).find("no begin_allocate_to_pool"),
            std::string::npos);
  const std::uint64_t id = pool.id();
  pool.release();
  EXPECT_NE(error_of([&] { alloc.release_pool(id); }).find("does not exist"), std::string::npos);
  EXPECT_NE(error_of([&] { alloc.begin_allocate_to_pool(id, *s); }).find("does not exist"),
            std::string::npos);
  EXPECT_NE(error_of([&] { PrivatePoolScope released(pool, *s); }).find("empty"), std::string::npos);

  AllocatorConfig uncached;
  uncached.caching = false;
  CachingAllocator no_cache{fake, uncached, "fake:nocache"};
  const std::string refused = error_of([&] { PrivatePool p(no_cache); });
  EXPECT_NE(refused.find("GALLEY_NO_CACHING"), std::string::npos) << refused;

  // A runtime stream of the cpu device is not a stream of the fake device's allocator.
  runtime::Stream cpu_stream(runtime::device("cpu"));
  EXPECT_NE(error_of([&] { PrivatePoolScope wrong(other, cpu_stream); }).find("stream is on cpu"),
            std::string::npos);
  alloc.check_invariants();
}

TEST_F(PoolFixture, MovedPoolsReleaseOnce) {
  PrivatePool a(alloc);
  const std::uint64_t id = a.id();
  PrivatePool b(std::move(a));
  EXPECT_FALSE(a);
  EXPECT_EQ(b.id(), id);
  PrivatePool c(alloc);
  c = std::move(b);  // c's own pool is released here
  EXPECT_EQ(c.id(), id);
  EXPECT_NO_THROW(c.release());
  alloc.check_invariants();
}

// The cpu device's process-wide allocator takes the same path a GPU's does.
TEST(PrivatePoolCpu, IsolationOnTheCpuDevicesAllocator) {
  const runtime::Device cpu = runtime::device("cpu");
  CachingAllocator& alloc = allocator_for(cpu);
  runtime::Stream stream(cpu);
  runtime::Stream other(cpu);
  PrivatePool pool(alloc);
  void* freed = nullptr;
  {
    PrivatePoolScope scope(pool, stream);
    Buffer b = allocate(stream, 48 * kKiB);
    freed = b.data();
  }
  std::vector<Buffer> outside;
  for (int i = 0; i < 8; ++i) {
    outside.push_back(allocate(stream, 48 * kKiB));
    outside.push_back(allocate(other, 48 * kKiB));
    outside.push_back(allocate(cpu, 48 * kKiB));
  }
  for (const Buffer& b : outside) EXPECT_NE(b.data(), freed);
  {
    PrivatePoolScope scope(pool, stream);
    Buffer again = allocate(stream, 48 * kKiB);
    EXPECT_EQ(again.data(), freed);
  }
  alloc.check_invariants();
}

}  // namespace
}  // namespace galley::memory
