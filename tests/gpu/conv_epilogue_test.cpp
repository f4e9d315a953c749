// Fused convolution epilogues on the GPU backends: every registered conv solver of the cuda and
// hip lists either refuses a fused problem (the central check, or its own reason) or matches
// ref.conv.direct on it (every gpu.conv.* solver takes it, as a pass after its kernels), over odd
// shapes, f32/f16/bf16, both layouts and the activation classes; the unfused sequence takes every
// one, and the list's first choice for a fused problem matches the reference. cuDNN's fused graph
// (cuda.conv.cudnn_graph) over every activation, with and without the residual, in f16/bf16 NHWC
// and f32 NCHW, at batch 1 with odd channels too: it refuses with a reason or matches; its plan
// cache never serves a plain plan for a fused problem nor the reverse; every engine config it lists
// for a fused problem (what the tuner times) applies the epilogue, and a stored config is reinstated
// on a fused problem not seen yet. Skips without a device of the backend (the plan cache key test
// needs none).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "backends/gpu/problem_key.hpp"
#include "dnn/op_verify.hpp"
#include "dnn/ref_conv_direct.hpp"
#include "dnn/tensor_data.hpp"
#include "galley/dnn/convolution.hpp"
#include "galley/memory/buffer.hpp"
#include "gpu_test_util.hpp"

namespace galley::dnn {
namespace {

std::vector<ConvProblem> problems() {
  const ConvProblem shapes[] = {
      {.n = 1, .c = 3, .h = 31, .w = 29, .k = 17, .y = 3, .x = 3, .pad_h = 1, .pad_w = 1},
      {.n = 2, .c = 64, .h = 14, .w = 14, .k = 64, .y = 3, .x = 3, .pad_h = 1, .pad_w = 1},  // tensor-core
                                                                                             // sized
      {.n = 2, .c = 32, .h = 9, .w = 11, .k = 48, .y = 1, .x = 1},
      {.n = 1,
       .c = 17,
       .h = 31,
       .w = 29,
       .k = 17,
       .y = 3,
       .x = 3,
       .pad_h = 1,
       .pad_w = 1,
       .stride_h = 2,
       .stride_w = 2,
       .groups = 17},
      {.n = 1, .c = 6, .h = 13, .w = 10, .k = 9, .y = 3, .x = 3, .groups = 3},
  };
  const ConvEpilogue epilogues[] = {
      ConvEpilogue::with(Activation::relu, true, false),
      ConvEpilogue::with(Activation::relu, true, true),
      {.bias = true, .residual = true},
      ConvEpilogue::with(Activation::leaky_relu, true, true),
      ConvEpilogue{.residual = true, .activation = Activation::clip, .alpha = -0.5, .beta = 0.75},
      ConvEpilogue::with(Activation::gelu_erf, true, false),
      ConvEpilogue::with(Activation::silu),
  };
  std::vector<ConvProblem> out;
  std::size_t i = 0;
  for (const ConvProblem& shape : shapes) {
    for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
      for (Layout l : {Layout::nchw, Layout::nhwc}) {
        ConvProblem p = shape;
        p.epilogue = epilogues[i++ % std::size(epilogues)];
        p.dtype = dt;
        p.layout = l;
        out.push_back(p);
      }
    }
  }
  // f32 NCHW with bias, residual and relu, which gpu.conv.gemm_1x1 and gpu.conv.igemm_f32_nchw apply
  // in their kernel's store: 4-pixel vector stores (planes of 96 and 196 pixels), scalar ones (35),
  // and a long reduction over a 7x7 plane that the planner splits (the epilogue then a pass after).
  const ConvProblem store_shapes[] = {
      {.n = 2, .c = 32, .h = 8, .w = 12, .k = 40},
      {.n = 1, .c = 24, .h = 5, .w = 7, .k = 20},
      {.n = 2, .c = 64, .h = 14, .w = 14, .k = 64, .y = 3, .x = 3, .pad_h = 1, .pad_w = 1},
      {.n = 1, .c = 1024, .h = 7, .w = 7, .k = 64}};
  const ConvEpilogue store_epilogues[] = {ConvEpilogue::with(Activation::relu, true, true),
                                          ConvEpilogue::with(Activation::relu, true, false),
                                          ConvEpilogue{.residual = true}};
  for (const ConvProblem& shape : store_shapes) {
    for (const ConvEpilogue& e : store_epilogues) {
      ConvProblem p = shape;
      p.epilogue = e;
      out.push_back(p);
    }
  }
  return out;
}

constexpr const char* kCudnnGraph = "cuda.conv.cudnn_graph";

class GpuConvEpilogue : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string why;
    device_ = testing::first_device(GetParam(), why);
    if (!device_) GTEST_SKIP() << "no " << GetParam() << " device: " << why;
  }
  std::optional<runtime::Device> device_;
};

