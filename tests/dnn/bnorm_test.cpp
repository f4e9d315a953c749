// Batch norm: the problem's key and validation, the reference against a hand-computed case and its
// backward against central finite differences in double, every cpu solver against the reference
// (odd shapes, every dtype, both layouts, all three modes), the numerics of constant channels and
// large means, and the Tensor entry points.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "dnn/cpu_isa_cap.hpp"
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

BatchNormProblem problem(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, DType dtype,
                         Layout layout, BatchNormMode mode, NormDirection direction) {
  BatchNormProblem p{
      .n = n, .c = c, .h = h, .w = w, .dtype = dtype, .layout = layout, .mode = mode, .direction = direction};
  return p;
}

struct Form {
  BatchNormMode mode;
  NormDirection direction;
};
constexpr Form kForms[] = {{BatchNormMode::inference, NormDirection::forward},
                           {BatchNormMode::training, NormDirection::forward},
                           {BatchNormMode::training, NormDirection::backward}};

TEST(BnormProblem, KeyRoundTripsEveryField) {
  for (const Form f : kForms) {
    for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
      for (Layout l : {Layout::nchw, Layout::nhwc}) {
        BatchNormProblem p = problem(3, 17, 31, 29, dt, l, f.mode, f.direction);
        p.epsilon = 1e-3;
        p.momentum = 0.01;
        const std::string key = p.key();
        EXPECT_EQ(BatchNormProblem::parse_key(key), p) << key;
        EXPECT_EQ(parse_problem_key(key).ref().key(), key);
      }
    }
  }
  BatchNormProblem p{.n = 32, .c = 64, .h = 56, .w = 56};
  EXPECT_EQ(p.key(), "bnorm-F-train-f32-nchw-n32-c64-h56-w56-e0.00001-m0.1");
  for (double eps : {1e-5, 0.5, 3.0, 1e-12}) {
    p.epsilon = eps;
    EXPECT_EQ(BatchNormProblem::parse_key(p.key()).epsilon, eps);
  }
  p.momentum = 0;
  EXPECT_EQ(BatchNormProblem::parse_key(p.key()), p);
  p.momentum = 1;
  EXPECT_EQ(BatchNormProblem::parse_key(p.key()), p);
}

TEST(BnormProblem, ParseKeyRefusesOtherSpellings) {
  for (const char* key : {"bnorm-F-train-f32-nchw-n32-c64-h56-w56-e0.00001",
                          "bnorm-F-eval-f32-nchw-n32-c64-h56-w56-e0.00001-m0.1",
                          "bnorm-X-train-f32-nchw-n32-c64-h56-w56-e0.00001-m0.1",
                          "bnorm-F-train-f32-nchw-n32-c64-h56-w56-e0.000010-m0.1",
                          "bnorm-F-train-f32-nchw-n32-c64-h56-w56-e1e-05-m0.1",
                          "bnorm-F-train-f32-NCHW-n32-c64-h56-w56-e0.00001-m0.1",
                          "bnorm-F-train-f32-nchw-n032-c64-h56-w56-e0.00001-m0.1",
                          "bnorm-F-train-f32-nchw-n32-c64-h56-w56-e0-m0.1",
                          "bnorm-B-infer-f32-nchw-n32-c64-h56-w56-e0.00001-m0.1",
                          "lnorm-F-train-f32-nchw-n32-c64-h56-w56-e0.00001-m0.1"}) {
    expect_invalid([&] { BatchNormProblem::parse_key(key); }, {"bnorm"});
  }
}

