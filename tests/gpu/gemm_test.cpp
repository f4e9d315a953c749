// Every GPU gemm solver (gpu.gemm.tc with each of its tiles, gpu.gemm.simt, cuda.gemm.cublas)
// against ref.gemm on the first device of each GPU backend: odd and aligned shapes with ragged
// edges, every transpose and direction, shared operands (a gradient summed over the batch, folded
// or looped), bias and its gradient (including the split column sums), alpha and beta, f32, f16
// and bf16. Skips without a device.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/scoped_env.hpp"
#include "dnn/op_verify.hpp"
#include "dnn/ref_gemm.hpp"
#include "dnn/tensor_data.hpp"
#include "galley/dnn/gemm.hpp"
#include "galley/dnn/gemm_solver.hpp"
#include "gpu_test_util.hpp"

namespace galley::dnn {
namespace {

struct Case {
  std::int64_t m, n, k, batch;
  bool shared_a, shared_b;
};

GemmProblem make(const Case& c, int transposes, bool bias, DType dtype, GemmDirection dir) {
  GemmProblem p;
  p.m = c.m, p.n = c.n, p.k = c.k, p.batch = c.batch;
  p.shared_a = c.shared_a, p.shared_b = c.shared_b;
  p.trans_a = (transposes & 1) != 0, p.trans_b = (transposes & 2) != 0;
  p.bias = bias, p.dtype = dtype, p.direction = dir;
  if (dir == GemmDirection::forward) {
    p.alpha = 0.5;
    p.beta = bias ? 0.25 : 0;
  }
  return p;
}

// Runs every solver that accepts `p` with every inner choice it lists (its default when none)
// against the reference, computed once; returns how many solvers ran.
int verify_all(const runtime::Device& device, const GemmProblem& p, const std::vector<const SolverBase*>& solvers) {
  const ProblemRef ref = ProblemRef::of(p);
  const std::uint64_t seed = default_op_seed(ref);
  std::vector<std::vector<std::byte>> want;
  runtime::Stream stream(device);
  int ran = 0;
  for (const SolverBase* solver : solvers) {
    if (!solver->check_any(ref, device)) continue;
    if (want.empty()) want = reference_op_outputs(ref, seed);
    std::vector<std::string> configs = solver->configs_any(ref, device);
    if (configs.empty()) configs.push_back("");
    for (const std::string& text : configs) {
      const auto config = solver->parse_config_any(ref, device, text);
      EXPECT_TRUE(config.has_value()) << solver->name() << " rejects its own config '" << text << "'";
      if (!config) continue;
      OpTensors tensors = make_op_tensors(stream, ref, seed);
      const OpVerification v = verify_op(stream, ref, Choice{solver, *config}, tensors, want, p.tolerance());
      EXPECT_TRUE(v.passed) << solver->name() << " [" << text << "] " << p.key() << ": " << v.summary;
    }
    ++ran;
  }
  return ran;
}

class GpuGemm : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string why;
    device_ = testing::first_device(GetParam(), why);
    if (!device_) GTEST_SKIP() << "no " << GetParam() << " device: " << why;
    solvers_ = solvers_of(GetParam(), OpKind::gemm);
    ASSERT_FALSE(solvers_.empty()) << "no gemm solvers on " << GetParam();
  }
  std::optional<runtime::Device> device_;
  std::vector<const SolverBase*> solvers_;
};

TEST_P(GpuGemm, OddShapesEveryTransposeDirectionAndDtype) {
  const Case cases[] = {{1, 1, 1, 1, false, false}, {17, 31, 129, 1, false, false}, {31, 17, 1, 2, false, false},
                        {129, 1, 17, 3, true, false}, {1, 129, 31, 3, false, true}};
  int ran = 0;
  for (const DType dt : {DType::f32, DType::f16, DType::bf16})
    for (const Case& c : cases)
      for (int t = 0; t < 4; ++t)
        for (const GemmDirection dir :
             {GemmDirection::forward, GemmDirection::backward_data, GemmDirection::backward_weights})
          ran += verify_all(*device_, make(c, t, (t + c.m) % 2 == 0, dt, dir), solvers_);
  EXPECT_GT(ran, 0);
}

TEST_P(GpuGemm, AlignedShapesWithRaggedTilesTakeTheTensorCores) {
  // Multiples of 8 (the tensor-core kernel's 16-byte copies) that are not multiples of any tile.
  const Case cases[] = {{200, 136, 72, 1, false, false}, {72, 264, 520, 2, false, false},
                        {136, 72, 200, 3, false, true}, {264, 136, 72, 3, true, false}};
  int ran = 0;
  for (const DType dt : {DType::f16, DType::bf16, DType::f32})
    for (const Case& c : cases)
      for (int t = 0; t < 4; ++t)
        for (const GemmDirection dir :
             {GemmDirection::forward, GemmDirection::backward_data, GemmDirection::backward_weights})
          ran += verify_all(*device_, make(c, t, true, dt, dir), solvers_);
  EXPECT_GT(ran, 0);
  if (GetParam() == "cuda") {
    const SolverBase* tc = find_solver("cuda", OpKind::gemm, "gpu.gemm.tc");
    ASSERT_NE(tc, nullptr);
    EXPECT_TRUE(tc->check_any(ProblemRef::of(make(cases[0], 0, true, DType::f16, GemmDirection::forward)), *device_))
        << "an aligned f16 problem should take the tensor cores";
  }
}

