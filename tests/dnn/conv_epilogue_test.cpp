// Fused convolution epilogues, y = act(conv(x, w) + bias[k] + residual): the key and its round
// trip (a plain problem's key unchanged), validation naming the field, the tensors and bytes, the
// reference against a hand computation, the central refusal (every registered conv solver either
// refuses a fused problem or matches the reference on it), every cpu solver that takes an epilogue
// against the reference over odd shapes, dtypes, layouts and activation classes, and the Tensor
// entry point's checks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "dnn/op_verify.hpp"
#include "dnn/ref_conv_direct.hpp"
#include "dnn/tensor_data.hpp"
#include "galley/core/error.hpp"
#include "galley/dnn/convolution.hpp"
#include "galley/runtime/device.hpp"
#include "galley/tensor.hpp"

namespace galley::dnn {
namespace {

const runtime::Device& cpu() {
  static const runtime::Device d = runtime::device("cpu");
  return d;
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

ConvProblem base() {
  return ConvProblem{.n = 2, .c = 8, .h = 9, .w = 7, .k = 5, .y = 3, .x = 3, .pad_h = 1, .pad_w = 1};
}

ConvProblem fused(ConvProblem p, ConvEpilogue e) {
  p.epilogue = e;
  return p;
}

TEST(ConvEpilogue, PlainKeyIsUnchanged) {
  const ConvProblem p = base();
  EXPECT_EQ(p.key(), "conv-F-f32-nchw-n2-c8-h9-w7-k5-y3-x3-p1-q1-u1-v1-l1-j1-g1");
  EXPECT_TRUE(p.fused_parts().empty());
  EXPECT_EQ(p.tensors().size(), 3u);
}

TEST(ConvEpilogue, KeyRoundTripsExactly) {
  const std::string plain = base().key();
  const struct {
    ConvEpilogue e;
    std::string suffix;
  } cases[] = {
      {{.bias = true}, "-bias"},
      {{.residual = true}, "-res"},
      {ConvEpilogue::with(Activation::relu), "-relu-a0-b0"},
      {ConvEpilogue::with(Activation::relu, true, true), "-bias-res-relu-a0-b0"},
      {ConvEpilogue::with(Activation::leaky_relu, true), "-bias-leaky_relu-a0.01-b0"},
      {ConvEpilogue{.bias = true, .activation = Activation::clip, .alpha = -1, .beta = 1},
       "-bias-clip-am1-b1"},
      {ConvEpilogue::with(Activation::clip, false, true), "-res-clip-a0-b6"},
      {ConvEpilogue{.activation = Activation::elu, .alpha = 0.1 + 0.2}, "-elu-a0.30000000000000004-b0"},
      {ConvEpilogue::with(Activation::gelu_tanh, true), "-bias-gelu_tanh-a0-b0"},
      {ConvEpilogue::with(Activation::hardsigmoid), "-hardsigmoid-a0-b0"},
  };
  std::set<std::size_t> hashes{base().hash()};
  for (const auto& c : cases) {
    for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
      ConvProblem p = fused(base(), c.e);
      p.dtype = dt;
      p.layout = Layout::nhwc;
      const std::string key = p.key();
      ASSERT_EQ(key.substr(key.size() - c.suffix.size()), c.suffix) << key;
      const ConvProblem back = ConvProblem::parse_key(key);
      EXPECT_EQ(back, p) << key;
      EXPECT_EQ(back.key(), key);
      EXPECT_EQ(back.hash(), p.hash());
      EXPECT_FALSE(p == p.plain());
      EXPECT_EQ(p.plain().key(), key.substr(0, key.size() - c.suffix.size()));
    }
    hashes.insert(fused(base(), c.e).hash());
  }
  EXPECT_EQ(hashes.size(), std::size(cases) + 1) << "the epilogue must change the hash";
}

TEST(ConvEpilogue, MalformedKeysAreRefused) {
  const std::string plain = base().key();
  const auto bad_key = [&](const std::string& suffix, std::string_view fragment) {
    expect_error([&] { (void)ConvProblem::parse_key(plain + suffix); }, {fragment});
  };
  bad_key("-res-bias", "epilogue part");  // fixed order: bias before res
  bad_key("-bias-bias", "epilogue part");
  bad_key("-relu", "exactly 'a<number>' and 'b<number>'");
  bad_key("-relu-a0-b0-x", "exactly");
  bad_key("-swish-a0-b0", "swish");
  bad_key("-leaky_relu-a-0.1-b0", "exactly");      // '-' splits the key; minus is 'm'
  bad_key("-leaky_relu-a0.10-b0", "'a<number>'");  // not the shortest spelling
  bad_key("-relu-a1-b0", "alpha = 1 means nothing for relu");
  bad_key("-clip-a2-b1", "exceeds its upper bound");
  bad_key("-elu-anan-b0", "must be finite");
  // A backward direction cannot carry an epilogue, whatever the key says.
  std::string back = plain + "-bias";
  back[5] = 'B';
  expect_error([&] { (void)ConvProblem::parse_key(back); }, {"epilogue", "backward_data"});
}

TEST(ConvEpilogue, ValidationNamesTheField) {
  ConvProblem p = fused(base(), {.bias = true});
  p.direction = ConvDirection::backward_weights;
  expect_error([&] { p.validate(); }, {"fused epilogue (bias)", "forward", "backward_weights"});
  expect_error([&] { fused(base(), {.activation = Activation::sigmoid, .beta = 2}).validate(); },
               {"epilogue beta = 2", "sigmoid"});
  expect_error([&] { fused(base(), {.bias = true, .alpha = 1}).validate(); },
               {"epilogue alpha = 1", "without an activation"});
  expect_error([&] { fused(base(), {.activation = Activation::leaky_relu, .alpha = INFINITY}).validate(); },
               {"alpha of leaky_relu", "finite"});
  expect_error([&] { fused(base(), {.activation = static_cast<Activation>(200)}).validate(); },
               {"epilogue activation 200"});
}

TEST(ConvEpilogue, TensorsBytesAndCommand) {
  ConvProblem p = fused(base(), ConvEpilogue::with(Activation::leaky_relu, true, true));
  p.dtype = DType::f16;
  p.layout = Layout::nhwc;
  const auto t = p.tensors();
  ASSERT_EQ(t.size(), 5u);
  EXPECT_EQ(t[2].id, ArgId::bias);
  EXPECT_EQ(t[2].desc, TensorDesc::contiguous(DType::f16, {5}));
  EXPECT_FALSE(t[2].output);
  EXPECT_EQ(t[3].id, ArgId::src1);
  EXPECT_EQ(t[3].desc, p.y_desc());
  EXPECT_FALSE(t[3].output);
  EXPECT_EQ(t[4].id, ArgId::dst);
  const double y = static_cast<double>(p.y_desc().bytes());
  EXPECT_DOUBLE_EQ(p.min_bytes(), p.plain().min_bytes() + y + 5 * 2);
  EXPECT_DOUBLE_EQ(p.flops(), p.plain().flops());
  const std::string cmd = p.bench_command(cpu(), "cpu.conv.unfused");
  EXPECT_NE(cmd.find(" --bias --residual --activ leaky_relu --alpha 0.01 --beta 0 --solver cpu.conv.unfused"),
            std::string::npos)
      << cmd;
  EXPECT_EQ(base().bench_command(cpu()).find("--bias"), std::string::npos);
  EXPECT_EQ(p.fused_parts(), "fused epilogue bias + residual + leaky_relu(alpha 0.01)");
}

// 1x1 convolution of one image with two pixels: every value by hand.
TEST(ConvEpilogue, ReferenceMatchesAHandComputation) {
  const ConvProblem plain{.n = 1, .c = 1, .h = 1, .w = 2, .k = 2, .y = 1, .x = 1};
  const float x[2] = {1, -2}, w[2] = {2, 3}, bias[2] = {0.5f, -1}, res[4] = {1, 1, 1, 1};
  // conv: k0 = {2, -4}, k1 = {3, -6}; + bias + residual: k0 = {3.5, -2.5}, k1 = {3, -6}.
  const struct {
    ConvEpilogue e;
    float want[4];
  } cases[] = {
      {{.bias = true}, {2.5f, -3.5f, 2, -7}},
      {{.residual = true}, {3, -3, 4, -5}},
      {ConvEpilogue::with(Activation::relu, true, true), {3.5f, 0, 3, 0}},
      {ConvEpilogue{.bias = true, .residual = true, .activation = Activation::leaky_relu, .alpha = 0.1},
       {3.5f, -0.25f, 3, -0.6f}},
      {ConvEpilogue{.bias = true, .residual = true, .activation = Activation::clip, .alpha = -3, .beta = 3},
       {3, -2.5f, 3, -3}},
      {ConvEpilogue::with(Activation::sigmoid),
       {static_cast<float>(1 / (1 + std::exp(-2.0))), static_cast<float>(1 / (1 + std::exp(4.0))),
        static_cast<float>(1 / (1 + std::exp(-3.0))), static_cast<float>(1 / (1 + std::exp(6.0)))}},
  };
  for (const auto& c : cases) {
    const ConvProblem p = fused(plain, c.e);
    float y[4] = {};
    reference_conv_forward(p, x, w, y, c.e.bias ? bias : nullptr, c.e.residual ? res : nullptr);
    for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(y[i], c.want[i]) << p.key() << " element " << i;
  }
  float y[4];
  EXPECT_THROW(reference_conv_forward(fused(plain, {.bias = true}), x, w, y), Error);
}

// A solver written before epilogues existed: it must be refused by check_any, never asked.
class PlainOnly final : public ConvSolver {
 public:
  std::string_view name() const override { return "test.conv.plain_only"; }
  Applicability check(const ConvProblem&, const runtime::Device&) const override {
    return Applicability::yes();
  }
  void run(runtime::Stream&, const ConvProblem&, const ConvArgs&) const override { FAIL() << "must not run"; }
};

TEST(ConvEpilogue, SolversWithoutEpilogueSupportRefuseItCentrally) {
  const PlainOnly s;
  EXPECT_TRUE(s.check_any(ProblemRef::of(base()), cpu()));
  const Applicability a =
      s.check_any(ProblemRef::of(fused(base(), ConvEpilogue::with(Activation::relu, true))), cpu());
  EXPECT_FALSE(a);
  EXPECT_EQ(a.reason, "does not implement the fused epilogue bias + relu");
}

// Problems over odd shapes, each dtype and layout, rotating through the activation classes
// (none, kink, parameterised kink, clamp, smooth) and the parts.
std::vector<ConvProblem> odd_problems() {
  const ConvProblem shapes[] = {
      {.n = 1, .c = 3, .h = 31, .w = 29, .k = 17, .y = 3, .x = 3, .pad_h = 1, .pad_w = 1},  // 3x3 stride 1
      {.n = 2, .c = 17, .h = 9, .w = 11, .k = 3, .y = 1, .x = 1},                           // 1x1
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
       .groups = 17},                                                           // depthwise
      {.n = 1, .c = 6, .h = 13, .w = 10, .k = 9, .y = 3, .x = 3, .groups = 3},  // grouped
      {.n = 1,
       .c = 5,
       .h = 12,
       .w = 11,
       .k = 7,
       .y = 5,
       .x = 3,
       .pad_h = 2,
       .pad_w = 1,
       .stride_h = 2,
       .dilation_w = 2},  // direct
      {.n = 2,
       .c = 16,
       .h = 14,
       .w = 14,
       .k = 24,
       .y = 3,
       .x = 3,
       .pad_h = 1,
       .pad_w = 1},  // winograd-shaped, the epilogue per run of tiles across images
      {.n = 2,
       .c = 5,
       .h = 12,
       .w = 11,
       .k = 9,
       .y = 3,
       .x = 3,
       .pad_h = 2,
       .pad_w = 2,
       .dilation_h = 2,
       .dilation_w = 2},  // dilated 3x3 stride 1: winograd's phases, the epilogue after it
  };
  const ConvEpilogue epilogues[] = {
      ConvEpilogue::with(Activation::relu, true, false),
      {.bias = true, .residual = true},
      ConvEpilogue::with(Activation::leaky_relu, true, true),
      ConvEpilogue{.residual = true, .activation = Activation::clip, .alpha = -0.5, .beta = 0.75},
      ConvEpilogue::with(Activation::gelu_erf, true, false),
      ConvEpilogue::with(Activation::hardswish, false, true),
      ConvEpilogue::with(Activation::elu, true, true),
      ConvEpilogue::with(Activation::sigmoid),
  };
  std::vector<ConvProblem> out;
  std::size_t i = 0;
  for (const ConvProblem& shape : shapes) {
    for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
      for (Layout l : {Layout::nchw, Layout::nhwc}) {
        ConvProblem p = fused(shape, epilogues[i++ % std::size(epilogues)]);
        p.dtype = dt;
        p.layout = l;
        out.push_back(p);
      }
    }
  }
  return out;
}

