// The cuda plugin through the neutral runtime API: properties and readiness, copies in every
// direction (pageable and pinned, sizes around the staging chunk edges, misaligned pointers),
// memset, host tasks and their errors, events, cross-stream waits, graph capture and replay, and
// clear errors on bad input. Every test skips with the registry's reason when no CUDA device is
// visible (no driver, no GPU, plugin not built).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "galley/core/error.hpp"
#include "gpu_test_util.hpp"
#include "runtime/backend.hpp"

namespace galley::runtime {
namespace {

using namespace std::chrono_literals;
using galley::testing::DeviceMemory;
using galley::testing::random_bytes;

class CudaRuntime : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    auto found = galley::testing::first_device("cuda", why);
    if (!found) GTEST_SKIP() << "no CUDA device: " << why;
    device_ = *found;
  }
  Device device_;
};

TEST(CudaPlugin, IsReportedWithAReasonWhenItHasNoDevices) {
  bool seen = false;
  for (const auto& r : backend_reports()) {
    if (r.name != "cuda") continue;
    seen = true;
    if (!r.loaded || r.device_count == 0) {
      EXPECT_FALSE(r.reason.empty()) << "a cuda backend without devices must say why";
    } else {
      EXPECT_TRUE(r.reason.empty()) << r.reason;
    }
  }
  EXPECT_TRUE(seen) << "the registry must report the cuda backend even when it cannot load";
}

TEST_F(CudaRuntime, PropertiesDescribeTheDevice) {
  const auto p = device_.properties();
  EXPECT_FALSE(p.name.empty());
  EXPECT_EQ(p.backend, "cuda");
  EXPECT_EQ(p.arch.rfind("sm_", 0), 0u) << p.arch;
  EXPECT_GT(p.compute_units, 0);
  EXPECT_GT(p.memory_total, std::size_t{1} << 30);
  EXPECT_GT(p.memory_free, 0u);
  EXPECT_LE(p.memory_free, p.memory_total);
  EXPECT_GT(p.clock_mhz, 0);
  EXPECT_GT(p.l2_bytes, 0u);
  EXPECT_FALSE(p.driver_version.empty());
  EXPECT_FALSE(p.runtime_version.empty());
  ASSERT_FALSE(p.built_for.empty());
  EXPECT_EQ(p.built_for.front().rfind("sm_", 0), 0u);
}

TEST_F(CudaRuntime, ReadinessIsOkOnASupportedGpu) {
  const auto lines = device_.impl().readiness();
  ASSERT_GE(lines.size(), 3u);
  bool arch_line = false;
  for (const auto& line : lines) {
    EXPECT_TRUE(line.ends_with(": ok")) << line;
    arch_line = arch_line || line.rfind("built for ", 0) == 0;
  }
  EXPECT_TRUE(arch_line);
}

// Host -> device -> device -> host for one size and host offset, from pageable or pinned memory.
void round_trip(const Device& device, Stream& stream, std::size_t bytes, std::size_t offset, bool pinned,
                std::uint32_t seed) {
  SCOPED_TRACE("bytes=" + std::to_string(bytes) + " offset=" + std::to_string(offset) +
               (pinned ? " pinned" : " pageable"));
  const auto data = random_bytes(bytes, seed);
  const std::size_t span = bytes + offset + 1;
  std::vector<unsigned char> pageable_src(span), pageable_dst(span, 0xEE);
  PinnedBuffer pinned_src(device, span), pinned_dst(device, span);
  unsigned char* src = pinned ? static_cast<unsigned char*>(pinned_src.data()) : pageable_src.data();
  unsigned char* dst = pinned ? static_cast<unsigned char*>(pinned_dst.data()) : pageable_dst.data();
  std::memset(dst, 0xEE, span);
  std::memcpy(src + offset, data.data(), bytes);
  DeviceMemory a(device, span), b(device, span);
  stream.memset(a.get(), 0x11, span);
  stream.memset(b.get(), 0x22, span);
  stream.copy_h2d(a.get() + offset, src + offset, bytes);
  stream.copy_d2d(b.get() + offset, a.get() + offset, bytes);
  stream.copy_d2h(dst + offset, b.get() + offset, bytes);
  stream.synchronize();
  ASSERT_EQ(std::memcmp(dst + offset, data.data(), bytes), 0);
  // Nothing outside the range was written.
  for (std::size_t i = 0; i < offset; ++i) ASSERT_EQ(dst[i], 0xEE);
  ASSERT_EQ(dst[offset + bytes], 0xEE);
}

TEST_F(CudaRuntime, CopiesInEveryDirectionForSmallOddAndMisalignedSizes) {
  Stream stream(device_);
  std::uint32_t seed = 1;
  for (bool pinned : {false, true}) {
    for (std::size_t bytes : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{4096},
                              std::size_t{12345}, std::size_t{(1 << 20) - 1}}) {
      for (std::size_t offset : {0, 1, 3}) round_trip(device_, stream, bytes, offset, pinned, seed++);
    }
  }
}

