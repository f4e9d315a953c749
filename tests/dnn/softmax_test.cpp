// Softmax and log-softmax: keys, validation, the reference against hand-computed values and (for
// backward) central finite differences in double, every cpu solver against the reference over
// every axis of both layouts and every dtype, large and infinite logits, and the entry points.
#include "galley/dnn/softmax.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "backends/cpu/conv_isa.hpp"
#include "dnn/cpu_isa_cap.hpp"
#include "dnn/op_verify.hpp"
#include "dnn/ref_softmax.hpp"
#include "galley/core/error.hpp"
#include "galley/runtime/device.hpp"

namespace galley::dnn {
namespace {

const runtime::Device& cpu() {
  static const runtime::Device d = runtime::device("cpu");
  return d;
}

SoftmaxProblem make(std::vector<std::int64_t> dims, int axis,
                    SoftmaxAlgorithm algo = SoftmaxAlgorithm::softmax, DType dtype = DType::f32,
                    Layout layout = Layout::nchw, bool backward = false) {
  SoftmaxProblem p;
  p.rank = static_cast<int>(dims.size());
  for (std::size_t i = 0; i < dims.size(); ++i) p.dims[i] = dims[i];
  p.axis = axis;
  p.algorithm = algo;
  p.dtype = dtype;
  p.layout = layout;
  p.backward = backward;
  return p;
}

void expect_error(const std::function<void()>& f, const std::vector<std::string>& words) {
  try {
    f();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    for (const auto& w : words)
      EXPECT_NE(std::string(e.what()).find(w), std::string::npos) << e.what() << " lacks " << w;
  }
}

std::vector<std::string> cpu_solvers() {
  std::vector<std::string> out;
  for (const SolverBase* s : solvers_of("cpu", OpKind::softmax)) {
    if (!s->is_reference()) out.emplace_back(s->name());
  }
  return out;
}

TEST(SoftmaxProblem, KeysRoundTrip) {
  const std::vector<SoftmaxProblem> problems = {
      make({2, 3, 4, 5}, 1),
      make({2, 3, 4, 5}, 3, SoftmaxAlgorithm::log_softmax, DType::f16, Layout::nhwc, true),
      make({1000}, 0, SoftmaxAlgorithm::softmax, DType::bf16),
      make({2, 3, 4, 5, 6, 7}, 5, SoftmaxAlgorithm::log_softmax),
      make({8, 1000}, 1),
  };
  for (const SoftmaxProblem& p : problems) {
    EXPECT_EQ(SoftmaxProblem::parse_key(p.key()), p) << p.key();
    EXPECT_EQ(parse_problem_key(p.key()).ref().key(), p.key());
    EXPECT_EQ(p.key().rfind("softmax-", 0), 0u);
  }
  EXPECT_EQ(problems[1].key(), "softmax-B-f16-nhwc-logsoftmax-a3-s2x3x4x5");
  // The repro line; tests/cli/softmax_reduce_cli_test.cpp runs it and finds this key.
  EXPECT_EQ(
      make({2, 3, 4, 5}, 2, SoftmaxAlgorithm::log_softmax, DType::bf16, Layout::nhwc, true)
          .bench_command(cpu()),
      "galley bench softmax --shape 2x3x4x5 --axis 2 --log -F 2 --dtype bf16 --layout nhwc --device cpu");
  EXPECT_NE(problems[0].hash(), problems[1].hash());
  for (const char* bad :
       {"softmax-F-f32-nchw-softmax-a1", "softmax-X-f32-nchw-softmax-a1-s2x3",
        "softmax-F-f32-nchw-softmax-a2-s2x3", "softmax-F-f32-nchw-softmax-a01-s2x3",
        "softmax-F-f32-nhwc-softmax-a1-s2x3", "softmax-F-f32-nchw-soft-a1-s2x3",
        "softmax-F-f32-nchw-softmax-a1-s2x0", "softmax-F-f32-nchw-softmax-a1-s1x1x1x1x1x1x1"}) {
    EXPECT_THROW(SoftmaxProblem::parse_key(bad), Error) << bad;
  }
}

TEST(SoftmaxProblem, ValidationNamesTheField) {
  expect_error([] { make({2, 3}, 2).validate(); }, {"axis 2", "out of range"});
  expect_error([] { make({2, 3}, -1).validate(); }, {"axis -1"});
  expect_error([] { make({2, 0, 3}, 0).validate(); }, {"dims[1]"});
  expect_error(
      [] {
        make({2, 3, 4}, 1, SoftmaxAlgorithm::softmax, DType::f32, Layout::nhwc).validate();
      },
      {"nhwc", "rank 3"});
  expect_error([] { make({2, 3}, 1, SoftmaxAlgorithm::softmax, DType::i32).validate(); }, {"dtype"});
  SoftmaxProblem p = make({2, 3}, 1);
  p.rank = 7;
  expect_error([&] { p.validate(); }, {"rank 7"});
  expect_error([] { SoftmaxProblem::over(TensorDesc::contiguous(DType::f32, {2, 3}), 2); }, {"axis 2"});
  EXPECT_EQ(SoftmaxProblem::over(TensorDesc::contiguous(DType::f32, {2, 3}), -1).axis, 1);
  EXPECT_EQ(SoftmaxProblem::over(TensorDesc::packed(DType::f32, Layout::nhwc, 2, 3, 4, 5), 1).layout,
            Layout::nhwc);
}

TEST(SoftmaxProblem, MemoryViewFollowsTheLayout) {
  const SoftmaxProblem nchw = make({2, 3, 4, 5}, 1);
  EXPECT_EQ(nchw.outer(), 2);
  EXPECT_EQ(nchw.inner(), 20);
  const SoftmaxProblem nhwc = make({2, 3, 4, 5}, 1, SoftmaxAlgorithm::softmax, DType::f32, Layout::nhwc);
  EXPECT_EQ(nhwc.outer(), 40);
  EXPECT_EQ(nhwc.inner(), 1);
  const SoftmaxProblem nhwc_h = make({2, 3, 4, 5}, 2, SoftmaxAlgorithm::softmax, DType::f32, Layout::nhwc);
  EXPECT_EQ(nhwc_h.outer(), 2);
  EXPECT_EQ(nhwc_h.inner(), 15);
  EXPECT_EQ(nchw.min_bytes(), 2.0 * 120 * 4);
  EXPECT_EQ(make({2, 3, 4, 5}, 1, SoftmaxAlgorithm::softmax, DType::f16, Layout::nchw, true).min_bytes(),
            3.0 * 120 * 2);
}

TEST(SoftmaxReference, HandComputed) {
  const SoftmaxProblem p = make({2, 3}, 1);
  const std::vector<float> x = {1, 2, 3, -1, -1, -1};
  std::vector<float> y(6);
  reference_softmax_forward(p, x.data(), y.data());
  const double s = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  EXPECT_NEAR(y[0], std::exp(1.0) / s, 1e-7);
  EXPECT_NEAR(y[2], std::exp(3.0) / s, 1e-7);
  EXPECT_NEAR(y[4], 1.0 / 3, 1e-7);
  SoftmaxProblem lp = p;
  lp.algorithm = SoftmaxAlgorithm::log_softmax;
  reference_softmax_forward(lp, x.data(), y.data());
  EXPECT_NEAR(y[1], 2.0 - std::log(s), 1e-6);
  EXPECT_NEAR(y[3], -std::log(3.0), 1e-6);
  // Axis 0 of the same data: pairs (1, -1), (2, -1), (3, -1).
  reference_softmax_forward(make({2, 3}, 0), x.data(), y.data());
  EXPECT_NEAR(y[0], std::exp(1.0) / (std::exp(1.0) + std::exp(-1.0)), 1e-7);
  EXPECT_NEAR(y[3] + y[0], 1.0, 1e-7);
}

// softmax / log-softmax along the axis of a [outer, len, inner] view, in double.
std::vector<double> softmax_double(const SoftmaxProblem& p, const std::vector<double>& x) {
  std::vector<double> y(x.size());
  const std::int64_t outer = p.outer(), len = p.axis_size(), inner = p.inner();
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t i = 0; i < inner; ++i) {
      double m = -INFINITY, s = 0;
      for (std::int64_t k = 0; k < len; ++k) m = std::max(m, x[(o * len + k) * inner + i]);
      for (std::int64_t k = 0; k < len; ++k) s += std::exp(x[(o * len + k) * inner + i] - m);
      for (std::int64_t k = 0; k < len; ++k) {
        const double v = x[(o * len + k) * inner + i] - m;
        y[(o * len + k) * inner + i] =
            p.algorithm == SoftmaxAlgorithm::log_softmax ? v - std::log(s) : std::exp(v) / s;
      }
    }
  return y;
}

TEST(SoftmaxReference, BackwardMatchesCentralDifferences) {
  for (const SoftmaxAlgorithm algo : {SoftmaxAlgorithm::softmax, SoftmaxAlgorithm::log_softmax}) {
    for (const auto& [dims, axis, layout] :
         std::vector<std::tuple<std::vector<std::int64_t>, int, Layout>>{{{2, 3, 2, 2}, 1, Layout::nchw},
                                                                         {{2, 3, 2, 2}, 1, Layout::nhwc},
                                                                         {{3, 5}, 1, Layout::nchw},
                                                                         {{4, 2, 3}, 0, Layout::nchw}}) {
      const SoftmaxProblem p = make(dims, axis, algo, DType::f32, layout);
      const std::int64_t n = p.elements();
      std::vector<double> x(static_cast<std::size_t>(n)), w(x.size());
      for (std::int64_t i = 0; i < n; ++i) {
        x[i] = std::sin(1.3 * i) * 2;
        w[i] = std::cos(0.7 * i);
      }
      // L = sum(w * y(x)); dL/dx by central differences, and by the reference from dy = w.
      const auto loss = [&](const std::vector<double>& at) {
        const auto y = softmax_double(p, at);
        double l = 0;
        for (std::int64_t i = 0; i < n; ++i) l += w[i] * y[i];
        return l;
      };
      std::vector<float> dyf(w.begin(), w.end()), yf(x.size()), dx(x.size());
      const auto y = softmax_double(p, x);
      for (std::int64_t i = 0; i < n; ++i) yf[i] = static_cast<float>(y[i]);
      SoftmaxProblem bp = p;
      bp.backward = true;
      reference_softmax_backward(bp, dyf.data(), yf.data(), dx.data());
      for (std::int64_t i = 0; i < n; ++i) {
        std::vector<double> a = x, b = x;
        a[i] += 1e-6;
        b[i] -= 1e-6;
        const double fd = (loss(a) - loss(b)) / 2e-6;
        EXPECT_NEAR(dx[i], fd, 1e-5) << p.key() << " element " << i;
      }
    }
  }
}

std::vector<SoftmaxProblem> conformance_problems() {
  std::vector<SoftmaxProblem> problems;
  for (const auto& dims :
       std::vector<std::vector<std::int64_t>>{{1, 17, 31, 29}, {2, 3, 5, 7}, {3, 23, 1, 1}}) {
    for (int axis = 0; axis < 4; ++axis)
      for (Layout layout : {Layout::nchw, Layout::nhwc})
        for (DType dtype : {DType::f32, DType::f16, DType::bf16})
          for (auto algo : {SoftmaxAlgorithm::softmax, SoftmaxAlgorithm::log_softmax})
            for (bool backward : {false, true})
              problems.push_back(make(dims, axis, algo, dtype, layout, backward));
  }
  for (const auto& [dims, axis] :
       std::vector<std::pair<std::vector<std::int64_t>, int>>{{{1}, 0},
                                                              {{1000}, 0},
                                                              {{7, 1001}, 1},
                                                              {{3, 2051}, 1},
                                                              {{5, 3, 7}, 1},
                                                              {{2, 3, 2, 3, 5}, 3},
                                                              {{2, 1, 3, 2, 2, 3}, 5},
                                                              {{2, 1, 3, 2, 2, 3}, 0},
                                                              {{4, 20000}, 1},
                                                              // rows held in registers: whole and
                                                              // partial last lane arrays, 16..256
                                                              {{3, 16}, 1},
                                                              {{5, 80}, 1},
                                                              {{4, 255}, 1},
                                                              {{3, 256}, 1},
                                                              {{2, 257}, 1}}) {
    for (DType dtype : {DType::f32, DType::bf16})
      for (auto algo : {SoftmaxAlgorithm::softmax, SoftmaxAlgorithm::log_softmax})
        for (bool backward : {false, true})
          problems.push_back(make(dims, axis, algo, dtype, Layout::nchw, backward));
  }
  return problems;
}

void expect_cpu_solvers_match_reference() {
  const auto names = cpu_solvers();
  ASSERT_EQ(names.size(), 2u);
  for (const SoftmaxProblem& p : conformance_problems()) {
    for (const auto& name : names) {
      const SolverBase* s = find_solver("cpu", OpKind::softmax, name);
      if (!s->check_any(ProblemRef::of(p), cpu())) continue;
      const OpVerification v = check_against_reference(cpu(), ProblemRef::of(p), *s);
      EXPECT_TRUE(v.passed) << name << " " << p.key() << ": " << v.summary;
    }
  }
}

TEST(SoftmaxSolvers, CpuMatchReferenceOnEveryAxisLayoutAndDtype) { expect_cpu_solvers_match_reference(); }

// The loops are built once per ISA level; a machine with AVX-512 takes the lower builds only when
// capped.
TEST(SoftmaxSolvers, EveryIsaBuildMatchesTheReference) {
  for (const auto cap : {backends::cpu::CpuIsa::avx2, backends::cpu::CpuIsa::scalar}) {
    const IsaCap capped(cap);
    SCOPED_TRACE(std::string(backends::cpu::to_string(cap)));
    expect_cpu_solvers_match_reference();
  }
}

// Runs `solver` (null: the tuner's pick) forward on host data through the Tensor entry point.
std::vector<float> forward_on_cpu(const SoftmaxProblem& p, std::vector<float> x, const SolverBase* solver) {
  runtime::Stream stream(cpu());
  std::vector<float> y(x.size(), -7.0f);
  const TensorDesc d = p.desc();
  const Tensor tx = Tensor::wrap(cpu(), d, x.data(), x.size() * 4);
  Tensor ty = Tensor::wrap(cpu(), d, y.data(), y.size() * 4);
  softmax_forward(stream, p, tx, ty, solver);
  stream.synchronize();
  return y;
}

TEST(SoftmaxSolvers, LargeLogitsStayFinite) {
  for (auto algo : {SoftmaxAlgorithm::softmax, SoftmaxAlgorithm::log_softmax}) {
    for (const auto& [dims, axis] :
         std::vector<std::pair<std::vector<std::int64_t>, int>>{{{3, 37}, 1}, {{3, 37}, 0}}) {
      const SoftmaxProblem p = make(dims, axis, algo);
      std::vector<float> x(static_cast<std::size_t>(p.elements()));
      for (std::size_t i = 0; i < x.size(); ++i)
        x[i] = 1e4f + static_cast<float>(i % 7) - (i % 2 ? 2e4f : 0.0f);
      std::vector<float> ref(x.size());
      reference_softmax_forward(p, x.data(), ref.data());
      for (const auto& name : cpu_solvers()) {
        const SolverBase* s = find_solver("cpu", OpKind::softmax, name);
        if (!s->check_any(ProblemRef::of(p), cpu())) continue;
        const auto y = forward_on_cpu(p, x, s);
        for (std::size_t i = 0; i < y.size(); ++i) {
          ASSERT_TRUE(std::isfinite(y[i])) << name << " " << p.key() << " element " << i;
          EXPECT_NEAR(y[i], ref[i], 1e-5 * std::max(1.0f, std::abs(ref[i])))
              << name << " " << p.key() << " element " << i;
        }
      }
    }
  }
}

TEST(SoftmaxSolvers, InfinitiesAsPyTorch) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // Rows: one -inf among finite values; all -inf; a +inf; a NaN.
  const std::vector<float> x = {-inf, 0, 1, -inf, -inf, -inf, inf, 0, 1, nan, 0, 1};
  for (auto algo : {SoftmaxAlgorithm::softmax, SoftmaxAlgorithm::log_softmax}) {
    const SoftmaxProblem p = make({4, 3}, 1, algo);
    const bool log = algo == SoftmaxAlgorithm::log_softmax;
    std::vector<float> ref(x.size());
    reference_softmax_forward(p, x.data(), ref.data());
    for (const auto& name : cpu_solvers()) {
      const auto y = forward_on_cpu(p, x, find_solver("cpu", OpKind::softmax, name));
      for (const auto& got : {ref, y}) {
        EXPECT_EQ(got[0], log ? -inf : 0.0f) << name;
        EXPECT_NEAR(got[2], log ? 1 - std::log(1 + std::exp(1.0)) : std::exp(1.0) / (1 + std::exp(1.0)), 1e-6)
            << name;
        for (int i = 3; i < 12; ++i)
          EXPECT_TRUE(std::isnan(got[i])) << name << " element " << i << " = " << got[i];
      }
    }
  }
}

