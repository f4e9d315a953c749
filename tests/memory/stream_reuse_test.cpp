// Stream-ordered reuse: a block freed on S is reused at once on S, never by another stream while
// S may still use it; record_stream delays reuse until events recorded at the free complete.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "memory/caching_allocator.hpp"
#include "memory/fake_device.hpp"

namespace galley::memory {
namespace {

using testing::FakeDevice;
constexpr std::size_t kKiB = 1024;

struct StreamReuse : ::testing::Test {
  FakeDevice fake{std::size_t{1} << 30};
  std::unique_ptr<testing::FakeStream> s = fake.make_stream();
  std::unique_ptr<testing::FakeStream> t = fake.make_stream();
  CachingAllocator alloc{fake, AllocatorConfig{}, "fake:0"};

  std::string state_of(const void* ptr) {
    const auto snap = nlohmann::json::parse(alloc.snapshot_json());
    for (const auto& seg : snap["segments"]) {
      for (const auto& blk : seg["blocks"]) {
        if (blk["address"].get<std::uintptr_t>() == reinterpret_cast<std::uintptr_t>(ptr))
          return blk["state"];
      }
    }
    return "missing";
  }
};

TEST_F(StreamReuse, BlockFreedOnOneStreamIsNotGivenToAnother) {
  Buffer a = alloc.allocate(4 * kKiB, s.get());
  void* ptr = a.data();
  s->enqueue();  // a kernel on S still using the block
  a.reset();
  Buffer b = alloc.allocate(4 * kKiB, t.get());
  EXPECT_NE(b.data(), ptr);
  Buffer c = alloc.allocate(4 * kKiB, s.get());
  EXPECT_EQ(c.data(), ptr);
  EXPECT_EQ(fake.records, 0);
  alloc.check_invariants();
}

TEST_F(StreamReuse, RecordStreamWaitsForEventsRecordedAtTheFree) {
  Buffer a = alloc.allocate(4 * kKiB, s.get());
  void* ptr = a.data();
  alloc.record_stream(a, *t);
  alloc.record_stream(a, *t);  // recording twice is the same as once
  alloc.record_stream(a, *s);  // the owning stream adds nothing
  t->enqueue();         // T's work using the buffer
  a.reset();
  EXPECT_EQ(fake.records, 2) << "one event on S and one on T, recorded at the free";
  EXPECT_EQ(state_of(ptr), "active_awaiting_free");
  auto st = alloc.stats();
  EXPECT_EQ(st.allocation.all.current, 0);
  EXPECT_EQ(st.active.all.current, 1);

  // Not even S may reuse it while T's work is pending.
  Buffer b = alloc.allocate(4 * kKiB, s.get());
  EXPECT_NE(b.data(), ptr);
  b.reset();
  s->complete();
  Buffer c = alloc.allocate(4 * kKiB, s.get());
  EXPECT_NE(c.data(), ptr) << "T's event has not completed";
  c.reset();
  t->complete();
  // Both events done: the block is back (merged with S's free rest of the segment).
  Buffer d = alloc.allocate(4 * kKiB, s.get());
  EXPECT_EQ(d.data(), ptr);
  EXPECT_EQ(state_of(ptr), "active_allocated");
  EXPECT_EQ(alloc.stats().active.all.current, 1);
  alloc.check_invariants();
}

TEST_F(StreamReuse, CompletedRecordStreamBlockIsFreeForAnyStream) {
  Buffer left = alloc.allocate(4 * kKiB, s.get());
  Buffer a = alloc.allocate(4 * kKiB, s.get());
  Buffer right = alloc.allocate(4 * kKiB, s.get());  // live neighbours: nothing to merge with
  void* ptr = a.data();
  alloc.record_stream(a, *t);
  t->enqueue();
  a.reset();
  Buffer early = alloc.allocate(4 * kKiB, s.get());
  EXPECT_NE(early.data(), ptr) << "T's work is pending";
  early.reset();
  s->complete();
  t->complete();
  Buffer later = alloc.allocate(4 * kKiB, t.get());  // another stream than the one it was allocated on
  EXPECT_EQ(later.data(), ptr);
  alloc.check_invariants();
}

TEST_F(StreamReuse, EventsArePooled) {
  for (int i = 0; i < 50; ++i) {
    Buffer a = alloc.allocate(4 * kKiB, s.get());
    alloc.record_stream(a, *t);
    a.reset();
    s->complete();
    t->complete();
  }
  EXPECT_LE(fake.events_created, 4);
  EXPECT_EQ(fake.records, 100);
  alloc.check_invariants();
}

TEST_F(StreamReuse, NoStreamBufferIsReusableByAnyStream) {
  Buffer a = alloc.allocate(4 * kKiB);
  void* ptr = a.data();
  a.reset();  // caller synchronised: free for everyone
  Buffer b = alloc.allocate(4 * kKiB, t.get());
  EXPECT_EQ(b.data(), ptr);
  b.reset();
  // ...but once T freed it, only T (or, after a device sync, anyone) may take it.
  Buffer c = alloc.allocate(4 * kKiB, s.get());
  EXPECT_NE(c.data(), ptr);
  alloc.check_invariants();
}

TEST_F(StreamReuse, EmptyCacheWaitsForPendingEvents) {
  Buffer a = alloc.allocate(4 * kKiB, s.get());
  alloc.record_stream(a, *t);
  t->enqueue();
  a.reset();
  EXPECT_EQ(alloc.stats().reserved_bytes.all.current, std::int64_t{2} << 20);
  alloc.empty_cache();  // synchronises the device, so the events complete and the segment goes
  EXPECT_EQ(alloc.stats().reserved_bytes.all.current, 0);
  EXPECT_EQ(fake.used(), 0u);
  alloc.check_invariants();
}

TEST_F(StreamReuse, OomRetryMakesOtherStreamsBlocksAvailable) {
  FakeDevice small{std::size_t{4} << 20};  // room for two small segments
  auto s2 = small.make_stream();
  auto t2 = small.make_stream();
  CachingAllocator tight{small, AllocatorConfig{}, "fake:1"};
  Buffer keep_s = tight.allocate(4 * kKiB, s2.get());  // segment 1, split: the rest cached for S
  Buffer keep_t = tight.allocate(4 * kKiB, t2.get());  // segment 2 for T
  Buffer fill_t1 = tight.allocate(1u << 20, t2.get());
  Buffer fill_t2 = tight.allocate((1u << 20) - 4 * kKiB, t2.get());  // T's segment is now full
  Buffer from_s = tight.allocate(kKiB << 9, t2.get());  // 512 KiB: only S's cached rest can serve it
  EXPECT_EQ(tight.stats().num_alloc_retries, 1u);
  EXPECT_EQ(tight.stats().num_ooms, 0u);
  EXPECT_GE(small.synchronize_calls, 1);
  EXPECT_EQ(tight.stats().segment.all.current, 2);
  tight.check_invariants();
}

}  // namespace
}  // namespace galley::memory
