// The cuDNN solvers' inner choices, each a TunableSolver's configs that the tuner times.
// cuda.conv.cudnn_graph's engine configs: the text form round-trips and refuses anything else (no
// device needed); on a device every candidate of a few problems matches the reference, the default is
// the first candidate, a config text stored in the find-db is reinstated by the tuner on a problem not
// seen in this process and what runs then matches, and a text that is not valid is refused
// (parse_config_any, the tuner re-tunes past it) or, handed over as a config, a galley::Error naming
// it. cuda.conv.cudnn's algorithms: each candidate matches the reference, texts round-trip, malformed
// or unsupported ones and TF32 for f32 are refused, and the text of a stored choice of the cudnnFind
// era is still a valid config. The device tests skip without a CUDA device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backends/cuda/cudnn_engine_config.hpp"
#include "dnn/ref_conv_direct.hpp"
#include "dnn/tensor_data.hpp"
#include "galley/core/error.hpp"
#include "galley/dnn/conv_solver.hpp"
#include "galley/memory/buffer.hpp"
#include "galley/tuning/tuner.hpp"
#include "gpu_test_util.hpp"
#include "solver_vs_reference.hpp"

namespace galley::dnn {
namespace {

using backends::cuda::EngineConfig;

constexpr const char* kGraph = "cuda.conv.cudnn_graph";

// Texts of the form find-db rows hold today ("eng<N>{k<type>=<value>,...}", as EngineInfo::tag
// wrote them) parse and print back unchanged.
TEST(CudnnGraphConfigText, StoredFormRoundTrips) {
  for (const char* text : {"eng0", "eng12", "eng12{k2=3,k14=4}", "eng47{k2=-1,k3=0,k17=123456789012}",
                           "eng1234{k0=0}", "eng1{k2=9223372036854775807,k3=-9223372036854775808}"}) {
    const std::optional<EngineConfig> c = EngineConfig::parse(text);
    ASSERT_TRUE(c.has_value()) << text;
    EXPECT_EQ(c->to_string(), text);
    EXPECT_EQ(EngineConfig::parse(c->to_string()), c) << text;
  }
  const std::optional<EngineConfig> c = EngineConfig::parse("eng12{k2=3,k14=4}");
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->index, 12);
  const std::vector<std::pair<std::int64_t, std::int64_t>> knobs{{2, 3}, {14, 4}};
  EXPECT_EQ(c->knobs, knobs);
  EXPECT_EQ((EngineConfig{7, {{1, 2}}}).to_string(), "eng7{k1=2}");
}

TEST(CudnnGraphConfigText, AnyOtherTextIsRefused) {
  for (const char* bad : {"",
                          "eng",
                          "engx",
                          "eng-1",
                          "eng3{k2=}",
                          "eng3{k2=1,}",
                          "eng3{x}",
                          "eng3}",
                          "eng3{",
                          "eng3{}",
                          "eng03",
                          "eng-0",
                          "eng3{k-1=2}",
                          "eng3{k2=01}",
                          " eng3",
                          "eng3 ",
                          "eng3{k2=1}x",
                          "eng3{k2=1}{k3=1}",
                          "ENG3",
                          "eng3{k2=1;k3=2}",
                          "algo1-math3",
                          "eng99999999999999999999",
                          "eng1{k2=9223372036854775808}",
                          "eng3{k+2=1}",
                          "eng+3"}) {
    EXPECT_FALSE(EngineConfig::parse(bad).has_value()) << "'" << bad << "'";
  }
}

/// cuda.conv.cudnn_graph on the first CUDA device, or a skip.
class CudnnGraphConfigs : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    device_ = galley::testing::first_device("cuda", why);
    if (!device_) GTEST_SKIP() << "no CUDA device: " << why;
    solver_ = find_conv_solver("cuda", kGraph);
    ASSERT_NE(solver_, nullptr);
  }
  std::optional<runtime::Device> device_;
  const ConvSolver* solver_ = nullptr;
};

ConvProblem graph_problem(DType dtype, Layout layout, ConvProblem p) {
  p.dtype = dtype;
  p.layout = layout;
  return p;
}

// A 3x3 layer of odd sizes and a dilated one of 7 channels: shapes every cuDNN solver is checked on.
const ConvProblem kOddLayer{
    .n = 2, .c = 24, .h = 17, .w = 13, .k = 40, .y = 3, .x = 3, .pad_h = 1, .pad_w = 1};
const ConvProblem kDilatedLayer{.n = 1,
                                .c = 7,
                                .h = 11,
                                .w = 11,
                                .k = 5,
                                .y = 3,
                                .x = 3,
                                .pad_h = 2,
                                .pad_w = 2,
                                .dilation_h = 2,
                                .dilation_w = 2};