// Rows longer than one vector, with the special value in the vector part or in the tail, which
// the cpu loops take through a padded lane array: the reference's result, NaN for NaN.
TEST(SoftmaxSolvers, InfinitiesInRowTailsAsPyTorch) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  constexpr int kRow = 37;
  std::vector<float> x;
  for (int r = 0; r < 8; ++r) {
    for (int i = 0; i < kRow; ++i) x.push_back(0.25f * static_cast<float>((i * 7 + r) % 11) - 1.0f);
  }
  x[0 * kRow + 35] = nan;
  x[1 * kRow + 3] = nan;
  x[2 * kRow + 36] = -inf;
  x[3 * kRow + 2] = -inf;
  for (int i = 0; i < kRow; ++i) x[4 * kRow + i] = -inf;
  x[5 * kRow + 34] = inf;
  x[6 * kRow + 1] = inf;
  for (auto algo : {SoftmaxAlgorithm::softmax, SoftmaxAlgorithm::log_softmax}) {
    const SoftmaxProblem p = make({8, kRow}, 1, algo);
    std::vector<float> ref(x.size());
    reference_softmax_forward(p, x.data(), ref.data());
    for (const auto& name : cpu_solvers()) {
      const auto y = forward_on_cpu(p, x, find_solver("cpu", OpKind::softmax, name));
      for (std::size_t i = 0; i < y.size(); ++i) {
        if (std::isnan(ref[i])) {
          EXPECT_TRUE(std::isnan(y[i])) << name << " " << p.key() << " element " << i << " = " << y[i];
        } else if (std::isinf(ref[i])) {
          EXPECT_EQ(y[i], ref[i]) << name << " " << p.key() << " element " << i;
        } else {
          EXPECT_NEAR(y[i], ref[i], 1e-5 * std::max(1.0f, std::abs(ref[i])))
              << name << " " << p.key() << " element " << i;
        }
      }
    }
  }
}

