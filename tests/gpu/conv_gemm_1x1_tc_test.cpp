// gpu.conv.gemm_1x1_tc: NHWC 1x1 convolutions, forward (with and without a fused epilogue) and
// backward data (unit stride, or strided through the compact product and a scatter), as one product
// on gpu.gemm.tc's kernel. Every listed GEMM tile against the
// reference on random data with NaN-poisoned outputs (f16, bf16 and f32 as 3xTF32), on odd shapes:
// batch 1, prime planes, channels a multiple of 8 (4 for f32) but not of the tiles, pixels ragged
// against every tile; and the problems it must refuse, each with its reason. Skips without a CUDA
// device.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "dnn/op_verify.hpp"
#include "galley/dnn/conv_solver.hpp"
#include "gpu_test_util.hpp"

namespace galley::dnn {
namespace {

constexpr const char* kSolver = "gpu.conv.gemm_1x1_tc";

ConvProblem one_by_one(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, std::int64_t k,
                       DType dtype, ConvDirection direction) {
  ConvProblem p;
  p.n = n, p.c = c, p.h = h, p.w = w, p.k = k;
  p.dtype = dtype, p.layout = Layout::nhwc, p.direction = direction;
  return p;
}

class ConvGemm1x1Tc : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    device_ = galley::testing::first_device("cuda", why);
    if (!device_) GTEST_SKIP() << "no CUDA device: " << why;
    solver_ = find_conv_solver("cuda", kSolver);
    ASSERT_NE(solver_, nullptr) << kSolver << " is not in the cuda list";
  }

  // Every config the solver lists for `p`, each checked against the reference; returns how many ran.
  int verify_every_tile(const ConvProblem& p) {
    const ProblemRef ref = ProblemRef::of(p);
    const Applicability a = solver_->check_any(ref, *device_);
    EXPECT_TRUE(a.ok) << p.key() << ": " << a.reason;
    if (!a.ok) return 0;
    runtime::Stream stream(*device_);
    const std::uint64_t seed = default_op_seed(ref);
    const auto want = reference_op_outputs(ref, seed);
    const std::vector<std::string> texts = solver_->configs_any(ref, *device_);
    EXPECT_FALSE(texts.empty()) << p.key();
    int ran = 0;
    for (const std::string& text : texts) {
      const auto config = solver_->parse_config_any(ref, *device_, text);
      EXPECT_TRUE(config.has_value()) << text << " does not parse back for " << p.key();
      if (!config) continue;
      OpTensors tensors = make_op_tensors(stream, ref, seed);
      const OpVerification v = verify_op(stream, ref, Choice{solver_, *config}, tensors, want, p.tolerance());
      EXPECT_TRUE(v.passed) << kSolver << " [" << text << "] " << p.key() << ": " << v.summary;
      ++ran;
    }
    return ran;
  }

  std::optional<runtime::Device> device_;
  const ConvSolver* solver_ = nullptr;
};

TEST_F(ConvGemm1x1Tc, EveryTileMatchesTheReferenceInBothDirections) {
  struct Shape {
    std::int64_t n, c, h, w, k;
  };
  const Shape shapes[] = {
      {1, 24, 7, 11, 40},    // batch 1, 77 pixels, channels a multiple of 8 only
      {3, 64, 13, 11, 256},  // 429 pixels, N = 256 (the wide tiles)
      {2, 136, 7, 7, 72},    // long-ish reduction past a 64-k stage, N ragged
      {1, 8, 1, 1, 8},       // one pixel
  };
  int ran = 0;
  for (const DType dt : {DType::f16, DType::bf16, DType::f32})
    for (const ConvDirection dir : {ConvDirection::forward, ConvDirection::backward_data})
      for (const Shape& s : shapes) ran += verify_every_tile(one_by_one(s.n, s.c, s.h, s.w, s.k, dt, dir));
  EXPECT_GT(ran, 0);
  // f32 reads 16-byte chunks of 4 floats: 12 channels pass there.
  ran += verify_every_tile(one_by_one(2, 12, 5, 7, 20, DType::f32, ConvDirection::backward_data));
}

// Backward data with a stride: the product of dy's pixels compact in the workspace, then scattered
// onto dx's stride grid with zeros between (odd planes: the last row and column off the grid).
TEST_F(ConvGemm1x1Tc, StridedBackwardDataScattersOntoTheGrid) {
  struct Strided {
    std::int64_t n, c, h, w, k, u, v;
    DType dtype;
  };
  const Strided cases[] = {
      {2, 32, 13, 11, 64, 2, 2, DType::f16},  // a ResNet downsample on an odd plane
      {1, 16, 10, 9, 24, 3, 2, DType::bf16},  // strides 3 x 2
      {2, 12, 9, 9, 20, 2, 2, DType::f32},    // 12 floats: three 16-byte chunks a pixel
      {1, 8, 7, 7, 16, 2, 2, DType::f16},     // one 16-byte chunk a pixel
  };
  for (const Strided& s : cases) {
    ConvProblem p = one_by_one(s.n, s.c, s.h, s.w, s.k, s.dtype, ConvDirection::backward_data);
    p.stride_h = s.u, p.stride_w = s.v;
    EXPECT_GT(verify_every_tile(p), 0) << p.key();
  }
}

TEST_F(ConvGemm1x1Tc, FusedEpilogueRunsAfterTheProduct) {
  for (const DType dt : {DType::f16, DType::f32}) {
    ConvProblem p = one_by_one(2, 32, 9, 7, 48, dt, ConvDirection::forward);
    p.epilogue = ConvEpilogue::with(Activation::relu, /*bias=*/true, /*residual=*/true);
    EXPECT_GT(verify_every_tile(p), 0) << p.key();
  }
}

TEST_F(ConvGemm1x1Tc, RefusesWhatIsNotOneProductWithAReason) {
  struct Refused {
    ConvProblem p;
    const char* reason;
  };
  std::vector<Refused> cases;
  const ConvProblem base = one_by_one(2, 32, 9, 7, 48, DType::f16, ConvDirection::forward);
  ConvProblem p = base;
  p.stride_h = p.stride_w = 2;
  cases.push_back({p, "unit stride"});  // forward reads x's pixels as one matrix
  p = base, p.pad_h = p.pad_w = 1;
  cases.push_back({p, "padding"});
  p = base, p.y = p.x = 3, p.pad_h = p.pad_w = 1;
  cases.push_back({p, "1x1"});
  p = base, p.groups = 2;
  cases.push_back({p, "groups 2"});
  p = base, p.layout = Layout::nchw;
  cases.push_back({p, "nhwc"});
  p = base, p.direction = ConvDirection::backward_weights;
  cases.push_back({p, "backward_weights"});
  p = base, p.c = 12;
  cases.push_back({p, "multiple of 8"});
  for (const Refused& r : cases) {
    const Applicability a = solver_->check_any(ProblemRef::of(r.p), *device_);
    EXPECT_FALSE(a.ok) << r.p.key();
    EXPECT_NE(a.reason.find(r.reason), std::string::npos) << r.p.key() << ": " << a.reason;
  }
}

}  // namespace
}  // namespace galley::dnn
