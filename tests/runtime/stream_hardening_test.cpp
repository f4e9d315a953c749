// Streams on error paths and under load: a failed task is reported once and the stream goes on,
// host memory outlives the work queued on it, and a queue holds a bounded number of tasks.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "backends/cpu/cpu_stream.hpp"
#include "galley/core/error.hpp"
#include "galley/runtime/stream.hpp"

namespace galley::runtime {
namespace {

using namespace std::chrono_literals;

// Holds a stream's worker inside a task until open() is called.
class Gate {
 public:
  void wait() {
    std::unique_lock lock(mutex_);
    opened_.wait(lock, [&] { return open_; });
  }
  void open() {
    {
      std::lock_guard lock(mutex_);
      open_ = true;
    }
    opened_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable opened_;
  bool open_ = false;
};

TEST(StreamFailure, IsReportedOnceAndTheStreamStaysUsable) {
  Stream stream(device("cpu"));
  std::atomic<int> ran{0};
  stream.host_task([] { throw Error(Status::backend_error, "first failure"); });
  stream.host_task([] { throw Error(Status::backend_error, "second failure"); });
  stream.host_task([&] { ++ran; });
  try {
    stream.synchronize();
    FAIL() << "the failed task was not reported";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "first failure");
  }
  EXPECT_EQ(ran.load(), 1) << "work after a failed task still runs";
  EXPECT_NO_THROW(stream.synchronize()) << "a failure is reported once";
  std::vector<int> src(1000, 7), dst(1000, 0);
  stream.copy_h2h(dst.data(), src.data(), src.size() * sizeof(int));
  EXPECT_NO_THROW(stream.synchronize());
  EXPECT_EQ(dst, src);
}

TEST(StreamFailure, AnErrorThrownOnTheHostWhileWorkIsQueuedNeverFreesMemoryTheWorkUses) {
  // The shape of the crash: a host buffer a queued copy writes into goes out of scope because an
  // Error unwinds the caller. SynchronizeOnExit, declared after the buffer, waits for the copy.
  Stream stream(device("cpu"));
  auto gate = std::make_shared<Gate>();
  std::vector<unsigned char> source(std::size_t{8} << 20, 0x5A);
  std::atomic<bool> copy_done{false};
  const auto start = std::chrono::steady_clock::now();
  try {
    std::vector<unsigned char> destination(source.size(), 0);
    SynchronizeOnExit stream_done(stream);
    stream.host_task([gate] { gate->wait(); });
    stream.copy_h2h(destination.data(), source.data(), source.size());
    stream.host_task([&] { copy_done = true; });
    std::thread opener([gate] {
      std::this_thread::sleep_for(100ms);
      gate->open();
    });
    opener.detach();
    throw Error(Status::invalid_argument, "late error while the copy is queued");
  } catch (const Error&) {
  }
  EXPECT_TRUE(copy_done.load()) << "the guard returned before the queued copy finished";
  EXPECT_GE(std::chrono::steady_clock::now() - start, 90ms);
}

TEST(StreamFailure, TheGuardLeavesAFailedTaskForSynchronize) {
  Stream stream(device("cpu"));
  {
    SynchronizeOnExit stream_done(stream);
    stream.host_task([] { throw Error(Status::backend_error, "kept for synchronize"); });
  }
  try {
    stream.synchronize();
    FAIL() << "the guard swallowed the failure";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "kept for synchronize");
  }
}

TEST(PinnedBufferLifetime, DestructionWaitsForWorkStillQueuedOnIt) {
  const Device cpu = device("cpu");
  Stream stream(cpu);
  auto gate = std::make_shared<Gate>();
  std::vector<unsigned char> source(std::size_t{4} << 20, 0xA5);
  std::atomic<bool> copy_done{false};
  {
    PinnedBuffer pinned(cpu, source.size());
    stream.host_task([gate] { gate->wait(); });
    stream.copy_h2h(pinned.data(), source.data(), source.size());
    stream.host_task([&] { copy_done = true; });
    std::thread([gate] {
      std::this_thread::sleep_for(50ms);
      gate->open();
    }).detach();
  }  // freed here: only after the copy into it has run
  EXPECT_TRUE(copy_done.load());
  EXPECT_NO_THROW(stream.synchronize());
}

TEST(PinnedBufferLifetime, AnImpossibleSizeIsAnOutOfMemoryError) {
  try {
    PinnedBuffer huge(device("cpu"), std::size_t{1} << 63);
    FAIL() << "a 2^63-byte pinned buffer was allocated";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::out_of_memory) << e.what();
  }
}

TEST(StreamQueue, SubmitBlocksWhenTheQueueIsFull) {
  backends::cpu::CpuStream stream;
  auto gate = std::make_shared<Gate>();
  stream.submit([gate] { gate->wait(); });
  const std::size_t total = backends::cpu::kMaxQueuedTasks * 3;
  std::atomic<std::size_t> submitted{0};
  std::atomic<std::size_t> ran{0};
  std::thread producer([&] {
    for (std::size_t i = 0; i < total; ++i) {
      stream.submit([&] { ++ran; });
      ++submitted;
    }
  });
  // Give the producer time to run far past the bound if nothing stopped it.
  for (int i = 0; i < 50 && submitted.load() < backends::cpu::kMaxQueuedTasks; ++i)
    std::this_thread::sleep_for(10ms);
  std::this_thread::sleep_for(100ms);
  EXPECT_LE(stream.queued(), backends::cpu::kMaxQueuedTasks);
  EXPECT_LE(submitted.load(), backends::cpu::kMaxQueuedTasks) << "submit did not block on a full queue";
  EXPECT_EQ(ran.load(), 0u);
  gate->open();
  producer.join();
  stream.synchronize();
  EXPECT_EQ(ran.load(), total) << "every task submitted under backpressure ran";
}

TEST(StreamQueue, ATaskMaySubmitToItsOwnFullStream) {
  backends::cpu::CpuStream stream;
  auto gate = std::make_shared<Gate>();
  std::atomic<int> follow_ups{0};
  // The first task waits until the queue is full, then enqueues more work on its own stream: a
  // blocking submit there would wait on itself forever.
  stream.submit([&stream, gate, &follow_ups] {
    gate->wait();
    for (int i = 0; i < 10; ++i) stream.submit([&follow_ups] { ++follow_ups; });
  });
  std::thread producer([&] {
    for (std::size_t i = 0; i < backends::cpu::kMaxQueuedTasks; ++i) stream.submit([] {});
  });
  while (stream.queued() < backends::cpu::kMaxQueuedTasks) std::this_thread::sleep_for(1ms);
  gate->open();
  producer.join();
  stream.synchronize();
  EXPECT_EQ(follow_ups.load(), 10);
}

}  // namespace
}  // namespace galley::runtime
