// Every GPU eltwise solver (gpu.eltwise.*, cuda.eltwise.cudnn) against the cpu reference: every
// broadcast pattern of rank 4, odd sizes, every dtype and layout, both directions; the broadcast
// kernel claims everything; the one-pass backward paths (column sums, paired gradients); in place;
// backward reductions are deterministic. Skips without a device.
#include "galley/dnn/eltwise.hpp"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "dnn/op_verify.hpp"
#include "dnn/tensor_data.hpp"
#include "galley/tensor.hpp"
#include "gpu_test_util.hpp"

namespace galley::dnn {
namespace {

using Shape = std::vector<std::int64_t>;
constexpr EltwiseOp kOps[] = {EltwiseOp::add, EltwiseOp::sub, EltwiseOp::mul, EltwiseOp::div};

EltwiseProblem problem(EltwiseOp op, Shape a, Shape b, DType dtype = DType::f32, Layout layout = Layout::nchw,
                       EltwiseDirection direction = EltwiseDirection::forward) {
  EltwiseProblem p;
  p.op = op;
  p.a = std::move(a);
  p.b = std::move(b);
  p.dtype = dtype;
  p.layout = layout;
  p.direction = direction;
  return p;
}

Shape pattern(const Shape& full, int mask) {
  Shape s = full;
  for (int i = 0; i < 4; ++i) {
    if (mask & (1 << i)) s[static_cast<std::size_t>(i)] = 1;
  }
  return s;
}

class EltwiseGpu : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string why;
    device_ = testing::first_device(GetParam(), why);
    if (!device_) GTEST_SKIP() << "no " << GetParam() << " device: " << why;
    solvers_ = solvers_of(GetParam(), OpKind::eltwise);
    ASSERT_FALSE(solvers_.empty()) << GetParam() << " has no eltwise solvers";
  }

  // Every solver that accepts `p` matches the reference; the broadcast kernel accepts everything.
  void expect_all_match(const EltwiseProblem& p) {
    for (const SolverBase* s : solvers_) {
      const Applicability a = s->check_any(ProblemRef::of(p), *device_);
      if (s->name() == "gpu.eltwise.broadcast") EXPECT_TRUE(a.ok) << p.key() << ": " << a.reason;
      if (!a) continue;
      const OpVerification v = check_against_reference(*device_, ProblemRef::of(p), *s);
      EXPECT_TRUE(v.passed) << s->name() << " " << p.key() << ": " << v.summary;
    }
  }

  std::optional<runtime::Device> device_;
  std::vector<const SolverBase*> solvers_;
};

TEST_P(EltwiseGpu, EveryBroadcastPatternOfRank4) {
  const Shape full{2, 3, 5, 7};
  for (int ma = 0; ma < 16; ++ma) {
    for (int mb = 0; mb < 16; ++mb) {
      for (EltwiseDirection d : {EltwiseDirection::forward, EltwiseDirection::backward}) {
        expect_all_match(
            problem(kOps[(ma + mb) % 4], pattern(full, ma), pattern(full, mb), DType::f32, Layout::nchw, d));
      }
    }
  }
}

TEST_P(EltwiseGpu, EveryOpDtypeAndLayoutOnOddShapes) {
  const Shape full{1, 17, 31, 29};
  for (EltwiseOp op : kOps) {
    for (DType dtype : {DType::f32, DType::f16, DType::bf16}) {
      for (Layout layout : {Layout::nchw, Layout::nhwc}) {
        for (int mb : {0, 1, 5, 13, 14, 15}) {
          for (EltwiseDirection d : {EltwiseDirection::forward, EltwiseDirection::backward}) {
            EltwiseProblem p = problem(op, full, pattern(full, mb), dtype, layout, d);
            p.beta = -0.75f;
            expect_all_match(p);
            std::swap(p.a, p.b);
            expect_all_match(p);
          }
        }
      }
    }
  }
}

