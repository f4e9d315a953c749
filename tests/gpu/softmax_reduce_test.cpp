// Every gpu/cuda softmax and reduce solver against the cpu reference: every axis of both layouts,
// every dtype, rows short and long (group, block and strided kernels), every axis combination of
// rank 4 for reduce (and the split two-pass path), large and infinite logits. Skips without a device.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "dnn/op_verify.hpp"
#include "dnn/ref_softmax.hpp"
#include "galley/dnn/reduce.hpp"
#include "galley/dnn/softmax.hpp"
#include "galley/tensor.hpp"
#include "gpu_test_util.hpp"

namespace galley::testing {
namespace {

using dnn::ReduceOp;
using dnn::ReduceProblem;
using dnn::SoftmaxAlgorithm;
using dnn::SoftmaxProblem;

dnn::SoftmaxProblem softmax(std::vector<std::int64_t> dims, int axis, SoftmaxAlgorithm algo, DType dtype,
                            dnn::Layout layout, bool backward) {
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

// Every applicable softmax solver of `backend` on f32 input `x` against the reference: NaN where it
// has NaN, infinities exactly, finite values within fp32 rounding.
void expect_every_softmax_solver_matches(const runtime::Device& device, const std::string& backend,
                                         const SoftmaxProblem& p, const std::vector<float>& x) {
  std::vector<float> want(x.size());
  dnn::reference_softmax_forward(p, x.data(), want.data());
  for (const dnn::SolverBase* s : dnn::solvers_of(backend, dnn::OpKind::softmax)) {
    if (!s->check_any(dnn::ProblemRef::of(p), device)) continue;
    runtime::Stream stream(device);
    Tensor tx = Tensor::empty(stream, p.desc());
    Tensor ty = Tensor::empty(stream, p.desc());
    tx.copy_from_host(stream, x.data(), x.size() * 4);
    dnn::softmax_forward(stream, p, tx, ty, s);
    const auto got = ty.to_host<float>(stream);
    for (std::size_t i = 0; i < got.size(); ++i) {
      if (std::isnan(want[i])) {
        EXPECT_TRUE(std::isnan(got[i])) << s->name() << " " << p.key() << " element " << i << " = " << got[i];
      } else if (std::isinf(want[i])) {
        EXPECT_EQ(got[i], want[i]) << s->name() << " " << p.key() << " element " << i;
      } else {
        EXPECT_NEAR(got[i], want[i], 1e-5 * std::max(1.0f, std::abs(want[i])))
            << s->name() << " " << p.key() << " element " << i;
      }
    }
  }
}

class GpuSoftmaxReduce : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string why;
    device_ = first_device(GetParam(), why);
    if (!device_) GTEST_SKIP() << why;
  }
  std::optional<runtime::Device> device_;
};

TEST_P(GpuSoftmaxReduce, SoftmaxSolversMatchReference) {
  std::vector<SoftmaxProblem> problems;
  for (const auto& dims :
       std::vector<std::vector<std::int64_t>>{{1, 17, 31, 29}, {2, 3, 5, 7}, {3, 23, 1, 1}}) {
    for (int axis = 0; axis < 4; ++axis)
      for (dnn::Layout layout : {dnn::Layout::nchw, dnn::Layout::nhwc})
        for (DType dtype : {DType::f32, DType::f16, DType::bf16})
          for (auto algo : {SoftmaxAlgorithm::softmax, SoftmaxAlgorithm::log_softmax})
            for (bool backward : {false, true})
              problems.push_back(softmax(dims, axis, algo, dtype, layout, backward));
  }
  for (const auto& [dims, axis] : std::vector<std::pair<std::vector<std::int64_t>, int>>{{{1}, 0},
                                                                                         {{33}, 0},
                                                                                         {{7, 1000}, 1},
                                                                                         {{3, 1025}, 1},
                                                                                         {{5, 20011}, 1},
                                                                                         {{2, 3, 2, 3, 5}, 3},
                                                                                         {{3, 70000, 2}, 1},
                                                                                         {{70000, 3}, 0},
                                                                                         {{2, 200, 9}, 1},
                                                                                         {{3, 64, 33}, 1},
                                                                                         {{2, 65, 31}, 1}}) {
    for (DType dtype : {DType::f32, DType::bf16})
      for (auto algo : {SoftmaxAlgorithm::softmax, SoftmaxAlgorithm::log_softmax})
        for (bool backward : {false, true})
          problems.push_back(softmax(dims, axis, algo, dtype, dnn::Layout::nchw, backward));
  }
  const auto solvers = dnn::solvers_of(GetParam(), dnn::OpKind::softmax);
  ASSERT_GE(solvers.size(), 2u);
  for (const SoftmaxProblem& p : problems) {
    for (const dnn::SolverBase* s : solvers) {
      if (!s->check_any(dnn::ProblemRef::of(p), *device_)) continue;
      const dnn::OpVerification v = dnn::check_against_reference(*device_, dnn::ProblemRef::of(p), *s);
      EXPECT_TRUE(v.passed) << s->name() << " " << p.key() << ": " << v.summary;
    }
  }
}

TEST_P(GpuSoftmaxReduce, SoftmaxLargeAndInfiniteLogits) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (auto algo : {SoftmaxAlgorithm::softmax, SoftmaxAlgorithm::log_softmax}) {
    for (int axis : {0, 1}) {
      // 4 x 3, axis 1: rows {-inf, 0, 1}, {-inf x3}, {inf, 0, 1}, {nan, 0, 1}; axis 0 reads columns.
      const SoftmaxProblem p = softmax({4, 3}, axis, algo, DType::f32, dnn::Layout::nchw, false);
      std::vector<float> x = {-inf, 0, 1, -inf, -inf, -inf, inf, 0, 1, nan, 0, 1};
      std::vector<float> big(x.size());
      for (std::size_t i = 0; i < big.size(); ++i)
        big[i] = 1e4f + static_cast<float>(i % 5) - (i % 2 ? 2e4f : 0.0f);
      for (const auto& input : {x, big}) {
        expect_every_softmax_solver_matches(*device_, GetParam(), p, input);
      }
    }
  }
}