TEST_P(GpuConvEpilogue, EverySolverRefusesOrMatchesTheReference) {
  const std::string unfused = GetParam() + ".conv.unfused";
  std::set<std::string> ran;
  for (const ConvProblem& p : problems()) {
    bool took = false;
    for (const ConvSolver* s : conv_solvers(GetParam())) {
      const Applicability a = s->check_any(ProblemRef::of(p), *device_);
      if (!a) {
        EXPECT_FALSE(a.reason.empty()) << s->name();
        continue;
      }
      const OpVerification v = check_against_reference(*device_, ProblemRef::of(p), *s);
      EXPECT_TRUE(v.passed) << s->name() << " " << p.key() << ": " << v.summary;
      ran.insert(std::string(s->name()));
      took = took || s->name() == unfused;
    }
    EXPECT_TRUE(took) << unfused << " refused " << p.key();
  }
  // The single-source solvers run the epilogue after their kernels; of the vendor solvers only
  // cuDNN's graph API has a fused path, the others refuse it (the backend's unfused sequence is not
  // a vendor solver, though named after the backend).
  EXPECT_TRUE(ran.count("gpu.conv.direct"));
  EXPECT_TRUE(ran.count("gpu.conv.igemm_f32"));
  std::string names;
  for (const auto& n : ran) {
    if (n != unfused && n != kCudnnGraph) EXPECT_NE(n.rfind("cuda.", 0), 0u) << n << " has no fused path";
    names += " " + n;
  }
  std::printf("[ info ] solvers that ran fused problems on %s:%s\n", GetParam().c_str(), names.c_str());
}

TEST_P(GpuConvEpilogue, TensorEntryPointMatchesTheReference) {
  runtime::Stream stream(*device_);
  for (DType dt : {DType::f32, DType::f16}) {
    ConvProblem p{.n = 2,
                  .c = 64,
                  .h = 14,
                  .w = 14,
                  .k = 64,
                  .y = 3,
                  .x = 3,
                  .pad_h = 1,
                  .pad_w = 1,
                  .dtype = dt,
                  .layout = Layout::nhwc,
                  .epilogue = ConvEpilogue::with(Activation::relu, true, true)};
    OpTensors t = make_op_tensors(stream, ProblemRef::of(p), 11);
    const auto want = reference_op_outputs(ProblemRef::of(p), 11);
    const ConvSolver& picked = select_conv_solver(p, *device_);
    const OpVerification v =
        verify_op(stream, ProblemRef::of(p), Choice{&picked, {}}, t, want, p.tolerance());
    EXPECT_TRUE(v.passed) << picked.name() << " " << p.key() << ": " << v.summary;
  }
}