// Pageable copies of 1 MiB and more go through the staging pool: sizes around its 4 MiB pieces,
// and a large one that cycles every chunk several times.
TEST_F(CudaRuntime, StagedPageableCopiesAroundChunkEdges) {
  Stream stream(device_);
  std::uint32_t seed = 100;
  for (std::size_t bytes : {std::size_t{1} << 20, (std::size_t{4} << 20) - 1, (std::size_t{4} << 20) + 1,
                            (std::size_t{37} << 20) + 13, std::size_t{200} << 20}) {
    round_trip(device_, stream, bytes, 5, false, seed++);
  }
}

TEST_F(CudaRuntime, PageableCopiesFromTwoThreadsAtOnce) {
  constexpr std::size_t kBytes = std::size_t{24} << 20;
  std::vector<std::thread> threads;
  std::atomic<int> good{0};
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      Stream stream(device_);
      const auto data = random_bytes(kBytes, 500 + t);
      std::vector<unsigned char> back(kBytes, 0);
      DeviceMemory d(device_, kBytes);
      for (int i = 0; i < 4; ++i) {
        stream.copy_h2d(d.get(), data.data(), kBytes);
        stream.copy_d2h(back.data(), d.get(), kBytes);
      }
      stream.synchronize();
      if (back == data) ++good;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(good.load(), 2);
}

TEST_F(CudaRuntime, MemsetSetsExactlyTheRange) {
  Stream stream(device_);
  constexpr std::size_t kBytes = 100003;
  DeviceMemory d(device_, kBytes);
  std::vector<unsigned char> back(kBytes);
  stream.memset(d.get(), 0x00, kBytes);
  stream.memset(d.get() + 17, 0xAB, 5000);
  stream.copy_d2h(back.data(), d.get(), kBytes);
  stream.synchronize();
  for (std::size_t i = 0; i < kBytes; ++i) {
    ASSERT_EQ(back[i], (i >= 17 && i < 5017) ? 0xAB : 0x00) << "at " << i;
  }
}

TEST_F(CudaRuntime, HostTaskRunsAfterEarlierWork) {
  Stream stream(device_);
  constexpr std::size_t kBytes = 8 << 20;
  const auto data = random_bytes(kBytes, 7);
  PinnedBuffer src(device_, kBytes), dst(device_, kBytes);
  std::memcpy(src.data(), data.data(), kBytes);
  std::memset(dst.data(), 0, kBytes);
  DeviceMemory d(device_, kBytes);
  std::atomic<bool> saw_data{false};
  stream.copy_h2d(d.get(), src.data(), kBytes);
  stream.copy_d2h(dst.data(), d.get(), kBytes);
  stream.host_task([&] { saw_data = std::memcmp(dst.data(), data.data(), kBytes) == 0; });
  stream.synchronize();
  EXPECT_TRUE(saw_data.load());
}

TEST_F(CudaRuntime, HostTaskErrorSurfacesAtSynchronizeOnce) {
  Stream stream(device_);
  std::atomic<int> after{0};
  stream.host_task([] { throw std::runtime_error("task exploded"); });
  stream.host_task([&] { ++after; });
  try {
    stream.synchronize();
    FAIL() << "synchronize() must rethrow the host task's error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("task exploded"), std::string::npos) << e.what();
  }
  EXPECT_EQ(after.load(), 1) << "later work still runs";
  EXPECT_NO_THROW(stream.synchronize()) << "the error is reported once";
  // The stream stays usable.
  stream.host_task([&] { ++after; });
  stream.synchronize();
  EXPECT_EQ(after.load(), 2);
}

TEST_F(CudaRuntime, EventsRecordQueryAndTime) {
  Stream stream(device_);
  Event start(device_), stop(device_);
  EXPECT_TRUE(stop.query()) << "an event never recorded counts as complete";
  DeviceMemory a(device_, 256 << 20), b(device_, 256 << 20);
  start.record(stream);
  for (int i = 0; i < 4; ++i) stream.copy_d2d(b.get(), a.get(), 256 << 20);
  stop.record(stream);
  stop.synchronize();
  EXPECT_TRUE(stop.query());
  const float ms = stop.elapsed_ms_since(start);
  EXPECT_GT(ms, 0.0f);
  EXPECT_LT(ms, 10000.0f);
}

TEST_F(CudaRuntime, StreamWaitsOnAnotherStreamsEvent) {
  Stream producer(device_), consumer(device_);
  Event ready(device_, false);
  constexpr std::size_t kBytes = 4 << 20;
  const auto data = random_bytes(kBytes, 9);
  PinnedBuffer src(device_, kBytes), dst(device_, kBytes);
  std::memcpy(src.data(), data.data(), kBytes);
  DeviceMemory d(device_, kBytes);
  producer.memset(d.get(), 0, kBytes);
  producer.synchronize();
  // The producer holds back its copy; without the wait the consumer would read zeros.
  producer.host_task([] { std::this_thread::sleep_for(100ms); });
  producer.copy_h2d(d.get(), src.data(), kBytes);
  ready.record(producer);
  consumer.wait(ready);
  consumer.copy_d2h(dst.data(), d.get(), kBytes);
  consumer.synchronize();
  EXPECT_EQ(std::memcmp(dst.data(), data.data(), kBytes), 0);
  producer.synchronize();
}