// Per format: the two shapes above and a first layer of 3 channels (where the fallback list's
// classic engines come in).
std::vector<ConvProblem> graph_problems() {
  std::vector<ConvProblem> out;
  const ConvProblem shapes[] = {kOddLayer,
                                kDilatedLayer,
                                {.n = 1,
                                 .c = 3,
                                 .h = 32,
                                 .w = 30,
                                 .k = 16,
                                 .y = 7,
                                 .x = 7,
                                 .pad_h = 3,
                                 .pad_w = 3,
                                 .stride_h = 2,
                                 .stride_w = 2}};
  for (const auto& [dtype, layout] :
       {std::pair{DType::f16, Layout::nhwc}, std::pair{DType::bf16, Layout::nhwc},
        std::pair{DType::f32, Layout::nchw}}) {
    for (const ConvProblem& shape : shapes) out.push_back(graph_problem(dtype, layout, shape));
  }
  return out;
}

TEST_F(CudnnGraphConfigs, EveryCandidateMatchesTheReference) {
  for (const ConvProblem& p : graph_problems()) {
    const ProblemRef ref = ProblemRef::of(p);
    const Applicability a = solver_->check_any(ref, *device_);
    if (!a) {
      // cuDNN may have no engine for the dilated or the 3-channel problem: then it says why. The
      // plain 3x3 layer is one every format's engines take.
      EXPECT_FALSE(a.reason.empty()) << p.key();
      EXPECT_FALSE(p.dilation_h == 1 && p.c > 3) << p.key() << " refused: " << a.reason;
      std::printf("[ info ] %s refused %s: %s\n", kGraph, p.key().c_str(), a.reason.c_str());
      continue;
    }
    const std::vector<std::string> texts = solver_->configs_any(ref, *device_);
    ASSERT_FALSE(texts.empty()) << p.key();
    // Heuristics mode A's 10 and the fallback list's 4, or at most 14 of the sweep.
    EXPECT_LE(texts.size(), 14u) << p.key();
    std::printf("[ info ] %s %s: %zu configs, first %s\n", kGraph, p.key().c_str(), texts.size(),
                texts.front().c_str());
    for (std::size_t i = 0; i < texts.size(); ++i) {
      const std::string& text = texts[i];
      EXPECT_EQ(std::count(texts.begin(), texts.end(), text), 1) << text << " listed twice for " << p.key();
      const std::optional<EngineConfig> typed = EngineConfig::parse(text);
      ASSERT_TRUE(typed.has_value()) << text << " is not of the stored form";
      EXPECT_EQ(typed->to_string(), text);
      const std::optional<ConfigHandle> config = solver_->parse_config_any(ref, *device_, text);
      ASSERT_TRUE(config.has_value()) << text << " does not parse back for " << p.key();
      const Comparison cmp =
          galley::testing::run_against_reference(*solver_, p, *device_, 41 + i, config->get());
      EXPECT_TRUE(cmp.passed) << text << " on " << p.key() << ": " << cmp.summary;
    }
    // Without a tuned choice the first candidate runs (heuristics mode A's best usable config).
    const std::optional<ConfigHandle> first = solver_->parse_config_any(ref, *device_, texts.front());
    ASSERT_TRUE(first.has_value());
    EXPECT_EQ(solver_->workspace_bytes(p, *device_),
              solver_->workspace_bytes_any(ref, *device_, first->get()));
    const std::string detail = solver_->detail(p, *device_);
    EXPECT_NE(detail.find(texts.front()), std::string::npos) << detail;
    const Comparison cmp = galley::testing::run_against_reference(*solver_, p, *device_, 40);
    EXPECT_TRUE(cmp.passed) << "the default on " << p.key() << ": " << cmp.summary;
  }
}

tuning::TunerOptions graph_only_tuner() {
  tuning::TunerOptions o;
  o.find.mode = tuning::FindMode::hybrid;
  o.find.time_box_ms = 20000;  // every config is timed: the box must not cut the list
  o.db_paths = {};             // an in-memory find-db, seeded by the test
  o.only_solvers = {kGraph};
  return o;
}

// A config text in the find-db (written by an earlier process, or before the solver listed configs:
// the same "eng<N>{...}" text) is reinstated on a problem this process has not seen, and runs right.
TEST_F(CudnnGraphConfigs, StoredConfigTextIsReinstated) {
  for (const auto& [dtype, layout] :
       {std::pair{DType::f16, Layout::nhwc}, std::pair{DType::f32, Layout::nchw}}) {
    const ConvProblem seen = graph_problem(
        dtype, layout, {.n = 2, .c = 24, .h = 17, .w = 13, .k = 40, .y = 3, .x = 3, .pad_h = 1, .pad_w = 1});
    ASSERT_TRUE(solver_->check(seen, *device_)) << seen.key();
    const std::vector<std::string> texts = solver_->configs_any(ProblemRef::of(seen), *device_);
    ASSERT_FALSE(texts.empty());
    // The last candidate: not what the solver would run by default.
    const std::string stored = texts.back();
    ConvProblem fresh = seen;  // same shape, another key: nothing of it built in this process yet
    fresh.n = 3;
    tuning::Tuner tuner(graph_only_tuner());
    tuner.db().store(fresh.key(), tuning::DeviceIdentity::of(*device_),
                     {tuning::FindRecord{kGraph, 0.5, 0, 0, stored}});
    const tuning::Pick pick = tuner.pick(fresh, *device_);
    ASSERT_NE(pick.solver, nullptr);
    EXPECT_EQ(pick.solver->name(), kGraph);
    EXPECT_TRUE(pick.hit);
    EXPECT_EQ(pick.source, tuning::PickSource::user_db);
    EXPECT_EQ(pick.config, stored);
    ASSERT_NE(pick.config_handle, nullptr);
    const Comparison cmp =
        galley::testing::run_against_reference(*solver_, fresh, *device_, 43, pick.config_handle.get());
    EXPECT_TRUE(cmp.passed) << stored << " on " << fresh.key() << ": " << cmp.summary;
  }
}

