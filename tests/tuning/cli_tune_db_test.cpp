// `galley tune` and `galley db` as a user runs them, with real cpu solvers on small problems: the db
// filled by one process is a hit in the next (`galley bench conv` says so), and export/import/clear work.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "common/run_command.hpp"
#include "tuning_fixtures.hpp"

namespace galley::tuning {
namespace {

struct Result {
  int exit_code = -1;
  std::string out;  // stdout only
  std::string all;  // stdout and stderr
};

Result galley(const std::string& env, const std::string& args) {
  Result r;
  for (bool with_stderr : {false, true}) {
    const auto child = galley::testing::run_command(env + " " GALLEY_TEST_BIN_DIR "/galley " + args +
                                            (with_stderr ? " 2>&1" : " 2>/dev/null"));
    r.exit_code = child.exit_code;
    (with_stderr ? r.all : r.out) = child.output;
  }
  return r;
}

// Runs a command once (for commands with side effects), keeping stdout and stderr apart in a file.
Result galley_once(const std::string& env, const std::string& args, const std::filesystem::path& err_file) {
  const auto child =
      galley::testing::run_command(env + " " GALLEY_TEST_BIN_DIR "/galley " + args + " 2>" + err_file.string());
  Result r;
  r.exit_code = child.exit_code;
  r.out = child.output;
  std::ifstream in(err_file);
  r.all = r.out + std::string(std::istreambuf_iterator<char>(in), {});
  return r;
}

constexpr const char* kList =
    "# two small problems\n"
    "conv -n 1 -c 8 -H 12 -W 12 -k 8 -y 3 -x 3 -p 1 -q 1 -u 1 -v 1 -l 1 -j 1 -g 1   # small.3x3\n"
    "conv -n 1 -c 16 -H 10 -W 10 -k 8 -y 1 -x 1 -p 0 -q 0 -u 1 -v 1 -l 1 -j 1 -g 1  # small.1x1\n";

TEST(CliTune, FillsTheDbAndTheNextProcessHits) {
  testing::TempDir dir;
  const auto list = dir.path() / "list.txt";
  std::ofstream(list) << kList;
  const std::string env = "GALLEY_CACHE_DIR=" + (dir.path() / "cache").string() + " GALLEY_FIND_TIME_MS=500";
  const Result tune = galley_once(env, "tune --file " + list.string(), dir.path() / "err");
  ASSERT_EQ(tune.exit_code, 0) << tune.all;
  EXPECT_NE(tune.out.find("small.3x3"), std::string::npos) << tune.out;
  EXPECT_NE(tune.out.find("speedup"), std::string::npos) << tune.out;
  EXPECT_NE(tune.all.find("[1/2] small.3x3"), std::string::npos) << tune.all;  // plain progress off a terminal
  EXPECT_NE(tune.out.find("tuned in"), std::string::npos) << tune.out;
  // A second run finds both stored.
  const Result again = galley_once(env, "tune --file " + list.string() + " --json", dir.path() / "err");
  ASSERT_EQ(again.exit_code, 0) << again.all;
  const auto doc = nlohmann::json::parse(again.out);
  ASSERT_EQ(doc["problems"].size(), 2u);
  for (const auto& p : doc["problems"]) {
    EXPECT_EQ(p["status"], "cached") << p.dump();
    EXPECT_FALSE(p["ranked"].empty());
  }
  // galley bench conv in a new process: the tuner's pick is a find-db hit.
  const Result bench = galley(env, "bench conv -n 1 -c 8 -H 12 -W 12 -k 8 -y 3 -x 3 -p 1 -q 1 --json");
  ASSERT_EQ(bench.exit_code, 0) << bench.all;
  const auto b = nlohmann::json::parse(bench.out);
  ASSERT_TRUE(b["problems"][0]["tuner"].is_object()) << bench.out;
  EXPECT_EQ(b["problems"][0]["tuner"]["hit"], true) << bench.out;
  EXPECT_EQ(b["problems"][0]["tuner"]["source"], "user find-db") << bench.out;
  EXPECT_EQ(b["problems"][0]["tuner"]["solver"], doc["problems"][0]["ranked"][0]["solver"]);
  // Batch override changes the keys: nothing stored for n=3 yet.
  const Result other = galley_once(env, "tune --file " + list.string() + " --batch 3 --json", dir.path() / "err");
  ASSERT_EQ(other.exit_code, 0) << other.all;
  EXPECT_EQ(nlohmann::json::parse(other.out)["problems"][0]["status"], "tuned");
}

TEST(CliTune, BadInputsAreErrors) {
  testing::TempDir dir;
  const auto list = dir.path() / "list.txt";
  std::ofstream(list) << kList;
  const std::string env = "GALLEY_CACHE_DIR=" + (dir.path() / "cache").string();
  Result r = galley(env + " GALLEY_FIND_MODE=sometimes", "tune --file " + list.string());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.all.find("normal, fast, hybrid, off"), std::string::npos) << r.all;
  r = galley(env + " GALLEY_FIND_MODE=off", "tune --file " + list.string());
  EXPECT_NE(r.exit_code, 0);
  r = galley(env, "tune --file " + (dir.path() / "missing.txt").string());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.all.find("missing.txt"), std::string::npos) << r.all;
  std::ofstream(dir.path() / "bad.txt") << "conv -n 1 -c 0 -H 8 -W 8\n";
  r = galley(env, "tune --file " + (dir.path() / "bad.txt").string());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.all.find("bad.txt:1"), std::string::npos) << r.all;
}

