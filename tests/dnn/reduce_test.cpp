// Sum and mean over axes: keys, validation, the reference against hand-computed values and (for
// backward) central finite differences in double, the cpu solver against the reference over every
// axis combination of rank 4 in every dtype, long reductions, and the entry points.
#include "galley/dnn/reduce.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "dnn/op_verify.hpp"
#include "dnn/ref_reduce.hpp"
#include "galley/core/error.hpp"
#include "galley/runtime/device.hpp"

namespace galley::dnn {
namespace {

const runtime::Device& cpu() {
  static const runtime::Device d = runtime::device("cpu");
  return d;
}

ReduceProblem make(std::vector<std::int64_t> dims, unsigned axes, ReduceOp op = ReduceOp::sum,
                   DType dtype = DType::f32, bool backward = false) {
  ReduceProblem p;
  p.rank = static_cast<int>(dims.size());
  for (std::size_t i = 0; i < dims.size(); ++i) p.dims[i] = dims[i];
  p.axes = axes;
  p.op = op;
  p.dtype = dtype;
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

TEST(ReduceProblem, KeysRoundTrip) {
  const std::vector<ReduceProblem> problems = {
      make({2, 3, 4, 5}, 0b0110), make({2, 3, 4, 5}, 0b1111, ReduceOp::mean, DType::f16, true),
      make({7}, 1, ReduceOp::sum, DType::bf16), make({2, 3, 4, 5, 6, 7}, 0b101010, ReduceOp::mean)};
  for (const ReduceProblem& p : problems) {
    EXPECT_EQ(ReduceProblem::parse_key(p.key()), p) << p.key();
    EXPECT_EQ(parse_problem_key(p.key()).ref().key(), p.key());
  }
  EXPECT_EQ(problems[0].key(), "reduce-F-f32-sum-a1.2-s2x3x4x5");
  // The repro line; tests/cli/softmax_reduce_cli_test.cpp runs it and finds this key.
  EXPECT_EQ(
      problems[1].bench_command(cpu(), "cpu.reduce.direct"),
      "galley bench reduce --shape 2x3x4x5 --axes 0,1,2,3 --op mean -F 2 --dtype f16 --device cpu --solver "
      "cpu.reduce.direct");
  EXPECT_NE(problems[0].hash(), problems[1].hash());
  for (const char* bad : {"reduce-F-f32-sum-a1.2", "reduce-F-f32-max-a1-s2x3", "reduce-F-f32-sum-a2.1-s2x3x4",
                          "reduce-F-f32-sum-a1.1-s2x3x4", "reduce-F-f32-sum-a3-s2x3",
                          "reduce-F-f32-sum-a-s2x3", "reduce-B-f32-sum-a0-s0x3"}) {
    EXPECT_THROW(ReduceProblem::parse_key(bad), Error) << bad;
  }
}

TEST(ReduceProblem, ValidationNamesTheField) {
  expect_error([] { make({2, 3}, 0b100).validate(); }, {"axis 2", "out of range"});
  expect_error([] { make({2, 3}, 0).validate(); }, {"axes is empty"});
  expect_error([] { make({2, 0}, 1).validate(); }, {"dims[1]"});
  expect_error([] { make({2, 3}, 1, ReduceOp::sum, DType::i8).validate(); }, {"dtype"});
  const TensorDesc d = TensorDesc::contiguous(DType::f32, {2, 3, 4});
  expect_error([&] { ReduceProblem::over(d, {1, 1}); }, {"axis 1", "twice"});
  expect_error([&] { ReduceProblem::over(d, {0, -3}); }, {"axis -3", "twice"});
  expect_error([&] { ReduceProblem::over(d, {3}); }, {"axis 3", "out of range"});
  expect_error([&] { ReduceProblem::over(d, {}); }, {"empty"});
  expect_error([] { (void)parse_reduce_op("max"); }, {"max", "sum, mean"});
  const ReduceProblem p = ReduceProblem::over(d, {-1, 0}, ReduceOp::mean);
  EXPECT_EQ(p.axes, 0b101u);
  EXPECT_EQ(p.dst_desc().dims, (Dims{1, 3, 1, 1, 1, 1}));
  EXPECT_EQ(p.reduced_count(), 8);
  EXPECT_EQ(p.min_bytes(), (24.0 + 3.0) * 4);
}

TEST(ReduceProblem, GroupsCoalesce) {
  const ReduceGroups g = ReduceGroups::of(make({2, 3, 1, 4, 5, 6}, 0b011010));
  // axes 1 and 3 reduced (size-1 axis 2 between them dropped), 4 reduced, 5 kept: [2 kept][3*4*5 reduced][6
  // kept]
  ASSERT_EQ(g.count, 3);
  EXPECT_EQ(g.size[0], 2);
  EXPECT_FALSE(g.reduced[0]);
  EXPECT_EQ(g.size[1], 60);
  EXPECT_TRUE(g.reduced[1]);
  EXPECT_EQ(g.size[2], 6);
}

TEST(ReduceReference, HandComputed) {
  const std::vector<float> x = {1, 2, 3, 4, 5, 6};  // 2 x 3
  std::vector<float> y(6);
  reference_reduce_forward(make({2, 3}, 0b01), x.data(), y.data());
  EXPECT_EQ(std::vector<float>(y.begin(), y.begin() + 3), (std::vector<float>{5, 7, 9}));
  reference_reduce_forward(make({2, 3}, 0b10, ReduceOp::mean), x.data(), y.data());
  EXPECT_EQ(std::vector<float>(y.begin(), y.begin() + 2), (std::vector<float>{2, 5}));
  reference_reduce_forward(make({2, 3}, 0b11), x.data(), y.data());
  EXPECT_EQ(y[0], 21);
  const std::vector<float> dy = {1, 2};
  reference_reduce_backward(make({2, 3}, 0b10, ReduceOp::mean, DType::f32, true), dy.data(), y.data());
  EXPECT_EQ(y, (std::vector<float>{1.f / 3, 1.f / 3, 1.f / 3, 2.f / 3, 2.f / 3, 2.f / 3}));
}

TEST(ReduceReference, BackwardMatchesCentralDifferences) {
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::mean}) {
    for (unsigned axes : {0b0001u, 0b0110u, 0b1010u, 0b1111u}) {
      const ReduceProblem p = make({2, 3, 2, 3}, axes, op);
      const std::int64_t n = p.src_elements(), m = p.dst_elements();
      std::vector<double> x(static_cast<std::size_t>(n)), w(static_cast<std::size_t>(m));
      for (std::int64_t i = 0; i < n; ++i) x[i] = std::sin(1.1 * i);
      for (std::int64_t i = 0; i < m; ++i) w[i] = std::cos(0.9 * i) + 0.5;
      // L = sum(w * reduce(x)) with the reduction written out in double from the definition.
      const auto loss = [&](const std::vector<double>& at) {
        std::vector<double> out(static_cast<std::size_t>(m), 0.0);
        for (std::int64_t i = 0; i < n; ++i) {
          std::int64_t rest = i, o = 0, ostride = 1;
          for (int d = 3; d >= 0; --d) {
            const std::int64_t c = rest % p.dims[d];
            rest /= p.dims[d];
            if (!p.reduces(d)) {
              o += c * ostride;
              ostride *= p.dims[d];
            }
          }
          out[o] += at[i] / (op == ReduceOp::mean ? static_cast<double>(p.reduced_count()) : 1.0);
        }
        double l = 0;
        for (std::int64_t i = 0; i < m; ++i) l += w[i] * out[i];
        return l;
      };
      ReduceProblem bp = p;
      bp.backward = true;
      std::vector<float> wf(w.begin(), w.end()), dx(x.size());
      reference_reduce_backward(bp, wf.data(), dx.data());
      for (std::int64_t i = 0; i < n; ++i) {
        std::vector<double> a = x, b = x;
        a[i] += 1e-6;
        b[i] -= 1e-6;
        EXPECT_NEAR(dx[i], (loss(a) - loss(b)) / 2e-6, 1e-6) << p.key() << " element " << i;
      }
    }
  }
}

TEST(ReduceSolvers, CpuMatchesReferenceOverEveryAxisCombination) {
  const SolverBase* s = find_solver("cpu", OpKind::reduce, "cpu.reduce.direct");
  ASSERT_NE(s, nullptr);
  std::vector<ReduceProblem> problems;
  for (const auto& dims :
       std::vector<std::vector<std::int64_t>>{{3, 5, 7, 2}, {1, 17, 31, 29}, {2, 1, 3, 23}}) {
    for (unsigned axes = 1; axes < 16; ++axes)
      for (DType dtype : {DType::f32, DType::f16, DType::bf16})
        for (ReduceOp op : {ReduceOp::sum, ReduceOp::mean})
          for (bool backward : {false, true}) problems.push_back(make(dims, axes, op, dtype, backward));
  }
  // Long reductions (split work), long kept rows, ranks 1, 5 and 6; rows of 1400001 (16.8 MB in
  // f32), whose backward is written around the caches from unaligned row starts.
  for (const auto& [dims, axes] :
       std::vector<std::pair<std::vector<std::int64_t>, unsigned>>{{{300001}, 1},
                                                                   {{3, 70001}, 1},
                                                                   {{3, 70001}, 2},
                                                                   {{20000, 17}, 1},
                                                                   {{2, 3, 4, 5, 6}, 0b10101},
                                                                   {{2, 3, 2, 3, 2, 3}, 0b110011},
                                                                   {{1, 1, 1}, 0b010},
                                                                   {{5, 1, 7}, 0b010},
                                                                   {{3, 1400001}, 0b10}}) {
    for (DType dtype : {DType::f32, DType::bf16})
      for (bool backward : {false, true})
        problems.push_back(make(dims, axes, ReduceOp::mean, dtype, backward));
  }
  for (const ReduceProblem& p : problems) {
    const OpVerification v = check_against_reference(cpu(), ProblemRef::of(p), *s);
    EXPECT_TRUE(v.passed) << p.key() << ": " << v.summary;
  }
}

TEST(ReduceEntryPoints, RunAndNameMismatchedTensors) {
  runtime::Stream stream(cpu());
  const ReduceProblem p =
      ReduceProblem::over(TensorDesc::contiguous(DType::f32, {2, 3}), {1}, ReduceOp::mean);
  std::vector<float> a = {1, 2, 3, 4, 5, 6}, b(2), c(6);
  const Tensor src = Tensor::wrap(cpu(), p.src_desc(), a.data(), 24);
  Tensor dst = Tensor::wrap(cpu(), p.dst_desc(), b.data(), 8);
  reduce_forward(stream, p, src, dst);
  stream.synchronize();
  EXPECT_EQ(b, (std::vector<float>{2, 5}));
  Tensor wrong = Tensor::wrap(cpu(), p.src_desc(), c.data(), 24);
  expect_error([&] { reduce_forward(stream, p, src, wrong); }, {"dst"});
  expect_error([&] { reduce_backward(stream, p, src, wrong); }, {"diff_dst"});
  Tensor dsrc = Tensor::wrap(cpu(), p.src_desc(), c.data(), 24);
  reduce_backward(stream, p, dst, dsrc);
  stream.synchronize();
  const std::vector<float> want = {2.f / 3, 2.f / 3, 2.f / 3, 5.f / 3, 5.f / 3, 5.f / 3};
  for (std::size_t i = 0; i < c.size(); ++i) EXPECT_NEAR(c[i], want[i], 1e-6) << i;
}

}  // namespace
}  // namespace galley::dnn