TEST(BnormProblem, ValidationNamesTheField) {
  BatchNormProblem p{.n = 2, .c = 3, .h = 4, .w = 5};
  expect_invalid(
      [&] {
        BatchNormProblem q = p;
        q.n = 0;
        q.validate();
      },
      {"n (batch", "0"});
  expect_invalid(
      [&] {
        BatchNormProblem q = p;
        q.c = -3;
        q.validate();
      },
      {"c (channels", "-3"});
  expect_invalid(
      [&] {
        BatchNormProblem q = p;
        q.epsilon = 0;
        q.validate();
      },
      {"epsilon"});
  expect_invalid(
      [&] {
        BatchNormProblem q = p;
        q.epsilon = -1e-5;
        q.validate();
      },
      {"epsilon"});
  expect_invalid(
      [&] {
        BatchNormProblem q = p;
        q.epsilon = std::nan("");
        q.validate();
      },
      {"epsilon"});
  expect_invalid(
      [&] {
        BatchNormProblem q = p;
        q.momentum = 1.5;
        q.validate();
      },
      {"momentum", "[0, 1]"});
  expect_invalid(
      [&] {
        BatchNormProblem q = p;
        q.dtype = DType::i32;
        q.validate();
      },
      {"dtype i32"});
  expect_invalid(
      [&] {
        BatchNormProblem q = p;
        q.mode = BatchNormMode::inference;
        q.direction = NormDirection::backward;
        q.validate();
      },
      {"backward needs mode training"});
  expect_invalid(
      [&] {
        BatchNormProblem q{.n = 1, .c = 8, .h = 1, .w = 1};
        q.validate();
      },
      {"more than one value per channel"});
  expect_invalid(
      [&] {
        BatchNormProblem q = p;
        q.n = q.c = q.h = q.w = std::int64_t(1) << 20;
        q.validate();
      },
      {"overflows"});
  // Inference with a single value per channel is fine (no batch statistics).
  BatchNormProblem single{.n = 1, .c = 8, .h = 1, .w = 1, .mode = BatchNormMode::inference};
  EXPECT_NO_THROW(single.validate());
}

TEST(BnormProblem, TensorsFlopsAndBytes) {
  BatchNormProblem p{.n = 2, .c = 3, .h = 4, .w = 5, .dtype = DType::f16};
  const auto t = p.tensors();
  ASSERT_EQ(t.size(), 8u);
  int also_read = 0;
  for (const auto& a : t) also_read += a.also_read ? 1 : 0;
  EXPECT_EQ(also_read, 2);  // running mean and variance
  // x and y in f16 (120 elements each), scale, shift, saved mean/invstd once, running stats twice (f32).
  EXPECT_DOUBLE_EQ(p.min_bytes(), 2 * 120 * 2 + (4 + 2 * 2) * 3 * 4);
  EXPECT_DOUBLE_EQ(p.flops(), 8.0 * 120);
  EXPECT_EQ(p.tolerance(), 1e-2);
}

TEST(BnormReference, HandComputedTrainingStep) {
  const BatchNormProblem p{.n = 1, .c = 1, .h = 1, .w = 4, .epsilon = 0.25, .momentum = 0.1};
  const double x[4] = {1, 2, 3, 4}, scale[1] = {2}, shift[1] = {1};
  double y[4], rm[1] = {0}, rv[1] = {1}, sm[1], si[1];
  NormDoubleArgs a;
  a.x = x, a.scale = scale, a.shift = shift, a.y = y, a.running_mean = rm, a.running_var = rv;
  a.saved_mean = sm, a.saved_invstd = si;
  reference_norm_double(p, a);
  // mean 2.5, biased variance 1.25, invstd 1/sqrt(1.5); unbiased variance 5/3.
  EXPECT_DOUBLE_EQ(sm[0], 2.5);
  EXPECT_NEAR(si[0], 1 / std::sqrt(1.5), 1e-15);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(y[i], 2 * (x[i] - 2.5) / std::sqrt(1.5) + 1, 1e-14);
  EXPECT_NEAR(rm[0], 0.25, 1e-15);
  EXPECT_NEAR(rv[0], 0.9 + 0.1 * 5.0 / 3.0, 1e-15);
}

