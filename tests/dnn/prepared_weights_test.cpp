// PreparedWeights, the slot a call site passes for its weights in a solver's own form: built once
// per tag, rebuilt for another tag, unchanged when building throws, and the old data alive for a
// holder after it was replaced.
#include "galley/dnn/prepared_weights.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

namespace galley::dnn {
namespace {

std::shared_ptr<const void> number(int value) { return std::make_shared<const int>(value); }
int value_of(const std::shared_ptr<const void>& p) { return *static_cast<const int*>(p.get()); }

TEST(PreparedWeights, BuildsOncePerTag) {
  PreparedWeights slot;
  EXPECT_EQ(slot.tag(), "");
  int built = 0;
  const auto make = [&] { return number(++built); };
  EXPECT_EQ(value_of(slot.get("a", make)), 1);
  EXPECT_EQ(value_of(slot.get("a", make)), 1);
  EXPECT_EQ(slot.preparations(), 1u);
  EXPECT_EQ(slot.tag(), "a");
  const auto held = slot.get("a", make);
  EXPECT_EQ(value_of(slot.get("b", make)), 2);  // another tag replaces it
  EXPECT_EQ(value_of(held), 1);                 // a holder keeps the old data
  EXPECT_EQ(value_of(slot.get("a", make)), 3);  // and back again: built anew
  EXPECT_EQ(slot.preparations(), 3u);
}

TEST(PreparedWeights, AThrowingBuildLeavesTheSlotAsItWas) {
  PreparedWeights slot;
  slot.get("a", [] { return number(7); });
  EXPECT_THROW(slot.get("b", []() -> std::shared_ptr<const void> { throw std::runtime_error("no memory"); }),
               std::runtime_error);
  EXPECT_EQ(slot.tag(), "a");
  EXPECT_EQ(slot.preparations(), 1u);
  EXPECT_EQ(value_of(slot.get("a", [] { return number(8); })), 7);
}

TEST(PreparedWeights, ConcurrentCallsBuildOnce) {
  PreparedWeights slot;
  std::atomic<int> built{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 100; ++i) EXPECT_EQ(value_of(slot.get("x", [&] { return number(++built); })), 1);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(built.load(), 1);
}

}  // namespace
}  // namespace galley::dnn
