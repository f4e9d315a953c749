// `galley bench activ` run as a user runs it: the default problem verifies, every flag reaches the
// problem (the key and repro line say so), and bad flags are errors naming the flag.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "common/run_command.hpp"

namespace {

const std::string kGalley = GALLEY_TEST_BIN_DIR "/galley";

galley::testing::CommandResult run(const std::string& args, bool with_stderr = false) {
  return galley::testing::run_command(kGalley + " " + args + (with_stderr ? " 2>&1" : " 2>/dev/null"));
}

class BenchActivCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kGalley)) GTEST_SKIP() << kGalley << " is not built";
  }
};

TEST_F(BenchActivCli, DefaultProblemRunsAndVerifies) {
  const auto r = run("bench activ -V 1 -i 2 --device cpu --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  ASSERT_EQ(j["problems"].size(), 1u);
  EXPECT_EQ(j["problems"][0]["key"], "activ-F-f32-nchw-relu-a0-b0-n32-c64-h56-w56");
  for (const auto& res : j["problems"][0]["results"]) EXPECT_EQ(res["verified"], true) << res.dump();
}

// --graph times replays of a graph of each sample's calls: the results say so, the outputs still
// verify, and a time comes out.
TEST_F(BenchActivCli, GraphReplaysAreTimedAndSaySo) {
  for (const char* graph : {"", " --graph"}) {
    const auto r = run(
        std::string("bench activ -m gelu -n 1 -c 17 -H 31 -W 29 -F 0 --device cpu -V 1 -i 3 --json") + graph);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const auto j = nlohmann::json::parse(r.output);
    ASSERT_EQ(j["problems"].size(), 2u);
    for (const auto& p : j["problems"]) {
      ASSERT_FALSE(p["results"].empty());
      for (const auto& res : p["results"]) {
        EXPECT_EQ(res["graph"], *graph != 0) << res.dump();
        EXPECT_EQ(res["verified"], true) << res.dump();
        EXPECT_GT(res["ms"].get<double>(), 0) << res.dump();
      }
    }
  }
}

TEST_F(BenchActivCli, FlagsReachTheProblemAndBothDirectionsVerify) {
  const auto r = run(
      "bench activ -m hardtanh --shape 7,129 -F 0 --dtype bf16 --device cpu --all-solvers -V 1 -i 2 --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  ASSERT_EQ(j["problems"].size(), 2u);
  EXPECT_EQ(j["problems"][0]["key"], "activ-F-bf16-row-clip-am1-b1-d7x129");
  EXPECT_EQ(j["problems"][1]["key"], "activ-B-bf16-row-clip-am1-b1-d7x129");
  for (const auto& p : j["problems"]) {
    ASSERT_FALSE(p["results"].empty());
    for (const auto& res : p["results"]) {
      EXPECT_EQ(res["verified"], true) << res.dump();
      EXPECT_NE(res["solver"], "ref.activ") << "--all-solvers leaves the reference out";
    }
  }
  const auto leaky =
      run("bench activ -m leaky_relu -A -0.2 -n 1 -c 17 -H 31 -W 29 --layout nhwc --dtype f16 -F 2 "
          "--device cpu -V 1 -i 2 --json");
  ASSERT_EQ(leaky.exit_code, 0) << leaky.output;
  const auto lj = nlohmann::json::parse(leaky.output);
  EXPECT_EQ(lj["problems"][0]["key"], "activ-B-f16-nhwc-leaky_relu-am0.2-b0-n1-c17-h31-w29");
  // The repro line runs the same problem.
  const std::string command = lj["problems"][0]["command"];
  EXPECT_EQ(command.rfind("galley bench activ -m leaky_relu -A -0.2 -B 0 -n 1 -c 17 -H 31 -W 29 -F 2", 0), 0u)
      << command;
  const auto again = run(command.substr(std::string("galley ").size()) + " -V 1 -i 2 --json");
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_EQ(nlohmann::json::parse(again.output)["problems"][0]["key"], lj["problems"][0]["key"]);
}

TEST_F(BenchActivCli, BadFlagsNameTheFlag) {
  struct Case {
    const char* args;
    const char* fragment;
  };
  const Case cases[] = {
      {"-m swishy", "swishy"},
      {"-m relu -A 0.5", "alpha = 0.5"},
      {"-m clip -A 7 -B 6", "lower bound"},
      {"-n 0", "-n"},
      {"-W x", "-W"},
      {"-A nan -m elu", "-A"},
      {"--shape 3,0", "--shape"},
      {"--shape 1,1,1,1,1,1,1", "at most 6"},
      {"--shape 7,129 -n 2", "--shape"},
      {"--shape 7,129 --layout nhwc", "--layout"},
      {"--layout nhcw", "nhcw"},
      {"--dtype f64", "f64"},
      {"-F 3", "-F"},
      {"--solver cpu.conv.direct", "cpu.conv.direct"},
  };
  for (const Case& c : cases) {
    const auto r = run(std::string("bench activ --device cpu -i 1 ") + c.args, true);
    EXPECT_NE(r.exit_code, 0) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find(c.fragment), std::string::npos) << c.args << "\n" << r.output;
  }
}

}  // namespace
