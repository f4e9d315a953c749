// `galley bench conv --bias --activ NAME [--alpha A --beta B] --residual`: the fused forms run and
// verify with every solver (the unfused sequence among them), the repro line carries the flags,
// and bad epilogue flags are errors naming them.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "common/run_command.hpp"

namespace {

const std::string kGalley = GALLEY_TEST_BIN_DIR "/galley";
const std::string kSmall = "-n 1 -c 17 -H 31 -W 29 -k 23 -y 3 -x 3 -p 1 -q 1";

galley::testing::CommandResult run(const std::string& args, bool with_stderr = false) {
  return galley::testing::run_command(kGalley + " " + args + (with_stderr ? " 2>&1" : " 2>/dev/null"));
}

class BenchConvEpilogueCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kGalley)) GTEST_SKIP() << kGalley << " is not built (ninja galley_cli)";
  }
};

TEST_F(BenchConvEpilogueCli, FusedFormsRunAndVerifyWithEverySolver) {
  const struct {
    std::string flags, suffix;
  } cases[] = {
      {"--bias --activ relu", "-bias-relu-a0-b0"},
      {"--bias --residual --activ relu", "-bias-res-relu-a0-b0"},
      {"--residual", "-res"},
      {"--activ leaky_relu --alpha 0.2", "-leaky_relu-a0.2-b0"},
      {"--bias --activ clip --alpha -1 --beta 1 --layout nhwc --dtype f16", "-bias-clip-am1-b1"},
  };
  for (const auto& c : cases) {
    const auto r =
        run("bench conv " + kSmall + " " + c.flags + " --device cpu --all-solvers -V 1 -i 2 --json");
    ASSERT_EQ(r.exit_code, 0) << c.flags << "\n" << r.output;
    const auto j = nlohmann::json::parse(r.output);
    ASSERT_EQ(j["problems"].size(), 1u);
    const auto& p = j["problems"][0];
    const std::string key = p["key"];
    EXPECT_EQ(key.substr(key.size() - c.suffix.size()), c.suffix) << key;
    bool unfused = false;
    for (const auto& res : p["results"]) {
      EXPECT_EQ(res["verified"], true) << c.flags << ": " << res.dump();
      unfused = unfused || res["solver"] == "cpu.conv.unfused";
    }
    EXPECT_TRUE(unfused) << c.flags << ": " << p.dump();
    const std::string cmd = p["command"];
    for (const std::string flag : {"--bias", "--residual", "--activ"}) {
      EXPECT_EQ(c.flags.find(flag) != std::string::npos, cmd.find(flag) != std::string::npos)
          << flag << ": " << cmd;
    }
  }
}

TEST_F(BenchConvEpilogueCli, TheReproLineRunsTheSameProblem) {
  const auto first = run("bench conv " + kSmall + " --bias --residual --activ elu --device cpu -i 1 --json");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const auto p = nlohmann::json::parse(first.output)["problems"][0];
  std::string cmd = p["command"];
  ASSERT_EQ(cmd.rfind("galley ", 0), 0u) << cmd;
  const auto again = run(cmd.substr(7) + " -i 1 --json");
  ASSERT_EQ(again.exit_code, 0) << cmd << "\n" << again.output;
  EXPECT_EQ(nlohmann::json::parse(again.output)["problems"][0]["key"], p["key"]);
}

TEST_F(BenchConvEpilogueCli, BadEpilogueFlagsAreErrors) {
  const struct {
    std::string flags, fragment;
  } cases[] = {
      {"--activ swish", "unknown activation 'swish'"},
      {"--activ relu --alpha 1", "alpha = 1 means nothing for relu"},
      {"--alpha 0.1", "--alpha and --beta are parameters of --activ"},
      {"--activ clip --alpha 2 --beta 1", "exceeds its upper bound"},
      {"--bias -F 2", "needs direction forward, not backward_data"},
      {"--activ relu --alpha nan", "--alpha"},
  };
  for (const auto& c : cases) {
    const auto r = run("bench conv " + kSmall + " " + c.flags + " --device cpu -i 1", true);
    EXPECT_NE(r.exit_code, 0) << c.flags;
    EXPECT_NE(r.output.find(c.fragment), std::string::npos) << c.flags << ": " << r.output;
  }
}

}  // namespace
