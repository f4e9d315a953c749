// GALLEY_ALLOC_CONF parsing and GALLEY_NO_CACHING behaviour.
#include <gtest/gtest.h>
#include <stdlib.h>

#include "common/scoped_env.hpp"
#include "memory/caching_allocator.hpp"
#include "memory/fake_device.hpp"

namespace galley::memory {
namespace {

constexpr std::size_t kMiB = 1024 * 1024;

using galley::testing::ScopedEnv;

TEST(AllocConf, EmptyMeansDefaults) {
  const auto c = AllocatorConfig::parse("");
  EXPECT_EQ(c.max_split_size, SIZE_MAX);
  EXPECT_EQ(c.max_non_split_rounding, 20 * kMiB);
  EXPECT_EQ(c.roundup_power2_divisions, 0u);
  EXPECT_EQ(c.memory_fraction, 1.0);
  EXPECT_TRUE(c.caching);
  EXPECT_EQ(c.to_string(), "");
}

TEST(AllocConf, ParsesEveryKey) {
  const auto c = AllocatorConfig::parse(
      " max_split_mb:512 , max_non_split_rounding_mb:64,roundup_power2_divisions:4,memory_fraction:0.75,");
  EXPECT_EQ(c.max_split_size, 512 * kMiB);
  EXPECT_EQ(c.max_non_split_rounding, 64 * kMiB);
  EXPECT_EQ(c.roundup_power2_divisions, 4u);
  EXPECT_DOUBLE_EQ(c.memory_fraction, 0.75);
  EXPECT_EQ(c.to_string(),
            "max_split_mb:512,max_non_split_rounding_mb:64,roundup_power2_divisions:4,memory_fraction:0.75");
  // The text round-trips.
  const auto again = AllocatorConfig::parse(c.to_string());
  EXPECT_EQ(again.max_split_size, c.max_split_size);
  EXPECT_EQ(again.memory_fraction, c.memory_fraction);
}

TEST(AllocConf, MalformedValuesAreErrorsListingValidKeys) {
  for (const char* bad :
       {"max_split_mb", "max_split_mb:", "max_split_mb:abc", "max_split_mb:-5", "max_split_mb:10",
        "max_split_mb:20", "max_split_mb:99999999999999999999", "garbage:1", "expandable_segments:True",
        "max_split_size_mb:100", "roundup_power2_divisions:3", "roundup_power2_divisions:128",
        "memory_fraction:0", "memory_fraction:1.5", "memory_fraction:nan", "memory_fraction:x",
        "max_split_mb:64,oops"}) {
    try {
      AllocatorConfig::parse(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), Status::invalid_argument) << bad;
      const std::string m = e.what();
      EXPECT_NE(m.find(bad), std::string::npos) << "message should quote the value: " << m;
      for (const char* key :
           {"max_split_mb", "max_non_split_rounding_mb", "roundup_power2_divisions", "memory_fraction"}) {
        EXPECT_NE(m.find(key), std::string::npos) << "message should list " << key << ": " << m;
      }
    }
  }
}

TEST(AllocConf, PyTorchNameGetsAHint) {
  try {
    AllocatorConfig::parse("max_split_size_mb:128");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Galley's is max_split_mb"), std::string::npos) << e.what();
  }
}

TEST(AllocConf, FromEnvReadsBothVariables) {
  {
    ScopedEnv conf("GALLEY_ALLOC_CONF", "max_split_mb:128");
    ScopedEnv no_cache("GALLEY_NO_CACHING", nullptr);
    const auto c = AllocatorConfig::from_env();
    EXPECT_EQ(c.max_split_size, 128 * kMiB);
    EXPECT_TRUE(c.caching);
  }
  {
    ScopedEnv conf("GALLEY_ALLOC_CONF", "max_split:128");
    EXPECT_THROW(AllocatorConfig::from_env(), Error);
  }
  {
    ScopedEnv conf("GALLEY_ALLOC_CONF", nullptr);
    ScopedEnv no_cache("GALLEY_NO_CACHING", "1");
    EXPECT_FALSE(AllocatorConfig::from_env().caching);
  }
  {
    ScopedEnv no_cache("GALLEY_NO_CACHING", "maybe");
    EXPECT_THROW(AllocatorConfig::from_env(), Error);
  }
}

TEST(NoCaching, EveryAllocationAndFreeGoesToTheBackend) {
  testing::FakeDevice fake{std::size_t{1} << 30};
  auto s = fake.make_stream();
  ScopedEnv no_cache("GALLEY_NO_CACHING", "1");
  CachingAllocator alloc{fake, AllocatorConfig::from_env(), "fake:0"};
  ASSERT_FALSE(alloc.config().caching);

  // No stream: the caller has synchronised, so the memory is returned at once.
  for (int i = 0; i < 3; ++i) {
    Buffer b = alloc.allocate(1000);
    EXPECT_EQ(fake.used(), 1000u) << "exact size, no rounding, no segment";
  }
  EXPECT_EQ(fake.raw_alloc_calls, 3);
  EXPECT_EQ(fake.raw_free_calls, 3);
  EXPECT_EQ(fake.used(), 0u);

  // On a stream the free waits for the stream's work (an event), then goes to the backend.
  {
    Buffer b = alloc.allocate(4096, s.get());
    s->enqueue();
  }
  EXPECT_EQ(fake.used(), 4096u);
  EXPECT_EQ(alloc.stats().active.all.current, 1);
  s->complete();
  Buffer next = alloc.allocate(100, s.get());  // processes completed events first
  EXPECT_EQ(fake.used(), 100u);
  const auto st = alloc.stats();
  EXPECT_EQ(st.cache_hits, 0u);
  EXPECT_EQ(st.cache_misses, 5u);
  EXPECT_EQ(st.allocated_bytes.all.current, 100);
  EXPECT_EQ(st.reserved_bytes.all.current, 100);
  alloc.check_invariants();
  next.reset();
  alloc.empty_cache();
  EXPECT_EQ(fake.used(), 0u);
  EXPECT_EQ(fake.bad_frees, 0);
}

}  // namespace
}  // namespace galley::memory