// The plan cache of the cuDNN graph solver is keyed by the problem itself: every part of an
// epilogue (and its parameters) makes another key, so a fused problem can never find a plain plan.
TEST(CudnnGraphFused, EveryEpiloguePartMakesAnotherPlanCacheKey) {
  const ConvProblem plain{.n = 2, .c = 64, .h = 14, .w = 14, .k = 64, .y = 3, .x = 3, .pad_h = 1, .pad_w = 1};
  std::vector<ConvProblem> variants{plain};
  for (ConvEpilogue e :
       {ConvEpilogue{.bias = true}, ConvEpilogue{.residual = true}, ConvEpilogue::with(Activation::relu),
        ConvEpilogue::with(Activation::relu, true, true), ConvEpilogue::with(Activation::leaky_relu),
        ConvEpilogue{.activation = Activation::leaky_relu, .alpha = 0.2},
        ConvEpilogue{.activation = Activation::clip, .alpha = 0, .beta = 6},
        ConvEpilogue{.activation = Activation::clip, .alpha = 0, .beta = 5}}) {
    ConvProblem p = plain;
    p.epilogue = e;
    variants.push_back(p);
  }
  for (std::size_t i = 0; i < variants.size(); ++i) {
    for (std::size_t j = 0; j < variants.size(); ++j) {
      const backends::gpu::ProblemKey a{0, variants[i]}, b{0, variants[j]};
      EXPECT_EQ(a == b, i == j) << variants[i].key() << " vs " << variants[j].key();
    }
    EXPECT_EQ(backends::gpu::ProblemKey({0, variants[i]}), backends::gpu::ProblemKey({0, variants[i]}));
  }
}

/// cuda.conv.cudnn_graph on a cuda device, or a skip.
class CudnnGraphFusedOnDevice : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    device_ = testing::first_device("cuda", why);
    if (!device_) GTEST_SKIP() << "no cuda device: " << why;
    for (const ConvSolver* s : conv_solvers("cuda"))
      if (s->name() == kCudnnGraph) solver_ = s;
    ASSERT_NE(solver_, nullptr) << kCudnnGraph << " is not in the cuda list";
  }
  std::optional<runtime::Device> device_;
  const ConvSolver* solver_ = nullptr;
};

struct FusedCase {
  ConvProblem problem;
  bool must_take = false;  // the case cuDNN's fusion is for: f16 NHWC ResNet-like conv + bias + add + relu
};

std::vector<FusedCase> fused_cases() {
  const ConvProblem resnet_like{
      .n = 2, .c = 64, .h = 14, .w = 14, .k = 64, .y = 3, .x = 3, .pad_h = 1, .pad_w = 1};
  const ConvProblem odd{.n = 1, .c = 17, .h = 31, .w = 29, .k = 23, .y = 3, .x = 3, .pad_h = 1, .pad_w = 1};
  const ConvProblem pointwise{.n = 1, .c = 32, .h = 9, .w = 11, .k = 48, .y = 1, .x = 1};
  struct Format {
    DType dtype;
    Layout layout;
  };
  const Format formats[] = {
      {DType::f16, Layout::nhwc}, {DType::bf16, Layout::nhwc}, {DType::f32, Layout::nchw}};
  std::vector<FusedCase> out;
  // Every activation (and none) on the tensor-core sized shape, the residual on every other one,
  // and on the other half in the next format, so each activation meets both.
  for (std::size_t f = 0; f < std::size(formats); ++f) {
    for (std::size_t a = 0; a <= kActivationCount; ++a) {
      ConvProblem p = resnet_like;
      p.dtype = formats[f].dtype;
      p.layout = formats[f].layout;
      const bool residual = (a + f) % 2 == 0;
      p.epilogue = a == kActivationCount ? ConvEpilogue{.bias = true, .residual = residual}
                                         : ConvEpilogue::with(static_cast<Activation>(a), true, residual);
      out.push_back({p, false});
    }
  }
  // Non-default parameters where the activation has them, one per format. (Every case may cost a
  // runtime compilation on the device: the grid stays small.)
  const ConvEpilogue parameterised[] = {
      ConvEpilogue{.bias = true, .activation = Activation::leaky_relu, .alpha = 0.2},
      ConvEpilogue{.residual = true, .activation = Activation::clip, .alpha = -0.5, .beta = 0.75},
      ConvEpilogue{.bias = true, .activation = Activation::elu, .alpha = 0.5}};
  for (std::size_t f = 0; f < std::size(formats); ++f) {
    ConvProblem p = resnet_like;
    p.dtype = formats[f].dtype;
    p.layout = formats[f].layout;
    p.epilogue = parameterised[f];
    out.push_back({p, false});
  }
  // Batch 1 with odd channels (cuDNN may refuse them in f16/bf16: then check() must say so), and
  // a 1x1 convolution, with and without the residual.
  for (const Format& f : formats) {
    const std::pair<ConvProblem, ConvEpilogue> cases[] = {
        {odd, ConvEpilogue::with(Activation::relu, true, true)},
        {odd, ConvEpilogue::with(Activation::silu)},
        {pointwise, ConvEpilogue::with(Activation::gelu_erf, true)},
        {pointwise, ConvEpilogue{.bias = true, .residual = true}}};
    for (const auto& [shape, e] : cases) {
      ConvProblem p = shape;
      p.dtype = f.dtype;
      p.layout = f.layout;
      p.epilogue = e;
      out.push_back({p, false});
    }
  }
  ConvProblem must = resnet_like;
  must.dtype = DType::f16;
  must.layout = Layout::nhwc;
  must.epilogue = ConvEpilogue::with(Activation::relu, true, true);
  out.push_back({must, true});
  return out;
}