// Shapes aimed at the AVX-512 column blocks of cpu.softmax.strided: several blocks per row with a
// partial last one (NCHW over 80 channels of 17 x 19), one-vector blocks (300 channels), an axis
// too long to stage its exponentials beside the block (5000), short axes with 8-vector blocks, and
// an output of 16 MiB, which the blocks write around the caches.
TEST(SoftmaxSolvers, StridedColumnBlocksMatchTheReference) {
  const std::vector<std::pair<std::vector<std::int64_t>, int>> shapes = {
      {{2, 80, 17, 19}, 1}, {{1, 300, 5, 7}, 1},  {{2, 5000, 3}, 1},
      {{1, 3, 40, 40}, 1},  {{3, 17, 31, 29}, 1}, {{1, 64, 256, 256}, 1}};
  for (const auto& [dims, axis] : shapes) {
    for (auto algo : {SoftmaxAlgorithm::softmax, SoftmaxAlgorithm::log_softmax}) {
      for (bool backward : {false, true}) {
        const SoftmaxProblem p = make(dims, axis, algo, DType::f32, Layout::nchw, backward);
        for (const auto& name : cpu_solvers()) {
          const SolverBase* s = find_solver("cpu", OpKind::softmax, name);
          if (!s->check_any(ProblemRef::of(p), cpu())) continue;
          const OpVerification v = check_against_reference(cpu(), ProblemRef::of(p), *s);
          EXPECT_TRUE(v.passed) << name << " " << p.key() << ": " << v.summary;
        }
      }
    }
  }
}