// Sizes where the vector paths, the many-segment reductions and both reduction forms run.
TEST_P(EltwiseGpu, LargeShapesAndOtherRanks) {
  const std::vector<std::pair<Shape, Shape>> shapes = {{{8, 64, 56, 56}, {1, 64, 1, 1}},
                                                       {{8, 64, 56, 56}, {8, 64, 56, 56}},
                                                       {{8, 64, 56, 56}, {1}},
                                                       {{4000, 1000}, {1000}},
                                                       {{4000, 1000}, {4000, 1}},
                                                       {{1000003}, {1}},
                                                       {{2, 3, 1, 5, 1, 3}, {4, 1, 2, 1}},
                                                       {{1, 7, 1}, {9, 1, 11}}};
  for (EltwiseOp op : {EltwiseOp::add, EltwiseOp::mul, EltwiseOp::div}) {
    for (const auto& [a, b] : shapes) {
      for (DType dtype : {DType::f32, DType::f16}) {
        for (EltwiseDirection d : {EltwiseDirection::forward, EltwiseDirection::backward}) {
          expect_all_match(problem(op, a, b, dtype, Layout::nchw, d));
        }
      }
    }
  }
  for (EltwiseDirection d : {EltwiseDirection::forward, EltwiseDirection::backward}) {
    expect_all_match(problem(EltwiseOp::add, {8, 64, 56, 56}, {1, 64, 1, 1}, DType::bf16, Layout::nhwc, d));
  }
}

// The column sum (an input broadcast along every dim but channels-last C): channel counts of one,
// a few and more than 32 vectors (a partial column block), C not a multiple of a vector (the
// general reduction), batch 1 and odd spatial sizes, segments from one to many; either input
// broadcast, with the other's gradient written in the same pass. And equal shapes, whose two
// gradients come from one pass: sizes with a partial last tile and an element tail.
TEST_P(EltwiseGpu, ColumnSumsAndPairedGradients) {
  const std::vector<std::pair<Shape, Shape>> columns = {
      {{1, 8, 31, 29}, {1, 8, 1, 1}},     {{1, 24, 31, 29}, {1, 24, 1, 1}}, {{2, 520, 7, 9}, {1, 520, 1, 1}},
      {{4, 256, 28, 28}, {1, 256, 1, 1}}, {{3, 12, 5, 3}, {1, 12, 1, 1}},   {{2, 36, 1, 1}, {1, 36, 1, 1}},
      {{1, 40, 2, 2}, {1, 40, 1, 1}}};
  for (EltwiseOp op : kOps) {
    for (DType dtype : {DType::f32, DType::f16, DType::bf16}) {
      for (const auto& [a, b] : columns) {
        EltwiseProblem p = problem(op, a, b, dtype, Layout::nhwc, EltwiseDirection::backward);
        p.alpha = 1.25f;
        p.beta = -0.75f;
        expect_all_match(p);
        std::swap(p.a, p.b);
        expect_all_match(p);
      }
      for (const Shape& s : std::vector<Shape>{{1}, {13}, {3, 1000}, {2, 8 * 1024 * 5 + 8 * 77 + 3}}) {
        EltwiseProblem p = problem(op, s, s, dtype, Layout::nchw, EltwiseDirection::backward);
        p.alpha = 0.5f;
        expect_all_match(p);
        p.direction = EltwiseDirection::forward;
        expect_all_match(p);
      }
    }
  }
  // Rank 2, the bias along the inner dim, in the row-major layout.
  for (DType dtype : {DType::f32, DType::f16}) {
    expect_all_match(
        problem(EltwiseOp::mul, {3001, 64}, {64}, dtype, Layout::nchw, EltwiseDirection::backward));
  }
}

