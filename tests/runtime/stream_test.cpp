#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <chrono>
#include <cstring>
#include <mutex>
#include <numeric>
#include <thread>
#include <vector>

#include "common/scoped_env.hpp"
#include "galley/core/error.hpp"
#include "galley/runtime/stream.hpp"

namespace galley::runtime {
namespace {

using namespace std::chrono_literals;

TEST(CpuStream, EnqueueReturnsBeforeTheWorkRuns) {
  Stream stream(device("cpu"));
  std::atomic<bool> release{false};
  std::atomic<bool> ran{false};
  stream.host_task([&] {
    while (!release.load()) std::this_thread::sleep_for(1ms);
  });
  stream.host_task([&] { ran = true; });
  // Both calls returned although the first task is still blocked.
  EXPECT_FALSE(ran.load());
  EXPECT_FALSE(stream.query());
  release = true;
  stream.synchronize();
  EXPECT_TRUE(ran.load());
  EXPECT_TRUE(stream.query());
}

// Vendor handles remember their stream by id(): a new stream must never carry an old one's id, even
// where its native handle is a destroyed stream's address.
TEST(Stream, IdsAreNeverReused) {
  std::vector<std::uint64_t> seen;
  for (int i = 0; i < 4; ++i) {
    Stream a(device("cpu"));
    Stream b(device("cpu"));
    seen.push_back(a.id());
    seen.push_back(b.id());
  }
  Stream moved_from(device("cpu"));
  const std::uint64_t id = moved_from.id();
  Stream moved = std::move(moved_from);
  EXPECT_EQ(moved.id(), id);
  seen.push_back(id);
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(std::adjacent_find(seen.begin(), seen.end()), seen.end());
  EXPECT_EQ(std::count(seen.begin(), seen.end(), std::uint64_t{0}), 0);
}

TEST(CpuStream, OrderIsKept) {
  Stream stream(device("cpu"));
  std::vector<int> order;
  for (int i = 0; i < 200; ++i) stream.host_task([&order, i] { order.push_back(i); });
  stream.synchronize();
  std::vector<int> expected(200);
  std::iota(expected.begin(), expected.end(), 0);
  EXPECT_EQ(order, expected);
}

TEST(CpuStream, CrossStreamEventWait) {
  const auto cpu = device("cpu");
  Stream producer(cpu), consumer(cpu);
  Event ready(cpu);
  std::atomic<int> value{0};
  std::atomic<bool> release{false};
  producer.host_task([&] {
    while (!release.load()) std::this_thread::sleep_for(1ms);
    value = 42;
  });
  ready.record(producer);
  consumer.wait(ready);
  int seen = -1;
  consumer.host_task([&] { seen = value.load(); });
  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(consumer.query());  // blocked behind the event
  EXPECT_FALSE(ready.query());
  release = true;
  consumer.synchronize();
  EXPECT_EQ(seen, 42);
  EXPECT_TRUE(ready.query());
}

TEST(CpuStream, EventsMeasureElapsedTime) {
  const auto cpu = device("cpu");
  Stream stream(cpu);
  Event start(cpu), stop(cpu);
  start.record(stream);
  stream.host_task([] { std::this_thread::sleep_for(30ms); });
  stop.record(stream);
  stop.synchronize();
  const float ms = stop.elapsed_ms_since(start);
  EXPECT_GE(ms, 25.f);
  EXPECT_LT(ms, 2000.f);
  Event never(cpu);
  EXPECT_THROW(never.elapsed_ms_since(start), Error);
}

TEST(CpuStream, ErrorsInTasksSurfaceAtSynchronize) {
  Stream stream(device("cpu"));
  stream.host_task([] { throw Error(Status::backend_error, "kernel exploded"); });
  try {
    stream.synchronize();
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("kernel exploded"), std::string::npos);
  }
  EXPECT_NO_THROW(stream.synchronize());  // reported once
}

TEST(CpuStream, GraphCaptureAndReplay) {
  Stream stream(device("cpu"));
  std::vector<float> a(1000, 1.f), b(1000, 0.f);
  int runs = 0;
  stream.begin_capture();
  stream.copy_h2h(b.data(), a.data(), a.size() * sizeof(float));
  stream.host_task([&] { ++runs; });
  Graph graph = stream.end_capture();
  EXPECT_EQ(graph.node_count(), 2u);
  stream.synchronize();
  EXPECT_EQ(runs, 0);  // captured, not run
  EXPECT_EQ(b[0], 0.f);
  graph.replay(stream);
  graph.replay(stream);
  stream.synchronize();
  EXPECT_EQ(runs, 2);
  EXPECT_EQ(b[999], 1.f);
  EXPECT_THROW(stream.end_capture(), Error);
}

TEST(CpuStream, CopiesOfEverySizeAndAlignment) {
  const auto cpu = device("cpu");
  Stream stream(cpu);
  const std::size_t big = (std::size_t{3} << 20) + 7;
  std::vector<unsigned char> src(big + 16), dst(big + 16);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 131 + 7);
  for (std::size_t size : {std::size_t{0}, std::size_t{1}, std::size_t{13}, std::size_t{4097}, big}) {
    for (std::size_t misalign : {0, 1, 3}) {
      std::fill(dst.begin(), dst.end(), 0xEE);
      stream.copy_h2d(dst.data() + misalign, src.data() + (3 - misalign), size);
      stream.synchronize();
      EXPECT_EQ(std::memcmp(dst.data() + misalign, src.data() + (3 - misalign), size), 0) << size;
      EXPECT_EQ(dst[misalign + size], 0xEE) << "wrote past the end for size " << size;
      stream.copy_d2h(dst.data(), src.data() + misalign, size);
      stream.copy_d2d(dst.data(), src.data() + misalign, size);
      stream.copy_h2h(dst.data(), src.data() + misalign, size);
      stream.synchronize();
      EXPECT_EQ(std::memcmp(dst.data(), src.data() + misalign, size), 0) << size;
    }
  }
  stream.memset(dst.data() + 1, 0x5A, 1001);
  stream.synchronize();
  EXPECT_EQ(dst[0], src[0 + 3]);
  EXPECT_EQ(dst[1], 0x5A);
  EXPECT_EQ(dst[1001], 0x5A);
}

