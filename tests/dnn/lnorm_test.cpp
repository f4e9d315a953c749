// Layer norm: key and validation, the reference against a hand case and finite differences, every
// cpu solver against the reference (ranks 1..4, odd sizes, every dtype), numerics of constant rows
// and large means, and the Tensor entry points.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "dnn/cpu_isa_cap.hpp"
#include "dnn/norm_fd.hpp"
#include "dnn/norm_test_util.hpp"
#include "dnn/ref_norm.hpp"
#include "galley/dnn/normalization.hpp"

namespace galley::dnn {
namespace {

using norm_test::expect_invalid;

const runtime::Device& cpu() {
  static const runtime::Device d = runtime::device("cpu");
  return d;
}

TEST(LnormProblem, KeyRoundTrips) {
  for (NormDirection d : {NormDirection::forward, NormDirection::backward}) {
    for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
      for (int k = 1; k <= 3; ++k) {
        LayerNormProblem p = LayerNormProblem::of({3, 5, 31, 29}, k, dt);
        p.direction = d;
        p.epsilon = 1e-6;
        EXPECT_EQ(LayerNormProblem::parse_key(p.key()), p) << p.key();
        EXPECT_EQ(parse_problem_key(p.key()).ref().key(), p.key());
      }
    }
  }
  const LayerNormProblem p = LayerNormProblem::of({8, 197, 768}, 1);
  EXPECT_EQ(p.key(), "lnorm-F-f32-d8x197x768-a2-e0.00001");
  EXPECT_EQ(p.outer(), 8 * 197);
  EXPECT_EQ(p.inner(), 768);
  const LayerNormProblem whole = LayerNormProblem::of({7}, 1);
  EXPECT_EQ(LayerNormProblem::parse_key(whole.key()), whole);
  EXPECT_EQ(whole.stat_desc().elements(), 1);
}

TEST(LnormProblem, ParseKeyRefusesOtherSpellings) {
  for (const char* key :
       {"lnorm-F-f32-d8x197x768-a2", "lnorm-F-f32-d8x197x768-a3-e0.00001", "lnorm-F-f32-d8x0x768-a2-e0.00001",
        "lnorm-F-f32-d8x197x768-a-1-e0.00001", "lnorm-F-f32-d1x2x3x4x5x6x7-a2-e0.00001",
        "lnorm-F-f32-d8x197x768-a2-e1e-05", "lnorm-F-f64-d8x197x768-a2-e0.00001"}) {
    expect_invalid([&] { LayerNormProblem::parse_key(key); }, {"lnorm"});
  }
}

TEST(LnormProblem, ValidationNamesTheField) {
  const LayerNormProblem p = LayerNormProblem::of({4, 6}, 1);
  expect_invalid(
      [&] {
        LayerNormProblem q = p;
        q.axis = 2;
        q.validate();
      },
      {"axis", "2"});
  expect_invalid(
      [&] {
        LayerNormProblem q = p;
        q.axis = -1;
        q.validate();
      },
      {"axis"});
  expect_invalid(
      [&] {
        LayerNormProblem q = p;
        q.dims[1] = 0;
        q.validate();
      },
      {"dims[1]"});
  expect_invalid(
      [&] {
        LayerNormProblem q = p;
        q.rank = 7;
        q.validate();
      },
      {"rank"});
  expect_invalid(
      [&] {
        LayerNormProblem q = p;
        q.dims[3] = 2;
        q.validate();
      },
      {"dims[3]", "past rank"});
  expect_invalid(
      [&] {
        LayerNormProblem q = p;
        q.epsilon = 0;
        q.validate();
      },
      {"epsilon"});
  expect_invalid(
      [&] {
        LayerNormProblem q = p;
        q.dtype = DType::i8;
        q.validate();
      },
      {"dtype i8"});
  expect_invalid([&] { LayerNormProblem::of({1, 2, 3, 4, 5, 6, 7}, 1); }, {"rank"});
}

TEST(LnormReference, HandComputedRow) {
  const LayerNormProblem p = [] {
    LayerNormProblem q = LayerNormProblem::of({2, 2}, 1);
    q.epsilon = 0.5;
    return q;
  }();
  const double x[4] = {1, 3, -2, -2}, scale[2] = {2, 1}, shift[2] = {0, 1};
  double y[4], sm[2], si[2];
  NormDoubleArgs a;
  a.x = x, a.scale = scale, a.shift = shift, a.y = y, a.saved_mean = sm, a.saved_invstd = si;
  reference_norm_double(p, a);
  // Row 0: mean 2, variance 1, invstd 1/sqrt(1.5). Row 1: constant, variance 0, xhat 0.
  EXPECT_DOUBLE_EQ(sm[0], 2);
  EXPECT_NEAR(si[0], 1 / std::sqrt(1.5), 1e-15);
  EXPECT_NEAR(y[0], 2 * (-1 / std::sqrt(1.5)), 1e-14);
  EXPECT_NEAR(y[1], 1 / std::sqrt(1.5) + 1, 1e-14);
  EXPECT_DOUBLE_EQ(y[2], 0);
  EXPECT_DOUBLE_EQ(y[3], 1);
  EXPECT_NEAR(si[1], 1 / std::sqrt(0.5), 1e-15);
}

TEST(LnormReference, BackwardMatchesCentralDifferences) {
  norm_test::expect_backward_matches_central_differences(LayerNormProblem::of({3, 7}, 1));
  norm_test::expect_backward_matches_central_differences(LayerNormProblem::of({2, 3, 5}, 2));
  norm_test::expect_backward_matches_central_differences(LayerNormProblem::of({11}, 1));
}

// Every cpu solver against the reference over odd rows (vector tails, rows shorter than a vector,
// a row count off the backward's blocks of rows), every dtype and direction.
void expect_cpu_solvers_match_reference() {
  int checked = 0;
  for (const LayerNormSolver* s : solvers_for<LayerNormProblem>("cpu")) {
    if (s->is_reference()) continue;
    for (auto shape : {LayerNormProblem::of({1, 17}, 1), LayerNormProblem::of({3, 5, 31, 29}, 2),
                       LayerNormProblem::of({3, 5, 31, 29}, 1), LayerNormProblem::of({23, 4100}, 1),
                       LayerNormProblem::of({2, 3, 9}, 3), LayerNormProblem::of({64, 8}, 1),
                       LayerNormProblem::of({71, 48}, 1),
                       // rows held in registers (up to 256), at their ends, and one past them
                       LayerNormProblem::of({4, 16}, 1), LayerNormProblem::of({3, 255}, 1),
                       LayerNormProblem::of({5, 256}, 1), LayerNormProblem::of({2, 257}, 1)}) {
      for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
        for (NormDirection d : {NormDirection::forward, NormDirection::backward}) {
          LayerNormProblem p = shape;
          p.dtype = dt;
          p.direction = d;
          norm_test::expect_matches_reference(cpu(), ProblemRef::of(p), *s);
          ++checked;
        }
      }
    }
  }
  EXPECT_GT(checked, 0);
  EXPECT_TRUE(solvers_for<LayerNormProblem>("cpu").back()->is_reference());
}

