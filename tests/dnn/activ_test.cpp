// Activations: names and keys, validation naming the field, the definitions against hand-computed
// values, every derivative against central finite differences in double, the derivative PyTorch
// takes at each kink, extreme and NaN inputs, every cpu solver against ref.activ over odd shapes,
// dtypes, layouts and both directions, in-place calls, and the Tensor entry points' checks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/activ_vector_math.hpp"
#include "backends/cpu/conv_isa.hpp"
#include "dnn/activation_dispatch.hpp"
#include "dnn/cpu_isa_cap.hpp"
#include "dnn/op_verify.hpp"
#include "dnn/ref_activ.hpp"
#include "dnn/tensor_data.hpp"
#include "galley/core/error.hpp"
#include "galley/dnn/activation.hpp"
#include "galley/runtime/device.hpp"
#include "galley/tensor.hpp"

namespace galley::dnn {
namespace {

const runtime::Device& cpu() {
  static const runtime::Device d = runtime::device("cpu");
  return d;
}

std::vector<Activation> all_activations() {
  std::vector<Activation> out;
  for (std::size_t i = 0; i < kActivationCount; ++i) out.push_back(static_cast<Activation>(i));
  return out;
}

template <class Fn>
void expect_error(Fn&& fn, std::initializer_list<std::string_view> fragments) {
  try {
    fn();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::invalid_argument) << e.what();
    for (auto f : fragments)
      EXPECT_NE(std::string(e.what()).find(f), std::string::npos) << f << " in: " << e.what();
  }
}

ActivProblem row(Activation a, std::initializer_list<std::int64_t> dims, DType dtype = DType::f32) {
  return ActivProblem::contiguous(a, dtype, dims);
}

// f(x) and f'(x) * dy in double through the same functors the reference uses.
double forward_of(const ActivProblem& p, double x) {
  return with_activation<double>(p.activation, p.alpha, p.beta, [&](auto f) { return f.forward(x); });
}
double backward_of(const ActivProblem& p, double dy, double x) {
  return with_activation<double>(p.activation, p.alpha, p.beta,
                                 [&](auto f) { return f.backward(dy, p.reads_dst() ? f.forward(x) : x); });
}
float forward_f32(const ActivProblem& p, float x) {
  return with_activation<float>(p.activation, p.alpha, p.beta, [&](auto f) { return f.forward(x); });
}
float backward_f32(const ActivProblem& p, float dy, float x) {
  return with_activation<float>(p.activation, p.alpha, p.beta,
                                [&](auto f) { return f.backward(dy, p.reads_dst() ? f.forward(x) : x); });
}

// Runs `solver` on host f32 memory: forward y = f(x), backward dx from dy and x (or y = f(x)).
std::vector<float> run_f32(const ActivSolver& solver, ActivProblem p, const std::vector<float>& x,
                           const std::vector<float>* dy = nullptr) {
  p.dtype = DType::f32;
  p.direction = dy ? ActivDirection::backward : ActivDirection::forward;
  std::vector<float> out(x.size(), -12345.f);
  std::vector<float> y(x.size());
  ActivArgs a;
  runtime::Stream stream(cpu());
  if (!dy) {
    a.x = x.data();
    a.y = out.data();
  } else {
    for (std::size_t i = 0; i < x.size(); ++i) y[i] = forward_f32(p, x[i]);
    a.x = x.data();
    a.y = y.data();
    a.dy = dy->data();
    a.dx = out.data();
  }
  solver.run(stream, p, a);
  stream.synchronize();
  return out;
}

std::vector<const ActivSolver*> cpu_solvers() {
  std::vector<const ActivSolver*> out = solvers_for<ActivProblem>("cpu");
  EXPECT_GE(out.size(), 2u);
  EXPECT_EQ(out.back()->name(), std::string_view(kRefActivName)) << "the reference closes the cpu list";
  return out;
}

TEST(ActivNames, RoundTripAndErrors) {
  for (Activation a : all_activations()) EXPECT_EQ(parse_activation(to_string(a)), a);
  expect_error([] { parse_activation("swish"); }, {"swish", "relu", "hardsigmoid"});
  EXPECT_EQ(parameter_count(Activation::clip), 2);
  EXPECT_EQ(parameter_count(Activation::leaky_relu), 1);
  EXPECT_EQ(parameter_count(Activation::gelu_tanh), 0);
  EXPECT_DOUBLE_EQ(default_alpha(Activation::leaky_relu), 0.01);
  EXPECT_DOUBLE_EQ(default_beta(Activation::clip), 6.0);
}

// The problem's tensor roles and the functors' formulas must agree on what backward reads.
TEST(ActivNames, BackwardReadsWhatTheFunctorExpects) {
  for (Activation a : all_activations()) {
    const bool functor_dst =
        with_activation<float>(a, 0, 0, [](auto f) { return decltype(f)::kBackwardFromDst; });
    EXPECT_EQ(functor_dst, backward_reads_dst(a)) << to_string(a);
    ActivProblem p = row(a, {5});
    p.direction = ActivDirection::backward;
    const auto t = p.tensors();
    ASSERT_EQ(t.size(), 3u);
    EXPECT_EQ(t[1].id, functor_dst ? ArgId::dst : ArgId::src) << to_string(a);
    EXPECT_FALSE(t[1].output);
    EXPECT_TRUE(t[2].output);
    EXPECT_EQ(t[2].id, ArgId::diff_src);
  }
}

TEST(ActivProblem, KeyRoundTrip) {
  ActivProblem clip = ActivProblem::packed(Activation::clip, DType::f16, Layout::nhwc, 2, 17, 31, 29);
  clip.alpha = -1;
  clip.beta = 1;
  ActivProblem leaky = row(Activation::leaky_relu, {7, 129}, DType::bf16);
  leaky.direction = ActivDirection::backward;
  leaky.alpha = -2.5e-7;
  ActivProblem elu = row(Activation::elu, {1, 2, 3, 4, 5, 6});
  elu.alpha = 0.1;
  const ActivProblem cases[] = {
      clip, leaky, elu, row(Activation::gelu_tanh, {100003}),
      ActivProblem::packed(Activation::relu, DType::f32, Layout::nchw, 1, 3, 31, 29)};
  for (const ActivProblem& p : cases) {
    SCOPED_TRACE(p.key());
    const ActivProblem back = ActivProblem::parse_key(p.key());
    EXPECT_EQ(back, p);
    EXPECT_EQ(back.key(), p.key());
    EXPECT_EQ(back.hash(), p.hash());
    EXPECT_EQ(op_kind_of_key(p.key()), OpKind::activ);
    const AnyProblem any = parse_problem_key(p.key());
    EXPECT_EQ(any.ref().key(), p.key());
  }
  EXPECT_EQ(clip.key(), "activ-F-f16-nhwc-clip-am1-b1-n2-c17-h31-w29");
  EXPECT_EQ(leaky.key(), "activ-B-bf16-row-leaky_relu-am2.5em07-b0-d7x129");
  EXPECT_EQ(ActivProblem::packed(Activation::relu, DType::f32, Layout::nchw, 1, 3, 31, 29).key(),
            "activ-F-f32-nchw-relu-a0-b0-n1-c3-h31-w29");
  // -0 is 0: one key.
  ActivProblem neg_zero = clip;
  neg_zero.alpha = -0.0;
  EXPECT_EQ(ActivProblem::parse_key(neg_zero.key()), neg_zero);
}

TEST(ActivProblem, MalformedKeysAreErrors) {
  for (const char* bad : {
           "",
           "activ",
           "conv-F-f32-nchw-relu-a0-b0-n1-c3-h31-w29",
           "activ-X-f32-nchw-relu-a0-b0-n1-c3-h31-w29",
           "activ-F-i32-nchw-relu-a0-b0-n1-c3-h31-w29",
           "activ-F-f32-nchw-swish-a0-b0-n1-c3-h31-w29",
           "activ-F-f32-NCHW-relu-a0-b0-n1-c3-h31-w29",
           "activ-F-f32-nchw-relu-a0-b0-n1-c3-h31",
           "activ-F-f32-nchw-relu-a0-b0-n1-c3-h31-x29",
           "activ-F-f32-nchw-relu-a0-b0-n01-c3-h31-w29",
           "activ-F-f32-nchw-leaky_relu-a0.010-b0-n1-c3-h31-w29",
           "activ-F-f32-nchw-leaky_relu-a+0.01-b0-n1-c3-h31-w29",
           "activ-F-f32-nchw-relu-a0.5-b0-n1-c3-h31-w29",
           "activ-F-f32-nchw-clip-a2-b1-n1-c3-h31-w29",
           "activ-F-f32-row-relu-a0-b0-d2x3x4x5",
           "activ-F-f32-row-relu-a0-b0-d2x0",
           "activ-F-f32-row-relu-a0-b0-d1x1x1x1x1x1x1",
           "activ-F-f32-row-relu-a0-b0-d",
           "activ-F-f32-row-relu-a0-b0-d7-x",
           "activ-F-f32-nchw-elu-anan-b0-n1-c3-h31-w29",
       }) {
    EXPECT_THROW(ActivProblem::parse_key(bad), Error) << "'" << bad << "'";
  }
}

TEST(ActivProblem, ValidationNamesTheField) {
  ActivProblem p = row(Activation::relu, {3, 5});
  p.dtype = DType::i32;
  expect_error([&] { p.validate(); }, {"dtype", "i32", "f32, f16, bf16"});
  p = row(Activation::relu, {3, 5});
  p.rank = 0;
  expect_error([&] { p.validate(); }, {"rank 0"});
  p = row(Activation::relu, {3, 5});
  p.dims[1] = 0;
  expect_error([&] { p.validate(); }, {"dims[1] = 0", "positive"});
  p = row(Activation::relu, {3, 5});
  p.dims[3] = 2;
  expect_error([&] { p.validate(); }, {"dims[3]", "must be 1"});
  p = row(Activation::relu, {3, 5, 7});
  p.layout = Layout::nhwc;
  expect_error([&] { p.validate(); }, {"nhwc", "rank 4", "rank 3"});
  p = row(Activation::relu, {3});
  p.alpha = 0.5;
  expect_error([&] { p.validate(); }, {"alpha = 0.5", "relu"});
  p = row(Activation::elu, {3});
  p.beta = 2;
  expect_error([&] { p.validate(); }, {"beta = 2", "elu"});
  p = row(Activation::leaky_relu, {3});
  p.alpha = std::numeric_limits<double>::infinity();
  expect_error([&] { p.validate(); }, {"alpha", "finite"});
  p = row(Activation::clip, {3});
  p.alpha = 7;
  expect_error([&] { p.validate(); }, {"lower bound alpha = 7", "upper bound beta = 6"});
  p = row(Activation::relu, {std::int64_t(1) << 40, std::int64_t(1) << 30});
  expect_error([&] { p.validate(); }, {"overflows"});
  p = row(Activation::relu, {3});
  p.activation = static_cast<Activation>(200);
  expect_error([&] { p.validate(); }, {"activation 200"});
  expect_error(
      [] {
        ActivProblem::contiguous(Activation::relu, DType::f32, {1, 2, 3, 4, 5, 6, 7});
      },
      {"rank 7"});
}

TEST(ActivProblem, FiguresAndDescriptors) {
  ActivProblem p = ActivProblem::packed(Activation::silu, DType::f16, Layout::nhwc, 2, 3, 5, 7);
  EXPECT_EQ(p.elements(), 210);
  EXPECT_EQ(p.desc(), TensorDesc::packed(DType::f16, Layout::nhwc, 2, 3, 5, 7));
  EXPECT_DOUBLE_EQ(p.min_bytes(), 2.0 * 210 * 2);
  EXPECT_DOUBLE_EQ(p.flops(), 210);
  p.direction = ActivDirection::backward;
  EXPECT_DOUBLE_EQ(p.min_bytes(), 3.0 * 210 * 2);
  EXPECT_LE(p.tolerance(), 2e-3);
  EXPECT_EQ(row(Activation::relu, {7, 129}).desc(), TensorDesc::contiguous(DType::f32, {7, 129}));
  const std::string line = p.bench_command(cpu(), "cpu.activ.blocked");
  EXPECT_EQ(line,
            "galley bench activ -m silu -A 0 -B 0 -n 2 -c 3 -H 5 -W 7 -F 2 --dtype f16 --layout nhwc "
            "--device cpu --solver cpu.activ.blocked");
  ActivProblem clip = row(Activation::clip, {7, 129});
  clip.alpha = -1;
  clip.beta = 1.5;
  EXPECT_EQ(clip.bench_command(cpu()),
            "galley bench activ -m clip -A -1 -B 1.5 --shape 7,129 -F 1 --dtype f32 --device cpu");
}

TEST(ActivProblem, OfDescriptorFindsTheLayout) {
  const ActivProblem nhwc =
      ActivProblem::of(Activation::relu, TensorDesc::packed(DType::bf16, Layout::nhwc, 2, 3, 4, 5), 0, 0);
  EXPECT_EQ(nhwc.layout, Layout::nhwc);
  EXPECT_EQ(nhwc.dtype, DType::bf16);
  const ActivProblem r3 =
      ActivProblem::of(Activation::elu, TensorDesc::contiguous(DType::f32, {3, 4, 5}), 1, 0);
  EXPECT_EQ(r3.rank, 3);
  EXPECT_EQ(r3.layout, Layout::nchw);
  TensorDesc strided = TensorDesc::contiguous(DType::f32, {3, 4});
  strided.strides[0] = 8;
  expect_error([&] { ActivProblem::of(Activation::relu, strided, 0, 0); }, {"neither row-major", "f32[3,4]"});
}

// Hand-computed values (PyTorch's outputs for these inputs, to double precision).
TEST(ActivReference, ForwardMatchesHandComputedValues) {
  struct Case {
    Activation a;
    double alpha, beta, x, want;
  };
  const Case cases[] = {
      {Activation::relu, 0, 0, -1.5, 0},
      {Activation::relu, 0, 0, 2.25, 2.25},
      {Activation::leaky_relu, 0.1, 0, -2, -0.2},
      {Activation::leaky_relu, 0.1, 0, 3, 3},
      {Activation::clip, 0, 6, 7.5, 6},
      {Activation::clip, 0, 6, -1, 0},
      {Activation::clip, -1, 1, 0.25, 0.25},
      {Activation::elu, 1, 0, -1, -0.63212055882855767},
      {Activation::elu, 0.5, 0, 2, 2},
      {Activation::sigmoid, 0, 0, 0, 0.5},
      {Activation::sigmoid, 0, 0, 2, 0.88079707797788231},
      {Activation::tanh, 0, 0, 0.5, 0.46211715726000974},
      {Activation::gelu_erf, 0, 0, 1, 0.84134474606854293},
      {Activation::gelu_erf, 0, 0, -0.5, -0.15426876936299344},
      {Activation::gelu_tanh, 0, 0, 1, 0.84119199060827677},
      {Activation::gelu_tanh, 0, 0, -2, -0.04540230591222494},
      {Activation::silu, 0, 0, 1, 0.73105857863000488},
      {Activation::silu, 0, 0, -3, -0.14227761953270035},
      {Activation::hardswish, 0, 0, 1, 4.0 / 6.0},
      {Activation::hardswish, 0, 0, -4, 0},
      {Activation::hardswish, 0, 0, 4, 4},
      {Activation::hardsigmoid, 0, 0, 1, 4.0 / 6.0},
      {Activation::hardsigmoid, 0, 0, -3.5, 0},
      {Activation::hardsigmoid, 0, 0, 3.5, 1},
  };
  for (const Case& c : cases) {
    ActivProblem p = row(c.a, {1});
    p.alpha = c.alpha;
    p.beta = c.beta;
    SCOPED_TRACE(std::string(to_string(c.a)) + " at " + std::to_string(c.x));
    EXPECT_NEAR(forward_of(p, c.x), c.want, 1e-15);
    // Through ref.activ on f32 storage: the double result rounded once.
    const float x = static_cast<float>(c.x);
    float y = -1;
    reference_activation(p, ActivArgs{&x, &y});
    EXPECT_EQ(y, static_cast<float>(forward_of(p, x)));
  }
}

// Central differences in double, at points at least 0.05 away from every kink.
TEST(ActivReference, BackwardMatchesFiniteDifferences) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> uniform(-6, 6);
  for (Activation a : all_activations()) {
    ActivProblem p = row(a, {1});
    if (a == Activation::leaky_relu) p.alpha = -0.3;
    if (a == Activation::clip) p.alpha = -1.5, p.beta = 2.5;
    if (a == Activation::elu) p.alpha = 0.7;
    const std::vector<double> kinks = {0, p.alpha, p.beta, -3, 3};
    int checked = 0;
    while (checked < 200) {
      const double x = uniform(rng);
      bool near_kink = false;
      for (double k : kinks) near_kink = near_kink || std::abs(x - k) < 0.05;
      if (near_kink) continue;
      const double h = 1e-5;
      const double fd = (forward_of(p, x + h) - forward_of(p, x - h)) / (2 * h);
      const double dy = 1.25;
      EXPECT_NEAR(backward_of(p, dy, x), dy * fd, 1e-7 * (1 + std::abs(fd)))
          << to_string(a) << " at x = " << x;
      ++checked;
    }
  }
}

