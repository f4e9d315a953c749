// The public per-device view of the allocator (device_memory.hpp) on the real cpu device: the counters
// follow a buffer's life, peaks reset, empty_cache gives freed segments back, the snapshot shows
// live blocks. Only public headers here: this is what a user of the installed tree can call.
#include "galley/memory/device_memory.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "galley/memory/buffer.hpp"
#include "galley/runtime/device.hpp"
#include "galley/runtime/stream.hpp"

namespace galley::memory {
namespace {

constexpr std::int64_t kMiB = std::int64_t{1} << 20;

TEST(DeviceMemory, StatsFollowABuffersLife) {
  const auto cpu = runtime::device("cpu");
  runtime::Stream stream(cpu);
  const AllocatorStats before = memory_stats(cpu);
  {
    Buffer buffer = allocate(stream, 3 * kMiB);
    const AllocatorStats during = memory_stats(cpu);
    EXPECT_EQ(during.allocation.all.current, before.allocation.all.current + 1);
    EXPECT_GE(during.allocated_bytes.all.current, before.allocated_bytes.all.current + 3 * kMiB);
    EXPECT_EQ(during.requested_bytes.all.current, before.requested_bytes.all.current + 3 * kMiB);
  }
  stream.synchronize();
  const AllocatorStats after = memory_stats(cpu);
  EXPECT_EQ(after.allocation.all.current, before.allocation.all.current);
  EXPECT_EQ(after.allocated_bytes.all.current, before.allocated_bytes.all.current);
}

TEST(DeviceMemory, ResetPeakSetsPeaksToCurrent) {
  const auto cpu = runtime::device("cpu");
  runtime::Stream stream(cpu);
  { Buffer buffer = allocate(stream, 8 * kMiB); }
  stream.synchronize();
  const AllocatorStats raised = memory_stats(cpu);
  ASSERT_GE(raised.allocated_bytes.all.peak, raised.allocated_bytes.all.current + 8 * kMiB);
  reset_peak_memory_stats(cpu);
  const AllocatorStats reset = memory_stats(cpu);
  EXPECT_EQ(reset.allocated_bytes.all.peak, reset.allocated_bytes.all.current);
  EXPECT_EQ(reset.reserved_bytes.all.peak, reset.reserved_bytes.all.current);
}

TEST(DeviceMemory, EmptyCacheReturnsFreedSegments) {
  const auto cpu = runtime::device("cpu");
  runtime::Stream stream(cpu);
  // A segment an earlier test in this process left cached could take the 30 MiB without growing.
  empty_cache(cpu);
  const AllocatorStats before = memory_stats(cpu);
  { Buffer buffer = allocate(stream, 30 * kMiB); }
  stream.synchronize();
  const AllocatorStats cached = memory_stats(cpu);
  ASSERT_GE(cached.reserved_bytes.all.current, before.reserved_bytes.all.current + 30 * kMiB)
      << "a freed buffer stays cached until empty_cache";
  empty_cache(cpu);
  const AllocatorStats emptied = memory_stats(cpu);
  EXPECT_LE(emptied.reserved_bytes.all.current, before.reserved_bytes.all.current);
  EXPECT_GT(emptied.num_device_free, cached.num_device_free);
}

TEST(DeviceMemory, SnapshotShowsTheLiveBlock) {
  const auto cpu = runtime::device("cpu");
  runtime::Stream stream(cpu);
  Buffer buffer = allocate(stream, 5 * kMiB);
  const auto snapshot = nlohmann::json::parse(memory_snapshot_json(cpu));
  EXPECT_EQ(snapshot.at("device"), "cpu");
  const auto address = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(buffer.data()));
  bool found = false;
  for (const auto& segment : snapshot.at("segments")) {
    for (const auto& block : segment.at("blocks")) {
      if (block.at("address").get<std::uint64_t>() == address) {
        found = true;
        EXPECT_EQ(block.at("state"), "active_allocated");
        EXPECT_EQ(block.at("requested_size").get<std::int64_t>(), 5 * kMiB);
      }
    }
  }
  EXPECT_TRUE(found) << "no block at the buffer's address in " << snapshot.dump();
}

TEST(DeviceMemory, ConfigIsTheEnvironmentsWhenFirstUsed) {
  const auto cpu = runtime::device("cpu");
  EXPECT_EQ(allocator_config(cpu).to_string(), AllocatorConfig::from_env().to_string());
}

}  // namespace
}  // namespace galley::memory
