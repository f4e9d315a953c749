// `galley bench conv` run as a user runs it: the JSON schema, --file tags, verification and its
// exit code, errors for unknown solvers and unsupported flags.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "common/run_command.hpp"

namespace {

const std::string kGalley = GALLEY_TEST_BIN_DIR "/galley";
const std::string kSmall = "-n 1 -c 17 -H 31 -W 29 -k 23 -y 3 -x 3 -p 1 -q 1";

/// stdout only (so --json parses) unless `with_stderr`.
galley::testing::CommandResult run(const std::string& args, bool with_stderr = false) {
  return galley::testing::run_command(kGalley + " " + args + (with_stderr ? " 2>&1" : " 2>/dev/null"));
}

class BenchConvCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kGalley)) GTEST_SKIP() << kGalley << " is not built (ninja galley_cli)";
  }
};

TEST_F(BenchConvCli, JsonHasEveryFieldAndVerifies) {
  const auto r = run("bench conv " + kSmall + " --device cpu --all-solvers -V 1 -i 2 --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  ASSERT_EQ(j["problems"].size(), 1u);
  const auto& p = j["problems"][0];
  EXPECT_EQ(p["key"], "conv-F-f32-nchw-n1-c17-h31-w29-k23-y3-x3-p1-q1-u1-v1-l1-j1-g1");
  EXPECT_EQ(p["tag"], "");
  ASSERT_FALSE(p["results"].empty());
  for (const auto& res : p["results"]) {
    for (const char* field :
         {"solver", "ms", "tflops", "gbps", "verified", "max_rel_err", "workspace_bytes", "detail"}) {
      EXPECT_TRUE(res.contains(field)) << field << " missing in " << res.dump();
    }
    EXPECT_NE(res["solver"], "ref.conv.direct") << "--all-solvers leaves the reference out";
    EXPECT_EQ(res["verified"], true) << res.dump();
    EXPECT_GT(res["ms"].get<double>(), 0.0);
    const double flops = 2.0 * 1 * 23 * 31 * 29 * 17 * 9;
    EXPECT_NEAR(res["tflops"].get<double>(), flops / (res["ms"].get<double>() * 1e-3) / 1e12,
                1e-9 + 1e-6 * res["tflops"].get<double>());
  }
}

// --prepared gives each solver a prepared-weights slot: the verified run fills it, the timed runs
// read it, and the output still matches the reference; the JSON says it was asked.
TEST_F(BenchConvCli, PreparedWeightsVerify) {
  const auto r = run("bench conv " + kSmall + " --device cpu --all-solvers -V 1 -i 2 --prepared --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["prepared"], true) << j.dump();
  ASSERT_EQ(j["problems"].size(), 1u);
  ASSERT_FALSE(j["problems"][0]["results"].empty());
  for (const auto& res : j["problems"][0]["results"]) EXPECT_EQ(res["verified"], true) << res.dump();
}

TEST_F(BenchConvCli, EveryDirectionRunsAndVerifies) {
  // -F 0 is MIOpenDriver's "all three"; each direction is verified against its own reference,
  // in both layouts and a half type.
  for (const std::string extra : {"", " --layout nhwc", " --dtype bf16"}) {
    const auto r = run("bench conv " + kSmall + " -F 0 --device cpu --all-solvers -V 1 -i 2 --json" + extra);
    ASSERT_EQ(r.exit_code, 0) << extra << r.output;
    const auto j = nlohmann::json::parse(r.output);
    ASSERT_EQ(j["problems"].size(), 3u);
    std::string letters;
    for (const auto& p : j["problems"]) {
      letters += p["key"].get<std::string>().substr(5, 1);
      ASSERT_FALSE(p["results"].empty()) << p.dump();
      for (const auto& res : p["results"]) EXPECT_EQ(res["verified"], true) << extra << res.dump();
    }
    EXPECT_EQ(letters, "FBW");
  }
  for (const auto& [flag, letter] : {std::pair{"2", "B"}, std::pair{"4", "W"}}) {
    const auto r = run("bench conv " + kSmall + " -F " + flag + " --device cpu -V 1 -i 2 --json");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const auto j = nlohmann::json::parse(r.output);
    ASSERT_EQ(j["problems"].size(), 1u);
    EXPECT_EQ(j["problems"][0]["key"].get<std::string>().substr(5, 1), letter);
  }
  const auto bad = run("bench conv " + kSmall + " -F 3 --device cpu", true);
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find("-F '3'"), std::string::npos) << bad.output;
}

TEST_F(BenchConvCli, FileKeepsTagsAndOverridesDtype) {
  const std::string path =
      ::testing::TempDir() + "/bench_conv_cli_test_" + std::to_string(::getpid()) + ".txt";
  {
    std::ofstream f(path);
    f << "# comment line\n\n"
      << "conv -n 1 -c 8 -H 9 -W 7 -k 4 -y 1 -x 1 -p 0 -q 0 -u 1 -v 1 -l 1 -j 1 -g 1   # tiny.1x1\n"
      << "convfp16 -n 1 -c 8 -H 9 -W 7 -k 8 -y 3 -x 3 -p 1 -q 1 -g 8 # tiny.dw\n";
  }
  auto r = run("bench conv --file " + path + " --device cpu -i 1 --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto j = nlohmann::json::parse(r.output);
  ASSERT_EQ(j["problems"].size(), 2u);
  EXPECT_EQ(j["problems"][0]["tag"], "tiny.1x1");
  EXPECT_EQ(j["problems"][1]["tag"], "tiny.dw");
  EXPECT_NE(j["problems"][1]["key"].get<std::string>().find("-f16-"), std::string::npos);
  EXPECT_EQ(j["problems"][0]["results"].size(), 1u);  // the default: the solver the library picks
  EXPECT_TRUE(j["problems"][0]["results"][0]["verified"].is_null());

  r = run("bench conv --file " + path + " --device cpu -i 1 --json --dtype bf16 --layout nhwc");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  j = nlohmann::json::parse(r.output);
  for (const auto& p : j["problems"]) {
    EXPECT_NE(p["key"].get<std::string>().find("-bf16-nhwc-"), std::string::npos) << p["key"];
  }
  // Problem flags and --file together are ambiguous.
  r = run("bench conv --file " + path + " -n 2", true);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("not both"), std::string::npos) << r.output;
  std::filesystem::remove(path);
}

TEST_F(BenchConvCli, VerificationFailureMeansNonZeroExit) {
  // No cpu solver is bit-exact with the double reference on f16 output at a 1e-12 tolerance...
  auto r = run("bench conv " + kSmall +
                 " --device cpu --dtype f16 --all-solvers -V 1 -i 1 --tolerance 1e-12 --json");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  bool any_failed = false;
  for (const auto& res : j["problems"][0]["results"]) any_failed = any_failed || res["verified"] == false;
  EXPECT_TRUE(any_failed) << r.output;
  // ...while the reference timed against itself passes at any tolerance.
  r = run("bench conv " + kSmall + " --device cpu --solver ref.conv.direct -V 1 -i 1 --tolerance 1e-12");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("ok 0"), std::string::npos) << r.output;
}