// PyTorch's one-sided choices at the kinks (aten's *_backward kernels).
TEST(ActivReference, DerivativesAtKinksAreTorchs) {
  const auto d = [](Activation a, double x, double alpha = 0, double beta = 0) {
    ActivProblem p = row(a, {1});
    p.alpha = alpha;
    p.beta = beta;
    return backward_of(p, 1.0, x);
  };
  EXPECT_EQ(d(Activation::relu, 0), 0);
  EXPECT_EQ(d(Activation::leaky_relu, 0, 0.1), 0.1);
  EXPECT_EQ(d(Activation::clip, 0, 0, 6), 0);
  EXPECT_EQ(d(Activation::clip, 6, 0, 6), 0);
  EXPECT_EQ(d(Activation::elu, 0, 0.5), 0.5);
  EXPECT_EQ(d(Activation::hardswish, -3), -0.5);
  EXPECT_EQ(d(Activation::hardswish, 3), 1.5);
  EXPECT_EQ(d(Activation::hardsigmoid, -3), 0);
  EXPECT_EQ(d(Activation::hardsigmoid, 3), 0);
  EXPECT_DOUBLE_EQ(d(Activation::hardsigmoid, 0), 1.0 / 6.0);
  EXPECT_DOUBLE_EQ(d(Activation::gelu_erf, 0), 0.5);
  EXPECT_DOUBLE_EQ(d(Activation::gelu_tanh, 0), 0.5);
  EXPECT_DOUBLE_EQ(d(Activation::silu, 0), 0.5);
}

