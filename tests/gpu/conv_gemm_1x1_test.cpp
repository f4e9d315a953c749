// gpu.conv.gemm_1x1 (fp32 NCHW 1x1 as a batched SGEMM): what check() refuses, with reasons, and
// shapes that send the planner to different tiles and the kernel down its float4 and scalar paths,
// against the reference on seeded random data. The conformance grid (tests/dnn) covers the small odd
// shapes. Also gpu.conv.igemm_f32_nchw (the same kernel, tap by tap). Skips without a CUDA or HIP device.
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

constexpr const char* kSolver = "gpu.conv.gemm_1x1";

ConvProblem one_by_one(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, std::int64_t k,
                       std::int64_t stride = 1) {
  return ConvProblem{.n = n, .c = c, .h = h, .w = w, .k = k, .y = 1, .x = 1, .stride_h = stride, .stride_w = stride};
}

class Gemm1x1 : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string why;
    device_ = galley::testing::first_device(GetParam(), why);
    if (!device_) GTEST_SKIP() << why;
    solver_ = find_conv_solver(GetParam(), kSolver);
    ASSERT_NE(solver_, nullptr) << kSolver << " is not registered on " << GetParam();
  }
  std::optional<runtime::Device> device_;
  const ConvSolver* solver_ = nullptr;
};

TEST_P(Gemm1x1, RefusesWhatItCannotDoWithAReason) {
  const ConvProblem base = one_by_one(2, 16, 8, 8, 16);
  ASSERT_TRUE(solver_->check(base, *device_)) << solver_->check(base, *device_).reason;
  struct Case {
    ConvProblem p;
    const char* reason;
  };
  std::vector<Case> cases;
  ConvProblem p = base;
  p.y = 3, p.x = 3;
  cases.push_back({p, "1x1"});
  p = base;
  p.x = 3;
  cases.push_back({p, "1x1"});
  p = base;
  p.pad_h = 1;
  cases.push_back({p, "padding"});
  p = base;
  p.groups = 2;
  cases.push_back({p, "groups"});
  p = base;
  p.dtype = DType::f16;
  cases.push_back({p, "f32"});
  p = base;
  p.dtype = DType::bf16;
  cases.push_back({p, "f32"});
  p = base;
  p.layout = Layout::nhwc;
  cases.push_back({p, "nchw"});
  for (const Case& c : cases) {
    const Applicability a = solver_->check(c.p, *device_);
    EXPECT_FALSE(a) << "claims " << c.p.key();
    EXPECT_NE(a.reason.find(c.reason), std::string::npos) << c.p.key() << ": " << a.reason;
  }
  // Dilation does not move a 1x1 filter's tap: still the same GEMM, so accepted.
  p = base;
  p.dilation_h = p.dilation_w = 2;
  EXPECT_TRUE(solver_->check(p, *device_));
}

TEST_P(Gemm1x1, MatchesTheReference) {
  const std::vector<ConvProblem> problems = {
      one_by_one(2, 96, 20, 20, 200),    // float4 pixels, two 128-row tiles, the second partial
      one_by_one(3, 64, 12, 12, 64),     // 64 output channels: a 64-row tile
      one_by_one(2, 132, 7, 7, 520),     // 49 pixels an image: scalar pixel path, columns across images
      one_by_one(2, 40, 15, 15, 72, 2),  // stride 2: gathered pixels, 64 pixels an image
      one_by_one(1, 7, 33, 31, 5),       // C and K under one step / one tile
      one_by_one(2, 300, 16, 16, 130),   // C not a multiple of 16: the last step is cut short
      one_by_one(4, 1024, 7, 7, 256),    // few tiles, long C: split-K over the workspace
      one_by_one(3, 512, 14, 14, 96, 2), // stride 2 with split-K
  };
  bool split_seen = false;
  int seed = 50;
  for (const ConvProblem& p : problems) {
    ASSERT_TRUE(solver_->check(p, *device_)) << p.key();
    const std::size_t ws_bytes = solver_->workspace_bytes(p, *device_);  // split-K partials, or 0
    const Comparison c = testing::run_against_reference(*solver_, p, *device_, seed);
    seed += 2;
    EXPECT_TRUE(c.passed) << p.key() << " (" << solver_->detail(p, *device_) << "): " << c.summary;
    split_seen = split_seen || ws_bytes > 0;
  }
  EXPECT_TRUE(split_seen) << "no problem here took the split-K path";
}