// Every registered conv solver of the cpu list: it refuses the fused problem or it matches the
// reference on it. The unfused sequence takes every one.
TEST(ConvEpilogue, EveryCpuSolverRefusesOrMatchesTheReference) {
  std::set<std::string> ran;
  for (const ConvProblem& p : odd_problems()) {
    bool unfused = false;
    for (const ConvSolver* s : conv_solvers("cpu")) {
      if (s->is_reference()) continue;
      const Applicability a = s->check_any(ProblemRef::of(p), cpu());
      if (!a) {
        EXPECT_FALSE(a.reason.empty());
        continue;
      }
      const OpVerification v = check_against_reference(cpu(), ProblemRef::of(p), *s);
      EXPECT_TRUE(v.passed) << s->name() << " " << p.key() << ": " << v.summary;
      ran.insert(std::string(s->name()));
      unfused = unfused || s->name() == "cpu.conv.unfused";
    }
    EXPECT_TRUE(unfused) << p.key();
  }
  // The fused cpu solvers each took some of the problems; the backward ones none.
  for (const char* name : {"cpu.conv.unfused", "cpu.conv.gemm_1x1", "cpu.conv.depthwise",
                           "cpu.conv.winograd_f4x3", "cpu.conv.im2col_gemm", "cpu.conv.direct"}) {
    EXPECT_TRUE(ran.count(name)) << name << " never ran a fused problem";
  }
  for (const std::string& name : ran) EXPECT_EQ(name.find("bwd"), std::string::npos) << name;
}

