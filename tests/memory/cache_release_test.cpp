// The caching allocators hand their cached segments back before the process exits, so a leak
// checker run at exit sees only memory that live buffers really hold.
#include "memory/cache_release.hpp"

#include <gtest/gtest.h>

#include <string>

#include "common/run_command.hpp"
#include "galley/memory/buffer.hpp"
#include "galley/runtime/device.hpp"
#include "galley/runtime/stream.hpp"
#include "memory/caching_allocator.hpp"

namespace galley::memory {
namespace {

TEST(CacheRelease, ReturnsEveryCachedSegmentAndKeepsLiveBuffers) {
  const runtime::Device cpu = runtime::device("cpu");
  runtime::Stream stream(cpu);
  auto& allocator = allocator_for(cpu);
  Buffer live = allocate(stream, 3 << 20);
  { Buffer freed = allocate(stream, 30 << 20); }
  { Buffer small = allocate(stream, 4096); }
  const auto live_reserved = [&] {
    // The live buffer's segment: what must stay reserved.
    return static_cast<std::int64_t>(live.size()) <= allocator.stats().reserved_bytes.all.current;
  };
  ASSERT_GT(allocator.stats().reserved_bytes.all.current, static_cast<std::int64_t>(30 << 20));
  release_all_cached_memory();
  const auto stats = allocator.stats();
  EXPECT_TRUE(live_reserved());
  EXPECT_LT(stats.reserved_bytes.all.current, static_cast<std::int64_t>(30 << 20))
      << "the freed 30 MiB segment is still cached";
  EXPECT_EQ(stats.segment.all.current, 1) << "only the live buffer's segment remains";
  allocator.check_invariants();
  // The allocator stays usable after a release.
  Buffer again = allocate(stream, 30 << 20);
  EXPECT_NE(again.data(), nullptr);
  stream.synchronize();
}

TEST(CacheRelease, HappensAtExit) {
  // bench conv on the cpu (a GPU machine defaults to its GPU) leaves its tensors' segment cached; the exit handler logs what it released.
  const auto r = galley::testing::run_command(
      "env GALLEY_LOG_LEVEL=debug timeout -s KILL 300 " + std::string(GALLEY_TEST_BIN_DIR) +
      "/galley bench conv -n 1 -c 8 -H 8 -W 8 -k 8 -y 3 -x 3 --device cpu --solver ref.conv.direct -i 1 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto at = r.output.find("caching allocator of cpu: released ");
  ASSERT_NE(at, std::string::npos) << r.output;
  const std::string line = r.output.substr(at, r.output.find('\n', at) - at);
  EXPECT_EQ(line.find("released 0 "), std::string::npos) << line;
  EXPECT_NE(line.find("; 0 bytes still held by live buffers"), std::string::npos) << line;
}

}  // namespace
}  // namespace galley::memory
