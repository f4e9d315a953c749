// The per-backend, per-op solver lists: list order, duplicate names, bad registrations, lookups,
// concurrent registration. Test solvers go to made-up backends so the real lists (and the
// conformance harness) stay clean.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <string_view>
#include <vector>
#include <thread>

#include "dnn/ref_conv_direct.hpp"
#include "galley/core/error.hpp"
#include "galley/dnn/conv_solver.hpp"

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

std::vector<std::unique_ptr<SolverBase>> list_of(std::initializer_list<const char*> names) {
  std::vector<std::unique_ptr<SolverBase>> out;
  for (const char* n : names) out.push_back(std::make_unique<NamedSolver>(n));
  return out;
}

std::vector<std::string> names_of(std::string_view backend) {
  std::vector<std::string> out;
  for (const ConvSolver* s : conv_solvers(backend)) out.emplace_back(s->name());
  return out;
}

TEST(SolverRegistry, ListOrderIsRegistrationOrder) {
  register_solvers("test.order", OpKind::conv, list_of({"t.fast", "t.mid_a", "t.mid_b"}));
  register_solvers("test.order", OpKind::conv, list_of({"t.ref"}));
  EXPECT_EQ(names_of("test.order"), (std::vector<std::string>{"t.fast", "t.mid_a", "t.mid_b", "t.ref"}));
  EXPECT_TRUE(conv_solvers("test.no_such_backend").empty());
}

TEST(SolverRegistry, DuplicatesAndBadRegistrations) {
  register_solvers("test.dup", OpKind::conv, list_of({"t.once"}));
  try {
    register_solvers("test.dup", OpKind::conv, list_of({"t.other", "t.once"}));
    FAIL() << "duplicate accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("t.once"), std::string::npos);
  }
  // A refused list adds nothing, not even its valid entries.
  EXPECT_EQ(names_of("test.dup"), (std::vector<std::string>{"t.once"}));
  EXPECT_THROW(register_solvers("test.dup2", OpKind::conv, list_of({"t.twice", "t.twice"})), Error);
  EXPECT_TRUE(conv_solvers("test.dup2").empty());
  // The single-source gpu solvers carry one name on both cuda and hip.
  EXPECT_NO_THROW(register_solvers("test.dup_other", OpKind::conv, list_of({"t.once"})));
  EXPECT_NE(find_conv_solver("test.dup", "t.once"), find_conv_solver("test.dup_other", "t.once"));
  std::vector<std::unique_ptr<SolverBase>> with_null;
  with_null.push_back(nullptr);
  EXPECT_THROW(register_solvers("test.dup", OpKind::conv, std::move(with_null)), Error);
  EXPECT_THROW(register_solvers("", OpKind::conv, list_of({"t.nobackend"})), Error);
  EXPECT_THROW(register_solvers("test.dup", OpKind::conv, list_of({""})), Error);
}

TEST(SolverRegistry, Lookups) {
  register_solvers("test.lookup", OpKind::conv, list_of({"t.lookup"}));
  const ConvSolver* s = find_conv_solver("t.lookup");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->name(), "t.lookup");
  EXPECT_EQ(s->kind(), OpKind::conv);
  EXPECT_EQ(find_conv_solver("test.lookup", "t.lookup"), s);
  EXPECT_EQ(find_solver("test.lookup", OpKind::conv, "t.lookup"), s);
  EXPECT_EQ(find_conv_solver("cpu", "t.lookup"), nullptr);
  EXPECT_EQ(find_conv_solver("no.such.solver"), nullptr);
  const auto names = conv_solver_names();
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  EXPECT_NE(std::find(names.begin(), names.end(), "t.lookup"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), kRefConvDirectName), names.end());
}

// One reference per direction, all of them after every other solver.
TEST(SolverRegistry, ReferencesAreLastOnCpu) {
  // Solvers other tests of this process appended ("test.*") come after the library's own list.
  std::vector<const ConvSolver*> cpu;
  for (const ConvSolver* s : conv_solvers("cpu"))
    if (!std::string_view(s->name()).starts_with("test.")) cpu.push_back(s);
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

TEST(SolverRegistry, ConcurrentListsStayWhole) {
  constexpr int kThreads = 8, kLists = 20, kEach = 4;
  std::atomic<bool> stop{false};
  std::jthread reader([&] {
    while (!stop) {
      // A list registered in one call is never seen in part, nor interleaved with another's.
      const auto names = names_of("test.concurrent");
      if (names.size() % kEach != 0) ADD_FAILURE() << "a list seen in part";
      for (std::size_t i = 0; i + 1 < names.size(); i += kEach) {
        const std::string head = names[i].substr(0, names[i].rfind('.'));
        for (int j = 1; j < kEach; ++j) {
          if (names[i + j].rfind(head + ".", 0) != 0) ADD_FAILURE() << "interleaved lists";
        }
      }
    }
  });
  {
    std::vector<std::jthread> writers;
    for (int t = 0; t < kThreads; ++t) {
      writers.emplace_back([t] {
        for (int l = 0; l < kLists; ++l) {
          std::vector<std::unique_ptr<SolverBase>> list;
          const std::string head = "c" + std::to_string(t) + "_" + std::to_string(l);
          for (int i = 0; i < kEach; ++i) list.push_back(std::make_unique<NamedSolver>(head + "." + std::to_string(i)));
          register_solvers("test.concurrent", OpKind::conv, std::move(list));
        }
      });
    }
  }
  stop = true;
  reader.join();
  EXPECT_EQ(conv_solvers("test.concurrent").size(), static_cast<std::size_t>(kThreads * kLists * kEach));
}

}  // namespace
}  // namespace galley::dnn
