// GALLEY_CUDA_GRAPHS as a user sets it, in a child `galley bench conv` (the value is read once per
// process): a malformed value is an error naming the variable and the value, from the first cuDNN or
// cuBLAS call; 0 (replay off) and 1 run and verify.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "common/run_command.hpp"
#include "gpu_test_util.hpp"

namespace {

/// The `galley` CLI beside this test binary: the build's bin/ here, the pack's bin/ on a GPU machine.
std::filesystem::path galley_cli() {
  return std::filesystem::read_symlink("/proc/self/exe").parent_path() / "galley";
}

/// stdout and stderr together.
galley::testing::CommandResult run_galley(const std::string& env, const std::string& args) {
  return galley::testing::run_command(env + " " + galley_cli().string() + " " + args + " 2>&1");
}

// A 1x1 layer with channels not a multiple of 8 and batch 1: both vendor solvers take it.
const std::string kProblem = "-n 1 -c 24 -H 13 -W 11 -k 40 -y 1 -x 1 -p 0 -q 0 --dtype f16 --layout nhwc";

class CudaGraphsEnv : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    std::string why;
    if (!galley::testing::first_device("cuda", why)) GTEST_SKIP() << "no CUDA device: " << why;
    if (!std::filesystem::exists(galley_cli())) GTEST_SKIP() << galley_cli() << " is not built (ninja galley_cli)";
  }
  std::string args() const {
    return "bench conv " + kProblem + " --device cuda:0 --solver " + GetParam() + " -V 1 -i 4";
  }
};

TEST_P(CudaGraphsEnv, MalformedValueIsAnErrorNamingIt) {
  const auto child = run_galley("GALLEY_FIND_MODE=off GALLEY_CUDA_GRAPHS=sometimes", args());
  EXPECT_NE(child.exit_code, 0) << child.output;
  EXPECT_NE(child.output.find("GALLEY_CUDA_GRAPHS='sometimes'"), std::string::npos) << child.output;
  EXPECT_NE(child.output.find("valid: 1, 0"), std::string::npos) << child.output;
}

TEST_P(CudaGraphsEnv, OnAndOffBothRunAndVerify) {
  for (const char* value : {"0", "1"}) {
    // -i 4 after the warm-up: with replay on, the later calls launch the captured graph.
    const auto child = run_galley(std::string("GALLEY_FIND_MODE=off GALLEY_CUDA_GRAPHS=") + value, args());
    EXPECT_EQ(child.exit_code, 0) << "GALLEY_CUDA_GRAPHS=" << value << "\n" << child.output;
    EXPECT_NE(child.output.find(" ok "), std::string::npos) << "not verified:\n" << child.output;
  }
}

INSTANTIATE_TEST_SUITE_P(Solvers, CudaGraphsEnv, ::testing::Values("cuda.conv.cudnn_graph", "cuda.conv.cublas_gemm"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& ch : name)
                             if (ch == '.') ch = '_';
                           return name;
                         });

}  // namespace