// NHWC with more channels than one epilogue run holds (runs are whole pixels), and a residual in
// each low-precision type, through every fused cpu solver; in NCHW, 1x1's batched small-plane path.
TEST(ConvEpilogue, WideChannelsAndSmallPlanes) {
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    for (Layout l : {Layout::nhwc, Layout::nchw}) {
      const ConvProblem p = fused(
          ConvProblem{.n = 2, .c = 4, .h = 5, .w = 3, .k = 600, .y = 1, .x = 1, .dtype = dt, .layout = l},
          ConvEpilogue::with(Activation::silu, true, true));
      int checked = 0;
      for (const ConvSolver* s : conv_solvers("cpu")) {
        if (s->is_reference() || !s->check_any(ProblemRef::of(p), cpu())) continue;
        const OpVerification v = check_against_reference(cpu(), ProblemRef::of(p), *s);
        EXPECT_TRUE(v.passed) << s->name() << " " << p.key() << ": " << v.summary;
        ++checked;
      }
      EXPECT_GE(checked, 3) << p.key();
    }
  }
}

// The unfused sequence's configs are the plain solvers; each gives the same answer.
TEST(ConvEpilogue, UnfusedRunsThroughEveryPlainSolver) {
  const ConvSolver* unfused = find_conv_solver("cpu", "cpu.conv.unfused");
  ASSERT_NE(unfused, nullptr);
  const ConvProblem p =
      fused(ConvProblem{.n = 1, .c = 16, .h = 10, .w = 9, .k = 8, .y = 3, .x = 3, .pad_h = 1, .pad_w = 1},
            ConvEpilogue::with(Activation::relu, true, true));
  const auto configs = unfused->configs_any(ProblemRef::of(p), cpu());
  ASSERT_GE(configs.size(), 2u);
  EXPECT_FALSE(unfused->check_any(ProblemRef::of(p.plain()), cpu()));
  runtime::Stream stream(cpu());
  OpTensors t = make_op_tensors(stream, ProblemRef::of(p), 7);
  const auto want = reference_op_outputs(ProblemRef::of(p), 7);
  for (const std::string& c : configs) {
    const auto handle = unfused->parse_config_any(ProblemRef::of(p), cpu(), c);
    ASSERT_TRUE(handle.has_value()) << c;
    const OpVerification v =
        verify_op(stream, ProblemRef::of(p), Choice{unfused, *handle}, t, want, p.tolerance());
    EXPECT_TRUE(v.passed) << c << ": " << v.summary;
  }
  EXPECT_FALSE(unfused->parse_config_any(ProblemRef::of(p), cpu(), "cpu.conv.no_such").has_value());
}