TEST_F(BenchConvCli, TableForPeople) {
  const auto r = run("bench conv " + kSmall + " --device cpu -V 1 -i 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* column : {"problem", "solver", "ms", "TFLOP/s", "GB/s", "workspace", "verify"}) {
    EXPECT_NE(r.output.find(column), std::string::npos) << r.output;
  }
  EXPECT_NE(r.output.find(" ok "), std::string::npos) << r.output;
}

TEST_F(BenchConvCli, ErrorsNameTheProblem) {
  auto r = run("bench conv " + kSmall + " --device cpu --solver cpu.conv.nope", true);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("unknown conv solver 'cpu.conv.nope'"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("ref.conv.direct"), std::string::npos) << "the valid names are listed: " << r.output;

  r = run("bench conv " + kSmall + " -F 3 --device cpu", true);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("-F"), std::string::npos) << r.output;

  r = run("bench conv -c 3 -g 2 --device cpu", true);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("divisible"), std::string::npos) << r.output;

  r = run("bench conv " + kSmall + " --dtype f64 --device cpu", true);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("f64"), std::string::npos) << r.output;

  // A solver that cannot do the problem says why, and nothing ran: an error.
  r = run("bench conv " + kSmall + " --device cpu --solver cpu.conv.gemm_1x1", true);
  if (r.output.find("unknown conv solver") == std::string::npos) {  // only when that cpu solver exists
    EXPECT_NE(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("cpu.conv.gemm_1x1"), std::string::npos) << r.output;
  }
}

}  // namespace
