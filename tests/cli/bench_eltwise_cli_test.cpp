// `galley bench eltwise` run as a user runs it: the default problem alone runs and verifies, both
// directions, its repro line pastes back, and bad flags and impossible shapes are errors naming them.
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

class BenchEltwiseCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kGalley)) GTEST_SKIP() << kGalley << " is not built (ninja galley_cli)";
  }
};

TEST_F(BenchEltwiseCli, DefaultProblemRunsAndVerifies) {
  const auto r = run("bench eltwise -V 1 --device cpu -i 2 --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  ASSERT_EQ(j["problems"].size(), 1u);
  EXPECT_EQ(j["problems"][0]["key"], "eltwise-F-add-f32-nchw-a8x64x28x28-b1x64x1x1-al1-be1");
  ASSERT_FALSE(j["problems"][0]["results"].empty());
  for (const auto& res : j["problems"][0]["results"]) EXPECT_EQ(res["verified"], true) << res.dump();
}

TEST_F(BenchEltwiseCli, BothDirectionsEveryDtypeAndTheReproLine) {
  const auto r =
      run("bench eltwise --op div --shape 3x17x31x29 --shape1 17x1x29 --alpha -0.5 --beta 2 -F 0 "
          "--dtype bf16 --device cpu --all-solvers -V 1 -i 1 --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  ASSERT_EQ(j["problems"].size(), 2u);
  EXPECT_EQ(j["problems"][1]["key"], "eltwise-B-div-bf16-nchw-a3x17x31x29-b17x1x29-al-0.5-be2");
  for (const auto& p : j["problems"]) {
    for (const auto& res : p["results"]) EXPECT_EQ(res["verified"], true) << res.dump();
  }
  // The logged command runs as it is.
  const std::string command = j["problems"][1]["command"];
  EXPECT_EQ(
      command.rfind(
          "galley bench eltwise --op div --shape 3x17x31x29 --shape1 17x1x29 --alpha -0.5 --beta 2 -F 2", 0),
      0u)
      << command;
  const auto again = run(command.substr(std::string("galley ").size()) + " -V 1 -i 1", true);
  EXPECT_EQ(again.exit_code, 0) << again.output;
  const auto nhwc =
      run("bench eltwise --op mul --shape 2x23x7x5 --shape1 1x23x1x1 --layout nhwc --dtype f16 -F 0 "
          "--device cpu -V 1 -i 1",
          true);
  EXPECT_EQ(nhwc.exit_code, 0) << nhwc.output;
}

TEST_F(BenchEltwiseCli, BadFlagsAndShapesAreNamed) {
  struct Case {
    const char* args;
    const char* fragment;
  };
  for (const Case& c :
       {Case{"--op pow", "pow"}, Case{"--shape 2x3 --shape1 4", "do not broadcast"},
        Case{"--shape 2x0x3", "--shape"}, Case{"--shape1 2xx3", "--shape1"},
        Case{"--shape 1x2x3x4x5x6x7", "at most 6"}, Case{"--alpha nan", "--alpha"}, Case{"-F 3", "-F"},
        Case{"--layout nhwc --shape 2x3 --shape1 3", "nhwc"}, Case{"--dtype i8", "i8"}}) {
    const auto r = run(std::string("bench eltwise --device cpu ") + c.args, true);
    EXPECT_NE(r.exit_code, 0) << c.args << ": " << r.output;
    EXPECT_NE(r.output.find(c.fragment), std::string::npos) << c.args << ": " << r.output;
  }
}

}  // namespace
