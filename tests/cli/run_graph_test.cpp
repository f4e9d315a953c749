// `galley run --graph`: the timed iterations replay one captured graph, and the report says so.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "common/run_command.hpp"

namespace {

galley::testing::CommandResult run_galley(const std::string& args) {
  return galley::testing::run_command(GALLEY_TEST_BIN_DIR "/galley " + args + " 2>&1");
}

TEST(CliRunGraph, TinyCnnReplaysOneGraph) {
  const auto r = run_galley("run --model tiny_cnn --size 32 --graph --iters 3 --device cpu");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("graph replay of "), std::string::npos) << r.output;
}

TEST(CliRunGraph, JsonNamesTheModeAndTheNodeCountEvenWithoutWarmUp) {
  const auto r =
      run_galley("run --model tiny_cnn --size 32 --graph --iters 3 --warmup 0 --device cpu --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["mode"], "graph replay");
  EXPECT_GT(j["graph_nodes"].get<int>(), 0);
  EXPECT_GT(j["peak_bytes"].get<double>(), 0);
}

TEST(CliRunGraph, WithoutTheFlagRunsEagerly) {
  const auto r = run_galley("run --model tiny_cnn --size 32 --iters 2 --device cpu --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(nlohmann::json::parse(r.output)["mode"], "eager");
}

TEST(CliRunGraph, ChecksAReplayAgainstTestData) {
  const std::string dir = "/usr/share/libonnx-testdata/data/pytorch-converted/test_Conv2d_no_bias/";
  const auto r = run_galley("run " + dir + "model.onnx --inputs " + dir +
                            "test_data_set_0 --check --graph --device cpu");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("[ ok ]"), std::string::npos) << r.output;
}

}  // namespace