TEST_F(CudaRuntime, GraphCaptureAndReplay) {
  Stream stream(device_), other(device_);
  constexpr std::size_t kBytes = 1 << 20;
  DeviceMemory a(device_, kBytes), b(device_, kBytes);
  PinnedBuffer out(device_, kBytes);
  std::atomic<int> runs{0};
  stream.begin_capture();
  EXPECT_TRUE(stream.impl().capturing());
  stream.memset(a.get(), 0x3C, kBytes);
  stream.copy_d2d(b.get(), a.get(), kBytes);
  stream.copy_d2h(out.data(), b.get(), kBytes);
  stream.host_task([&] { ++runs; });
  Graph graph = stream.end_capture();
  EXPECT_FALSE(stream.impl().capturing());
  EXPECT_GE(graph.node_count(), 4u);
  EXPECT_EQ(runs.load(), 0) << "capture records, it does not run";
  std::memset(out.data(), 0, kBytes);
  graph.replay(stream);
  graph.replay(stream);
  stream.synchronize();
  EXPECT_EQ(runs.load(), 2);
  const auto* bytes = static_cast<const unsigned char*>(out.data());
  for (std::size_t i = 0; i < kBytes; ++i) ASSERT_EQ(bytes[i], 0x3C) << "at " << i;
  graph.replay(other);
  other.synchronize();
  EXPECT_EQ(runs.load(), 3);
}

TEST_F(CudaRuntime, GraphHostTaskErrorSurfacesOnTheReplayingStream) {
  Stream stream(device_), other(device_);
  stream.begin_capture();
  stream.host_task([] { throw std::runtime_error("captured failure"); });
  Graph graph = stream.end_capture();
  graph.replay(other);
  EXPECT_THROW(other.synchronize(), std::runtime_error);
  EXPECT_NO_THROW(stream.synchronize());
}

TEST_F(CudaRuntime, PageableCopyCannotBeCaptured) {
  Stream stream(device_);
  constexpr std::size_t kBytes = 4 << 20;
  std::vector<unsigned char> host(kBytes, 1);
  DeviceMemory d(device_, kBytes);
  stream.begin_capture();
  stream.memset(d.get(), 0, kBytes);
  try {
    stream.copy_h2d(d.get(), host.data(), kBytes);
    ADD_FAILURE() << "a pageable copy in a capture must be refused";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::unsupported);
    EXPECT_NE(std::string(e.what()).find("pinned"), std::string::npos) << e.what();
  }
  Graph graph = stream.end_capture();  // the capture is still intact
  graph.replay(stream);
  stream.synchronize();
}

TEST_F(CudaRuntime, HostPointerWhereDeviceMemoryBelongsIsAnError) {
  Stream stream(device_);
  std::vector<unsigned char> host(4096, 1), other(4096, 2);
  DeviceMemory d(device_, 4096);
  try {
    stream.copy_h2d(other.data(), host.data(), host.size());
    FAIL() << "copy_h2d into host memory must be refused";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("dst"), std::string::npos) << e.what();
  }
  EXPECT_THROW(stream.copy_d2h(other.data(), host.data(), 4096), Error);
  EXPECT_THROW(stream.copy_d2d(d.get(), host.data(), 4096), Error);
  EXPECT_THROW(stream.memset(host.data(), 0, 4096), Error);
  // The stream and device still work after the refusals.
  stream.copy_h2d(d.get(), host.data(), 4096);
  stream.copy_d2h(other.data(), d.get(), 4096);
  stream.synchronize();
  EXPECT_EQ(other, host);
}

TEST_F(CudaRuntime, ImpossibleAllocationIsOutOfMemoryAndLeavesNoStickyError) {
  try {
    device_.impl().raw_alloc(std::size_t{1} << 50);  // 1 PiB
    FAIL() << "1 PiB cannot be allocated";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::out_of_memory);
    EXPECT_NE(std::string(e.what()).find("cuda:"), std::string::npos) << e.what();
  }
  try {
    PinnedBuffer huge(device_, std::size_t{1} << 50);
    FAIL() << "1 PiB of pinned memory cannot be allocated";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::out_of_memory) << e.what();
  }
  Stream stream(device_);
  DeviceMemory d(device_, 1 << 20);
  stream.memset(d.get(), 0, 1 << 20);
  EXPECT_NO_THROW(stream.synchronize());
}

TEST_F(CudaRuntime, NativeHandleIsTheVendorStream) {
  Stream stream(device_);
  EXPECT_NE(stream.native_handle(), nullptr);
  Stream another(device_);
  EXPECT_NE(stream.native_handle(), another.native_handle());
}

}  // namespace
}  // namespace galley::runtime
