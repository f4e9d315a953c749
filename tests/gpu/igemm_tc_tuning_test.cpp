// gpu.conv.igemm_tc's tile plans as the tuner's configs: every plan it lists for a problem computes
// the right thing (shapes that send the cost model and the timing to different tiles: N = 64 / 256,
// long K with few blocks, the scalar gather, folded and padded channels), the default is the first,
// the text round-trips in the form find-db rows stored before (so those rows keep working), bad text
// is refused, and the tuner times the plans and stores the winner's text. Skips without a CUDA device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "dnn/conv_grid.hpp"
#include "dnn/ref_conv_direct.hpp"
#include "dnn/tensor_data.hpp"
#include "galley/dnn/conv_solver.hpp"
#include "galley/memory/buffer.hpp"
#include "galley/tuning/tuner.hpp"
#include "gpu_test_util.hpp"
#include "solver_vs_reference.hpp"

namespace galley::dnn {
namespace {

using galley::test::geometry;

constexpr const char* kSolver = "gpu.conv.igemm_tc";

Comparison run_against_reference(const ConvSolver& solver, const ConvProblem& p,
                                 const runtime::Device& device) {
  return testing::run_against_reference(solver, p, device, 41);
}

ConvProblem nhwc(ConvProblem p, DType dtype) {
  p.dtype = dtype;
  p.layout = Layout::nhwc;
  return p;
}

class IgemmTcTuning : public galley::testing::CudaSolverTest<DType> {
 protected:
  IgemmTcTuning() : CudaSolverTest(kSolver) {}
};

// The shapes the plans are checked on.
std::vector<ConvProblem> plan_shapes() {
  //        n    c   h   w    k  y  x  p  q  u  v  l  j  g
  return {
      // 3x3 over 64 channels out: the 128x64 and 64x64 tiles compete.
      geometry(4, 64, 28, 28, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1),
      // Few blocks, long K (4608): split-K candidates are timed.
      geometry(2, 512, 7, 7, 256, 3, 3, 1, 1, 1, 1, 1, 1, 1),
      // 1x1, N = 256, odd pixel count.
      geometry(3, 128, 13, 11, 256, 1, 1, 0, 0, 1, 1, 1, 1, 1),
      // Channels not a multiple of 8: the scalar gather, whatever tile won.
      geometry(2, 12, 19, 17, 40, 3, 3, 1, 1, 2, 2, 1, 1, 1),
      // Dilated, channels a multiple of 8 but not of 32 (the loader's channel walk wraps mid-step).
      geometry(2, 24, 23, 21, 72, 3, 3, 2, 2, 1, 1, 2, 2, 1),
      // Up to 4 channels, stride 2 along w: column pairs folded into 8 channels. Odd and even pads
      // (the tap shift), an odd width (the last pair half zeros), 1-4 channels, stride 1 / dilation 2
      // along h, batch 1.
      geometry(2, 3, 30, 38, 64, 7, 7, 3, 3, 2, 2, 1, 1, 1),
      geometry(1, 3, 31, 29, 40, 7, 7, 3, 3, 2, 2, 1, 1, 1),
      geometry(3, 4, 17, 19, 24, 5, 5, 2, 2, 1, 2, 1, 1, 1),
      geometry(2, 1, 13, 12, 16, 3, 3, 0, 0, 2, 2, 1, 1, 1),
      geometry(2, 2, 19, 23, 8, 3, 4, 2, 1, 1, 2, 2, 1, 1),
  };
}

TEST_P(IgemmTcTuning, EveryListedPlanMatchesTheReference) {
  for (const ConvProblem& shape : plan_shapes()) {
    const ConvProblem p = nhwc(shape, GetParam());
    const ProblemRef ref = ProblemRef::of(p);
    ASSERT_TRUE(solver_->check(p, *device_)) << p.key() << ": " << solver_->check(p, *device_).reason;
    const std::string detail = solver_->detail(p, *device_);
    if (p.c <= 4 && p.stride_w == 2)
      EXPECT_NE(detail.find("column pairs folded"), std::string::npos) << p.key() << ": " << detail;
    const std::vector<std::string> texts = solver_->configs_any(ref, *device_);
    ASSERT_FALSE(texts.empty()) << p.key();
    EXPECT_LE(texts.size(), 29u) << p.key();
    for (const std::string& text : texts) {
      EXPECT_EQ(std::count(texts.begin(), texts.end(), text), 1) << text << " listed twice for " << p.key();
      const std::optional<ConfigHandle> config = solver_->parse_config_any(ref, *device_, text);
      ASSERT_TRUE(config.has_value()) << text << " does not parse back for " << p.key();
      const Comparison c = testing::run_against_reference(*solver_, p, *device_, 41, config->get());
      EXPECT_TRUE(c.passed) << p.key() << " " << text << ": " << c.summary;
    }
    // Without a tuned choice the first plan (the cost model's) runs, and gives the same answer again.
    const std::optional<ConfigHandle> first = solver_->parse_config_any(ref, *device_, texts.front());
    ASSERT_TRUE(first.has_value());
    EXPECT_EQ(solver_->workspace_bytes(p, *device_),
              solver_->workspace_bytes_any(ref, *device_, first->get()));
    EXPECT_EQ(solver_->configs_any(ref, *device_), texts) << p.key();
    const Comparison again = run_against_reference(*solver_, p, *device_);
    EXPECT_TRUE(again.passed) << p.key() << " (" << detail << "): " << again.summary;
  }
}

// Rows stored before the tuner listed the plans hold the same text: each tile and a split runs from
// it, on a problem this process has not planned; text that is not a plan here is refused.
TEST_P(IgemmTcTuning, StoredPlanTextRunsAndBadTextIsRefused) {
  const ConvProblem p = nhwc(geometry(3, 32, 15, 13, 48, 3, 3, 1, 1, 1, 1, 1, 1, 1), GetParam());
  const ProblemRef ref = ProblemRef::of(p);
  ASSERT_TRUE(solver_->check(p, *device_));
  for (const char* bad :
       {"", "tile", "tile=5", "tile=5,splits=", "tile=5,splits=0", "tile=99,splits=1", "tile=-1,splits=1",
        "tile=5,splits=2x", "splits=1,tile=5", "tile=05,splits=1", "tile=5,splits=65", " tile=5,splits=1"})
    EXPECT_FALSE(solver_->parse_config_any(ref, *device_, bad).has_value()) << "'" << bad << "'";
  for (const char* stored :
       {"tile=0,splits=1", "tile=1,splits=2", "tile=2,splits=1", "tile=3,splits=1", "tile=4,splits=1",
        "tile=5,splits=3", "tile=6,splits=1", "tile=7,splits=1", "tile=8,splits=2"}) {
    const std::optional<ConfigHandle> config = solver_->parse_config_any(ref, *device_, stored);
    ASSERT_TRUE(config.has_value()) << stored;
    const Comparison c = testing::run_against_reference(*solver_, p, *device_, 43, config->get());
    EXPECT_TRUE(c.passed) << stored << ": " << c.summary;
  }
}

// The tuner times the listed plans itself and stores the winner's text, one of them.
TEST_P(IgemmTcTuning, TheTunerTimesThePlansAndStoresTheWinnersText) {
  const ConvProblem p = nhwc(geometry(2, 512, 7, 7, 256, 3, 3, 1, 1, 1, 1, 1, 1, 1), GetParam());
  ASSERT_TRUE(solver_->check(p, *device_));
  const std::vector<std::string> texts = solver_->configs_any(ProblemRef::of(p), *device_);
  ASSERT_GT(texts.size(), 1u) << "a long reduction over few blocks lists split-K plans";
  tuning::TunerOptions options;
  options.find.mode = tuning::FindMode::hybrid;
  options.find.time_box_ms = 20000;  // every plan is timed: the box must not cut the list
  options.db_paths = {};             // an in-memory find-db
  options.only_solvers = {kSolver};
  tuning::Tuner tuner(options);
  const tuning::TuneResult result = tuner.tune(p, *device_);
  ASSERT_EQ(result.ranked.size(), 1u);  // one row per solver: its fastest plan
  EXPECT_NE(std::find(texts.begin(), texts.end(), result.ranked[0].params), texts.end())
      << result.ranked[0].params << " is not a listed plan";
  const auto rows = tuner.db().lookup(p.key(), tuning::DeviceIdentity::of(*device_));
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].params, result.ranked[0].params);
}

