// The per-backend solver lists: order by rank, duplicate names, lookups, concurrent registration.
// Test solvers go to made-up backends so the real lists (and the conformance harness) stay clean.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <thread>

#include "dnn/ref_conv_direct.hpp"
#include "galley/core/error.hpp"
#include "galley/dnn/solver.hpp"

namespace galley::dnn {
namespace {

class NamedSolver final : public ConvSolver {
 public:
  explicit NamedSolver(std::string name) : name_(std::move(name)) {}
  std::string_view name() const override { return name_; }
  Applicability check(const ConvProblem&, const runtime::Device&) const override {
    return Applicability::no("test solver");
  }
  void run(runtime::Stream&, const ConvProblem&, const ConvArgs&) const override {}

 private:
  std::string name_;
};

std::vector<std::string> names_of(std::string_view backend) {
  std::vector<std::string> out;
  for (const ConvSolver* s : conv_solvers(backend)) out.emplace_back(s->name());
  return out;
}

TEST(SolverRegistry, OrderedByRankThenRegistration) {
  register_conv_solver("test.order", 50, std::make_unique<NamedSolver>("t.mid_a"));
  register_conv_solver("test.order", kReferenceRank, std::make_unique<NamedSolver>("t.ref"));
  register_conv_solver("test.order", 10, std::make_unique<NamedSolver>("t.fast"));
  register_conv_solver("test.order", 50, std::make_unique<NamedSolver>("t.mid_b"));
  EXPECT_EQ(names_of("test.order"), (std::vector<std::string>{"t.fast", "t.mid_a", "t.mid_b", "t.ref"}));
  EXPECT_TRUE(conv_solvers("test.no_such_backend").empty());
}

TEST(SolverRegistry, DuplicatesAndBadRegistrations) {
  register_conv_solver("test.dup", 1, std::make_unique<NamedSolver>("t.once"));
  try {
    register_conv_solver("test.dup", 2, std::make_unique<NamedSolver>("t.once"));
    FAIL() << "duplicate accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("t.once"), std::string::npos);
  }
  EXPECT_EQ(conv_solvers("test.dup").size(), 1u);
  // The single-source gpu solvers carry one name on both cuda and hip.
  EXPECT_NO_THROW(register_conv_solver("test.dup_other", 1, std::make_unique<NamedSolver>("t.once")));
  EXPECT_NE(find_conv_solver("test.dup", "t.once"), find_conv_solver("test.dup_other", "t.once"));
  EXPECT_THROW(register_conv_solver("test.dup", 1, nullptr), Error);
  EXPECT_THROW(register_conv_solver("", 1, std::make_unique<NamedSolver>("t.nobackend")), Error);
  EXPECT_THROW(register_conv_solver("test.dup", 1, std::make_unique<NamedSolver>("")), Error);
}

TEST(SolverRegistry, Lookups) {
  register_conv_solver("test.lookup", 1, std::make_unique<NamedSolver>("t.lookup"));
  const ConvSolver* s = find_conv_solver("t.lookup");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->name(), "t.lookup");
  EXPECT_EQ(find_conv_solver("test.lookup", "t.lookup"), s);
  EXPECT_EQ(find_conv_solver("cpu", "t.lookup"), nullptr);
  EXPECT_EQ(find_conv_solver("no.such.solver"), nullptr);
  const auto names = conv_solver_names();
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  EXPECT_NE(std::find(names.begin(), names.end(), "t.lookup"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), kRefConvDirectName), names.end());
}

// One reference per direction, all of them after every other solver.
TEST(SolverRegistry, ReferencesAreLastOnCpu) {
  const auto cpu = conv_solvers("cpu");
  ASSERT_FALSE(cpu.empty());
  const auto first_ref =
      std::find_if(cpu.begin(), cpu.end(), [](const ConvSolver* s) { return s->is_reference(); });
  ASSERT_NE(first_ref, cpu.end());
  for (auto it = cpu.begin(); it != first_ref; ++it) EXPECT_FALSE((*it)->is_reference()) << (*it)->name();
  std::vector<std::string> references;
  for (auto it = first_ref; it != cpu.end(); ++it) {
    EXPECT_TRUE((*it)->is_reference()) << (*it)->name() << " after a reference";
    references.emplace_back((*it)->name());
  }
  EXPECT_NE(std::find(references.begin(), references.end(), kRefConvDirectName), references.end());
}

TEST(SolverRegistry, ConcurrentRegistrationAndReads) {
  constexpr int kThreads = 8, kEach = 40;
  std::atomic<bool> stop{false};
  std::atomic<std::size_t> max_seen{0};
  std::jthread reader([&] {
    while (!stop) {
      const auto list = conv_solvers("test.concurrent");
      // Every snapshot is sorted by rank (the rank is encoded in the name's number).
      for (std::size_t i = 0; i + 1 < list.size(); ++i) {
        const int a = std::stoi(std::string(list[i]->name()).substr(2));
        const int b = std::stoi(std::string(list[i + 1]->name()).substr(2));
        if (a % kEach > b % kEach) ADD_FAILURE() << "unsorted snapshot";
      }
      max_seen = std::max(max_seen.load(), list.size());
    }
  });
  {
    std::vector<std::jthread> writers;
    for (int t = 0; t < kThreads; ++t) {
      writers.emplace_back([t] {
        for (int i = 0; i < kEach; ++i) {
          const int id = t * kEach + i;
          register_conv_solver("test.concurrent", id % kEach,
                               std::make_unique<NamedSolver>("c." + std::to_string(id)));
        }
      });
    }
  }
  stop = true;
  reader.join();
  EXPECT_EQ(conv_solvers("test.concurrent").size(), static_cast<std::size_t>(kThreads * kEach));
}

}  // namespace
}  // namespace galley::dnn