// One test per case, so the sanitizers can spread the cases over processes (each case may cost a
// runtime-compiled plan, which they make slow).
class CudnnGraphFusedCase : public CudnnGraphFusedOnDevice,
                            public ::testing::WithParamInterface<std::size_t> {};

TEST_P(CudnnGraphFusedCase, RefusesWithAReasonOrMatchesTheReference) {
  const std::vector<FusedCase> cases = fused_cases();
  ASSERT_LT(GetParam(), cases.size());
  const FusedCase& c = cases[GetParam()];
  const ConvProblem& p = c.problem;
  const Applicability a = solver_->check_any(ProblemRef::of(p), *device_);
  if (!a) {
    EXPECT_FALSE(a.reason.empty()) << p.key();
    EXPECT_FALSE(c.must_take) << p.key() << " refused: " << a.reason;
    const Activation* act = p.epilogue.activation ? &*p.epilogue.activation : nullptr;
    if (act && (*act == Activation::hardswish || *act == Activation::hardsigmoid)) {
      EXPECT_NE(a.reason.find(to_string(*act)), std::string::npos) << a.reason;
    } else {
      // cuDNN's own verdict on the fused graph: what failed to build, or why no plan was usable.
      EXPECT_NE(a.reason.find("cuDNN graph API: fused"), std::string::npos) << a.reason;
    }
    std::printf("[ info ] %s refused %s: %s\n", kCudnnGraph, p.key().c_str(), a.reason.c_str());
    return;
  }
  const Activation* act = p.epilogue.activation ? &*p.epilogue.activation : nullptr;
  EXPECT_FALSE(act && (*act == Activation::hardswish || *act == Activation::hardsigmoid))
      << p.key() << ": cuDNN has no pointwise mode for it, yet the solver took it";
  const OpVerification v = check_against_reference(*device_, ProblemRef::of(p), *solver_);
  EXPECT_TRUE(v.passed) << p.key() << " (" << solver_->detail(p, *device_) << "): " << v.summary;
  const std::string detail = solver_->detail(p, *device_);
  EXPECT_NE(detail.find("fused conv"), std::string::npos) << p.key() << ": " << detail;
  std::printf("[ info ] %s took %s: %s; %s\n", kCudnnGraph, p.key().c_str(), v.summary.c_str(),
              detail.c_str());
}

INSTANTIATE_TEST_SUITE_P(EveryCase, CudnnGraphFusedCase,
                         ::testing::Range<std::size_t>(0, fused_cases().size()));