INSTANTIATE_TEST_SUITE_P(Backends, Gemm1x1, ::testing::Values("cuda", "hip"));

}  // namespace
}  // namespace galley::dnn

namespace galley::dnn {
namespace {

// gpu.conv.igemm_f32_nchw: gpu.conv.gemm_1x1's kernel reducing tap by tap.
class IgemmF32Nchw : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string why;
    device_ = galley::testing::first_device(GetParam(), why);
    if (!device_) GTEST_SKIP() << why;
    solver_ = find_conv_solver(GetParam(), "gpu.conv.igemm_f32_nchw");
    ASSERT_NE(solver_, nullptr) << "gpu.conv.igemm_f32_nchw is not registered on " << GetParam();
  }
  std::optional<runtime::Device> device_;
  const ConvSolver* solver_ = nullptr;
};

ConvProblem filtered(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, std::int64_t k, std::int64_t r,
                     std::int64_t s, std::int64_t pad, std::int64_t stride, std::int64_t dilation = 1) {
  return ConvProblem{.n = n, .c = c, .h = h, .w = w, .k = k, .y = r, .x = s, .pad_h = pad, .pad_w = pad,
                     .stride_h = stride, .stride_w = stride, .dilation_h = dilation, .dilation_w = dilation};
}

TEST_P(IgemmF32Nchw, RefusesWhatItCannotDoWithAReason) {
  const ConvProblem base = filtered(2, 16, 8, 8, 16, 3, 3, 1, 1);
  ASSERT_TRUE(solver_->check(base, *device_)) << solver_->check(base, *device_).reason;
  std::vector<std::pair<ConvProblem, const char*>> cases;
  ConvProblem p = filtered(2, 16, 8, 8, 16, 1, 1, 0, 1);
  cases.push_back({p, "gemm_1x1"});
  p = base, p.groups = 2;
  cases.push_back({p, "groups"});
  p = base, p.dtype = DType::f16;
  cases.push_back({p, "f32"});
  p = base, p.layout = Layout::nhwc;
  cases.push_back({p, "nchw"});
  p = filtered(2, 3, 8, 8, 16, 3, 3, 1, 1);
  cases.push_back({p, "16"});
  for (const auto& [q, reason] : cases) {
    const Applicability a = solver_->check(q, *device_);
    EXPECT_FALSE(a) << "claims " << q.key();
    EXPECT_NE(a.reason.find(reason), std::string::npos) << q.key() << ": " << a.reason;
  }
  p = filtered(2, 16, 8, 8, 16, 1, 1, 1, 1);  // 1x1 with padding: the tap path
  EXPECT_TRUE(solver_->check(p, *device_)) << solver_->check(p, *device_).reason;
}

TEST_P(IgemmF32Nchw, MatchesTheReference) {
  const std::vector<ConvProblem> problems = {
      filtered(2, 32, 14, 13, 70, 3, 3, 1, 1),      // same padding, K past a tile
      filtered(2, 48, 15, 17, 64, 3, 3, 1, 2),      // stride 2
      filtered(1, 20, 19, 23, 24, 3, 3, 2, 1, 2),   // dilation 2, padding 2, C % 16 != 0
      filtered(2, 16, 12, 12, 16, 5, 5, 2, 1),      // 5x5
      filtered(1, 17, 29, 31, 23, 7, 7, 3, 2),      // 7x7 stride 2
      filtered(3, 24, 9, 7, 40, 1, 1, 1, 1),        // 1x1 with padding: border outputs are 0
      filtered(2, 512, 7, 7, 128, 3, 3, 1, 1),      // few tiles, long reduction: split-K
      filtered(1, 16, 3, 3, 8, 3, 3, 0, 1),         // one output pixel
  };
  int seed = 90;
  for (const ConvProblem& p : problems) {
    ASSERT_TRUE(solver_->check(p, *device_)) << p.key() << ": " << solver_->check(p, *device_).reason;
    ASSERT_GT(solver_->workspace_bytes(p, *device_), 0u) << "the rearranged weights live in the workspace";
    const Comparison c = testing::run_against_reference(*solver_, p, *device_, seed);
    seed += 2;
    EXPECT_TRUE(c.passed) << p.key() << " (" << solver_->detail(p, *device_) << "): " << c.summary;
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, IgemmF32Nchw, ::testing::Values("cuda", "hip"));

}  // namespace
}  // namespace galley::dnn