TEST_P(GpuGemm, LargeLinearLayerAndItsGradients) {
  // nn.Linear over 4 sequences of 300 tokens, 1024 -> 768: many tiles, the grouped raster, the
  // folded batch and the bias gradient's split column sums.
  int ran = 0;
  for (const DType dt : {DType::bf16, DType::f32})
    for (const GemmDirection dir :
         {GemmDirection::forward, GemmDirection::backward_data, GemmDirection::backward_weights})
      ran += verify_all(*device_, make({300, 768, 1024, 4, false, true}, 2, true, dt, dir), solvers_);
  EXPECT_GT(ran, 0);
}

// f32 on gpu.gemm.tc's tensor cores as 3xTF32 (GALLEY_DEBUG_3XTF32 on): fp32's tolerance over every
// transpose and direction, on extents that are whole 16-byte chunks of floats (multiples of 4, not
// of 8) and ragged against every tile, and the linear layer of the test above.
TEST_P(GpuGemm, F32On3xTf32TensorCoresMatchTheReference) {
  const SolverBase* tc = find_solver(GetParam(), OpKind::gemm, "gpu.gemm.tc");
  if (GetParam() != "cuda" || tc == nullptr) GTEST_SKIP() << "3xTF32 is the cuda build's (mma.sync)";
  const GemmProblem probe = make({132, 76, 36, 1, false, false}, 0, true, DType::f32, GemmDirection::forward);
  {
    const testing::ScopedEnv off("GALLEY_DEBUG_3XTF32", "0");
    EXPECT_FALSE(tc->check_any(ProblemRef::of(probe), *device_)) << "GALLEY_DEBUG_3XTF32=0 keeps f32 off the tensor cores";
  }
  const testing::ScopedEnv tf32("GALLEY_DEBUG_3XTF32", "1");
  ASSERT_TRUE(tc->check_any(ProblemRef::of(probe), *device_)) << tc->check_any(ProblemRef::of(probe), *device_).reason;
  EXPECT_NE(tc->detail_any(ProblemRef::of(probe), *device_).find("3xTF32"), std::string::npos);
  const Case cases[] = {{132, 76, 36, 1, false, false}, {36, 260, 516, 2, false, false}, {76, 132, 36, 3, true, false}};
  for (const Case& c : cases)
    for (int t = 0; t < 4; ++t)
      for (const GemmDirection dir :
           {GemmDirection::forward, GemmDirection::backward_data, GemmDirection::backward_weights})
        EXPECT_GT(verify_all(*device_, make(c, t, true, DType::f32, dir), {tc}), 0) << "t " << t;
  for (const GemmDirection dir : {GemmDirection::forward, GemmDirection::backward_data, GemmDirection::backward_weights})
    EXPECT_GT(verify_all(*device_, make({300, 768, 1024, 4, false, true}, 2, true, DType::f32, dir), {tc}), 0);
  // A long reduction: a running sum fed straight by the tensor cores drifts past fp32's tolerance here.
  EXPECT_GT(verify_all(*device_, make({128, 136, 16384, 1, false, false}, 0, false, DType::f32, GemmDirection::forward),
                       {tc}),
            0);
  const GemmProblem odd = make({17, 16, 16, 1, false, false}, 1, false, DType::f32, GemmDirection::forward);
  const Applicability a = tc->check_any(ProblemRef::of(odd), *device_);
  EXPECT_FALSE(a.ok) << "A stored k x 17 floats cannot be read in 16-byte chunks";
  EXPECT_NE(a.reason.find("multiple of 4"), std::string::npos) << a.reason;
}