// One shape run plain, fused and plain again (and another fused first): were a fused problem served
// the plain plan, or the reverse, its output would miss (or gain) the bias, the residual and the relu.
TEST_F(CudnnGraphFusedOnDevice, PlanCacheNeverServesAPlainPlanForAFusedKey) {
  for (bool fused_first : {false, true}) {
    ConvProblem plain{.n = 2,
                      .c = 64,
                      .h = 14,
                      .w = fused_first ? 12 : 14,
                      .k = 64,
                      .y = 3,
                      .x = 3,
                      .pad_h = 1,
                      .pad_w = 1,
                      .dtype = DType::f16,
                      .layout = Layout::nhwc};
    ConvProblem fused = plain;
    fused.epilogue = ConvEpilogue::with(Activation::relu, true, true);
    ASSERT_TRUE(solver_->check_any(ProblemRef::of(plain), *device_)) << plain.key();
    const Applicability takes_fused = solver_->check_any(ProblemRef::of(fused), *device_);
    ASSERT_TRUE(takes_fused) << fused.key() << ": " << takes_fused.reason;
    const ConvProblem* first = fused_first ? &fused : &plain;
    const ConvProblem* second = fused_first ? &plain : &fused;
    const std::vector<const ConvProblem*> order{first, second, first};
    for (const ConvProblem* p : order) {
      const OpVerification v = check_against_reference(*device_, ProblemRef::of(*p), *solver_);
      EXPECT_TRUE(v.passed) << p->key() << " (" << solver_->detail(*p, *device_) << "): " << v.summary;
    }
    EXPECT_EQ(solver_->detail(plain, *device_).find("fused"), std::string::npos)
        << solver_->detail(plain, *device_);
    EXPECT_EQ(solver_->detail(fused, *device_).rfind("fused conv -> add bias -> add residual -> relu_fwd", 0),
              0u)
        << solver_->detail(fused, *device_);
  }
}

/// One verified call of `solver` with `config` (null: its default) on the problem's seeded tensors,
/// bias and residual included.
OpVerification check_config(const runtime::Device& device, const ConvProblem& p, const ConvSolver& solver,
                            const ConfigHandle& config) {
  const ProblemRef ref = ProblemRef::of(p);
  const std::uint64_t seed = default_op_seed(ref);
  const auto want = reference_op_outputs(ref, seed);
  runtime::Stream stream(device);
  OpTensors t = make_op_tensors(stream, ref, seed);
  return verify_op(stream, ref, Choice{&solver, config}, t, want, p.tolerance());
}

// A ResNet block's 3x3 layer in f16 NHWC with bias, residual and relu: the fusion cuDNN is built for.
ConvProblem resnet_block_f16(std::int64_t h, std::int64_t w = 10) {
  return ConvProblem{.n = 2,
                     .c = 64,
                     .h = h,
                     .w = w,
                     .k = 64,
                     .y = 3,
                     .x = 3,
                     .pad_h = 1,
                     .pad_w = 1,
                     .dtype = DType::f16,
                     .layout = Layout::nhwc,
                     .epilogue = ConvEpilogue::with(Activation::relu, true, true)};
}

// Each engine config the tuner would time for a fused problem (the runtime-compiled fusion plan and
// whichever others cuDNN lists) applies the whole epilogue.
TEST_F(CudnnGraphFusedOnDevice, EveryConfigOfAFusedProblemAppliesTheEpilogue) {
  const ConvProblem p = resnet_block_f16(10);
  const ProblemRef ref = ProblemRef::of(p);
  const Applicability a = solver_->check_any(ref, *device_);
  ASSERT_TRUE(a) << a.reason;
  const std::vector<std::string> texts = solver_->configs_any(ref, *device_);
  ASSERT_FALSE(texts.empty());
  for (const std::string& text : texts) {
    const std::optional<ConfigHandle> config = solver_->parse_config_any(ref, *device_, text);
    ASSERT_TRUE(config.has_value()) << text << " does not parse back for " << p.key();
    const OpVerification v = check_config(*device_, p, *solver_, *config);
    EXPECT_TRUE(v.passed) << text << " on " << p.key() << ": " << v.summary;
  }
  std::printf("[ info ] %s %s: %zu configs (%s)\n", kCudnnGraph, p.key().c_str(), texts.size(),
              solver_->detail(p, *device_).c_str());
}

