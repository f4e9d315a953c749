// `galley bench gemm` run as a user runs it: the default problem verifies, every direction and
// dtype verifies with --all-solvers, the JSON carries the key and the flops, and bad flags are
// errors naming the flag or field.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "common/run_command.hpp"

namespace {

const std::string kGalley = GALLEY_TEST_BIN_DIR "/galley";

galley::testing::CommandResult run(const std::string& args, bool with_stderr = false) {
  return galley::testing::run_command("GALLEY_FIND_MODE=off " + kGalley + " " + args +
                                      (with_stderr ? " 2>&1" : " 2>/dev/null"));
}

class BenchGemmCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kGalley)) GTEST_SKIP() << kGalley << " is not built";
  }
};

TEST_F(BenchGemmCli, DefaultProblemRunsAndVerifies) {
  const auto r = run("bench gemm -V 1 --device cpu -i 2", true);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("gemm-F-f32-nn-b1-m256-n256-k256-sa0-sb0-bias0-alpha1-beta0"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("ok"), std::string::npos) << r.output;
}

TEST_F(BenchGemmCli, EveryDirectionAndDtypeVerifies) {
  for (const std::string extra : {"", " --dtype f16 -u 1", " --dtype bf16 -v 1 -b 3 --shared_b"}) {
    const auto r = run("bench gemm -m 17 -n 31 -k 129 --bias -F 0 --device cpu --all-solvers -V 1 -i 2 --json" + extra);
    ASSERT_EQ(r.exit_code, 0) << extra << r.output;
    const auto j = nlohmann::json::parse(r.output);
    ASSERT_EQ(j["problems"].size(), 3u) << extra;
    const char* letters[] = {"gemm-F-", "gemm-B-", "gemm-W-"};
    for (std::size_t i = 0; i < 3; ++i) {
      const auto& p = j["problems"][i];
      EXPECT_EQ(p["key"].get<std::string>().rfind(letters[i], 0), 0u) << p["key"];
      ASSERT_FALSE(p["results"].empty()) << p.dump();
      for (const auto& res : p["results"]) {
        EXPECT_EQ(res["verified"], true) << res.dump();
        EXPECT_NE(res["solver"], "ref.gemm");
        const double batch = extra.find("-b 3") != std::string::npos ? 3 : 1;
        const double flops = 2.0 * 17 * 31 * 129 * batch;
        EXPECT_NEAR(res["tflops"].get<double>(), flops / (res["ms"].get<double>() * 1e-3) / 1e12,
                    1e-9 + 1e-6 * res["tflops"].get<double>());
      }
    }
  }
}

TEST_F(BenchGemmCli, BadFlagsAreNamed) {
  const std::pair<std::string, std::string> cases[] = {
      {"-m 0", "-m"},
      {"-n -3", "-n"},
      {"--transA 2", "--transA"},
      {"-F 8", "-F"},
      {"--shared_a", "shared_a"},
      {"-F 2 --beta 1", "--beta"},
      {"--dtype i32", "dtype"},
      {"--alpha nan", "--alpha"},
      {"--layout nhwc", "--layout"},
  };
  for (const auto& [flags, named] : cases) {
    const auto r = run("bench gemm --device cpu -i 1 " + flags, true);
    EXPECT_NE(r.exit_code, 0) << flags << ": " << r.output;
    EXPECT_NE(r.output.find(named), std::string::npos) << flags << ": " << r.output;
  }
}

TEST_F(BenchGemmCli, ReproLineRunsTheSameProblem) {
  const auto r = run("bench gemm -m 9 -n 7 -k 5 -b 2 --shared_b --bias -A 0.5 -B 2 -V 1 -i 1 --device cpu --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["problems"][0]["key"], "gemm-F-f32-nn-b2-m9-n7-k5-sa0-sb1-bias1-alpha0.5-beta2");
}

}  // namespace
