// `galley run`: checks a model against ONNX test data, times it on random inputs, and names bad
// models, options and data.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "common/run_command.hpp"

namespace {

const std::string kData = "/usr/share/libonnx-testdata/data/";

galley::testing::CommandResult run_galley(const std::string& args) {
  return galley::testing::run_command(GALLEY_TEST_BIN_DIR "/galley " + args + " 2>&1");
}

TEST(CliRun, ChecksAModelAgainstItsTestData) {
  const std::string dir = kData + "pytorch-converted/test_Conv2d_no_bias/";
  const auto r = run_galley("run " + dir + "model.onnx --inputs " + dir + "test_data_set_0 --check --device cpu");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("[ ok ]"), std::string::npos) << r.output;
}

TEST(CliRun, InputsOfAnotherModelAreRefused) {
  // Test data of another model (other input shapes) is an error naming the input, not a crash.
  const std::string a = kData + "pytorch-converted/test_Conv2d_no_bias/";
  const auto r = run_galley("run " + a + "model.onnx --inputs " + kData + "node/test_relu/test_data_set_0 --check --device cpu");
  EXPECT_NE(r.exit_code, 0) << r.output;
}

TEST(CliRun, TimesOnRandomInputsAsJson) {
  const auto r = run_galley("run " + kData + "pytorch-converted/test_Conv2d_no_bias/model.onnx --device cpu --iters 3 --json --verbose");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  EXPECT_GT(j["images_per_s"].get<double>(), 0);
  EXPECT_GT(j["peak_bytes"].get<double>(), 0);
  ASSERT_FALSE(j["layers"].empty());
  EXPECT_EQ(j["layers"][0]["op"], "Conv");
  EXPECT_FALSE(j["layers"][0]["solver"].get<std::string>().empty());
}

TEST(CliRun, BadInputIsNamed) {
  auto r = run_galley("run /nonexistent.onnx --device cpu");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("/nonexistent.onnx"), std::string::npos) << r.output;
  r = run_galley("run " + kData + "node/test_acos/model.onnx --device cpu");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("'Acos'"), std::string::npos) << r.output;
  r = run_galley("run " + kData + "node/test_relu/model.onnx --check --device cpu");
  EXPECT_NE(r.output.find("--check needs --inputs"), std::string::npos) << r.output;
  r = run_galley("run " + kData + "node/test_relu/model.onnx --batch 0 --device cpu");
  EXPECT_NE(r.exit_code, 0);
}

}  // namespace