// The Hopper wgmma tiles (plan tiles 9-16, kWgmmaTiles in conv_igemm_wgmma.hpp: 9-12 cp.async, 13-16
// warp-specialized with the weights by TMA) with and without split-K, handed over as configs so that
// each runs whatever the tuner would pick, over shapes that reach every edge: pixel counts that are not
// a multiple of the tile (prime sizes, batch 1), kg not a multiple of 8 (the scattered epilogue) or of
// the tile's N, kred not a multiple of 64 (the TMA box and the gather zero-fill past it), a channel
// walk that wraps mid-step (cg = 24, dilated), groups (a weight box must not reach into the next
// group's rows), strides, padding and c = 3 (channels padded to 8 in the workspace), and a reduction
// longer than the specialized tiles' stages (the producer waits for released stages). y is NaN-filled
// before each run. Skips on devices without wgmma (anything but compute capability 9.0), where these
// configs are refused.
TEST_P(IgemmTcTuning, WgmmaTilesMatchTheReference) {
  const ConvProblem probe = nhwc(geometry(1, 8, 5, 5, 8, 1, 1, 0, 0, 1, 1, 1, 1, 1), GetParam());
  if (!solver_->parse_config_any(ProblemRef::of(probe), *device_, "tile=9,splits=1"))
    GTEST_SKIP() << "no wgmma on " << device_->name() << " (needs compute capability 9.0)";
  //                                                n    c   h   w    k  y  x  p  q  u  v  l  j  g
  const std::vector<ConvProblem> shapes = {
      geometry(2, 64, 29, 31, 128, 3, 3, 1, 1, 1, 1, 1, 1, 1),
      geometry(1, 256, 7, 7, 264, 1, 1, 0, 0, 1, 1, 1, 1, 1),
      geometry(3, 24, 23, 21, 40, 3, 3, 2, 2, 1, 1, 2, 2, 1),
      geometry(2, 32, 17, 19, 20, 3, 3, 1, 1, 2, 2, 1, 1, 1),
      geometry(2, 3, 37, 41, 64, 7, 7, 3, 3, 2, 2, 1, 1, 1),
      geometry(2, 32, 11, 13, 48, 3, 3, 1, 1, 1, 1, 1, 1, 2),
      geometry(1, 512, 5, 5, 512, 3, 3, 1, 1, 1, 1, 1, 1, 1),
      // Groups of 40 output channels (kg below every tile's N) over kred = 144, stride 2, batch 1.
      geometry(1, 48, 19, 23, 120, 3, 3, 1, 1, 2, 2, 1, 1, 3),
      // kred = 8 (one chunk of a 64-wide step), kg = 8, an odd pixel count.
      geometry(3, 8, 9, 7, 8, 1, 1, 0, 0, 1, 1, 1, 1, 1),
      // kg = 300: past 256 (two column tiles of 128x256), not a multiple of 8; dilation 3, pad 2.
      geometry(2, 16, 15, 14, 300, 3, 3, 2, 2, 1, 1, 3, 3, 1),
  };
  const char* const configs[] = {
      "tile=9,splits=1",  "tile=10,splits=1", "tile=11,splits=1", "tile=12,splits=1", "tile=9,splits=3",
      "tile=10,splits=2", "tile=12,splits=4", "tile=13,splits=1", "tile=14,splits=1", "tile=15,splits=1",
      "tile=16,splits=1", "tile=13,splits=3", "tile=14,splits=2", "tile=15,splits=4", "tile=16,splits=2"};
  for (const ConvProblem& shape : shapes)
    for (const char* stored : configs) {
      const ConvProblem p = nhwc(shape, GetParam());
      ASSERT_TRUE(solver_->check(p, *device_)) << p.key() << ": " << solver_->check(p, *device_).reason;
      const std::optional<ConfigHandle> config =
          solver_->parse_config_any(ProblemRef::of(p), *device_, stored);
      ASSERT_TRUE(config.has_value()) << p.key() << " " << stored;
      const Comparison c = testing::run_against_reference(*solver_, p, *device_, 41, config->get());
      EXPECT_TRUE(c.passed) << p.key() << " " << stored << ": " << c.summary;
    }
}

