// The public entry point dnn::convolution_forward: solver choice, argument errors, workspace,
// GALLEY_LOG_CMD.
#include "core/config.hpp"
#include "galley/dnn/convolution.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "conv_grid.hpp"
#include "dnn/ref_conv_direct.hpp"
#include "dnn/tensor_data.hpp"
#include "galley/core/error.hpp"

namespace galley::dnn {
namespace {

// Needs workspace and checks it got it, then computes with the reference: correct, so the
// conformance harness may run it too if it shares a process with this test.
class WorkspaceProbe final : public ConvSolver {
 public:
  static constexpr std::size_t kBytes = 4096 + 3;
  std::string_view name() const override { return "test.conv.workspace_probe"; }
  Applicability check(const ConvProblem& p, const runtime::Device& d) const override {
    if (!d.is_cpu()) return Applicability::no("cpu only");
    if (p.direction != ConvDirection::forward) return Applicability::no("forward only");
    return Applicability::yes();
  }
  std::size_t workspace_bytes(const ConvProblem&, const runtime::Device&) const override { return kBytes; }
  void run(runtime::Stream& stream, const ConvProblem& p, const ConvArgs& a) const override {
    if (a.workspace == nullptr || a.workspace_bytes != kBytes) {
      throw Error(Status::internal, "workspace_probe: got " + std::to_string(a.workspace_bytes) + " bytes");
    }
    stream.host_task([p, a] {
      std::memset(a.workspace, 0x11, a.workspace_bytes);  // it must be writable, all of it
      reference_conv_forward(p, a.x, a.w, a.y);
    });
  }
};

const ConvSolver& probe() {
  static const ConvSolver* solver = [] {
    std::vector<std::unique_ptr<SolverBase>> list;
    list.push_back(std::make_unique<WorkspaceProbe>());
    register_solvers("cpu", OpKind::conv, std::move(list));
    return find_conv_solver("cpu", "test.conv.workspace_probe");
  }();
  return *solver;
}

struct Data {
  ConvProblem p;
  std::vector<std::byte> x, w, y, want;
  explicit Data(ConvProblem problem) : p(problem) {
    x = random_tensor(p.dtype, p.x_desc().elements(), 11);
    w = random_tensor(p.dtype, p.w_desc().elements(), 12);
    y.assign(p.y_desc().bytes(), std::byte{0xff});
    want.resize(p.y_desc().bytes());
    reference_conv_forward(p, x.data(), w.data(), want.data());
  }
};

template <typename Fn>
void expect_error(Status status, Fn&& fn, std::initializer_list<std::string_view> fragments) {
  try {
    fn();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), status) << e.what();
    for (auto f : fragments) EXPECT_NE(std::string(e.what()).find(f), std::string::npos) << e.what();
  }
}

TEST(ConvolutionForward, PicksTheFirstApplicableSolver) {
  runtime::Stream stream(runtime::device("cpu"));
  Data d(test::geometry(2, 17, 15, 13, 23, 3, 3, 1, 1, 1, 1, 1, 1, 1));
  const ConvSolver& used = convolution_forward(stream, d.p, d.x.data(), d.w.data(), d.y.data());
  stream.synchronize();
  // The tuner chooses by measurement (list order only with GALLEY_FIND_MODE=off): any applicable solver.
  EXPECT_TRUE(used.check(d.p, stream.device()));
  EXPECT_FALSE(used.is_reference()) << "a cpu solver other than the reference should accept a plain 3x3";
  const Comparison c = compare_outputs(d.p.dtype, d.y.data(), d.want.data(), d.p.y_desc().elements(), 1e-5);
  EXPECT_TRUE(c.passed) << used.name() << ": " << c.summary;
}

TEST(ConvolutionForward, RunsANamedSolverWithItsWorkspace) {
  runtime::Stream stream(runtime::device("cpu"));
  for (DType dt : {DType::f32, DType::bf16}) {
    ConvProblem p = test::geometry(1, 3, 9, 7, 4, 3, 3, 0, 1, 2, 1, 1, 1, 1);
    p.dtype = dt;
    p.layout = Layout::nhwc;
    Data d(p);
    const ConvSolver& used = convolution_forward(stream, d.p, d.p.x_desc(), d.x.data(), d.p.w_desc(),
                                                 d.w.data(), d.p.y_desc(), d.y.data(), &probe());
    stream.synchronize();
    EXPECT_EQ(&used, &probe());
    EXPECT_EQ(d.y, d.want);
  }
}

