// The cache-hit path (allocate + free of a size already cached) must not touch the heap or the
// backend: counted through a replaced global operator new and the fake device's call counters.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "galley/runtime/device.hpp"
#include "galley/runtime/stream.hpp"
#include "memory/caching_allocator.hpp"
#include "memory/fake_device.hpp"

namespace {
std::atomic<long> g_heap_allocations{0};
}  // namespace

// Process-wide replacements (they also serve libgalley): count, then defer to malloc.
void* operator new(std::size_t bytes) {
  g_heap_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(bytes == 0 ? 1 : bytes)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace galley::memory {
namespace {

TEST(HitPath, NoHeapAllocationNoBackendCall) {
  testing::FakeDevice fake{std::size_t{1} << 30};
  auto s = fake.make_stream();
  CachingAllocator alloc{fake, AllocatorConfig{}, "fake:0"};
  for (std::size_t bytes : {std::size_t{4096}, std::size_t{1} << 20, std::size_t{64} << 20}) {
    { Buffer warm = alloc.allocate(bytes, s.get()); }
    const int raw_calls = fake.raw_alloc_calls + fake.raw_free_calls;
    const long before = g_heap_allocations.load();
    for (int i = 0; i < 1000; ++i) {
      Buffer b = alloc.allocate(bytes, s.get());
      ASSERT_TRUE(b);
    }
    EXPECT_EQ(g_heap_allocations.load() - before, 0) << bytes << " bytes";
    EXPECT_EQ(fake.raw_alloc_calls + fake.raw_free_calls, raw_calls);
    EXPECT_EQ(fake.records, 0);
  }
}

TEST(HitPath, PublicAllocateOnCpuDoesNotTouchTheHeap) {
  const auto cpu = runtime::device("cpu");
  runtime::Stream stream(cpu);
  { Buffer warm = allocate(stream, 4096); }
  const long before = g_heap_allocations.load();
  for (int i = 0; i < 1000; ++i) {
    Buffer b = allocate(stream, 4096);
    ASSERT_TRUE(b);
  }
  EXPECT_EQ(g_heap_allocations.load() - before, 0);
}

}  // namespace
}  // namespace galley::memory