// The reference takes the parameters as float, as PyTorch's kernels do: an input equal to the
// float bound is at the bound, though the double 0.7 lies above it.
TEST(ActivReference, ParametersAreTakenAsFloat) {
  ActivProblem p = row(Activation::clip, {1});
  p.alpha = 0;
  p.beta = 0.7;
  const float bound = static_cast<float>(p.beta);
  ASSERT_LT(static_cast<double>(bound), p.beta) << "pick a bound that float rounds down";
  float y = -1;
  reference_activation(p, ActivArgs{&bound, &y});
  EXPECT_EQ(y, bound);
  p.direction = ActivDirection::backward;
  const float dy = 1.f;
  float dx = -1;
  reference_activation(p, ActivArgs{&bound, nullptr, &dy, &dx});
  EXPECT_EQ(dx, 0.f) << "x == beta: clip's derivative is 0 at its bounds";
}

// Large |x| saturates; it never makes NaN (in float, where exp and x^3 overflow), on every solver.
TEST(ActivExtremes, LargeInputsGiveNoNaN) {
  const float big = std::numeric_limits<float>::max();
  const std::vector<float> xs = {1e4f,  -1e4f,  88.8f, -88.8f, 200.f, -200.f,
                                 1e20f, -1e20f, 1e30f, -1e30f, big,   -big};
  const std::vector<float> dys(xs.size(), 0.75f);
  for (Activation a : {Activation::sigmoid, Activation::tanh, Activation::gelu_erf, Activation::gelu_tanh,
                       Activation::silu, Activation::elu, Activation::hardswish, Activation::hardsigmoid}) {
    ActivProblem p = row(a, {static_cast<std::int64_t>(xs.size())});
    p.alpha = default_alpha(a);
    for (const ActivSolver* s : cpu_solvers()) {
      const auto y = run_f32(*s, p, xs);
      const auto dx = run_f32(*s, p, xs, &dys);
      for (std::size_t i = 0; i < xs.size(); ++i) {
        EXPECT_FALSE(std::isnan(y[i])) << s->name() << " " << to_string(a) << " forward at " << xs[i];
        EXPECT_FALSE(std::isnan(dx[i])) << s->name() << " " << to_string(a) << " backward at " << xs[i];
        // The saturated values themselves.
        const double want_dx = backward_of(p, 0.75, xs[i]);
        if (std::isfinite(want_dx)) EXPECT_NEAR(dx[i], want_dx, 1e-6 * (1 + std::abs(want_dx)));
      }
    }
  }
  const ActivProblem sig = row(Activation::sigmoid, {1});
  EXPECT_EQ(forward_f32(sig, -1e4f), 0.f);
  EXPECT_EQ(forward_f32(sig, 1e4f), 1.f);
  EXPECT_EQ(forward_f32(row(Activation::silu, {1}), -1e4f), 0.f);
  EXPECT_EQ(forward_f32(row(Activation::gelu_erf, {1}), -1e4f), 0.f);
  EXPECT_EQ(forward_f32(row(Activation::gelu_tanh, {1}), 1e20f), 1e20f);
  EXPECT_EQ(backward_f32(row(Activation::gelu_tanh, {1}), 1.f, 1e20f), 1.f);
  EXPECT_EQ(backward_f32(row(Activation::gelu_tanh, {1}), 1.f, -1e20f), 0.f);
}