TEST(ConvolutionForward, BadArgumentsAreNamed) {
  runtime::Stream stream(runtime::device("cpu"));
  Data d(test::geometry(1, 4, 8, 8, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1));
  const ConvProblem& p = d.p;
  expect_error(Status::invalid_argument,
               [&] { convolution_forward(stream, p, nullptr, d.w.data(), d.y.data()); },
               {"x (input)", "null"});
  expect_error(Status::invalid_argument,
               [&] { convolution_forward(stream, p, d.x.data(), d.w.data(), nullptr); },
               {"y (output)", "null"});
  TensorDesc wrong_w = p.w_desc();
  wrong_w.dims[0] = 5;
  expect_error(Status::invalid_argument,
               [&] {
                 convolution_forward(stream, p, p.x_desc(), d.x.data(), wrong_w, d.w.data(), p.y_desc(),
                                     d.y.data());
               },
               {"w (weights)"});
  ConvProblem bwd = p;
  bwd.direction = ConvDirection::backward_data;
  expect_error(Status::invalid_argument,
               [&] { convolution_forward(stream, bwd, d.x.data(), d.w.data(), d.y.data()); },
               {"backward_data"});
  ConvProblem bad = p;
  bad.groups = 3;
  expect_error(Status::invalid_argument,
               [&] { convolution_forward(stream, bad, d.x.data(), d.w.data(), d.y.data()); }, {"divisible"});
}

TEST(ConvolutionForward, NamedSolverMustFit) {
  runtime::Stream stream(runtime::device("cpu"));
  Data d(test::geometry(1, 4, 8, 8, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1));
  // A solver of another backend is refused even though the pointers would work.
  class Elsewhere final : public ConvSolver {
   public:
    std::string_view name() const override { return "test.conv.elsewhere"; }
    Applicability check(const ConvProblem&, const runtime::Device&) const override {
      return Applicability::yes();
    }
    void run(runtime::Stream&, const ConvProblem&, const ConvArgs&) const override {}
  };
  static const ConvSolver* elsewhere = [] {
    std::vector<std::unique_ptr<SolverBase>> list;
    list.push_back(std::make_unique<Elsewhere>());
    register_solvers("test.elsewhere", OpKind::conv, std::move(list));
    return find_conv_solver("test.elsewhere", "test.conv.elsewhere");
  }();
  expect_error(Status::unsupported,
               [&] { convolution_forward(stream, d.p, d.x.data(), d.w.data(), d.y.data(), elsewhere); },
               {"test.conv.elsewhere", "backend 'cpu'"});
  // The reference refuses nothing forward on cpu; find a cpu solver that refuses this problem to
  // see its reason come through (1x1-only solvers refuse 3x3), if there is one.
  for (const ConvSolver* s : conv_solvers("cpu")) {
    const Applicability a = s->check(d.p, stream.device());
    if (a) continue;
    expect_error(Status::unsupported,
                 [&] { convolution_forward(stream, d.p, d.x.data(), d.w.data(), d.y.data(), s); },
                 {std::string_view(s->name()), std::string_view(a.reason)});
  }
}

TEST(ConvolutionForward, NoSolverListsEveryReason) {
  ConvProblem p = test::geometry(1, 4, 8, 8, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1);
  p.direction = ConvDirection::backward_weights;
  p.dtype = DType::i8;  // refused by the backward-weights solvers too
  expect_error(Status::unsupported, [&] { select_conv_solver(p, runtime::device("cpu")); },
               {"no conv solver on cpu", kRefConvDirectName, "forward only", "dtype i8"});
}

TEST(ConvolutionForward, LogCmdPrintsAReproducingLine) {
  runtime::Stream stream(runtime::device("cpu"));
  Data d(test::geometry(1, 4, 8, 8, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1));
  const ConvSolver* ref = find_conv_solver("cpu", kRefConvDirectName);
  ::setenv("GALLEY_LOG_CMD", "1", 1);
  galley::env::reload_for_testing();  // the configuration is read once per process
  ::testing::internal::CaptureStderr();
  convolution_forward(stream, d.p, d.x.data(), d.w.data(), d.y.data(), ref);
  stream.synchronize();
  const std::string err = ::testing::internal::GetCapturedStderr();
  ::unsetenv("GALLEY_LOG_CMD");
  galley::env::reload_for_testing();  // the configuration is read once per process
  EXPECT_NE(err.find("galley bench conv " + d.p.driver_flags() +
                     " -F 1 --dtype f32 --layout nchw --device cpu --solver ref.conv.direct\n"),
            std::string::npos)
      << err;
  ::testing::internal::CaptureStderr();
  convolution_forward(stream, d.p, d.x.data(), d.w.data(), d.y.data(), ref);
  stream.synchronize();
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
}

}  // namespace
}  // namespace galley::dnn
