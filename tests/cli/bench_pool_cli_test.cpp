// `galley bench pool` run as a user runs it: the default problem verifies, every window kind and
// both directions verify in JSON, and bad attributes are errors naming the flag.
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

class BenchPoolCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kGalley)) GTEST_SKIP() << kGalley << " is not built (ninja galley_cli)";
  }
};

TEST_F(BenchPoolCli, DefaultProblemRunsAndVerifies) {
  const auto r = run("bench pool -V 1 --device cpu -i 1", true);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("pool-F-f32-nchw-max-kernel"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" ok "), std::string::npos) << r.output;
}

TEST_F(BenchPoolCli, EveryWindowKindVerifiesForwardAndBackward) {
  const char* problems[] = {
      "-n 1 -c 17 -H 31 -W 29 -y 3 -x 2 -p 1 -q 1 -u 2 -v 3 --ceil -m avg",
      "-n 2 -c 3 -H 31 -W 29 -y 2 -x 2 -p 0 -q 0 -u 2 -v 2 -m max --keep-indices --layout nhwc --dtype f16",
      "-n 1 -c 23 -H 31 -W 29 --global -m avg_in --dtype bf16",
      "-n 1 -c 5 -H 31 -W 29 --adaptive 7x5 -m max",
  };
  for (const char* flags : problems) {
    const auto r = run(std::string("bench pool -V 1 -F 0 -i 1 --device cpu --json ") + flags);
    ASSERT_EQ(r.exit_code, 0) << flags << "\n" << r.output;
    const auto j = nlohmann::json::parse(r.output);
    ASSERT_EQ(j["problems"].size(), 2u) << flags;
    for (const auto& p : j["problems"]) {
      ASSERT_FALSE(p["results"].empty()) << p.dump();
      for (const auto& res : p["results"]) EXPECT_EQ(res["verified"], true) << res.dump();
    }
  }
}

// The repro line a problem prints (GALLEY_LOG_CMD, the JSON's "command") runs the same problem.
TEST_F(BenchPoolCli, ReproCommandRunsTheSameProblem) {
  const char* problems[] = {
      "-n 1 -c 3 -H 9 -W 8 -y 3 -x 2 -p 1 -q 1 -u 2 -v 1 --ceil -m avg",
      "-n 1 -c 3 -H 9 -W 8 --global -m max --keep-indices -F 2 --layout nhwc",
      "-n 1 -c 3 -H 9 -W 8 --adaptive 4x3 -m avg_in --dtype bf16",
  };
  for (const char* flags : problems) {
    const auto first = run(std::string("bench pool -i 1 --device cpu --json ") + flags);
    ASSERT_EQ(first.exit_code, 0) << flags << "\n" << first.output;
    const auto j = nlohmann::json::parse(first.output)["problems"][0];
    const std::string command = j["command"];
    ASSERT_EQ(command.rfind("galley bench pool ", 0), 0u) << command;
    const auto again = run(command.substr(std::string("galley ").size()) + " -i 1 --json");
    ASSERT_EQ(again.exit_code, 0) << command << "\n" << again.output;
    EXPECT_EQ(nlohmann::json::parse(again.output)["problems"][0]["key"], j["key"]) << command;
  }
}

TEST_F(BenchPoolCli, BadAttributesAreErrorsNamingThem) {
  const struct {
    const char* flags;
    const char* names;
  } cases[] = {
      {"-H 4 -W 4 -y 9 -p 1", "kernel_h (-y)"},
      {"-y 3 -p 2", "pad_h (-p)"},
      {"-m min", "-m"},
      {"--adaptive 7", "--adaptive"},
      {"--adaptive 0x3", "--adaptive"},
      {"--global -y 3", "-y"},
      {"--global --adaptive 2x2", "--global"},
      {"-m avg --keep-indices", "keep_indices"},
      {"--dtype i32", "--dtype"},
      {"-u 0", "-u"},
      {"-n 017", "-n"},
  };
  for (const auto& c : cases) {
    const auto r = run(std::string("bench pool --device cpu -i 1 ") + c.flags, true);
    EXPECT_NE(r.exit_code, 0) << c.flags << "\n" << r.output;
    EXPECT_NE(r.output.find(c.names), std::string::npos) << c.flags << "\n" << r.output;
  }
}

}  // namespace
