// The cuDNN solvers' inner choices. cuda.conv.cudnn_graph's engine config (tuned_params /
// use_tuned_params): malformed text is refused, a stored choice is adopted without a search, and what
// runs then still matches the reference. cuda.conv.cudnn's algorithms (a TunableSolver's configs,
// which the tuner times): each candidate matches the reference, texts round-trip, malformed or
// unsupported ones and TF32 for f32 are refused, and the text of a stored choice of the cudnnFind
// era is still a valid config. Skips without a CUDA device.
#include <gtest/gtest.h>

#include <optional>
#include <string>
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
        ParamsCase{"cuda.conv.cudnn_graph", {"eng3{k2=1,}"}, "stored choice", DType::f32}),
    [](const ::testing::TestParamInfo<ParamsCase>& info) {
      std::string name = std::string(info.param.solver).substr(10) + "_" + to_string(info.param.dtype);
      for (char& ch : name) if (ch == '.') ch = '_';
      return name;
    });

struct LegacyCase {
  DType dtype;
  Layout layout;
};

class CudnnLegacyConfigs : public ::testing::TestWithParam<LegacyCase> {};

TEST_P(CudnnLegacyConfigs, EveryCandidateMatchesTheReference) {
  std::string why;
  const auto device = galley::testing::first_device("cuda", why);
  if (!device) GTEST_SKIP() << "no CUDA device: " << why;
  const SolverBase* solver = find_solver("cuda", OpKind::conv, "cuda.conv.cudnn");
  ASSERT_NE(solver, nullptr);
  const auto& conv_solver = static_cast<const ConvSolver&>(*solver);
  const LegacyCase& c = GetParam();
  for (ConvProblem p : {ConvProblem{.n = 2, .c = 24, .h = 17, .w = 13, .k = 40, .y = 3, .x = 3, .pad_h = 1, .pad_w = 1},
                        ConvProblem{.n = 1, .c = 7, .h = 11, .w = 11, .k = 5, .y = 3, .x = 3, .pad_h = 2, .pad_w = 2,
                                    .dilation_h = 2, .dilation_w = 2}}) {
    p.dtype = c.dtype;
    p.layout = c.layout;
    const ProblemRef ref = ProblemRef::of(p);
    ASSERT_TRUE(solver->check_any(ref, *device)) << p.key();
    const std::vector<std::string> texts = solver->configs_any(ref, *device);
    ASSERT_FALSE(texts.empty()) << p.key();
    for (const std::string& text : texts) {
      const std::optional<ConfigHandle> config = solver->parse_config_any(ref, *device, text);
      ASSERT_TRUE(config.has_value()) << text << " does not parse back for " << p.key();
      if (p.dtype == DType::f32) EXPECT_TRUE(text.ends_with("-math3")) << text << ": f32 must run FMA math";
      const Comparison cmp = testing::run_against_reference(conv_solver, p, *device, 37, config->get());
      EXPECT_TRUE(cmp.passed) << text << " on " << p.key() << ": " << cmp.summary;
    }
    for (const char* bad : {"", "algo", "algo1", "algo1-math", "algo99-math0", "algo1-math9", "algo1-math1x"})
      EXPECT_FALSE(solver->parse_config_any(ref, *device, bad).has_value()) << bad;
    if (p.dtype == DType::f32) {
      // A tensor-op (TF32) choice is refused for f32, even one cuDNN supports.
      EXPECT_FALSE(solver->parse_config_any(ref, *device, "algo1-math1").has_value());
      EXPECT_FALSE(solver->parse_config_any(ref, *device, "algo1-math2").has_value());
    }
    // The cudnnFind era stored IMPLICIT_PRECOMP_GEMM as "algo1-math<M>": still a valid config.
    const std::string stored = p.dtype == DType::f32 ? "algo1-math3" : "algo1-math1";
    EXPECT_TRUE(solver->parse_config_any(ref, *device, stored).has_value()) << stored << " for " << p.key();
  }
}

INSTANTIATE_TEST_SUITE_P(Vendor, CudnnLegacyConfigs,
                         ::testing::Values(LegacyCase{DType::f32, Layout::nchw}, LegacyCase{DType::f16, Layout::nhwc},
                                           LegacyCase{DType::bf16, Layout::nhwc}),
                         [](const ::testing::TestParamInfo<LegacyCase>& info) {
                           return std::string(to_string(info.param.dtype)) + "_" + to_string(info.param.layout);
                         });

}  // namespace
}  // namespace galley::dnn