TEST(CliDb, PathListExportImportClear) {
  testing::TempDir dir;
  const auto list = dir.path() / "list.txt";
  std::ofstream(list) << kList;
  const std::string a = "GALLEY_CACHE_DIR=" + (dir.path() / "a").string() + " GALLEY_FIND_TIME_MS=300";
  const std::string b = "GALLEY_CACHE_DIR=" + (dir.path() / "b").string();
  Result r = galley(a, "db path");
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, (dir.path() / "a" / "finddb.sqlite").string() + "\n");
  ASSERT_EQ(galley_once(a, "tune --file " + list.string(), dir.path() / "err").exit_code, 0);
  r = galley(a, "db list --json");
  ASSERT_EQ(r.exit_code, 0) << r.all;
  const auto rows = nlohmann::json::parse(r.out)["rows"];
  ASSERT_GE(rows.size(), 2u);
  for (const auto& row : rows) EXPECT_TRUE(row["current"].get<bool>()) << row.dump();
  r = galley(a, "db list");
  EXPECT_NE(r.out.find("conv-F-f32-nchw-n1-c8-h12-w12"), std::string::npos) << r.out;

  const auto file = dir.path() / "export.json";
  ASSERT_EQ(galley_once(a, "db export " + file.string(), dir.path() / "err").exit_code, 0);
  ASSERT_EQ(galley_once(b, "db import " + file.string(), dir.path() / "err").exit_code, 0);
  r = galley(b, "db list --json");
  EXPECT_EQ(nlohmann::json::parse(r.out)["rows"].size(), rows.size());
  // The imported db serves hits on "another machine with the same device".
  const Result bench = galley(b, "bench conv -n 1 -c 16 -H 10 -W 10 -k 8 -y 1 -x 1 --json");
  ASSERT_EQ(bench.exit_code, 0) << bench.all;
  EXPECT_EQ(nlohmann::json::parse(bench.out)["problems"][0]["tuner"]["hit"], true) << bench.out;

  const Result clear = galley_once(b, "db clear", dir.path() / "err");
  ASSERT_EQ(clear.exit_code, 0);
  EXPECT_NE(clear.out.find("deleted"), std::string::npos);
  EXPECT_TRUE(nlohmann::json::parse(galley(b, "db list --json").out)["rows"].empty());
  EXPECT_NE(galley(b, "db import " + (dir.path() / "nope.json").string()).exit_code, 0);
}

// `galley bench tuner --first-call --passes` after `galley tune`: every first pick of the new process
// is a find-db hit, each problem has the first pass and --rounds steady passes, all timed (> 0).
TEST(CliBenchTuner, PassesAfterTuneAreHitsWithOneTimePerPass) {
  testing::TempDir dir;
  const auto list = dir.path() / "list.txt";
  std::ofstream(list) << kList;
  const std::string env = "GALLEY_CACHE_DIR=" + (dir.path() / "cache").string() + " GALLEY_FIND_TIME_MS=500";
  ASSERT_EQ(galley_once(env, "tune --file " + list.string() + " --device cpu", dir.path() / "err").exit_code, 0);
  for (const std::string options : {"", " --preload", " --preload --touch"}) {
    const Result r = galley_once(env,
                                 "bench tuner --first-call --passes --rounds 3 --json --device cpu --file " +
                                     list.string() + options,
                                 dir.path() / "err");
    ASSERT_EQ(r.exit_code, 0) << r.all;
    const auto doc = nlohmann::json::parse(r.out);
    EXPECT_EQ(doc["hits"], 2) << r.out;
    EXPECT_EQ(doc["steady_passes"], 3);
    EXPECT_EQ(doc["preload"]["enabled"], options.find("--preload") != std::string::npos);
    EXPECT_EQ(doc["touched"], options.find("--touch") != std::string::npos);
    ASSERT_EQ(doc["passes"].size(), 2u);
    EXPECT_EQ(doc["passes"][0]["problem"], "small.3x3");
    for (const auto& p : doc["passes"]) {
      ASSERT_EQ(p["per_pass_ms"].size(), 4u) << p.dump();
      for (const auto& t : p["per_pass_ms"]) EXPECT_GT(t.get<double>(), 0.0) << p.dump();
      EXPECT_GT(p["steady_ms"].get<double>(), 0.0);
    }
  }
  // --passes belongs to --first-call and replaces --sequence/--explicit: each misuse is named.
  const Result lone = galley(env, "bench tuner --passes --device cpu --file " + list.string());
  EXPECT_NE(lone.exit_code, 0);
  EXPECT_NE(lone.all.find("--passes needs --first-call"), std::string::npos) << lone.all;
  const Result touch = galley(env, "bench tuner --first-call --touch --device cpu --file " + list.string());
  EXPECT_NE(touch.exit_code, 0);
  EXPECT_NE(touch.all.find("--touch needs"), std::string::npos) << touch.all;
  const Result mixed = galley(env, "bench tuner --first-call --passes --sequence --device cpu --file " + list.string());
  EXPECT_NE(mixed.exit_code, 0);
  EXPECT_NE(mixed.all.find("--sequence"), std::string::npos) << mixed.all;
}

}  // namespace
}  // namespace galley::tuning