// Forward rows of a multiple of 8 in registers: every lanes-per-row choice (rows up to 128, 256,
// 512 and 1024 long) with a row length just past each boundary, one row and a row count that
// leaves a block and a warp part-full, and the channels of nhwc tensors (rows of C contiguous).
TEST_P(GpuSoftmaxReduce, SoftmaxRowsInRegistersMatchReference) {
  std::vector<SoftmaxProblem> problems;
  for (std::int64_t len : {8, 24, 128, 136, 256, 264, 512, 520, 1016, 1024})
    for (std::int64_t rows : {1, 37, 1031})
      for (DType dtype : {DType::f32, DType::f16, DType::bf16})
        for (auto algo : {SoftmaxAlgorithm::softmax, SoftmaxAlgorithm::log_softmax})
          problems.push_back(softmax({rows, len}, 1, algo, dtype, dnn::Layout::nchw, false));
  for (const auto& dims :
       std::vector<std::vector<std::int64_t>>{{2, 256, 7, 9}, {1, 128, 31, 29}, {3, 40, 5, 1}})
    for (DType dtype : {DType::f16, DType::bf16})
      for (auto algo : {SoftmaxAlgorithm::softmax, SoftmaxAlgorithm::log_softmax})
        for (bool backward : {false, true})
          problems.push_back(softmax(dims, 1, algo, dtype, dnn::Layout::nhwc, backward));
  const auto solvers = dnn::solvers_of(GetParam(), dnn::OpKind::softmax);
  for (const SoftmaxProblem& p : problems) {
    for (const dnn::SolverBase* s : solvers) {
      if (!s->check_any(dnn::ProblemRef::of(p), *device_)) continue;
      const dnn::OpVerification v = dnn::check_against_reference(*device_, dnn::ProblemRef::of(p), *s);
      EXPECT_TRUE(v.passed) << s->name() << " " << p.key() << ": " << v.summary;
    }
  }
}

