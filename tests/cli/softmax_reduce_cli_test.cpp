// `galley bench softmax` and `galley bench reduce` run and verify their default problems and name
// bad attributes.
#include <gtest/gtest.h>

#include <string>

#include "common/run_command.hpp"

namespace {

galley::testing::CommandResult galley_bench(const std::string& args) {
  return galley::testing::run_command(GALLEY_TEST_BIN_DIR "/galley bench " + args + " 2>&1");
}

TEST(CliSoftmaxReduce, DefaultProblemsRunAndVerify) {
  for (const char* args :
       {"softmax -V 1 -F 0 --device cpu", "softmax -V 1 --layout nhwc --dtype f16 --device cpu",
        "softmax --shape 8x1000 --axis -1 --log -V 1 -F 0 --device cpu --all-solvers",
        "softmax -m 0 -a 2 -n 4 -V 1 --device cpu", "reduce -V 1 -F 0 --device cpu",
        "reduce --shape 2x3x4x5 --axes 0,2 --op sum --dtype bf16 -V 1 -F 0 --device cpu"}) {
    const auto r = galley_bench(args);
    EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.output;
    EXPECT_NE(r.output.find("ok"), std::string::npos) << args << "\n" << r.output;
    EXPECT_EQ(r.output.find("FAIL"), std::string::npos) << args << "\n" << r.output;
  }
  const auto json = galley_bench("reduce --json -V 1 --device cpu");
  EXPECT_EQ(json.exit_code, 0) << json.output;
  EXPECT_NE(json.output.find("reduce-F-f32-mean-a2.3-s32x64x14x14"), std::string::npos) << json.output;
}

// The repro lines the problems print (their bench_command, checked in tests/dnn) run the same problem.
TEST(CliSoftmaxReduce, ReproLinesRunTheirProblem) {
  const struct {
    const char* args;
    const char* key;
  } cases[] = {
      {"softmax --shape 2x3x4x5 --axis 2 --log -F 2 --dtype bf16 --layout nhwc --device cpu",
       "softmax-B-bf16-nhwc-logsoftmax-a2-s2x3x4x5"},
      {"reduce --shape 2x3x4x5 --axes 0,1,2,3 --op mean -F 2 --dtype f16 --device cpu --solver "
       "cpu.reduce.direct",
       "reduce-B-f16-mean-a0.1.2.3-s2x3x4x5"},
  };
  for (const auto& c : cases) {
    const auto r = galley_bench(std::string(c.args) + " -V 1 --json");
    EXPECT_EQ(r.exit_code, 0) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find(c.key), std::string::npos) << c.args << "\n" << r.output;
  }
}

TEST(CliSoftmaxReduce, BadAttributesAreNamed) {
  const struct {
    const char* args;
    const char* words;
  } cases[] = {
      {"softmax --axis 4 --device cpu", "axis 4"},
      {"softmax --shape 2x3 --axis 2 --device cpu", "axis 2"},
      {"softmax --shape 2x3 --layout nhwc --device cpu", "--layout"},
      {"softmax --shape 2x3 -n 4 --device cpu", "--shape"},
      {"softmax -a 3 --device cpu", "-a"},
      {"softmax --shape 2x0 --device cpu", "--shape"},
      {"softmax -m 0 -c 4294967296 -H 4294967296 --device cpu", "overflows"},
      {"softmax -c 4294967296 -H 4294967296 -W 8 --device cpu", "-n * -c * -H * -W"},
      {"softmax --shape 4294967296x4294967296 --device cpu", "overflows"},
      {"reduce --shape 4294967296x4294967296 --device cpu", "overflows"},
      {"reduce --axes 1,1 --device cpu", "twice"},
      {"reduce --axes 4 --device cpu", "axis 4"},
      {"reduce --op max --device cpu", "max"},
      {"reduce --shape 2x3x4x5x6x7x8 --device cpu", "--shape"},
      {"reduce --axes 1, --device cpu", "--axes"},
  };
  for (const auto& c : cases) {
    const auto r = galley_bench(c.args);
    EXPECT_NE(r.exit_code, 0) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find(c.words), std::string::npos) << c.args << "\n" << r.output;
  }
}

}  // namespace