// The tuner times the candidates itself and stores the winner's text, one of the listed configs.
TEST_F(CudnnGraphConfigs, TheTunerTimesTheConfigsAndStoresTheWinnersText) {
  const ConvProblem p =
      graph_problem(DType::f16, Layout::nhwc,
                    {.n = 2, .c = 32, .h = 14, .w = 14, .k = 32, .y = 3, .x = 3, .pad_h = 1, .pad_w = 1});
  ASSERT_TRUE(solver_->check(p, *device_)) << p.key();
  const std::vector<std::string> texts = solver_->configs_any(ProblemRef::of(p), *device_);
  tuning::Tuner tuner(graph_only_tuner());
  const tuning::TuneResult result = tuner.tune(p, *device_);
  ASSERT_EQ(result.ranked.size(), 1u);  // one row per solver: its fastest config
  EXPECT_EQ(result.ranked[0].solver, kGraph);
  EXPECT_NE(std::find(texts.begin(), texts.end(), result.ranked[0].params), texts.end())
      << result.ranked[0].params << " is not a listed config";
  const auto rows = tuner.db().lookup(p.key(), tuning::DeviceIdentity::of(*device_));
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].params, result.ranked[0].params);
}

// Text that is not a valid config here is refused, never run: malformed, an engine cuDNN does not
// have, or a knob it rejects. A find-db row holding one is re-tuned past; a config handed over anyway
// is a galley::Error that names it.
TEST_F(CudnnGraphConfigs, InvalidConfigTextIsRefused) {
  for (const auto& [dtype, layout] :
       {std::pair{DType::f16, Layout::nhwc}, std::pair{DType::f32, Layout::nchw}}) {
    const ConvProblem p = graph_problem(
        dtype, layout, {.n = 2, .c = 24, .h = 17, .w = 13, .k = 40, .y = 3, .x = 3, .pad_h = 1, .pad_w = 1});
    const ProblemRef ref = ProblemRef::of(p);
    ASSERT_TRUE(solver_->check_any(ref, *device_)) << p.key();
    for (const char* bad : {"", "eng", "engx", "eng-1", "eng3{k2=}", "eng3{k2=1,}", "eng3{x}", "eng3}",
                            "eng999999", "algo1-math3"}) {
      EXPECT_FALSE(solver_->parse_config_any(ref, *device_, bad).has_value()) << "'" << bad << "'";
    }
    const ConfigHandle unknown = std::make_shared<const EngineConfig>(EngineConfig{999999, {}});
    try {
      (void)solver_->workspace_bytes_any(ref, *device_, unknown.get());
      ADD_FAILURE() << "eng999999 was taken for " << p.key();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("eng999999"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(kGraph), std::string::npos) << e.what();
    }
    // A find-db row of a config that is not valid here is not trusted: the problem is tuned again and
    // the row replaced by a listed config.
    ConvProblem fresh = p;
    fresh.n = 4;
    tuning::Tuner tuner(graph_only_tuner());
    const tuning::DeviceIdentity id = tuning::DeviceIdentity::of(*device_);
    tuner.db().store(fresh.key(), id, {tuning::FindRecord{kGraph, 0.5, 0, 0, "eng999999"}});
    const tuning::Pick pick = tuner.pick(fresh, *device_);
    EXPECT_EQ(pick.source, tuning::PickSource::tuned);
    EXPECT_NE(pick.config, "eng999999");
    const std::vector<std::string> texts = solver_->configs_any(ProblemRef::of(fresh), *device_);
    EXPECT_NE(std::find(texts.begin(), texts.end(), pick.config), texts.end()) << pick.config;
    const auto rows = tuner.db().lookup(fresh.key(), id);
    ASSERT_FALSE(rows.empty());
    EXPECT_EQ(rows[0].params, pick.config);
  }
}

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
  for (ConvProblem p : {kOddLayer, kDilatedLayer}) {
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
                         ::testing::Values(LegacyCase{DType::f32, Layout::nchw},
                                           LegacyCase{DType::f16, Layout::nhwc},
                                           LegacyCase{DType::bf16, Layout::nhwc}),
                         [](const ::testing::TestParamInfo<LegacyCase>& info) {
                           return std::string(to_string(info.param.dtype)) + "_" +
                                  to_string(info.param.layout);
                         });

}  // namespace
}  // namespace galley::dnn
