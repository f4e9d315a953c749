// Randomised alloc/free/use/record_stream/complete sequences with fixed seeds, checked after every
// step against the allocator's own invariants and against a shadow model: live buffers never
// overlap and keep their contents, no memory is handed to a stream while another stream's work
// on it may still run, counters match the model, reserved bytes match what the fake device holds.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <random>
#include <thread>
#include <vector>

#include "memory/caching_allocator.hpp"
#include "memory/fake_device.hpp"

namespace galley::memory {
namespace {

using testing::FakeDevice;
using testing::FakeStream;
constexpr std::size_t kKiB = 1024;
constexpr std::size_t kMiB = 1024 * 1024;

struct Live {
  Buffer buffer;
  FakeStream* stream = nullptr;  // nullptr: allocated without a stream
  std::vector<FakeStream*> recorded;
  std::map<FakeStream*, std::uint64_t> last_use;  // per stream, the last work using the buffer
  std::uint64_t tag = 0;
};

// Memory that some stream's work (up to seq) may still touch.
struct Hazard {
  const char* lo;
  const char* hi;
  FakeStream* stream;
  std::uint64_t seq;
};

// A buffer's first and last 8 bytes hold its tag; below 16 bytes the two would overlap (a tail
// written over part of the head), so the head alone, or one byte below 8.
void write_tag(const Buffer& b, std::uint64_t tag) {
  auto* p = b.as<unsigned char>();
  if (b.size() >= 2 * sizeof tag) {
    std::memcpy(p, &tag, sizeof tag);
    std::memcpy(p + b.size() - sizeof tag, &tag, sizeof tag);
  } else if (b.size() >= sizeof tag) {
    std::memcpy(p, &tag, sizeof tag);
  } else {
    p[0] = static_cast<unsigned char>(tag);
  }
}

bool tag_intact(const Buffer& b, std::uint64_t tag) {
  const auto* p = b.as<unsigned char>();
  if (b.size() < sizeof tag) return p[0] == static_cast<unsigned char>(tag);
  std::uint64_t head, tail;
  std::memcpy(&head, p, sizeof head);
  if (b.size() < 2 * sizeof tag) return head == tag;
  std::memcpy(&tail, p + b.size() - sizeof tail, sizeof tail);
  return head == tag && tail == tag;
}

AllocatorConfig config_for(int variant) {
  switch (variant % 4) {
    case 1:
      return AllocatorConfig::parse("max_split_mb:48,max_non_split_rounding_mb:8");
    case 2:
      return AllocatorConfig::parse("roundup_power2_divisions:4");
    case 3: {
      AllocatorConfig c;
      c.caching = false;
      return c;
    }
    default:
      return AllocatorConfig{};
  }
}

std::size_t random_size(std::mt19937_64& rng) {
  const auto r = rng() % 100;
  if (r < 55) return 1 + rng() % (64 * kKiB);
  if (r < 80) return 1 + rng() % kMiB;
  if (r < 97) return kMiB + rng() % (12 * kMiB);
  return 12 * kMiB + rng() % (60 * kMiB);
}

void run_sequence(std::uint64_t seed, int steps) {
  SCOPED_TRACE("seed " + std::to_string(seed));
  FakeDevice fake{256 * kMiB};
  std::vector<std::unique_ptr<FakeStream>> streams;
  for (int i = 0; i < 3; ++i) streams.push_back(fake.make_stream());
  const AllocatorConfig config = config_for(static_cast<int>(seed));
  CachingAllocator alloc{fake, config, "fake:0"};
  std::mt19937_64 rng(seed);

  std::vector<Live> live;
  std::vector<Hazard> hazards;
  std::uint64_t attempts = 0, ooms = 0, next_tag = 1;
  std::int64_t requested = 0, requested_peak = 0;

  const auto pick_stream = [&]() -> FakeStream* {
    const auto i = rng() % 4;
    return i == 3 ? nullptr : streams[i].get();
  };

  for (int step = 0; step < steps; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    const auto op = rng() % 100;
    if (op < 36 && live.size() < 40) {
      const std::size_t size = random_size(rng);
      FakeStream* stream = pick_stream();
      ++attempts;
      Live entry;
      try {
        entry.buffer = alloc.allocate(size, stream);
      } catch (const Error& e) {
        ASSERT_EQ(e.status(), Status::out_of_memory) << e.what();
        ++ooms;
        continue;
      }
      const char* lo = entry.buffer.as<char>();
      const char* hi = lo + size;
      for (const auto& h : hazards) {
        const bool overlaps = lo < h.hi && h.lo < hi;
        if (overlaps && !h.stream->done(h.seq)) {
          ASSERT_TRUE(stream == h.stream) << "memory handed to another stream while work on it may still run";
        }
      }
      entry.stream = stream;
      entry.tag = next_tag++;
      write_tag(entry.buffer, entry.tag);
      requested += static_cast<std::int64_t>(size);
      requested_peak = std::max(requested_peak, requested);
      live.push_back(std::move(entry));
    } else if (op < 68) {  // also when the alloc branch declined: keeps ~20 buffers live
      if (live.empty()) continue;
      const auto i = rng() % live.size();
      Live& victim = live[i];
      ASSERT_TRUE(tag_intact(victim.buffer, victim.tag)) << "buffer contents overwritten: overlapping memory";
      const char* lo = victim.buffer.as<char>();
      for (const auto& [stream, seq] : victim.last_use) {
        if (!stream->done(seq)) hazards.push_back({lo, lo + victim.buffer.size(), stream, seq});
      }
      requested -= static_cast<std::int64_t>(victim.buffer.size());
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
    } else if (op < 80) {
      // Work using a buffer, on its own stream or on one it was recorded on.
      if (live.empty()) continue;
      Live& user = live[rng() % live.size()];
      std::vector<FakeStream*> allowed = user.recorded;
      if (user.stream != nullptr) allowed.push_back(user.stream);
      if (allowed.empty()) continue;
      FakeStream* stream = allowed[rng() % allowed.size()];
      user.last_use[stream] = stream->enqueue();
    } else if (op < 87) {
      if (live.empty()) continue;
      Live& user = live[rng() % live.size()];
      FakeStream* stream = streams[rng() % streams.size()].get();
      alloc.record_stream(user.buffer, *stream);
      if (stream != user.stream) user.recorded.push_back(stream);
    } else if (op < 98) {
      FakeStream* stream = streams[rng() % streams.size()].get();
      if (rng() % 2 == 0) {
        stream->complete();
      } else {
        stream->complete_up_to(stream->progress()->completed + 1 + rng() % 4);
      }
    } else {
      alloc.empty_cache();
    }
    std::erase_if(hazards, [](const Hazard& h) { return h.stream->done(h.seq); });

    ASSERT_NO_THROW(alloc.check_invariants());
    const auto st = alloc.stats();
    ASSERT_EQ(st.allocation.all.current, static_cast<std::int64_t>(live.size()));
    ASSERT_EQ(st.requested_bytes.all.current, requested);
    ASSERT_EQ(st.requested_bytes.all.peak, requested_peak);
    ASSERT_EQ(st.num_ooms, ooms);
    ASSERT_EQ(st.cache_hits + st.cache_misses, attempts);
    ASSERT_EQ(static_cast<std::int64_t>(fake.used()), st.reserved_bytes.all.current);
    ASSERT_EQ(static_cast<std::int64_t>(st.num_device_alloc - st.num_device_free), st.segment.all.current);
    ASSERT_EQ(static_cast<std::uint64_t>(fake.raw_free_calls), st.num_device_free);
    ASSERT_EQ(fake.bad_frees, 0);
    ASSERT_LE(st.allocated_bytes.all.current, st.reserved_bytes.all.current);
    std::int64_t rounded = 0;
    for (const auto& l : live) {
      rounded +=
          static_cast<std::int64_t>(config.caching ? (l.buffer.size() + 511) / 512 * 512 : l.buffer.size());
    }
    if (config.caching) {
      ASSERT_GE(st.allocated_bytes.all.current, rounded);
    } else {
      ASSERT_EQ(st.allocated_bytes.all.current, rounded);
    }
    std::vector<std::pair<const char*, const char*>> ranges;
    for (const auto& l : live)
      ranges.emplace_back(l.buffer.as<char>(), l.buffer.as<char>() + l.buffer.size());
    std::sort(ranges.begin(), ranges.end());
    for (std::size_t i = 1; i < ranges.size(); ++i)
      ASSERT_LE(ranges[i - 1].second, ranges[i].first) << "overlap";
  }
  ASSERT_GT(attempts, 0u);
  live.clear();
  alloc.empty_cache();
  EXPECT_EQ(fake.used(), 0u) << "after freeing everything and empty_cache nothing stays reserved";
  EXPECT_EQ(alloc.stats().allocated_bytes.all.current, 0);
  alloc.check_invariants();
}

class AllocatorProperty : public ::testing::TestWithParam<std::uint64_t> {};

TEST_P(AllocatorProperty, RandomSequencesKeepEveryInvariant) { run_sequence(GetParam(), 3000); }

// Seeds 1-8 cover each configuration (default, max_split, power-of-two rounding, no caching) twice.
INSTANTIATE_TEST_SUITE_P(Seeds, AllocatorProperty, ::testing::Range<std::uint64_t>(1, 9));

TEST(AllocatorThreads, ConcurrentAllocAndFreeStayConsistent) {
  FakeDevice fake{std::size_t{1} << 30};
  CachingAllocator alloc{fake, AllocatorConfig{}, "fake:0"};
  constexpr int kThreads = 4;
  std::vector<std::unique_ptr<FakeStream>> streams;
  for (int i = 0; i < kThreads; ++i) streams.push_back(fake.make_stream());
  std::vector<std::thread> threads;
  std::vector<int> failures(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(100 + t);
      std::vector<std::pair<Buffer, std::uint64_t>> mine;
      for (int i = 0; i < 20000; ++i) {
        if (mine.size() < 32 && rng() % 2 == 0) {
          // Half on the thread's stream, half stream-less.
          Buffer b = alloc.allocate(1 + rng() % (256 * kKiB), rng() % 2 ? streams[t].get() : nullptr);
          const std::uint64_t tag = (static_cast<std::uint64_t>(t) << 32) | static_cast<std::uint64_t>(i);
          write_tag(b, tag);
          mine.emplace_back(std::move(b), tag);
        } else if (!mine.empty()) {
          const auto k = rng() % mine.size();
          if (!tag_intact(mine[k].first, mine[k].second)) ++failures[t];
          mine.erase(mine.begin() + static_cast<std::ptrdiff_t>(k));
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], 0) << "thread " << t;
  alloc.check_invariants();
  EXPECT_EQ(alloc.stats().allocation.all.current, 0);
}

}  // namespace
}  // namespace galley::memory
