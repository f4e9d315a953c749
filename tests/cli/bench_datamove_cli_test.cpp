// `galley bench concat|split|transpose|pad|reorder` as a user runs them: the default problems run
// and verify on the cpu, forward and backward, and bad flags are errors naming the flag.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "common/run_command.hpp"

namespace {

galley::testing::CommandResult run_bench(const std::string& args) {
  return galley::testing::run_command("GALLEY_FIND_MODE=off " GALLEY_TEST_BIN_DIR "/galley bench " + args +
                                      " --device cpu -i 1 2>&1");
}

TEST(CliBenchDataMove, DefaultProblemsRunAndVerifyBothDirections) {
  for (const char* op : {"concat", "split", "transpose", "pad", "reorder"}) {
    const auto r = run_bench(std::string(op) + " -V 1 -F 0 --json");
    ASSERT_EQ(r.exit_code, 0) << op << ": " << r.output;
    const auto out = nlohmann::json::parse(r.output);
    ASSERT_EQ(out["problems"].size(), 2u) << op << ": " << r.output;
    for (const auto& problem : out["problems"]) {
      ASSERT_FALSE(problem["results"].empty()) << op << ": " << r.output;
      for (const auto& result : problem["results"])
        EXPECT_EQ(result["verified"], true) << op << ": " << r.output;
    }
  }
}

// The repro line a problem prints (GALLEY_LOG_CMD, --json "command") benches that same problem.
TEST(CliBenchDataMove, ReproLinesRunTheSameProblem) {
  for (const char* args :
       {"concat --layout nhwc --dtype f16 --sizes 3,5", "split --axis 2 --inputs 7",
        "transpose --dims 2,3,4,5,6 --perm 4,3,2,1,0", "pad -F 2 --value -3 --before 1,0,0,2",
        "reorder --to-dtype bf16", "pad --layout nhwc --value 1e-05"}) {
    const auto first = run_bench(std::string(args) + " --json");
    ASSERT_EQ(first.exit_code, 0) << args << ": " << first.output;
    const auto problem = nlohmann::json::parse(first.output)["problems"][0];
    std::string command = problem["command"];
    ASSERT_EQ(command.rfind("galley bench ", 0), 0u) << command;
    command = command.substr(std::string("galley bench ").size());
    command = command.substr(0, command.find(" --device"));
    const auto again = run_bench(command + " -V 1 --json");
    ASSERT_EQ(again.exit_code, 0) << command << ": " << again.output;
    EXPECT_EQ(nlohmann::json::parse(again.output)["problems"][0]["key"], problem["key"]) << command;
  }
}

TEST(CliBenchDataMove, ShapesFromFlags) {
  const auto c =
      run_bench("concat -V 1 --dims 1,43,31,29 --axis 1 --sizes 3,17,23 --layout nhwc --dtype bf16");
  EXPECT_EQ(c.exit_code, 0) << c.output;
  EXPECT_NE(c.output.find("concat-bf16-nhwc-a1-d1x43x31x29-s3.17.23"), std::string::npos) << c.output;
  const auto s = run_bench("split -V 1 --sizes 5,7 --axis 0");
  EXPECT_EQ(s.exit_code, 0) << s.output;
  EXPECT_NE(s.output.find("split-f32-nchw-a0-d12x256x28x28-s5.7"), std::string::npos) << s.output;
  const auto t = run_bench("transpose -V 1 --dims 3,17,31,29,2 --perm 4,2,0,3,1 --dtype f16");
  EXPECT_EQ(t.exit_code, 0) << t.output;
  const auto p = run_bench("pad -V 1 -F 2 --dims 2,3,5 --before 1,0,2 --after 0,3,1 --value -2.5");
  EXPECT_EQ(p.exit_code, 0) << p.output;
  EXPECT_NE(p.output.find("pad-B-f32-nchw-d2x3x5-b1.0.2-e0.3.1-vm2.5"), std::string::npos) << p.output;
  const auto r =
      run_bench("reorder -V 1 --dims 2,3,31,29 --dtype f16 --to-dtype f32 --layout nhwc --to-layout nchw");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("reorder-f16-nhwc-f32-nchw-d2x3x31x29"), std::string::npos) << r.output;
}

TEST(CliBenchDataMove, BadFlagsAreErrorsNamingThem) {
  const struct {
    const char* args;
    const char* message;
  } cases[] = {
      {"concat --dims 2,4 --axis 3", "--axis 3 is out of range"},
      {"concat --dims 2,4 --axis 1 --sizes 1,2", "sum to 3"},
      {"concat --dims 2,6 --axis 1 --inputs 4", "--inputs 4 does not divide"},
      {"concat --sizes 1,2 --inputs 2", "--sizes"},
      {"concat --inputs 97", "--inputs"},
      {"split --dims 2,x", "--dims"},
      {"split --dims 2,,3", "--dims"},
      {"transpose --dims 2,3,4 --perm 0,1,1", "repeats"},
      {"transpose --dims 2,3,4 --perm 0,1", "perm has 2 entries"},
      {"pad --before 0,0,-1,0", "--before"},
      {"pad --dims 2,3 --before 1 --after 1,1", "before has 1 entries"},
      {"pad --value nan", "--value"},
      {"reorder --to-dtype i8", "dst dtype i8"},
      {"reorder --dims 2,3,4 --layout nhwc", "nhwc"},
      {"concat --layout nchwc", "nchwc"},
      {"transpose -F 3", "-F"},
  };
  for (const auto& c : cases) {
    const auto r = run_bench(c.args);
    EXPECT_NE(r.exit_code, 0) << c.args << ": " << r.output;
    EXPECT_NE(r.output.find(c.message), std::string::npos) << c.args << ": " << r.output;
  }
}

}  // namespace