// NaN in x: every forward gives NaN (PyTorch's clamp and max propagate it); backward gives what
// PyTorch's formula does: a comparison with NaN is false, so some take the gradient branch.
TEST(ActivExtremes, NaNPropagatesAsInTorch) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  struct Case {
    Activation a;
    float want_dx;  // NaN: NaN comes out
  };
  const float dy = 2.f;
  const Case cases[] = {
      {Activation::relu, dy},      {Activation::leaky_relu, dy * 0.01f}, {Activation::clip, dy},
      {Activation::elu, dy},       {Activation::sigmoid, nan},           {Activation::tanh, nan},
      {Activation::gelu_erf, nan}, {Activation::gelu_tanh, nan},         {Activation::silu, nan},
      {Activation::hardswish, dy}, {Activation::hardsigmoid, 0.f},
  };
  for (const Case& c : cases) {
    const ActivProblem p = row(c.a, {3});
    const std::vector<float> xs = {nan, 0.5f, nan};
    const std::vector<float> dys = {dy, dy, dy};
    for (const ActivSolver* s : cpu_solvers()) {
      SCOPED_TRACE(std::string(s->name()) + " " + to_string(c.a));
      const auto y = run_f32(*s, p, xs);
      EXPECT_TRUE(std::isnan(y[0]) && std::isnan(y[2]));
      EXPECT_FALSE(std::isnan(y[1]));
      const auto dx = run_f32(*s, p, xs, &dys);
      if (std::isnan(c.want_dx)) {
        EXPECT_TRUE(std::isnan(dx[0])) << dx[0];
      } else {
        EXPECT_FLOAT_EQ(dx[0], c.want_dx);
      }
    }
  }
}