// L = sum(w * y(x, scale, shift)) by central differences against the reference backward with dy = w.
TEST(BnormReference, BackwardMatchesCentralDifferences) {
  for (Layout layout : {Layout::nchw, Layout::nhwc}) {
    const BatchNormProblem fwd{.n = 2, .c = 3, .h = 3, .w = 2, .layout = layout, .epsilon = 1e-3};
    BatchNormProblem bwd = fwd;
    bwd.direction = NormDirection::backward;
    const std::size_t total = 36, c = 3;
    std::vector<double> x(total), w(total), scale(c), shift(c);
    const auto fx = norm_test::uniform(total, -1, 1, 1), fw = norm_test::uniform(total, -1, 1, 2);
    const auto fs = norm_test::uniform(c, 0.5, 1.5, 3), fb = norm_test::uniform(c, -1, 1, 4);
    x.assign(fx.begin(), fx.end()), w.assign(fw.begin(), fw.end());
    scale.assign(fs.begin(), fs.end()), shift.assign(fb.begin(), fb.end());
    const auto loss = [&](const std::vector<double>& xv, const std::vector<double>& sv,
                          const std::vector<double>& bv, std::vector<double>* mean,
                          std::vector<double>* invstd) {
      std::vector<double> y(total), rm(c, 0.0), rv(c, 1.0), sm(c), si(c);
      NormDoubleArgs a;
      a.x = xv.data(), a.scale = sv.data(), a.shift = bv.data(), a.y = y.data();
      a.running_mean = rm.data(), a.running_var = rv.data(), a.saved_mean = sm.data(),
      a.saved_invstd = si.data();
      reference_norm_double(fwd, a);
      if (mean != nullptr) *mean = sm, *invstd = si;
      double l = 0;
      for (std::size_t i = 0; i < total; ++i) l += w[i] * y[i];
      return l;
    };
    std::vector<double> mean, invstd;
    loss(x, scale, shift, &mean, &invstd);
    std::vector<double> dx(total), dscale(c), dshift(c);
    NormDoubleArgs b;
    b.dy = w.data(), b.x = x.data(), b.scale = scale.data(), b.saved_mean = mean.data(),
    b.saved_invstd = invstd.data();
    b.dx = dx.data(), b.dscale = dscale.data(), b.dshift = dshift.data();
    reference_norm_double(bwd, b);
    const double h = 1e-5;
    const auto central = [&](std::vector<double>& v, std::size_t i, auto&& f) {
      const double keep = v[i];
      v[i] = keep + h;
      const double up = f();
      v[i] = keep - h;
      const double down = f();
      v[i] = keep;
      return (up - down) / (2 * h);
    };
    const auto l = [&] { return loss(x, scale, shift, nullptr, nullptr); };
    for (std::size_t i = 0; i < total; ++i) EXPECT_NEAR(dx[i], central(x, i, l), 1e-7) << "dx " << i;
    for (std::size_t i = 0; i < c; ++i) {
      EXPECT_NEAR(dscale[i], central(scale, i, l), 1e-7) << "dscale " << i;
      EXPECT_NEAR(dshift[i], central(shift, i, l), 1e-7) << "dshift " << i;
    }
  }
}

