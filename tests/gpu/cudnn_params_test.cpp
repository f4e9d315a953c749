// The cuDNN solvers' inner choices (tuned_params / use_tuned_params): cuda.conv.cudnn_graph's engine
// config and cuda.conv.cudnn's cudnnFind winner. Malformed text is refused, a stored choice is adopted
// without a search, and what runs then still matches the reference. Skips without a CUDA device.
#include <gtest/gtest.h>

#include <vector>

#include "dnn/ref_conv_direct.hpp"
#include "dnn/tensor_data.hpp"
#include "galley/dnn/conv_solver.hpp"
#include "galley/memory/buffer.hpp"
#include "gpu_test_util.hpp"
#include "solver_vs_reference.hpp"

namespace galley::dnn {
namespace {

Comparison run_against_reference(const ConvSolver& solver, const ConvProblem& p, const runtime::Device& device) {
  return testing::run_against_reference(solver, p, device, 31);
}

struct ParamsCase {
  const char* solver;
  std::vector<const char*> malformed;
  const char* stored_detail;  // what detail() says once a stored choice was adopted
  DType dtype;
};

class CudnnParams : public ::testing::TestWithParam<ParamsCase> {};

TEST_P(CudnnParams, StoredChoiceIsAdoptedAndCorrect) {
  std::string why;
  const auto device = galley::testing::first_device("cuda", why);
  if (!device) GTEST_SKIP() << "no CUDA device: " << why;
  const ParamsCase& c = GetParam();
  const ConvSolver* solver = find_conv_solver("cuda", c.solver);
  ASSERT_NE(solver, nullptr);
  ConvProblem tuned{.n = 2, .c = 24, .h = 17, .w = 13, .k = 40, .y = 3, .x = 3, .pad_h = 1, .pad_w = 1};
  tuned.dtype = c.dtype;
  tuned.layout = Layout::nhwc;
  ASSERT_TRUE(solver->check(tuned, *device));
  const std::string params = solver->tuned_params(tuned, *device);
  ASSERT_FALSE(params.empty());

  ConvProblem fresh = tuned;  // same shape, another key: not searched in this process yet
  fresh.n = 3;
  for (const char* bad : c.malformed) EXPECT_FALSE(solver->use_tuned_params(fresh, *device, bad)) << bad;
  ASSERT_TRUE(solver->use_tuned_params(fresh, *device, params)) << params;
  EXPECT_EQ(solver->tuned_params(fresh, *device), params);
  EXPECT_NE(solver->detail(fresh, *device).find(c.stored_detail), std::string::npos) << solver->detail(fresh, *device);
  const Comparison cmp = run_against_reference(*solver, fresh, *device);
  EXPECT_TRUE(cmp.passed) << cmp.summary;
  // Once chosen, a later stored choice is a no-op that reports success.
  EXPECT_TRUE(solver->use_tuned_params(tuned, *device, params));
}

INSTANTIATE_TEST_SUITE_P(
    Vendor, CudnnParams,
    ::testing::Values(
        ParamsCase{"cuda.conv.cudnn_graph",
                   {"", "eng", "engx", "eng-1", "eng3{k2=}", "eng3{k2=1,}", "eng3{x}", "eng3}", "eng999999"},
                   "stored choice", DType::f16},
        ParamsCase{"cuda.conv.cudnn", {"", "algo", "algo1", "algo1-math", "algo99-math0", "algo1-math9", "algo1-math1x"},
                   "stored choice", DType::f16},
        // f32 must stay on FMA math: a stored tensor-op (TF32) choice is refused.
        ParamsCase{"cuda.conv.cudnn", {"algo1-math1", "algo1-math2"}, "stored choice", DType::f32}),
    [](const ::testing::TestParamInfo<ParamsCase>& info) {
      std::string name = std::string(info.param.solver).substr(10) + "_" + to_string(info.param.dtype);
      for (char& ch : name) if (ch == '.') ch = '_';
      return name;
    });

}  // namespace
}  // namespace galley::dnn
