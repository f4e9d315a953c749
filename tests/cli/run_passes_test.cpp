// `galley run` with the graph passes: --no-pass names are checked, --json and --verbose say what
// each pass did, --dtype f16 checks f32 test data with f16's tolerance.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "common/run_command.hpp"

namespace {

const std::string kConv = "/usr/share/libonnx-testdata/data/pytorch-converted/test_Conv2d/";

galley::testing::CommandResult run_galley(const std::string& args) {
  return galley::testing::run_command(GALLEY_TEST_BIN_DIR "/galley " + args + " 2>&1");
}

nlohmann::json pass_named(const nlohmann::json& passes, const std::string& name) {
  for (const auto& p : passes) {
    if (p["pass"] == name) return p;
  }
  ADD_FAILURE() << "no pass " << name << " in " << passes.dump();
  return {};
}

TEST(CliRunPasses, UnknownPassIsAnErrorListingTheValidOnes) {
  const auto r = run_galley("run " + kConv + "model.onnx --device cpu --no-pass constant-foldin");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("unknown pass 'constant-foldin'"), std::string::npos) << r.output;
  for (const char* name : {"constant-folding", "batch-norm-folding", "conv-fusion", "dead-node-removal",
                           "dtype-conversion", "layout"}) {
    EXPECT_NE(r.output.find(name), std::string::npos) << r.output;
  }
}

TEST(CliRunPasses, BadDtypeAndLayoutAreNamed) {
  auto r = run_galley("run " + kConv + "model.onnx --device cpu --dtype i8");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("--dtype i8"), std::string::npos) << r.output;
  r = run_galley("run " + kConv + "model.onnx --device cpu --dtype f64");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  r = run_galley("run " + kConv + "model.onnx --device cpu --layout sideways");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("--layout sideways"), std::string::npos) << r.output;
}

TEST(CliRunPasses, JsonSaysWhichPassesRanAndWhatTheyChanged) {
  const auto r = run_galley(
      "run --model tiny_cnn --size 32 --device cpu --iters 1 --warmup 0 --json --no-pass dead-node-removal");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  ASSERT_EQ(j["passes"].size(), 6u);
  const auto fusion = pass_named(j["passes"], "conv-fusion");
  EXPECT_TRUE(fusion["ran"].get<bool>());
  EXPECT_EQ(fusion["rewrites"], 5);  // every conv of tiny_cnn but the shortcut projection
  EXPECT_LT(fusion["nodes_after"].get<int>(), fusion["nodes_before"].get<int>());
  const auto dead = pass_named(j["passes"], "dead-node-removal");
  EXPECT_FALSE(dead["ran"].get<bool>());
  EXPECT_EQ(dead["note"], "turned off");
  EXPECT_FALSE(pass_named(j["passes"], "dtype-conversion")["ran"].get<bool>());
}

TEST(CliRunPasses, F16ChecksF32TestDataWithItsTolerance) {
  const auto r = run_galley("run " + kConv + "model.onnx --inputs " + kConv +
                            "test_data_set_0 --check --device cpu --dtype f16 --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["dtype"], "f16");
  EXPECT_TRUE(pass_named(j["passes"], "dtype-conversion")["ran"].get<bool>());
  ASSERT_EQ(j["outputs"].size(), 1u);
  EXPECT_TRUE(j["outputs"][0]["passed"].get<bool>());
  EXPECT_EQ(j["outputs"][0]["tolerance"], 1e-2);
  EXPECT_GT(j["outputs"][0]["max_error"].get<double>(), 0);  // f16 rounding shows
}

TEST(CliRunPasses, VerboseTableAndNhwcOnTheCpu) {
  const auto r = run_galley("run " + kConv + "model.onnx --inputs " + kConv +
                            "test_data_set_0 --check --device cpu --layout nhwc --verbose");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("layout"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("[ ok ]"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("1 -> 3"), std::string::npos) << "the conv and a reorder each side: " << r.output;
}

}  // namespace