TEST(LnormCpuSolvers, EveryShapeAndDtypeMatchesTheReference) { expect_cpu_solvers_match_reference(); }

// The row loops have an AVX-512 build and a scalar one; a machine with AVX-512 takes the scalar
// one only when capped.
TEST(LnormCpuSolvers, TheScalarRowLoopsMatchTheReference) {
  const IsaCap capped(backends::cpu::CpuIsa::scalar);
  expect_cpu_solvers_match_reference();
}

// f32 rows of 16 MiB and more, whose outputs the AVX-512 row loops write with non-temporal stores
// (rows of 256: y from the register rows, dx from the row loop), and rows of 250 that cannot be.
TEST(LnormCpuSolvers, OutputsBeyondTheCachesMatchTheReference) {
  for (const LayerNormSolver* s : solvers_for<LayerNormProblem>("cpu")) {
    if (s->is_reference()) continue;
    for (auto shape : {LayerNormProblem::of({16400, 256}, 1), LayerNormProblem::of({16800, 250}, 1)}) {
      for (NormDirection d : {NormDirection::forward, NormDirection::backward}) {
        LayerNormProblem p = shape;
        p.direction = d;
        norm_test::expect_matches_reference(cpu(), ProblemRef::of(p), *s);
      }
    }
  }
}