// Every wgmma tile is among the plans the tuner times on an sm_90 device, and the cost model's
// untuned plan for a large 3x3 layer is a warp-specialized tile (their priors are above the
// cp.async tiles' for every shape).
TEST_P(IgemmTcTuning, TheTunerListsEveryWgmmaTile) {
  const ConvProblem probe = nhwc(geometry(1, 8, 5, 5, 8, 1, 1, 0, 0, 1, 1, 1, 1, 1), GetParam());
  if (!solver_->parse_config_any(ProblemRef::of(probe), *device_, "tile=9,splits=1"))
    GTEST_SKIP() << "no wgmma on " << device_->name() << " (needs compute capability 9.0)";
  const ConvProblem p = nhwc(geometry(32, 128, 28, 28, 128, 3, 3, 1, 1, 1, 1, 1, 1, 1), GetParam());
  const std::vector<std::string> texts = solver_->configs_any(ProblemRef::of(p), *device_);
  for (int tile = 9; tile <= 16; ++tile) {
    const std::string text = "tile=" + std::to_string(tile) + ",splits=1";
    EXPECT_NE(std::find(texts.begin(), texts.end(), text), texts.end())
        << text << " not listed for " << p.key();
  }
  ASSERT_FALSE(texts.empty());
  int tile = -1, splits = 0;
  ASSERT_EQ(std::sscanf(texts.front().c_str(), "tile=%d,splits=%d", &tile, &splits), 2) << texts.front();
  EXPECT_TRUE(tile >= 13 && tile <= 16)
      << "untuned plan " << texts.front() << " is not a warp-specialized wgmma tile";
}

INSTANTIATE_TEST_SUITE_P(Dtypes, IgemmTcTuning, ::testing::Values(DType::f16, DType::bf16),
                         [](const ::testing::TestParamInfo<DType>& info) { return to_string(info.param); });

}  // namespace
}  // namespace galley::dnn
