// The find-db across processes: results persist into a new process, and several processes tuning
// overlapping problems into one file at once lose no rows and never report a locked database.
// Children are this test binary re-run with a filter selecting TuningChild.Run.
#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>
#include <set>
#include <sstream>

#include "galley/tuning/tuner.hpp"
#include "tuning_fixtures.hpp"

namespace galley::tuning {
namespace {

using namespace testing;

std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : fallback;
}

// Child mode: picks problems [first, first+count) in a tuner over $TUNING_CHILD_DIR and prints one
// line per pick: "pick <variant> <solver> <hit 0|1> <source>".
TEST(TuningChild, Run) {
  const char* dir = std::getenv("TUNING_CHILD_DIR");
  if (dir == nullptr) GTEST_SKIP() << "only run as a child of the multi-process tests";
  const int first = std::stoi(env_or("TUNING_CHILD_FIRST", "0"));
  const int count = std::stoi(env_or("TUNING_CHILD_COUNT", "1"));
  Tuner tuner(options_in(dir, parse_find_mode(env_or("TUNING_CHILD_MODE", "hybrid")), {kFast, kSlow}));
  for (int v = first; v < first + count; ++v) {
    const Pick p = tuner.pick(small_problem(v), cpu());
    std::cout << "pick " << v << " " << p.solver->name() << " " << p.hit << " " << to_string(p.source) << "\n";
  }
  std::cout.flush();
}

// Child mode: stores $TUNING_CHILD_COUNT lists straight into the db as fast as possible (maximum
// write contention), keys "stress-<TUNING_CHILD_FIRST + i>".
TEST(TuningChild, Store) {
  const char* dir = std::getenv("TUNING_CHILD_DIR");
  if (dir == nullptr) GTEST_SKIP() << "only run as a child of the multi-process tests";
  const int first = std::stoi(env_or("TUNING_CHILD_FIRST", "0"));
  const int count = std::stoi(env_or("TUNING_CHILD_COUNT", "1"));
  FindDb db({std::filesystem::path(dir) / "finddb.sqlite", {}});
  const DeviceIdentity id{"Stress Device", "x", 1, "d", "0.1.0"};
  for (int i = first; i < first + count; ++i) {
    db.store("stress-" + std::to_string(i), id,
             {FindRecord{"a" + std::to_string(i), 1.0, 0, 0}, FindRecord{"b", 2.0, 0, 0}});
    ASSERT_FALSE(db.lookup("stress-" + std::to_string(i), id).empty());
  }
  EXPECT_FALSE(db.in_memory());
}

std::vector<std::string> pick_lines(const std::string& output) {
  std::vector<std::string> lines;
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("pick ", 0) == 0) lines.push_back(line);
  }
  return lines;
}

std::map<std::string, std::string> child_env(const TempDir& dir, int first, int count) {
  return {{"TUNING_CHILD_DIR", dir.path().string()},
          {"TUNING_CHILD_FIRST", std::to_string(first)},
          {"TUNING_CHILD_COUNT", std::to_string(count)}};
}

TEST(TuningProcesses, ResultsPersistIntoANewProcess) {
  TempDir dir;
  std::string out;
  ASSERT_EQ(run_child("TuningChild.Run", child_env(dir, 0, 3), &out), 0) << out;
  auto lines = pick_lines(out);
  ASSERT_EQ(lines.size(), 3u) << out;
  for (const auto& l : lines) EXPECT_NE(l.find("test.conv.fast 0 tuned"), std::string::npos) << l;
  ASSERT_EQ(run_child("TuningChild.Run", child_env(dir, 0, 3), &out), 0) << out;
  lines = pick_lines(out);
  ASSERT_EQ(lines.size(), 3u) << out;
  for (const auto& l : lines) EXPECT_NE(l.find("test.conv.fast 1 user find-db"), std::string::npos) << l;
  // Off in a child: nothing read, list order.
  auto env = child_env(dir, 0, 1);
  env["TUNING_CHILD_MODE"] = "off";
  ASSERT_EQ(run_child("TuningChild.Run", env, &out), 0) << out;
  ASSERT_EQ(pick_lines(out).size(), 1u) << out;
  EXPECT_NE(pick_lines(out)[0].find("test.conv.slow 0 list order"), std::string::npos) << out;
}

TEST(TuningProcesses, ConcurrentTunersLoseNoRows) {
  TempDir dir;
  // Four processes, overlapping ranges over 24 problems, all starting at once on a fresh file.
  const std::vector<std::pair<int, int>> ranges = {{0, 12}, {6, 12}, {12, 12}, {0, 24}};
  std::vector<int> pids;
  for (const auto& [first, count] : ranges) pids.push_back(spawn("TuningChild.Run", child_env(dir, first, count)));
  for (std::size_t i = 0; i < pids.size(); ++i) {
    std::string out;
    EXPECT_EQ(wait_child(pids[i], &out), 0) << out;
    EXPECT_EQ(out.find("locked"), std::string::npos) << out;
    EXPECT_EQ(out.find("galley[warn]"), std::string::npos) << out;
    EXPECT_EQ(pick_lines(out).size(), static_cast<std::size_t>(ranges[i].second)) << out;
  }
  FindDb db({dir.path() / "finddb.sqlite", {}});
  const auto rows = db.rows();
  std::set<std::string> keys;
  for (const auto& r : rows) keys.insert(r.problem);
  EXPECT_EQ(keys.size(), 24u);
  for (int v = 0; v < 24; ++v) {
    const auto records = db.lookup(small_problem(v).key(), DeviceIdentity::of(cpu()));
    ASSERT_EQ(records.size(), 2u) << "problem " << v;
    EXPECT_EQ(records[0].solver, kFast);
    EXPECT_EQ(records[1].solver, kSlow);
  }
  EXPECT_EQ(rows.size(), 48u);  // whole lists replaced, never duplicated or mixed
}

}  // namespace
}  // namespace galley::tuning

namespace galley::tuning {
namespace {

TEST(TuningProcesses, WriteStormLosesNothingAndNeverReportsLocked) {
  testing::TempDir dir;
  constexpr int kChildren = 6, kEach = 150;
  std::vector<int> pids;
  for (int c = 0; c < kChildren; ++c) {
    // Overlapping halves: child c writes [c*kEach/2, c*kEach/2 + kEach).
    pids.push_back(testing::spawn("TuningChild.Store", {{"TUNING_CHILD_DIR", dir.path().string()},
                                                        {"TUNING_CHILD_FIRST", std::to_string(c * kEach / 2)},
                                                        {"TUNING_CHILD_COUNT", std::to_string(kEach)}}));
  }
  for (int pid : pids) {
    std::string out;
    EXPECT_EQ(testing::wait_child(pid, &out), 0) << out;
    EXPECT_EQ(out.find("locked"), std::string::npos) << out;
    EXPECT_EQ(out.find("galley[warn]"), std::string::npos) << out;
  }
  FindDb db({dir.path() / "finddb.sqlite", {}});
  const int distinct = (kChildren - 1) * kEach / 2 + kEach;
  EXPECT_EQ(db.rows().size(), static_cast<std::size_t>(2 * distinct));
  const DeviceIdentity id{"Stress Device", "x", 1, "d", "0.1.0"};
  for (int i = 0; i < distinct; ++i) {
    const auto records = db.lookup("stress-" + std::to_string(i), id);
    ASSERT_EQ(records.size(), 2u) << i;
    EXPECT_EQ(records[0].solver, "a" + std::to_string(i));
  }
}

}  // namespace
}  // namespace galley::tuning