TEST(LnormCpuSolvers, ConstantRowsAndLargeMeans) {
  const LayerNormSolver* ref = find_solver_for<LayerNormProblem>("cpu", kRefLnormName);
  ASSERT_NE(ref, nullptr);
  for (const LayerNormSolver* s : solvers_for<LayerNormProblem>("cpu")) {
    const LayerNormProblem p = LayerNormProblem::of({6, 100}, 1);
    const auto flat =
        norm_test::run_solver(cpu(), ProblemRef::of(p), *s, {{ArgId::src, std::vector<float>(600, -7.f)}});
    SCOPED_TRACE(s->name());
    EXPECT_TRUE(norm_test::all_finite(flat.at(ArgId::dst)));
    for (std::size_t e = 0; e < 600; ++e) EXPECT_EQ(flat.at(ArgId::dst)[e], flat.at(ArgId::shift)[e % 100]);
    std::vector<float> x = norm_test::uniform(600, -0.5f, 0.5f, 3);
    for (float& v : x) v += 1e4f;
    const auto got = norm_test::run_solver(cpu(), ProblemRef::of(p), *s, {{ArgId::src, x}});
    const auto want = norm_test::run_solver(cpu(), ProblemRef::of(p), *ref, {{ArgId::src, x}});
    EXPECT_LT(norm_test::rel_err(got.at(ArgId::saved_invstd), want.at(ArgId::saved_invstd)), 1e-5);
    // The mean's f32 rounding is compensated: y is as exact as the double reference's, while
    // scaling x before subtracting (or dropping the compensation) costs ~1e-3 here.
    EXPECT_LT(norm_test::rel_err(got.at(ArgId::dst), want.at(ArgId::dst)), 1e-5);
  }
}

TEST(LnormEntryPoints, ForwardBackwardAndMismatchedTensors) {
  runtime::Stream stream(cpu());
  const LayerNormProblem p = LayerNormProblem::of({4, 3, 10}, 2);
  const auto fill = [&](const TensorDesc& d, std::uint64_t seed) {
    Tensor t = Tensor::empty(stream, d);
    const auto v = norm_test::uniform(static_cast<std::size_t>(d.elements()), -1, 1, seed);
    t.copy_from_host(stream, v.data(), v.size() * sizeof(float));
    return t;
  };
  Tensor x = fill(p.data_desc(), 1), scale = fill(p.affine_desc(), 2), shift = fill(p.affine_desc(), 3);
  Tensor y = Tensor::empty(stream, p.data_desc());
  Tensor sm = Tensor::empty(stream, p.stat_desc()), si = Tensor::empty(stream, p.stat_desc());
  layer_norm_forward(stream, p, x, scale, shift, y, sm, si);
  EXPECT_EQ(sm.desc().elements(), 4);
  const auto mean = sm.to_host<float>(stream), xv = x.to_host<float>(stream);
  for (int r = 0; r < 4; ++r) {
    double want = 0;
    for (int i = 0; i < 30; ++i) want += xv[static_cast<std::size_t>(r * 30 + i)];
    EXPECT_NEAR(mean[static_cast<std::size_t>(r)], want / 30, 1e-6);
  }
  Tensor dy = fill(p.data_desc(), 4), dx = Tensor::empty(stream, p.data_desc());
  Tensor ds = Tensor::empty(stream, p.affine_desc()), db = Tensor::empty(stream, p.affine_desc());
  layer_norm_backward(stream, p, dy, x, scale, sm, si, dx, ds, db);
  EXPECT_TRUE(norm_test::all_finite(dx.to_host<float>(stream)));
  expect_invalid([&] { layer_norm_forward(stream, p, x, scale, shift, y, ds, si); }, {"saved_mean"});
  expect_invalid([&] { layer_norm_backward(stream, p, dy, x, sm, sm, si, dx, ds, db); }, {"scale"});
}

}  // namespace
}  // namespace galley::dnn