void expect_cpu_solvers_match_reference() {
  // {1, 19, 9, 13}: one image and channels enough for the cpu solver's per-channel passes; 37
  // channels: whole vectors of them and a partial one in NHWC rows; 83 and 144: NHWC rows mapped in
  // chunks of 64 channels, the last one partial or whole.
  const std::int64_t shapes[][4] = {{1, 3, 31, 29}, {2, 17, 5, 7}, {3, 23, 1, 1},  {4, 8, 4, 2},
                                    {1, 3, 56, 56}, {2, 5, 1, 33}, {1, 19, 9, 13}, {2, 37, 3, 5},
                                    {2, 83, 3, 4},  {1, 144, 2, 3}};
  int checked = 0;
  for (const BatchNormSolver* s : solvers_for<BatchNormProblem>("cpu")) {
    if (s->is_reference()) continue;
    for (const auto& sh : shapes) {
      for (const Form f : kForms) {
        for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
          for (Layout l : {Layout::nchw, Layout::nhwc}) {
            const BatchNormProblem p = problem(sh[0], sh[1], sh[2], sh[3], dt, l, f.mode, f.direction);
            norm_test::expect_matches_reference(cpu(), ProblemRef::of(p), *s);
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 0);
}

TEST(BnormCpuSolvers, EveryFormDtypeLayoutAndOddShapeMatchesTheReference) {
  expect_cpu_solvers_match_reference();
}

// The plane loops have AVX-512 builds and scalar ones; a machine with AVX-512 takes the scalar
// ones only when capped.
TEST(BnormCpuSolvers, TheScalarLoopsMatchTheReference) {
  const IsaCap capped(backends::cpu::CpuIsa::scalar);
  expect_cpu_solvers_match_reference();
}

// f32 tensors of 16 MiB and more, whose outputs the AVX-512 loops write with non-temporal stores:
// 127x125 planes start off the 64-byte lines (head and tail of each plane masked), 144 channels
// give NHWC rows of whole aligned vectors.
TEST(BnormCpuSolvers, OutputsBeyondTheCachesMatchTheReference) {
  const std::int64_t shapes[][4] = {{2, 136, 127, 125}, {2, 144, 121, 121}};
  for (const BatchNormSolver* s : solvers_for<BatchNormProblem>("cpu")) {
    if (s->is_reference()) continue;
    for (const auto& sh : shapes) {
      for (const Form f : kForms) {
        for (Layout l : {Layout::nchw, Layout::nhwc}) {
          const BatchNormProblem p = problem(sh[0], sh[1], sh[2], sh[3], DType::f32, l, f.mode, f.direction);
          norm_test::expect_matches_reference(cpu(), ProblemRef::of(p), *s);
        }
      }
    }
  }
}

TEST(BnormCpuSolvers, ReferenceIsLastInTheList) {
  const auto list = solvers_for<BatchNormProblem>("cpu");
  ASSERT_GE(list.size(), 2u);
  EXPECT_TRUE(list.back()->is_reference());
  EXPECT_EQ(list.back()->name(), kRefBnormName);
}

// Every value of a channel equal: variance exactly 0, y = shift, no NaN; the backward stays finite.
TEST(BnormCpuSolvers, ConstantChannelGivesNoNan) {
  for (const BatchNormSolver* s : solvers_for<BatchNormProblem>("cpu")) {
    for (Layout l : {Layout::nchw, Layout::nhwc}) {
      for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
        const BatchNormProblem p =
            problem(2, 3, 5, 7, dt, l, BatchNormMode::training, NormDirection::forward);
        const std::vector<float> x(210, 3.0f);
        auto out = norm_test::run_solver(cpu(), ProblemRef::of(p), *s, {{ArgId::src, x}});
        SCOPED_TRACE(std::string(s->name()) + " " + p.key());
        EXPECT_TRUE(norm_test::all_finite(out[ArgId::dst]));
        EXPECT_TRUE(norm_test::all_finite(out[ArgId::variance]));
        for (std::size_t i = 0; i < 3; ++i) {
          EXPECT_EQ(out[ArgId::saved_mean][i], 3.0f);
          EXPECT_NEAR(out[ArgId::saved_invstd][i], 1 / std::sqrt(1e-5), 1e-2);
        }
        // xhat is 0, so y is the channel's shift (rounded to the dtype).
        for (std::size_t e = 0; e < 210; ++e) {
          const std::size_t ch = l == Layout::nchw ? (e / 35) % 3 : e % 3;
          EXPECT_NEAR(out[ArgId::dst][e], out[ArgId::shift][ch], 1e-2) << e;
        }
        BatchNormProblem b = p;
        b.direction = NormDirection::backward;
        auto back =
            norm_test::run_solver(cpu(), ProblemRef::of(b), *s,
                                  {{ArgId::src, x},
                                   {ArgId::saved_mean, {3.f, 3.f, 3.f}},
                                   {ArgId::saved_invstd, std::vector<float>(3, float(1 / std::sqrt(1e-5)))}});
        EXPECT_TRUE(norm_test::all_finite(back[ArgId::diff_src]));
        EXPECT_TRUE(norm_test::all_finite(back[ArgId::diff_scale]));
      }
    }
  }
}

// x = 1e4 + small noise in f32: the statistics must keep the noise's variance (a one-pass
// sum-of-squares in f32 would return garbage), so y matches the double reference.
TEST(BnormCpuSolvers, LargeMeanStaysAccurate) {
  const BatchNormSolver* ref = find_solver_for<BatchNormProblem>("cpu", kRefBnormName);
  ASSERT_NE(ref, nullptr);
  for (const BatchNormSolver* s : solvers_for<BatchNormProblem>("cpu")) {
    if (s->is_reference()) continue;
    for (Layout l : {Layout::nchw, Layout::nhwc}) {
      const BatchNormProblem p =
          problem(4, 5, 16, 16, DType::f32, l, BatchNormMode::training, NormDirection::forward);
      std::vector<float> x = norm_test::uniform(5120, -0.5f, 0.5f, 7);
      for (float& v : x) v += 1e4f;
      const auto got = norm_test::run_solver(cpu(), ProblemRef::of(p), *s, {{ArgId::src, x}});
      const auto want = norm_test::run_solver(cpu(), ProblemRef::of(p), *ref, {{ArgId::src, x}});
      SCOPED_TRACE(std::string(s->name()) + " " + p.key());
      EXPECT_LT(norm_test::rel_err(got.at(ArgId::saved_invstd), want.at(ArgId::saved_invstd)), 1e-5);
      // The mean's f32 rounding is compensated: y is as exact as the double reference's, while
      // scaling x before subtracting (or dropping the compensation) costs ~1e-3 here.
      EXPECT_LT(norm_test::rel_err(got.at(ArgId::dst), want.at(ArgId::dst)), 1e-5);
      EXPECT_LT(norm_test::rel_err(got.at(ArgId::variance), want.at(ArgId::variance)), 1e-5);
      // The noise is uniform in [-0.5, 0.5): variance about 1/12.
      EXPECT_NEAR(1 / (double(want.at(ArgId::saved_invstd)[0]) * want.at(ArgId::saved_invstd)[0]), 1.0 / 12,
                  0.02);
    }
  }
}

// The cpu statistics sum about a pivot, the first value of each channel: here that value is an
// outlier 1e3 deviations away and the channel's mean is 1e4, and the statistics still match the
// double reference, with the plane-major passes and (one image, 17 channels) the per-channel ones.
TEST(BnormCpuSolvers, OutlierPivotStaysAccurate) {
  const BatchNormSolver* ref = find_solver_for<BatchNormProblem>("cpu", kRefBnormName);
  ASSERT_NE(ref, nullptr);
  for (const BatchNormSolver* s : solvers_for<BatchNormProblem>("cpu")) {
    if (s->is_reference()) continue;
    for (Layout l : {Layout::nchw, Layout::nhwc}) {
      for (const auto [n, c] : {std::pair<std::int64_t, std::int64_t>{3, 2}, {3, 17}, {1, 17}}) {
        const BatchNormProblem p =
            problem(n, c, 9, 11, DType::f32, l, BatchNormMode::training, NormDirection::forward);
        std::vector<float> x = norm_test::uniform(static_cast<std::size_t>(n * c * 99), -0.5f, 0.5f, 11);
        for (float& v : x) v += 1e4f;
        for (std::int64_t ch = 0; ch < c; ++ch)
          x[static_cast<std::size_t>(l == Layout::nchw ? ch * 99 : ch)] += 300.f;
        const auto got = norm_test::run_solver(cpu(), ProblemRef::of(p), *s, {{ArgId::src, x}});
        const auto want = norm_test::run_solver(cpu(), ProblemRef::of(p), *ref, {{ArgId::src, x}});
        SCOPED_TRACE(std::string(s->name()) + " " + p.key());
        EXPECT_LT(norm_test::rel_err(got.at(ArgId::saved_mean), want.at(ArgId::saved_mean)), 1e-6);
        EXPECT_LT(norm_test::rel_err(got.at(ArgId::saved_invstd), want.at(ArgId::saved_invstd)), 1e-5);
        EXPECT_LT(norm_test::rel_err(got.at(ArgId::dst), want.at(ArgId::dst)), 1e-5);
      }
    }
  }
}

TEST(BnormEntryPoints, TrainingInferenceAndBackwardOnTensors) {
  runtime::Stream stream(cpu());
  const BatchNormProblem p{.n = 2, .c = 3, .h = 4, .w = 5};
  const TensorDesc data = p.data_desc(), chan = p.channel_desc();
  const auto fill = [&](const TensorDesc& d, std::uint64_t seed, float lo, float hi) {
    Tensor t = Tensor::empty(stream, d);
    const auto v = norm_test::uniform(static_cast<std::size_t>(d.elements()), lo, hi, seed);
    t.copy_from_host(stream, v.data(), v.size() * sizeof(float));
    return t;
  };
  Tensor x = fill(data, 1, -1, 1), scale = fill(chan, 2, 0.5, 1.5), shift = fill(chan, 3, -1, 1);
  Tensor rm = fill(chan, 4, -1, 1), rv = fill(chan, 5, 0.5, 1.5);
  Tensor y = Tensor::empty(stream, data), sm = Tensor::empty(stream, chan), si = Tensor::empty(stream, chan);
  const auto rm0 = rm.to_host<float>(stream);
  const BatchNormSolver& used = batch_norm_training(stream, p, x, scale, shift, rm, rv, y, sm, si);
  EXPECT_FALSE(used.name().empty());
  stream.synchronize();
  const auto mean = sm.to_host<float>(stream), rm1 = rm.to_host<float>(stream);
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(rm1[i], 0.9f * rm0[i] + 0.1f * mean[i], 1e-6);
  // y of training has mean 0 per channel before the affine map: check through the reference.
  const auto yv = y.to_host<float>(stream);
  EXPECT_TRUE(norm_test::all_finite(yv));

  Tensor y2 = Tensor::empty(stream, data);
  batch_norm_inference(stream, p, x, scale, shift, rm, rv, y2);
  EXPECT_TRUE(norm_test::all_finite(y2.to_host<float>(stream)));

  Tensor dy = fill(data, 6, -1, 1), dx = Tensor::empty(stream, data);
  Tensor dscale = Tensor::empty(stream, chan), dshift = Tensor::empty(stream, chan);
  batch_norm_backward(stream, p, dy, x, scale, sm, si, dx, dscale, dshift);
  // dshift is the plain sum of dy per channel.
  const auto dyv = dy.to_host<float>(stream), ds = dshift.to_host<float>(stream);
  for (int ch = 0; ch < 3; ++ch) {
    double want = 0;
    for (int n = 0; n < 2; ++n)
      for (int i = 0; i < 20; ++i) want += dyv[static_cast<std::size_t>((n * 3 + ch) * 20 + i)];
    EXPECT_NEAR(ds[static_cast<std::size_t>(ch)], want, 1e-5);
  }
}

TEST(BnormEntryPoints, MismatchedTensorIsNamed) {
  runtime::Stream stream(cpu());
  const BatchNormProblem p{.n = 2, .c = 3, .h = 4, .w = 5};
  Tensor x = Tensor::empty(stream, p.data_desc()), y = Tensor::empty(stream, p.data_desc());
  Tensor chan = Tensor::empty(stream, p.channel_desc());
  Tensor wrong = Tensor::empty(stream, TensorDesc::contiguous(DType::f32, {4}));
  Tensor rm = Tensor::empty(stream, p.channel_desc()), rv = Tensor::empty(stream, p.channel_desc());
  Tensor sm = Tensor::empty(stream, p.channel_desc()), si = Tensor::empty(stream, p.channel_desc());
  expect_invalid([&] { batch_norm_training(stream, p, x, wrong, chan, rm, rv, y, sm, si); }, {"scale"});
  expect_invalid([&] { batch_norm_training(stream, p, x, chan, chan, rm, rv, y, sm, wrong); },
                 {"saved_invstd"});
  Tensor half = Tensor::empty(stream, TensorDesc::packed(DType::f16, Layout::nchw, 2, 3, 4, 5));
  expect_invalid([&] { batch_norm_inference(stream, p, half, chan, chan, rm, rv, y); }, {"x (input)"});
  BatchNormProblem bad = p;
  bad.epsilon = -1;
  expect_invalid([&] { batch_norm_inference(stream, bad, x, chan, chan, rm, rv, y); }, {"epsilon"});
}

}  // namespace
}  // namespace galley::dnn