TEST(CpuStream, BadCopyArgumentsAreErrors) {
  Stream stream(device("cpu"));
  std::vector<char> buffer(16);
  EXPECT_THROW(stream.copy_h2d(nullptr, buffer.data(), 8), Error);
  EXPECT_THROW(stream.copy_d2h(buffer.data(), nullptr, 8), Error);
  EXPECT_THROW(stream.memset(nullptr, 0, 8), Error);
  try {
    stream.copy_d2d(buffer.data(), buffer.data() + 8, SIZE_MAX);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("overflows"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(stream.copy_h2d(nullptr, nullptr, 0));  // empty copies are no-ops
  EXPECT_THROW(stream.host_task({}), Error);
}

TEST(CpuStream, PinnedBuffersAreUsable) {
  const auto cpu = device("cpu");
  PinnedBuffer pinned(cpu, 4096);
  ASSERT_NE(pinned.data(), nullptr);
  std::memset(pinned.data(), 1, 4096);
  PinnedBuffer moved = std::move(pinned);
  EXPECT_EQ(moved.size(), 4096u);
  EXPECT_EQ(pinned.data(), nullptr);
  try {
    PinnedBuffer huge(cpu, SIZE_MAX);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::out_of_memory);
  }
}

}  // namespace
}  // namespace galley::runtime

namespace galley::runtime {
namespace {

TEST(LaunchBlocking, FailureNamesTheOp) {
  Stream stream(device("cpu"));
  {
    testing::ScopedEnv blocking("GALLEY_LAUNCH_BLOCKING", "1");
    try {
      stream.launch("conv.fwd[test]",
                    [&] { stream.host_task([] { throw Error(Status::backend_error, "bad kernel"); }); });
      FAIL() << "the failing op was not reported at launch";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("conv.fwd[test]"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("bad kernel"), std::string::npos) << e.what();
    }
  }
  // Without it the launch returns at once and the error waits for synchronize().
  stream.launch("late", [&] { stream.host_task([] { throw Error(Status::backend_error, "later"); }); });
  EXPECT_THROW(stream.synchronize(), Error);
  // A bad value fails the first call into the library that reads the configuration, here a
  // stream's creation, before anything is queued.
  testing::ScopedEnv blocking("GALLEY_LAUNCH_BLOCKING", "perhaps");
  try {
    Stream another(device("cpu"));
    FAIL() << "GALLEY_LAUNCH_BLOCKING=perhaps accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("GALLEY_LAUNCH_BLOCKING='perhaps'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace galley::runtime
