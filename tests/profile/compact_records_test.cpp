// The cheap paths of the tracer: allocator calls stored as plain data and turned into records at
// collect(), under the same bound as records; problem keys formatted once per problem per thread.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "dnn/traced_key.hpp"
#include "galley/dnn/conv_problem.hpp"
#include "profile/tracer.hpp"

namespace galley::profile {
namespace {

class CompactRecords : public ::testing::Test {
 protected:
  void SetUp() override {
    set_enabled(false);
    clear();
  }
  void TearDown() override {
    set_capacity(kDefaultCapacity);
    clear();
  }
};

TEST_F(CompactRecords, AMemoryEventIsCollectedAsARecordWithItsFields) {
  MemoryEvent e;
  e.kind = Kind::free;
  e.start_ns = now_ns();
  e.bytes = 4096;
  e.allocated = 100;
  e.reserved = 8192;
  e.device = intern("cuda:3");
  record_memory(e);
  const auto records = collect();
  ASSERT_EQ(records.size(), 1u);
  const Record& r = records.front();
  EXPECT_EQ(r.kind, Kind::free);
  EXPECT_EQ(r.start_ns, e.start_ns);
  EXPECT_EQ(r.device, "cuda:3");
  EXPECT_EQ(r.bytes, 4096u);
  EXPECT_EQ(r.allocated, 100);
  EXPECT_EQ(r.reserved, 8192);
  EXPECT_NE(r.thread, 0u);
}

TEST_F(CompactRecords, MemoryEventsShareTheRecordsBound) {
  set_capacity(3);
  Record r;
  r.name = "x";
  record(r);
  MemoryEvent e;
  e.device = intern("cpu");
  for (int i = 0; i < 4; ++i) record_memory(e);
  EXPECT_EQ(collect().size(), 3u);
  EXPECT_EQ(dropped(), 2u);
  clear();
  EXPECT_EQ(dropped(), 0u);
  record_memory(e);
  EXPECT_EQ(collect().size(), 1u) << "clear() gives the memory events' share of the bound back";
}

TEST_F(CompactRecords, InternGivesOneLastingPointerPerText) {
  const char* a = intern("cuda:0");
  std::string same = "cuda:";
  same += '0';
  EXPECT_EQ(intern(same), a);
  EXPECT_NE(intern("cuda:1"), a);
  EXPECT_STREQ(a, "cuda:0");
}

TEST(TracedKey, IsTheProblemsKeyForNewRepeatedAndEvictedProblems) {
  std::vector<dnn::ConvProblem> problems;
  // More problems than the cache keeps, so it starts over at least once, and each asked twice.
  for (int c = 1; c <= 4200; ++c)
    problems.push_back(dnn::ConvProblem{.n = 1, .c = c, .h = 5, .w = 5, .k = 2});
  for (int round = 0; round < 2; ++round) {
    for (const auto& p : problems) {
      const std::string key = dnn::traced_key(dnn::ProblemRef::of(p)).str();
      if (key != p.key()) {
        ADD_FAILURE() << "round " << round << ": " << key << " for " << p.key();
        return;
      }
    }
  }
}

}  // namespace
}  // namespace galley::profile