// A stored config (the find-db's text) is reinstated on a fused problem not seen yet in this
// process: that one plan is built for the fused graph (a runtime-compiled one included), and what
// runs then still applies the epilogue.
TEST_F(CudnnGraphFusedOnDevice, StoredConfigOfAFusedProblemStillAppliesTheEpilogue) {
  const ConvProblem tuned = resnet_block_f16(10);
  const Applicability a = solver_->check_any(ProblemRef::of(tuned), *device_);
  ASSERT_TRUE(a) << a.reason;
  const std::vector<std::string> texts = solver_->configs_any(ProblemRef::of(tuned), *device_);
  ASSERT_FALSE(texts.empty());
  for (const std::string& text : {texts.front(), texts.back()}) {
    ASSERT_EQ(text.rfind("eng", 0), 0u) << text;
    const ConvProblem fresh = resnet_block_f16(11);  // another key; the same engines fit its size
    const std::optional<ConfigHandle> config =
        solver_->parse_config_any(ProblemRef::of(fresh), *device_, text);
    ASSERT_TRUE(config.has_value()) << text << " for " << fresh.key();
    const OpVerification v = check_config(*device_, fresh, *solver_, *config);
    EXPECT_TRUE(v.passed) << text << " on " << fresh.key() << ": " << v.summary;
  }
}

// The variant packs and captured graphs are kept per pointer set, bias and residual included:
// calls that differ only in those (x, w, y and the workspace shared) must each read their own,
// through direct calls, the capture and the replays.
TEST_F(CudnnGraphFusedOnDevice, CallsThatDifferOnlyInBiasAndResidualReadTheirOwn) {
  const ConvProblem p = resnet_block_f16(14, 14);
  const Applicability a = solver_->check_any(ProblemRef::of(p), *device_);
  ASSERT_TRUE(a) << a.reason;
  runtime::Stream stream(*device_);
  const auto x = random_tensor(p.dtype, p.x_desc().elements(), 1);
  const auto w = random_tensor(p.dtype, p.w_desc().elements(), 2);
  const std::size_t y_bytes = p.y_desc().bytes(), ws_bytes = solver_->workspace_bytes(p, *device_);
  memory::Buffer dx = memory::allocate(stream, x.size()), dw = memory::allocate(stream, w.size()),
                 dy = memory::allocate(stream, y_bytes), ws = memory::allocate(stream, ws_bytes);
  memory::copy_from_host(stream, dx, x.data(), x.size());
  memory::copy_from_host(stream, dw, w.data(), w.size());
  struct Set {
    std::vector<std::byte> want;
    memory::Buffer bias, residual;
  };
  std::vector<Set> sets;
  for (std::uint64_t i = 0; i < 4; ++i) {
    const auto bias = random_tensor(p.dtype, p.k, 10 + i);
    const auto residual = random_tensor(p.dtype, p.y_desc().elements(), 20 + i);
    Set s{std::vector<std::byte>(y_bytes), memory::allocate(stream, bias.size()),
          memory::allocate(stream, residual.size())};
    reference_conv_forward(p, x.data(), w.data(), s.want.data(), bias.data(), residual.data());
    memory::copy_from_host(stream, s.bias, bias.data(), bias.size());
    memory::copy_from_host(stream, s.residual, residual.data(), residual.size());
    sets.push_back(std::move(s));
  }
  std::vector<std::byte> got(y_bytes);
  for (int round = 0; round < 4; ++round) {
    for (std::size_t i = 0; i < sets.size(); ++i) {
      memory::memset(stream, dy, 0xff, y_bytes);
      ConvArgs args{dx.data(), dw.data(), dy.data(), ws_bytes ? ws.data() : nullptr, ws_bytes};
      args.bias = sets[i].bias.data();
      args.residual = sets[i].residual.data();
      solver_->run(stream, p, args);
      memory::copy_to_host(stream, got.data(), dy, y_bytes);
      stream.synchronize();
      const Comparison cmp =
          compare_outputs(p.dtype, got.data(), sets[i].want.data(), p.y_desc().elements(), p.tolerance());
      ASSERT_TRUE(cmp.passed) << "round " << round << ", set " << i << ": " << cmp.summary;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, GpuConvEpilogue, ::testing::Values("cuda", "hip"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace galley::dnn
