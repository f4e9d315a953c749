// gpu.conv.depthwise's NHWC 3x3 kernels against the reference: on compute capability 9.0+ the
// staged-rows kernel (whole rows through shared memory by bulk copies) takes the shapes whose row
// fits one block; the register-tile kernel keeps the rest. The shapes reach every edge of the row
// kernel: a band that ends past the image (p not a multiple of the band), a last block's partial
// strip (q not a multiple of the columns a thread owns), threads past the row's last strip, pads
// 0/2 and asymmetric pads, batch 1, one-row and one-column images, f32's 4-channel vectors, and a
// row too wide for one block (the tile kernel). Outputs are NaN-poisoned first (solver_vs_reference).
// Skips without a CUDA device.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "galley/dnn/conv_solver.hpp"
#include "gpu_test_util.hpp"
#include "solver_vs_reference.hpp"

namespace galley::dnn {
namespace {

constexpr const char* kSolver = "gpu.conv.depthwise";

ConvProblem depthwise(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, int pad_h, int pad_w, DType dtype) {
  ConvProblem p{.n = n, .c = c, .h = h, .w = w, .k = c, .y = 3, .x = 3, .pad_h = pad_h, .pad_w = pad_w, .groups = c};
  p.dtype = dtype;
  p.layout = Layout::nhwc;
  return p;
}

class DepthwiseRows : public galley::testing::CudaSolverTest<DType> {
 protected:
  DepthwiseRows() : CudaSolverTest(kSolver) {}
};

TEST_P(DepthwiseRows, MatchesTheReferenceOnEveryEdge) {
  const DType dt = GetParam();
  const std::vector<ConvProblem> shapes = {
      depthwise(32, 144, 56, 56, 1, 1, dt),   // mbv2.dw itself
      depthwise(1, 24, 13, 57, 1, 1, dt),     // batch 1, q % 4 != 0, 13 rows: a partial band
      depthwise(3, 40, 7, 130, 2, 2, dt),     // pad 2: output wider and taller than the input
      depthwise(5, 32, 11, 9, 1, 0, dt),      // p 1, q 0
      depthwise(2, 16, 10, 10, 0, 0, dt),     // no padding
      depthwise(3, 8, 1, 1, 1, 1, dt),        // one pixel
      depthwise(2, 64, 29, 3, 2, 0, dt),      // three columns: one strip
      depthwise(3, 24, 2, 17, 1, 2, dt),      // two rows, pad 1 x 2
      depthwise(7, 48, 23, 31, 1, 1, dt),     // prime-ish sizes, threads past the last strip
      depthwise(2, 256, 28, 28, 1, 1, dt),    // row of 7 x 32 = 224 threads (f16) or 448 (f32: tile kernel)
      depthwise(1, 576, 14, 14, 1, 1, dt),    // too wide for one block: the tile kernel
      depthwise(1, 12, 5, 7, 1, 1, dt),       // 12 channels: 24 bytes of f16, not a 16-byte run (tile kernel)
  };
  bool rows_seen = false;
  for (const ConvProblem& p : shapes) {
    ASSERT_TRUE(solver_->check(p, *device_)) << p.key() << ": " << solver_->check(p, *device_).reason;
    const std::string detail = solver_->detail(p, *device_);
    rows_seen = rows_seen || detail.find("staged rows") != std::string::npos;
    const Comparison c = galley::testing::run_against_reference(*solver_, p, *device_, 57);
    EXPECT_TRUE(c.passed) << p.key() << " (" << detail << "): " << c.summary;
  }
  const std::string arch = device_->properties().arch;  // "sm_90"
  const int cc = arch.rfind("sm_", 0) == 0 ? std::atoi(arch.c_str() + 3) : 0;
  if (cc >= 90)
    EXPECT_TRUE(rows_seen) << "no shape took the staged-rows kernel on " << arch;
  else
    EXPECT_FALSE(rows_seen) << "the staged-rows kernel needs compute capability 9.0, not " << arch;
}

INSTANTIATE_TEST_SUITE_P(Dtypes, DepthwiseRows, ::testing::Values(DType::f32, DType::f16, DType::bf16),
                         [](const ::testing::TestParamInfo<DType>& info) { return std::string(to_string(info.param)); });

}  // namespace
}  // namespace galley::dnn
