// Fused convolution epilogues on the GPU backends: every registered conv solver of the cuda and
// hip lists either refuses a fused problem (the central check, or its own reason) or matches
// ref.conv.direct on it (every gpu.conv.* solver takes it, as a pass after its kernels), over odd
// shapes, f32/f16/bf16, both layouts and the activation classes; the unfused sequence takes every
// one, and the list's first choice for a fused problem matches the reference. Skips without a
// device of the backend.
#include <gtest/gtest.h>

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "dnn/op_verify.hpp"
#include "galley/dnn/convolution.hpp"
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
  return out;
}

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
  // The single-source solvers run the epilogue after their kernels; the vendor ones refuse it (the
  // backend's unfused sequence is not a vendor solver, though named after the backend).
  EXPECT_TRUE(ran.count("gpu.conv.direct"));
  EXPECT_TRUE(ran.count("gpu.conv.igemm_f32"));
  std::string names;
  for (const auto& n : ran) {
    if (n != unfused) EXPECT_NE(n.rfind("cuda.", 0), 0u) << n << " has no fused path";
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

INSTANTIATE_TEST_SUITE_P(Backends, GpuConvEpilogue, ::testing::Values("cuda", "hip"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace galley::dnn