TEST_P(EltwiseGpu, InPlaceAndDeterministicBackward) {
  runtime::Stream stream(*device_);
  const EltwiseProblem p = problem(EltwiseOp::mul, {16, 64, 31, 29}, {1, 64, 1, 1}, DType::f16);
  const auto host_a = random_tensor(p.dtype, p.a_desc().elements(), 3);
  const auto host_b = random_tensor(p.dtype, p.b_desc().elements(), 4);
  Tensor a = Tensor::empty(stream, p.a_desc()), b = Tensor::empty(stream, p.b_desc());
  Tensor y = Tensor::empty(stream, p.dst_desc());
  a.copy_from_host(stream, host_a.data(), host_a.size());
  b.copy_from_host(stream, host_b.data(), host_b.size());
  for (const SolverBase* s : solvers_) {
    const auto* solver = static_cast<const EltwiseSolver*>(s);
    if (!s->check_any(ProblemRef::of(p), *device_)) continue;
    a.copy_from_host(stream, host_a.data(), host_a.size());
    eltwise_forward(stream, p, a, b, y, solver);
    eltwise_forward(stream, p, a, b, a, solver);
    EXPECT_EQ(a.to_host<std::uint16_t>(stream), y.to_host<std::uint16_t>(stream)) << s->name();
  }
  // dst over b, with equal shapes and an op that does not commute.
  const EltwiseProblem q = problem(EltwiseOp::sub, {4, 33, 17}, {4, 33, 17}, DType::f32);
  const auto host_qa = random_tensor(q.dtype, q.a_desc().elements(), 5);
  const auto host_qb = random_tensor(q.dtype, q.b_desc().elements(), 6);
  Tensor qa = Tensor::empty(stream, q.a_desc()), qb = Tensor::empty(stream, q.b_desc());
  Tensor qy = Tensor::empty(stream, q.dst_desc());
  qa.copy_from_host(stream, host_qa.data(), host_qa.size());
  for (const SolverBase* s : solvers_) {
    const auto* solver = static_cast<const EltwiseSolver*>(s);
    if (!s->check_any(ProblemRef::of(q), *device_)) continue;
    qb.copy_from_host(stream, host_qb.data(), host_qb.size());
    eltwise_forward(stream, q, qa, qb, qy, solver);
    eltwise_forward(stream, q, qa, qb, qb, solver);
    EXPECT_EQ(qb.to_host<float>(stream), qy.to_host<float>(stream)) << s->name() << " dst == b";
  }
  EltwiseProblem back = p;
  back.direction = EltwiseDirection::backward;
  for (const SolverBase* s : solvers_) {
    const auto* solver = static_cast<const EltwiseSolver*>(s);
    if (!s->check_any(ProblemRef::of(back), *device_)) continue;
    Tensor da = Tensor::empty(stream, p.a_desc()), db = Tensor::empty(stream, p.b_desc());
    a.copy_from_host(stream, host_a.data(), host_a.size());
    eltwise_backward(stream, back, y, a, b, da, db, solver);
    const auto first = db.to_host<std::uint16_t>(stream);
    eltwise_backward(stream, back, y, a, b, da, db, solver);
    EXPECT_EQ(db.to_host<std::uint16_t>(stream), first) << s->name() << ": two runs differ";
  }
}

TEST_P(EltwiseGpu, CudnnRefusesWhatItCannotDoWithAReason) {
  const SolverBase* s = find_solver(GetParam(), OpKind::eltwise, "cuda.eltwise.cudnn");
  if (s == nullptr) GTEST_SKIP() << "no cuDNN solver on " << GetParam();
  for (const EltwiseProblem& p :
       {problem(EltwiseOp::div, {2, 3}, {3}), problem(EltwiseOp::add, {2, 1}, {1, 3}),
        problem(EltwiseOp::add, {2, 3}, {3}, DType::f32, Layout::nchw, EltwiseDirection::backward)}) {
    const Applicability a = s->check_any(ProblemRef::of(p), *device_);
    EXPECT_FALSE(a.ok) << p.key();
    EXPECT_FALSE(a.reason.empty()) << p.key();
  }
  EXPECT_TRUE(s->check_any(ProblemRef::of(problem(EltwiseOp::sub, {1, 3, 1, 1}, {2, 3, 4, 5})), *device_).ok);
}

INSTANTIATE_TEST_SUITE_P(Backends, EltwiseGpu, ::testing::Values("cuda", "hip"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace galley::dnn
