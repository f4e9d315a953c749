// gpu.conv.igemm_tc's measured plans: the first use of a problem times a few tile x split-K candidates
// and keeps the fastest. What it picks must agree between workspace_bytes() and run(), must not
// change within the process, and must compute the right thing whichever tile won; shapes here send
// the search to different tiles (N = 64 / 256, long K with few blocks, the scalar gather). Then the
// stored-choice round trip (tuned_params / use_tuned_params) once the solver reports its choice.
// Skips without a CUDA device.
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

constexpr const char* kSolver = "gpu.conv.igemm_tc";

Comparison run_against_reference(const ConvSolver& solver, const ConvProblem& p, const runtime::Device& device) {
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

TEST_P(IgemmTcTuning, MeasuredPlanIsStableAndCorrect) {
  const std::vector<ConvProblem> shapes = {
      // 3x3 over 64 channels out: the 128x64 and 64x64 tiles compete.
      {.n = 4, .c = 64, .h = 28, .w = 28, .k = 64, .y = 3, .x = 3, .pad_h = 1, .pad_w = 1},
      // Few blocks, long K (4608): split-K candidates are timed.
      {.n = 2, .c = 512, .h = 7, .w = 7, .k = 256, .y = 3, .x = 3, .pad_h = 1, .pad_w = 1},
      // 1x1, N = 256, odd pixel count.
      {.n = 3, .c = 128, .h = 13, .w = 11, .k = 256, .y = 1, .x = 1},
      // Channels not a multiple of 8: the scalar gather, whatever tile won.
      {.n = 2, .c = 12, .h = 19, .w = 17, .k = 40, .y = 3, .x = 3, .pad_h = 1, .pad_w = 1, .stride_h = 2, .stride_w = 2},
      // Dilated, channels a multiple of 8 but not of 32 (the loader's channel walk wraps mid-step).
      {.n = 2, .c = 24, .h = 23, .w = 21, .k = 72, .y = 3, .x = 3, .pad_h = 2, .pad_w = 2, .dilation_h = 2,
       .dilation_w = 2},
      // Up to 4 channels, stride 2 along w: column pairs folded into 8 channels. Odd and even pads
      // (the tap shift), an odd width (the last pair half zeros), 1-4 channels, stride 1 / dilation 2
      // along h, batch 1.
      {.n = 2, .c = 3, .h = 30, .w = 38, .k = 64, .y = 7, .x = 7, .pad_h = 3, .pad_w = 3, .stride_h = 2, .stride_w = 2},
      {.n = 1, .c = 3, .h = 31, .w = 29, .k = 40, .y = 7, .x = 7, .pad_h = 3, .pad_w = 3, .stride_h = 2, .stride_w = 2},
      {.n = 3, .c = 4, .h = 17, .w = 19, .k = 24, .y = 5, .x = 5, .pad_h = 2, .pad_w = 2, .stride_h = 1, .stride_w = 2},
      {.n = 2, .c = 1, .h = 13, .w = 12, .k = 16, .y = 3, .x = 3, .stride_h = 2, .stride_w = 2},
      {.n = 2, .c = 2, .h = 19, .w = 23, .k = 8, .y = 3, .x = 4, .pad_h = 2, .pad_w = 1, .stride_h = 1, .stride_w = 2,
       .dilation_h = 2},
  };
  for (const ConvProblem& shape : shapes) {
    const ConvProblem p = nhwc(shape, GetParam());
    ASSERT_TRUE(solver_->check(p, *device_)) << p.key() << ": " << solver_->check(p, *device_).reason;
    const std::size_t ws = solver_->workspace_bytes(p, *device_);
    const std::string detail = solver_->detail(p, *device_);
    if (p.c <= 4 && p.stride_w == 2)
      EXPECT_NE(detail.find("column pairs folded"), std::string::npos) << p.key() << ": " << detail;
    const Comparison first = run_against_reference(*solver_, p, *device_);
    EXPECT_TRUE(first.passed) << p.key() << " (" << detail << "): " << first.summary;
    // The choice is made once: the same workspace, the same plan, the same answer again.
    EXPECT_EQ(solver_->workspace_bytes(p, *device_), ws) << p.key();
    EXPECT_EQ(solver_->detail(p, *device_), detail) << p.key();
    const Comparison again = run_against_reference(*solver_, p, *device_);
    EXPECT_TRUE(again.passed) << p.key() << ": " << again.summary;
  }
}

TEST_P(IgemmTcTuning, StoredParamsRoundTrip) {
  ConvProblem tuned = nhwc({.n = 2, .c = 32, .h = 15, .w = 13, .k = 48, .y = 3, .x = 3, .pad_h = 1, .pad_w = 1},
                           GetParam());
  ASSERT_TRUE(solver_->check(tuned, *device_));
  const std::string params = solver_->tuned_params(tuned, *device_);
  if (params.empty()) GTEST_SKIP() << kSolver << " reports no tuned params (its solver class does not forward them yet)";
  ConvProblem fresh = tuned;  // same shape, another key: not measured in this process yet
  fresh.n = 3;
  for (const char* bad : {"", "tile", "tile=5", "tile=5,splits=", "tile=5,splits=0", "tile=99,splits=1",
                          "tile=-1,splits=1", "tile=5,splits=2x", "splits=1,tile=5"})
    EXPECT_FALSE(solver_->use_tuned_params(fresh, *device_, bad)) << "'" << bad << "'";
  ASSERT_TRUE(solver_->use_tuned_params(fresh, *device_, params)) << params;
  EXPECT_EQ(solver_->tuned_params(fresh, *device_), params);
  const Comparison cmp = run_against_reference(*solver_, fresh, *device_);
  EXPECT_TRUE(cmp.passed) << cmp.summary;
  // Every tile and a split can be stored and runs correctly (not only the one this device picked).
  for (const char* stored : {"tile=0,splits=1", "tile=1,splits=2", "tile=2,splits=1", "tile=3,splits=1",
                             "tile=4,splits=1", "tile=5,splits=3", "tile=6,splits=1", "tile=7,splits=1",
                             "tile=8,splits=2"}) {
    ConvProblem other = fresh;
    other.n = 4 + int(std::string_view(stored)[5] - '0');  // a key of its own per stored text
    ASSERT_TRUE(solver_->use_tuned_params(other, *device_, stored)) << stored;
    EXPECT_EQ(solver_->tuned_params(other, *device_), stored);
    const Comparison c = run_against_reference(*solver_, other, *device_);
    EXPECT_TRUE(c.passed) << stored << ": " << c.summary;
  }
  // Once chosen, a later stored choice is a no-op that reports success.
  EXPECT_TRUE(solver_->use_tuned_params(tuned, *device_, "tile=2,splits=1"));
  EXPECT_EQ(solver_->tuned_params(tuned, *device_), params);
}

// The Hopper wgmma tiles (plan tiles 9-12, kWgmmaTiles in conv_igemm_wgmma.hpp) with and without split-K, stored
// as params so that each runs whatever the measurement would pick, over shapes that reach every
// edge: pixel counts that are not a multiple of the tile (prime sizes, batch 1), kg not a multiple
// of 8 (the scattered epilogue) or of the tile's N, a channel walk that wraps mid-step (cg = 24,
// dilated), groups, strides and c = 3 (channels padded to 8 in the workspace). Skips on devices
// without wgmma (anything but compute capability 9.0), where use_tuned_params refuses these tiles.
TEST_P(IgemmTcTuning, WgmmaTilesMatchTheReference) {
  if (!solver_->use_tuned_params(
          nhwc({.n = 1, .c = 8, .h = 5, .w = 5, .k = 8, .y = 1, .x = 1}, GetParam()), *device_, "tile=9,splits=1"))
    GTEST_SKIP() << "no wgmma on " << device_->name() << " (needs compute capability 9.0)";
  const std::vector<ConvProblem> shapes = {
      {.n = 2, .c = 64, .h = 29, .w = 31, .k = 128, .y = 3, .x = 3, .pad_h = 1, .pad_w = 1},
      {.n = 1, .c = 256, .h = 7, .w = 7, .k = 264, .y = 1, .x = 1},
      {.n = 3, .c = 24, .h = 23, .w = 21, .k = 40, .y = 3, .x = 3, .pad_h = 2, .pad_w = 2, .dilation_h = 2,
       .dilation_w = 2},
      {.n = 2, .c = 32, .h = 17, .w = 19, .k = 20, .y = 3, .x = 3, .pad_h = 1, .pad_w = 1, .stride_h = 2, .stride_w = 2},
      {.n = 2, .c = 3, .h = 37, .w = 41, .k = 64, .y = 7, .x = 7, .pad_h = 3, .pad_w = 3, .stride_h = 2, .stride_w = 2},
      {.n = 2, .c = 32, .h = 11, .w = 13, .k = 48, .y = 3, .x = 3, .pad_h = 1, .pad_w = 1, .groups = 2},
      {.n = 1, .c = 512, .h = 5, .w = 5, .k = 512, .y = 3, .x = 3, .pad_h = 1, .pad_w = 1},
  };
  int key = 0;  // each (shape, plan) gets a height of its own, so each is a fresh key
  for (const ConvProblem& shape : shapes)
    for (const char* stored : {"tile=9,splits=1", "tile=10,splits=1", "tile=11,splits=1", "tile=12,splits=1",
                               "tile=9,splits=3", "tile=10,splits=2", "tile=12,splits=4"}) {
      ConvProblem p = nhwc(shape, GetParam());
      p.h = shape.h + key++ % 13;
      ASSERT_TRUE(solver_->check(p, *device_)) << p.key() << ": " << solver_->check(p, *device_).reason;
      ASSERT_TRUE(solver_->use_tuned_params(p, *device_, stored)) << p.key() << " " << stored;
      ASSERT_EQ(solver_->tuned_params(p, *device_), stored) << p.key() << ": the shape was measured before";
      const Comparison c = run_against_reference(*solver_, p, *device_);
      EXPECT_TRUE(c.passed) << p.key() << " " << stored << " (" << solver_->detail(p, *device_) << "): " << c.summary;
    }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, IgemmTcTuning, ::testing::Values(DType::f16, DType::bf16),
                         [](const ::testing::TestParamInfo<DType>& info) { return to_string(info.param); });

}  // namespace
}  // namespace galley::dnn