// Special values in the columns of a strided softmax (the axis first, 300 columns after it), in
// whole blocks and in the partial last one: the reference's result, NaN for NaN.
TEST(SoftmaxSolvers, InfinitiesInStridedColumnsAsPyTorch) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  constexpr int kLen = 8, kColumns = 300;
  std::vector<float> x;
  for (int r = 0; r < kLen; ++r) {
    for (int c = 0; c < kColumns; ++c) x.push_back(0.25f * static_cast<float>((c * 7 + r) % 11) - 1.0f);
  }
  const auto at = [&](int row, int column) -> float& {
    return x[static_cast<std::size_t>(row * kColumns + column)];
  };
  for (int column : {5, 290}) at(2, column) = nan;
  for (int column : {6, 291}) at(0, column) = -inf;
  for (int column : {130, 295})
    for (int r = 0; r < kLen; ++r) at(r, column) = -inf;
  for (int column : {131, 292}) at(3, column) = inf;
  for (auto algo : {SoftmaxAlgorithm::softmax, SoftmaxAlgorithm::log_softmax}) {
    const SoftmaxProblem p = make({kLen, kColumns}, 0, algo);
    std::vector<float> ref(x.size());
    reference_softmax_forward(p, x.data(), ref.data());
    for (const auto& name : cpu_solvers()) {
      const SolverBase* s = find_solver("cpu", OpKind::softmax, name);
      if (!s->check_any(ProblemRef::of(p), cpu())) continue;
      const auto y = forward_on_cpu(p, x, s);
      for (std::size_t i = 0; i < y.size(); ++i) {
        if (std::isnan(ref[i])) {
          EXPECT_TRUE(std::isnan(y[i])) << name << " " << p.key() << " element " << i << " = " << y[i];
        } else if (std::isinf(ref[i])) {
          EXPECT_EQ(y[i], ref[i]) << name << " " << p.key() << " element " << i;
        } else {
          EXPECT_NEAR(y[i], ref[i], 1e-5 * std::max(1.0f, std::abs(ref[i])))
              << name << " " << p.key() << " element " << i;
        }
      }
    }
  }
}

TEST(SoftmaxEntryPoints, MismatchedTensorsAreNamed) {
  runtime::Stream stream(cpu());
  const SoftmaxProblem p = make({2, 3}, 1);
  std::vector<float> a(6), b(6), c(8);
  const Tensor src = Tensor::wrap(cpu(), p.desc(), a.data(), 24);
  Tensor dst = Tensor::wrap(cpu(), p.desc(), b.data(), 24);
  Tensor wrong = Tensor::wrap(cpu(), TensorDesc::contiguous(DType::f32, {2, 4}), c.data(), 32);
  expect_error([&] { softmax_forward(stream, p, src, wrong); }, {"dst"});
  expect_error([&] { softmax_backward(stream, p, src, wrong, dst); }, {"dst"});
  expect_error([&] { softmax_backward(stream, p, wrong, src, dst); }, {"diff_dst"});
  SoftmaxProblem bp = p;
  bp.backward = true;
  expect_error([&] { softmax_forward(stream, bp, src, dst); }, {"backward"});
  EXPECT_NO_THROW(softmax_backward(stream, p, src, src, dst));
  stream.synchronize();
}

}  // namespace
}  // namespace galley::dnn
