// Buffers on the real cpu device: allocate, the checked copies, record_stream with real events,
// wrong-device and wrong-size errors.
#include "galley/memory/buffer.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

#include "galley/runtime/device.hpp"
#include "galley/runtime/stream.hpp"
#include "memory/caching_allocator.hpp"
#include "memory/fake_device.hpp"

namespace galley::memory {
namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(CpuBuffer, RoundTripThroughDeviceMemory) {
  const auto cpu = runtime::device("cpu");
  runtime::Stream stream(cpu);
  for (std::size_t n : {std::size_t{1}, std::size_t{1000}, std::size_t{4096}, std::size_t{3} << 20}) {
    std::vector<unsigned char> in(n), out(n, 0xAB);
    std::iota(in.begin(), in.end(), static_cast<unsigned char>(n));
    Buffer a = allocate(stream, n);
    Buffer b = allocate(stream, n);
    ASSERT_TRUE(a);
    EXPECT_EQ(a.size(), n);
    EXPECT_EQ(a.device(), cpu);
    copy_from_host(stream, a, in.data(), n);
    copy(stream, b, a, n);
    copy_to_host(stream, out.data(), b, n);
    stream.synchronize();
    EXPECT_EQ(in, out) << n << " bytes";
  }
}

TEST(CpuBuffer, MemsetAndZeroByteCopies) {
  const auto cpu = runtime::device("cpu");
  runtime::Stream stream(cpu);
  Buffer a = allocate(stream, 100);
  memset(stream, a, 7, 100);
  std::vector<unsigned char> out(100, 0);
  copy_to_host(stream, out.data(), a, 100);
  stream.synchronize();
  EXPECT_EQ(out, std::vector<unsigned char>(100, 7));
  Buffer empty = allocate(stream, 0);
  EXPECT_FALSE(empty);
  copy(stream, empty, empty, 0);  // nothing to do, no error
  EXPECT_THROW(copy(stream, empty, a, 1), Error);
}

TEST(CpuBuffer, TooManyBytesNamesTheSizes) {
  const auto cpu = runtime::device("cpu");
  runtime::Stream stream(cpu);
  Buffer small = allocate(stream, 100);
  Buffer large = allocate(stream, 200);
  std::vector<char> host(200);
  try {
    copy(stream, small, large, 200);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::invalid_argument);
    EXPECT_TRUE(contains(e.what(), "200 bytes")) << e.what();
    EXPECT_TRUE(contains(e.what(), "100 bytes")) << e.what();
  }
  EXPECT_THROW(copy_from_host(stream, small, host.data(), 101), Error);
  EXPECT_THROW(copy_to_host(stream, host.data(), small, SIZE_MAX), Error);
  EXPECT_THROW(copy_from_host(stream, small, nullptr, 10), Error);  // the stream rejects the null source
}

TEST(CpuBuffer, BufferOnAnotherDeviceNamesBoth) {
  const auto cpu = runtime::device("cpu");
  runtime::Stream stream(cpu);
  testing::FakeDevice fake{std::size_t{64} << 20};
  CachingAllocator other{fake, AllocatorConfig{}, "fake:3"};
  Buffer foreign = other.allocate(256);
  Buffer local = allocate(stream, 256);
  std::vector<char> host(256);
  for (int which = 0; which < 3; ++which) {
    try {
      if (which == 0) copy(stream, local, foreign, 16);
      if (which == 1) copy_from_host(stream, foreign, host.data(), 16);
      if (which == 2) copy_to_host(stream, host.data(), foreign, 16);
      FAIL() << "copy " << which << " accepted a buffer of another device";
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), Status::invalid_argument);
      EXPECT_TRUE(contains(e.what(), "fake:3")) << e.what();
      EXPECT_TRUE(contains(e.what(), "cpu")) << e.what();
    }
  }
  EXPECT_THROW(foreign.record_stream(stream), Error);
  EXPECT_THROW(other.allocate(16, stream), Error);
}

TEST(CpuBuffer, SizeMaxIsAClearError) {
  const auto cpu = runtime::device("cpu");
  runtime::Stream stream(cpu);
  try {
    allocate(stream, SIZE_MAX);
    FAIL();
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), std::to_string(SIZE_MAX))) << e.what();
  }
  Buffer fine = allocate(stream, 64);
  EXPECT_TRUE(fine);
  allocator_for(cpu).check_invariants();
}

TEST(CpuBuffer, AllocatorForIsOnePerDevice) {
  const auto cpu = runtime::device("cpu");
  EXPECT_EQ(&allocator_for(cpu), &allocator_for(runtime::device("cpu")));
  EXPECT_EQ(allocator_for(cpu).device_name(), "cpu");
  Buffer b = allocate(cpu, 1024);
  EXPECT_EQ(b.device(), cpu);
  EXPECT_GE(allocator_for(cpu).stats().allocation.all.current, 1);
}

TEST(CpuBuffer, RecordStreamDelaysReuseUntilTheOtherStreamFinishes) {
  const auto cpu = runtime::device("cpu");
  runtime::Stream s(cpu), t(cpu);
  CachingAllocator alloc{cpu, AllocatorConfig{}};
  std::atomic<bool> release{false};
  std::atomic<bool> finished{false};
  void* ptr = nullptr;
  Buffer left = alloc.allocate(4096, s);
  Buffer a = alloc.allocate(4096, s);
  Buffer right = alloc.allocate(4096, s);  // live neighbours keep the freed block apart
  {
    ptr = a.data();
    a.record_stream(t);
    t.host_task([&] {
      while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      finished = true;
    });
    a.reset();
  }
  Buffer b = alloc.allocate(4096, s);
  EXPECT_NE(b.data(), ptr) << "T still works on the freed block";
  b.reset();
  release = true;
  t.synchronize();
  s.synchronize();
  EXPECT_TRUE(finished.load());
  Buffer c = alloc.allocate(4096, t);
  EXPECT_EQ(c.data(), ptr) << "both events completed: any stream may reuse it";
  alloc.check_invariants();
}

TEST(CpuBuffer, EmptyCacheWaitsForStreamWork) {
  const auto cpu = runtime::device("cpu");
  runtime::Stream s(cpu);
  // Releasing cached memory is only safe if the device-wide synchronize covers every stream.
  std::atomic<bool> done{false};
  s.host_task([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    done = true;
  });
  cpu.synchronize();
  const bool device_sync_waits = done.load();
  s.synchronize();
  if (!device_sync_waits) {
    GTEST_SKIP() << "the cpu backend's DeviceImpl::synchronize() does not wait for its streams yet, so "
                    "empty_cache cannot be safe against pending cpu work";
  }
  CachingAllocator alloc{cpu, AllocatorConfig{}};
  std::atomic<bool> wrote{false};
  {
    Buffer a = alloc.allocate(std::size_t{30} << 20, s);
    auto* p = a.as<char>();
    s.host_task([&wrote, p] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      p[0] = 1;
      wrote = true;
    });
  }
  alloc.empty_cache();
  EXPECT_TRUE(wrote.load()) << "memory was released while stream work could still write to it";
  EXPECT_EQ(alloc.stats().reserved_bytes.all.current, 0);
}

}  // namespace
}  // namespace galley::memory