TEST(ConvEpilogue, TensorEntryPointChecksEveryTensor) {
  runtime::Stream stream(cpu());
  const ConvProblem p =
      fused(ConvProblem{.n = 1, .c = 3, .h = 11, .w = 13, .k = 17, .y = 3, .x = 3, .pad_h = 1, .pad_w = 1},
            ConvEpilogue::with(Activation::leaky_relu, true, true));
  const auto hx = random_tensor(p.dtype, p.x_desc().elements(), 1);
  const auto hw = random_tensor(p.dtype, p.w_desc().elements(), 2);
  const auto hb = random_tensor(p.dtype, p.k, 3);
  const auto hr = random_tensor(p.dtype, p.y_desc().elements(), 4);
  Tensor x = Tensor::empty(stream, p.x_desc()), w = Tensor::empty(stream, p.w_desc());
  Tensor b = Tensor::empty(stream, TensorDesc::contiguous(p.dtype, {p.k}));
  Tensor r = Tensor::empty(stream, p.y_desc()), y = Tensor::empty(stream, p.y_desc());
  x.copy_from_host(stream, hx.data(), hx.size());
  w.copy_from_host(stream, hw.data(), hw.size());
  b.copy_from_host(stream, hb.data(), hb.size());
  r.copy_from_host(stream, hr.data(), hr.size());

  CallReport report;
  convolution_forward(stream, p, x, w, &b, &r, y, nullptr, &report);
  EXPECT_FALSE(report.solver.empty());
  std::vector<std::byte> want(p.y_desc().bytes());
  reference_conv_forward(p, hx.data(), hw.data(), want.data(), hb.data(), hr.data());
  const std::vector<float> got = y.to_host<float>(stream);
  const Comparison c =
      compare_outputs(p.dtype, got.data(), want.data(), p.y_desc().elements(), p.tolerance());
  EXPECT_TRUE(c.passed) << report.solver << ": " << c.summary;

  Tensor b_wrong = Tensor::empty(stream, TensorDesc::contiguous(p.dtype, {p.k + 1}));
  expect_error([&] { convolution_forward(stream, p, x, w, &b_wrong, &r, y); }, {"bias", "[18]"});
  Tensor r_wrong = Tensor::empty(stream, p.x_desc());
  expect_error([&] { convolution_forward(stream, p, x, w, &b, &r_wrong, y); }, {"residual"});
  expect_error([&] { convolution_forward(stream, p, x, w, nullptr, &r, y); }, {"bias is missing"});
  expect_error([&] { convolution_forward(stream, p, x, w, &b, nullptr, y); }, {"residual is missing"});
  expect_error([&] { convolution_forward(stream, p, x, w, &b, &y, y); }, {"residual overlaps y"});
  expect_error([&] { convolution_forward(stream, p.plain(), x, w, &b, nullptr, y); }, {"adds no bias"});
  expect_error([&] { convolution_forward(stream, p.plain(), x, w, nullptr, &r, y); }, {"adds no residual"});
  // The plain entry point cannot run a fused problem: the bias has no tensor there.
  expect_error([&] { convolution_forward(stream, p, x, w, y); }, {"bias", "missing"});
  // Nor can a backward one.
  expect_error([&] { convolution_backward_data(stream, p, y, w, x); }, {"epilogue", "backward_data"});
}

}  // namespace
}  // namespace galley::dnn