struct TestIsa {};
using FastMath = backends::cpu::VectorMath<TestIsa>;

// The cpu solver's own elementary functions against libm in double, over the whole float range.
TEST(ActivVectorMath, AccurateEverywhereAndNaNPropagates) {
  double worst_exp = 0, worst_expm1 = 0, worst_tanh = 0, worst_erf = 0;
  for (float x = -120.f; x <= 120.f; x += 0.0037f) {
    const double e = std::exp(static_cast<double>(x));
    if (e > 1.3e-38 && e < 3.4e38) worst_exp = std::max(worst_exp, std::abs(FastMath::exp(x) - e) / e);
    const double em1 = std::expm1(static_cast<double>(x));
    if (em1 < 3.4e38)
      worst_expm1 = std::max(worst_expm1, std::abs(FastMath::expm1(x) - em1) / std::abs(em1 ? em1 : 1));
    const double th = std::tanh(static_cast<double>(x));
    worst_tanh = std::max(worst_tanh, std::abs(FastMath::tanh(x) - th) / std::abs(th ? th : 1));
    worst_erf = std::max(worst_erf, std::abs(FastMath::erf(x) - std::erf(static_cast<double>(x))));
  }
  for (float x = -1e-3f; x <= 1e-3f;
       x += 1.3e-6f) {  // near 0, where expm1 and tanh keep their relative accuracy
    const double em1 = std::expm1(static_cast<double>(x));
    if (em1 != 0) worst_expm1 = std::max(worst_expm1, std::abs(FastMath::expm1(x) - em1) / std::abs(em1));
    const double th = std::tanh(static_cast<double>(x));
    if (th != 0) worst_tanh = std::max(worst_tanh, std::abs(FastMath::tanh(x) - th) / std::abs(th));
  }
  EXPECT_LT(worst_exp, 3e-7);
  EXPECT_LT(worst_expm1, 3e-7);
  EXPECT_LT(worst_tanh, 3e-7);
  EXPECT_LT(worst_erf, 5e-7);
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(FastMath::exp(100.f), inf);
  EXPECT_EQ(FastMath::exp(-100.f), 0.f);
  EXPECT_EQ(FastMath::exp(0.f), 1.f);
  EXPECT_EQ(FastMath::expm1(-inf), -1.f);
  EXPECT_EQ(FastMath::tanh(inf), 1.f);
  EXPECT_EQ(FastMath::tanh(-inf), -1.f);
  EXPECT_EQ(FastMath::erf(-inf), -1.f);
  for (float v : {FastMath::exp(nan), FastMath::expm1(nan), FastMath::tanh(nan), FastMath::erf(nan)}) {
    EXPECT_TRUE(std::isnan(v));
  }
}