// gpu.gemm.tc's Hopper wgmma tiles (on unless GALLEY_DEBUG_GEMM_WGMMA=0) on an sm_90 device: every tile over
// every transpose and direction (K-major and M-/N-major operands, batches strided and summed), ragged
// edges against every tile, k not a multiple of the 64-k stage, alpha, beta and bias, f16 and bf16.
TEST_P(GpuGemm, WgmmaTilesMatchTheReferenceOnHopper) {
  const SolverBase* tc = find_solver(GetParam(), OpKind::gemm, "gpu.gemm.tc");
  if (GetParam() != "cuda" || tc == nullptr) GTEST_SKIP() << "the wgmma tiles are the cuda build's";
  if (device_->properties().arch != "sm_90") GTEST_SKIP() << "wgmma runs on sm_90 only, not " << device_->properties().arch;
  const GemmProblem probe = make({200, 136, 72, 1, false, false}, 0, true, DType::f16, GemmDirection::forward);
  const auto wgmma_configs = [&] {
    int n = 0;
    for (const std::string& c : tc->configs_any(ProblemRef::of(probe), *device_)) n += c.rfind("wgmma-", 0) == 0;
    return n;
  };
  {
    const testing::ScopedEnv off("GALLEY_DEBUG_GEMM_WGMMA", "0");
    EXPECT_EQ(wgmma_configs(), 0);
  }
  const testing::ScopedEnv on("GALLEY_DEBUG_GEMM_WGMMA", "1");
  ASSERT_GE(wgmma_configs(), 3);
  const Case cases[] = {{200, 136, 72, 1, false, false}, {72, 264, 520, 2, false, false},
                        {136, 72, 200, 3, false, true}, {264, 136, 72, 3, true, false},
                        {392, 520, 1096, 1, false, false}};
  int ran = 0;
  for (const DType dt : {DType::f16, DType::bf16})
    for (const Case& c : cases)
      for (int t = 0; t < 4; ++t)
        for (const GemmDirection dir :
             {GemmDirection::forward, GemmDirection::backward_data, GemmDirection::backward_weights})
          ran += verify_all(*device_, make(c, t, (t + c.k) % 2 == 0, dt, dir), {tc});
  EXPECT_GT(ran, 0);
  for (const GemmDirection dir : {GemmDirection::forward, GemmDirection::backward_data, GemmDirection::backward_weights})
    EXPECT_GT(verify_all(*device_, make({300, 768, 1024, 4, false, true}, 2, true, DType::f16, dir), {tc}), 0);
}

TEST_P(GpuGemm, RefusalsCarryAReason) {
  GemmProblem p = make({16, 16, 16, 1, false, false}, 0, false, DType::i32, GemmDirection::forward);
  for (const SolverBase* s : solvers_) {
    const Applicability a = s->check_any(ProblemRef::of(p), *device_);
    EXPECT_FALSE(a.ok) << s->name();
    EXPECT_NE(a.reason.find("dtype"), std::string::npos) << s->name() << ": " << a.reason;
  }
  if (const SolverBase* tc = find_solver(GetParam(), OpKind::gemm, "gpu.gemm.tc")) {
    const Applicability a = tc->check_any(ProblemRef::of(make({17, 16, 16, 1, false, false}, 1, false, DType::f16,
                                                              GemmDirection::forward)), *device_);
    EXPECT_FALSE(a.ok) << "A stored k x 17 cannot be read in 16-byte chunks";
    EXPECT_NE(a.reason.find("multiple of 8"), std::string::npos) << a.reason;
  }
}

TEST_P(GpuGemm, TensorEntryPointsIncludingAMisalignedView) {
  // An f16 operand viewed 2 bytes into its buffer cannot be read in 16-byte copies: the
  // tensor-core solver must still give the right answer (it takes its element-wise kernel).
  GemmProblem p = make({64, 48, 40, 1, false, false}, 2, true, DType::f16, GemmDirection::forward);
  p.alpha = 1, p.beta = 0;
  runtime::Stream stream(*device_);
  const auto ha = random_tensor(p.dtype, p.a_desc().elements(), 11);
  const auto hb = random_tensor(p.dtype, p.b_desc().elements(), 12);
  const auto hbias = random_tensor(p.dtype, p.n, 13);
  std::vector<std::byte> want(p.c_desc().bytes());
  GemmArgs args;
  args.a = ha.data(), args.b = hb.data(), args.bias = hbias.data(), args.c = want.data();
  reference_gemm(p, args);
  Tensor b = Tensor::empty(stream, p.b_desc()), bias = Tensor::empty(stream, p.bias_desc());
  b.copy_from_host(stream, hb.data(), hb.size());
  bias.copy_from_host(stream, hbias.data(), hbias.size());
  Tensor storage = Tensor::empty(stream, TensorDesc::contiguous(p.dtype, {p.a_desc().elements() + 8}));
  for (const std::size_t offset : {std::size_t{0}, std::size_t{2}}) {
    Tensor a = Tensor::wrap(*device_, p.a_desc(), static_cast<std::byte*>(storage.data()) + offset,
                            storage.storage_bytes() - offset);
    a.copy_from_host(stream, ha.data(), ha.size());
    Tensor c = Tensor::empty(stream, p.c_desc());
    for (const SolverBase* s : solvers_) {
      if (!s->check_any(ProblemRef::of(p), *device_)) continue;
      gemm(stream, p, a, b, c, &bias, static_cast<const GemmSolver*>(s));
      const std::vector<std::uint16_t> got = c.to_host<std::uint16_t>(stream);
      const Comparison cmp = compare_outputs(p.dtype, got.data(), want.data(), p.c_desc().elements(), p.tolerance());
      EXPECT_TRUE(cmp.passed) << s->name() << " offset " << offset << ": " << cmp.summary;
    }
  }
  stream.synchronize();
}

INSTANTIATE_TEST_SUITE_P(Backends, GpuGemm, ::testing::Values("cuda", "hip"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace galley::dnn