// The same special values in rows of 8 and 16 (the 16-byte path): -inf entries get 0, a row of only
// -inf and a row holding +inf or NaN come out NaN, as in the reference.
TEST_P(GpuSoftmaxReduce, SoftmaxRowsInRegistersInfiniteLogits) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (std::int64_t len : {8, 16}) {
    for (auto algo : {SoftmaxAlgorithm::softmax, SoftmaxAlgorithm::log_softmax}) {
      const SoftmaxProblem p = softmax({5, len}, 1, algo, DType::f32, dnn::Layout::nchw, false);
      std::vector<float> x(static_cast<std::size_t>(5 * len));
      for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7) * 0.5f - 1.0f;
      x[0] = -inf;
      for (std::int64_t i = 0; i < len; ++i) x[static_cast<std::size_t>(len + i)] = -inf;
      x[static_cast<std::size_t>(2 * len + len - 1)] = inf;
      x[static_cast<std::size_t>(3 * len + 3)] = nan;
      x[static_cast<std::size_t>(4 * len + 1)] = 80.0f;  // large, but its exp stays finite after the shift
      expect_every_softmax_solver_matches(*device_, GetParam(), p, x);
    }
  }
}

TEST_P(GpuSoftmaxReduce, ReduceSolversMatchReference) {
  std::vector<ReduceProblem> problems;
  const auto make = [](std::vector<std::int64_t> dims, unsigned axes, ReduceOp op, DType dtype,
                       bool backward) {
    ReduceProblem p;
    p.rank = static_cast<int>(dims.size());
    for (std::size_t i = 0; i < dims.size(); ++i) p.dims[i] = dims[i];
    p.axes = axes;
    p.op = op;
    p.dtype = dtype;
    p.backward = backward;
    return p;
  };
  for (const auto& dims :
       std::vector<std::vector<std::int64_t>>{{3, 5, 7, 2}, {1, 17, 31, 29}, {2, 1, 3, 23}}) {
    for (unsigned axes = 1; axes < 16; ++axes)
      for (DType dtype : {DType::f32, DType::f16, DType::bf16})
        for (ReduceOp op : {ReduceOp::sum, ReduceOp::mean})
          for (bool backward : {false, true}) problems.push_back(make(dims, axes, op, dtype, backward));
  }
  for (const auto& [dims, axes] :
       std::vector<std::pair<std::vector<std::int64_t>, unsigned>>{{{3000001}, 1},
                                                                   {{3, 700001}, 2},
                                                                   {{8, 3136, 64}, 2},
                                                                   {{8, 64, 3136}, 4},
                                                                   {{3, 70001}, 1},
                                                                   {{200000, 17}, 1},
                                                                   {{64, 3000}, 2},
                                                                   {{2, 3, 4, 5, 6}, 0b10101},
                                                                   {{2, 3, 2, 3, 2, 3}, 0b110011},
                                                                   {{1, 1, 1}, 0b010}}) {
    for (DType dtype : {DType::f32, DType::bf16})
      for (bool backward : {false, true})
        problems.push_back(make(dims, axes, ReduceOp::mean, dtype, backward));
  }
  // The column kernel (one reduced group, the innermost kept, whole 16-byte vectors): rows of one,
  // a few and more than 32 vectors, one chunk and many, with and without an outer kept group; and
  // rows that are no whole number of vectors (reduce_cols).
  for (const auto& [dims, axes] :
       std::vector<std::pair<std::vector<std::int64_t>, unsigned>>{{{4, 56, 56, 256}, 0b0110},
                                                                   {{1, 31, 29, 24}, 0b0110},
                                                                   {{3, 100, 520}, 0b010},
                                                                   {{2, 7, 8}, 0b010},
                                                                   {{5000, 16}, 0b01},
                                                                   {{2, 3, 40, 5, 16}, 0b00110},
                                                                   {{3, 77, 12}, 0b010}}) {
    for (DType dtype : {DType::f32, DType::f16, DType::bf16})
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::mean})
        problems.push_back(make(dims, axes, op, dtype, false));
  }
  const auto solvers = dnn::solvers_of(GetParam(), dnn::OpKind::reduce);
  ASSERT_GE(solvers.size(), 1u);
  for (const ReduceProblem& p : problems) {
    for (const dnn::SolverBase* s : solvers) {
      if (!s->check_any(dnn::ProblemRef::of(p), *device_)) continue;
      const dnn::OpVerification v = dnn::check_against_reference(*device_, dnn::ProblemRef::of(p), *s);
      EXPECT_TRUE(v.passed) << s->name() << " " << p.key() << ": " << v.summary;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, GpuSoftmaxReduce, ::testing::Values("cuda", "hip"));

}  // namespace
}  // namespace galley::testing