std::vector<ActivProblem> conformance_problems() {
  std::vector<ActivProblem> out;
  for (Activation a : all_activations()) {
    for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
      std::vector<ActivProblem> shapes = {
          ActivProblem::packed(a, dt, Layout::nchw, 1, 3, 31, 29),
          ActivProblem::packed(a, dt, Layout::nhwc, 2, 17, 5, 7),
          ActivProblem::contiguous(a, dt, {1}),
          ActivProblem::contiguous(a, dt, {23, 179}),
          ActivProblem::contiguous(a, dt, {3, 5, 7, 9, 2}),
          ActivProblem::contiguous(a, dt, {100003}),  // over the cpu solver's threading threshold
      };
      if (a == Activation::leaky_relu) shapes[1].alpha = -0.2;
      if (a == Activation::clip) shapes[1].alpha = -1, shapes[1].beta = 1;
      if (a == Activation::elu) shapes[1].alpha = 0.4;
      for (ActivDirection d : {ActivDirection::forward, ActivDirection::backward}) {
        for (ActivProblem p : shapes) {
          p.direction = d;
          out.push_back(p);
        }
      }
    }
  }
  return out;
}

TEST(ActivConformance, EveryCpuSolverMatchesTheReference) {
  const auto solvers = cpu_solvers();
  int checked = 0;
  for (const ActivProblem& p : conformance_problems()) {
    for (const ActivSolver* s : solvers) {
      if (s->is_reference()) continue;
      ASSERT_TRUE(s->check(p, cpu())) << s->name() << " " << p.key();
      const OpVerification v = check_against_reference(cpu(), ProblemRef::of(p), *s);
      EXPECT_TRUE(v.passed) << s->name() << " " << p.key() << ": " << v.summary;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 11 * 3 * 6 * 2);
}

// The AVX2 loops, which an AVX-512 machine does not take unless capped.
TEST(ActivConformance, Avx2LoopsMatchTheReference) {
  const IsaCap cap(backends::cpu::CpuIsa::avx2);
  const auto solvers = cpu_solvers();
  for (const ActivProblem& p : conformance_problems()) {
    for (const ActivSolver* s : solvers) {
      if (s->is_reference()) continue;
      const OpVerification v = check_against_reference(cpu(), ProblemRef::of(p), *s);
      EXPECT_TRUE(v.passed) << s->name() << " " << p.key() << ": " << v.summary;
    }
  }
}

// The baseline loops (no AVX2, no F16C), which the AVX2 machines that run the tests never take.
TEST(ActivConformance, BaselineLoopsMatchTheReference) {
  const IsaCap cap(backends::cpu::CpuIsa::scalar);
  const auto solvers = cpu_solvers();
  int checked = 0;
  for (const ActivProblem& p : conformance_problems()) {
    if (p.elements() > 10000) continue;
    for (const ActivSolver* s : solvers) {
      if (s->is_reference()) continue;
      const OpVerification v = check_against_reference(cpu(), ProblemRef::of(p), *s);
      EXPECT_TRUE(v.passed) << s->name() << " " << p.key() << ": " << v.summary;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 11 * 3 * 5 * 2);
}

// y may be x and dx may be dy: the result is the out-of-place one, bit for bit.
TEST(ActivInPlace, SameResultAsOutOfPlace) {
  for (const ActivSolver* s : cpu_solvers()) {
    for (Activation a : all_activations()) {
      for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
        SCOPED_TRACE(std::string(s->name()) + " " + to_string(a) + " " + galley::to_string(dt));
        ActivProblem p = ActivProblem::contiguous(a, dt, {70001});
        const std::size_t bytes = static_cast<std::size_t>(p.elements()) * size_of(dt);
        const auto x = random_tensor(dt, p.elements(), 11);
        const auto dy = random_tensor(dt, p.elements(), 12);
        runtime::Stream stream(cpu());
        // Forward.
        std::vector<std::byte> y(bytes), inplace = x;
        s->run(stream, p, ActivArgs{x.data(), y.data()});
        s->run(stream, p, ActivArgs{inplace.data(), inplace.data()});
        stream.synchronize();
        EXPECT_EQ(std::memcmp(y.data(), inplace.data(), bytes), 0) << "forward";
        // Backward, dx written over dy.
        p.direction = ActivDirection::backward;
        std::vector<std::byte> dx(bytes), dx_inplace = dy;
        ActivArgs out{x.data(), y.data(), dy.data(), dx.data()};
        ActivArgs in{x.data(), y.data(), dx_inplace.data(), dx_inplace.data()};
        s->run(stream, p, out);
        s->run(stream, p, in);
        stream.synchronize();
        EXPECT_EQ(std::memcmp(dx.data(), dx_inplace.data(), bytes), 0) << "backward";
      }
    }
  }
}

TEST(ActivEntryPoints, RunInPlaceAndNameTheBadTensor) {
  runtime::Stream stream(cpu());
  const ActivProblem p = ActivProblem::packed(Activation::relu, DType::f32, Layout::nchw, 1, 3, 5, 7);
  std::vector<float> host(105);
  for (std::size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(i) - 50.f;
  Tensor x = Tensor::empty(stream, p.desc());
  x.copy_from_host(stream, host.data(), host.size() * sizeof(float));
  const ActivSolver& ran = activation_forward(stream, p, x, x);
  EXPECT_FALSE(ran.is_reference());
  const auto y = x.to_host<float>(stream);
  for (std::size_t i = 0; i < host.size(); ++i) EXPECT_EQ(y[i], std::max(host[i], 0.f));

  // relu's backward reads y; dx over dy.
  Tensor dy = Tensor::empty(stream, p.desc());
  std::vector<float> ones(105, 1.f);
  dy.copy_from_host(stream, ones.data(), ones.size() * sizeof(float));
  activation_backward(stream, p, dy, x, dy);
  const auto dx = dy.to_host<float>(stream);
  for (std::size_t i = 0; i < host.size(); ++i) EXPECT_EQ(dx[i], host[i] > 0 ? 1.f : 0.f) << i;

  Tensor wrong = Tensor::empty(stream, TensorDesc::packed(DType::f32, Layout::nchw, 1, 3, 5, 6));
  expect_error([&] { activation_forward(stream, p, x, wrong); },
               {"activation_forward", "y (output)", "f32[1,3,5,6]"});
  Tensor half = Tensor::empty(stream, TensorDesc::packed(DType::f16, Layout::nchw, 1, 3, 5, 7));
  expect_error([&] { activation_backward(stream, p, dy, half, dy); }, {"y (forward output)", "f16"});
  ActivProblem silu = p;
  silu.activation = Activation::silu;
  expect_error([&] { activation_backward(stream, silu, half, x, dy); }, {"dy (output gradient)"});
  Tensor empty;
  expect_error([&] { activation_forward(stream, p, empty, x); }, {"x (input)", "missing"});
  ActivProblem back = p;
  back.direction = ActivDirection::backward;
  expect_error([&] { activation_forward(stream, back, x, x); }, {"direction is backward"});
  // A solver that refuses the device.
  const ActivSolver* ref = find_solver_for<ActivProblem>("cpu", kRefActivName);
  ASSERT_NE(ref, nullptr);
  EXPECT_EQ(&activation_forward(stream, p, x, x, ref), ref);
}

}  // namespace
}  // namespace galley::dnn
