// Every GPU normalisation solver (cuda and hip lists: the single-source kernels and cuDNN) against
// the cpu reference: odd and vector-width shapes, shapes whose planes are split over several
// blocks, every dtype, both layouts, every mode, layer norm's register path and its generic one;
// constant channels give no NaN, large means keep their variance, and two runs give the same bits.
// Skips without a device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "dnn/norm_test_util.hpp"
#include "dnn/ref_norm.hpp"
#include "galley/dnn/normalization.hpp"
#include "gpu/gpu_test_util.hpp"

namespace galley::dnn {
namespace {

class GpuNorm : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string why;
    auto d = testing::first_device(GetParam(), why);
    if (!d) GTEST_SKIP() << why;
    device_ = *d;
  }
  runtime::Device device_;
};

template <class P>
int check_all(const runtime::Device& device, const std::vector<P>& problems) {
  int checked = 0;
  for (const Solver<P>* s : solvers_for<P>(device.backend())) {
    for (const P& p : problems) {
      if (!s->check(p, device)) continue;  // e.g. cuDNN's legacy batch norm refuses bf16
      norm_test::expect_matches_reference(device, ProblemRef::of(p), *s);
      ++checked;
    }
  }
  return checked;
}

TEST_P(GpuNorm, BatchNormMatchesTheReference) {
  // 2x4x7x7 and 4x6x14x14: 8-wide elementwise vectors straddle planes (hw not a multiple of 8).
  // nhwc: 264 channels are two tiles of 17 vectors (block rows not a power of two), 24 and 40 are
  // 3 and 5 vectors a row, 1x40x61x67 splits one image's rows over several blocks.
  const std::int64_t shapes[][4] = {{1, 3, 31, 29},  {2, 17, 5, 7},   {3, 23, 1, 2},  {2, 16, 8, 8},
                                    {1, 2, 64, 64},  {2, 64, 32, 32}, {2, 4, 7, 7},   {4, 6, 14, 14},
                                    {3, 264, 9, 11}, {1, 24, 31, 29}, {1, 40, 61, 67}};
  std::vector<BatchNormProblem> problems;
  for (const auto& sh : shapes) {
    for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
      for (Layout l : {Layout::nchw, Layout::nhwc}) {
        for (int form = 0; form < 3; ++form) {
          BatchNormProblem p{.n = sh[0], .c = sh[1], .h = sh[2], .w = sh[3], .dtype = dt, .layout = l};
          p.mode = form == 0 ? BatchNormMode::inference : BatchNormMode::training;
          p.direction = form == 2 ? NormDirection::backward : NormDirection::forward;
          problems.push_back(p);
        }
      }
    }
  }
  EXPECT_GT(check_all(device_, problems), 0);
}

TEST_P(GpuNorm, BatchNormNhwcWithManyRowsMatchesTheReference) {
  // Enough rows that the nhwc elementwise pass keeps several rows in flight per thread, with a
  // partial last chunk (32766 rows of 256 channels), and many ranges per channel in the partials.
  std::vector<BatchNormProblem> problems;
  for (DType dt : {DType::f32, DType::f16}) {
    for (int form = 0; form < 3; ++form) {
      BatchNormProblem p{.n = 2, .c = 256, .h = 129, .w = 127, .dtype = dt, .layout = Layout::nhwc};
      p.mode = form == 0 ? BatchNormMode::inference : BatchNormMode::training;
      p.direction = form == 2 ? NormDirection::backward : NormDirection::forward;
      problems.push_back(p);
    }
  }
  EXPECT_GT(check_all(device_, problems), 0);
}

// Shapes whose nhwc partial pass has 256 blocks or more, so the elementwise pass walks that pass's
// ranges in reverse: 5x36x55x57 has 36 scalar channel vectors (c not a multiple of 8) in two tiles
// and 140 ranges, the last short.
const BatchNormProblem kMirroredBatchNorm{.n = 5, .c = 36, .h = 55, .w = 57, .layout = Layout::nhwc};

TEST_P(GpuNorm, NhwcElementwisePassOverThePartialRangesMatchesTheReference) {
  std::vector<BatchNormProblem> batch;
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    for (int form = 0; form < 3; ++form) {
      BatchNormProblem p = kMirroredBatchNorm;
      p.dtype = dt;
      p.mode = form == 0 ? BatchNormMode::inference : BatchNormMode::training;
      p.direction = form == 2 ? NormDirection::backward : NormDirection::forward;
      batch.push_back(p);
    }
  }
  EXPECT_GT(check_all(device_, batch), 0);
  // 64x264x9x14: two tiles of 17 vectors, groups of 3 vectors, two ranges an image (the second of
  // 6 rows); 128x20x13x11: 20 scalar vectors, groups of 4, two ranges an image (96 and 47 rows).
  const std::int64_t shapes[][5] = {{64, 264, 9, 14, 11}, {128, 20, 13, 11, 5}};
  std::vector<GroupNormProblem> group;
  for (const auto& sh : shapes) {
    for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
      for (NormDirection d : {NormDirection::forward, NormDirection::backward}) {
        group.push_back(GroupNormProblem{.n = sh[0],
                                         .c = sh[1],
                                         .h = sh[2],
                                         .w = sh[3],
                                         .groups = sh[4],
                                         .dtype = dt,
                                         .layout = Layout::nhwc,
                                         .direction = d});
      }
    }
  }
  EXPECT_GT(check_all(device_, group), 0);
}

TEST_P(GpuNorm, NhwcElementwisePassOverThePartialRangesKeepsConstantsLargeMeansAndBits) {
  const runtime::Device cpu = runtime::device("cpu");
  const BatchNormSolver* ref = find_solver_for<BatchNormProblem>("cpu", kRefBnormName);
  ASSERT_NE(ref, nullptr);
  const BatchNormProblem p = kMirroredBatchNorm;
  const std::size_t elements = std::size_t(p.n * p.c * p.h * p.w);
  std::vector<float> x = norm_test::uniform(elements, -0.5f, 0.5f, 12);
  for (float& v : x) v += 1e4f;
  for (const BatchNormSolver* s : solvers_for<BatchNormProblem>(device_.backend())) {
    if (!std::string_view(s->name()).starts_with("gpu.") || !s->check(p, device_)) continue;
    SCOPED_TRACE(std::string(s->name()) + " " + p.key());
    const auto flat = norm_test::run_solver(device_, ProblemRef::of(p), *s,
                                            {{ArgId::src, std::vector<float>(elements, 3.f)}});
    EXPECT_TRUE(norm_test::all_finite(flat.at(ArgId::dst)));
    EXPECT_TRUE(norm_test::all_finite(flat.at(ArgId::saved_invstd)));
    const auto got = norm_test::run_solver(device_, ProblemRef::of(p), *s, {{ArgId::src, x}});
    const auto want = norm_test::run_solver(cpu, ProblemRef::of(p), *ref, {{ArgId::src, x}});
    EXPECT_LT(norm_test::rel_err(got.at(ArgId::saved_invstd), want.at(ArgId::saved_invstd)), 1e-5);
    EXPECT_LT(norm_test::rel_err(got.at(ArgId::dst), want.at(ArgId::dst)), 1e-5);
    const auto again = norm_test::run_solver(device_, ProblemRef::of(p), *s, {{ArgId::src, x}});
    EXPECT_EQ(again.at(ArgId::dst), got.at(ArgId::dst));
    EXPECT_EQ(again.at(ArgId::saved_mean), got.at(ArgId::saved_mean));
    EXPECT_EQ(again.at(ArgId::saved_invstd), got.at(ArgId::saved_invstd));
    BatchNormProblem back = p;
    back.direction = NormDirection::backward;
    const auto first = norm_test::run_solver(device_, ProblemRef::of(back), *s);
    const auto second = norm_test::run_solver(device_, ProblemRef::of(back), *s);
    EXPECT_EQ(first.at(ArgId::diff_src), second.at(ArgId::diff_src));
    EXPECT_EQ(first.at(ArgId::diff_scale), second.at(ArgId::diff_scale));
    EXPECT_EQ(first.at(ArgId::diff_shift), second.at(ArgId::diff_shift));
  }
}

// Each shape in f32, f16 and bf16, forward and backward.
std::vector<LayerNormProblem> every_dtype_and_direction(std::initializer_list<LayerNormProblem> shapes) {
  std::vector<LayerNormProblem> out;
  for (const LayerNormProblem& shape : shapes) {
    for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
      for (NormDirection d : {NormDirection::forward, NormDirection::backward}) {
        LayerNormProblem p = shape;
        p.dtype = dt;
        p.direction = d;
        out.push_back(p);
      }
    }
  }
  return out;
}

TEST_P(GpuNorm, LayerNormMatchesTheReference) {
  const std::vector<LayerNormProblem> problems =
      every_dtype_and_direction({LayerNormProblem::of({1, 17}, 1), LayerNormProblem::of({3, 5, 31, 29}, 2),
                                 LayerNormProblem::of({23, 4100}, 1), LayerNormProblem::of({2, 3, 9}, 3),
                                 LayerNormProblem::of({64, 768}, 1), LayerNormProblem::of({5000, 8}, 1)});
  EXPECT_GT(check_all(device_, problems), 0);
}

TEST_P(GpuNorm, LayerNormRegisterPathMatchesTheReference) {
  // Rows of a multiple of 8 up to 1024 keep a row in registers: 8 and 24 elements give 1 and 4
  // lanes a row (one of the 4 idle), 40 gives 8 lanes with 3 idle, 256 two rows per group of 32
  // lanes (2697 rows: a partial last block), 512 two vectors a lane, 776 and 1024 four (776's
  // last vector only on the first lane; their backward takes the generic path). 12347 rows of 256
  // make the persistent backward blocks loop over several rows each.
  std::vector<LayerNormProblem> problems = every_dtype_and_direction(
      {LayerNormProblem::of({1, 8}, 1), LayerNormProblem::of({37, 24}, 1), LayerNormProblem::of({33, 40}, 1),
       LayerNormProblem::of({3, 31, 29, 256}, 1), LayerNormProblem::of({17, 512}, 1),
       LayerNormProblem::of({19, 776}, 1), LayerNormProblem::of({5, 1024}, 1)});
  for (NormDirection d : {NormDirection::forward, NormDirection::backward}) {
    LayerNormProblem p = LayerNormProblem::of({12347, 256}, 1);
    p.dtype = DType::f16;
    p.direction = d;
    problems.push_back(p);
  }
  EXPECT_GT(check_all(device_, problems), 0);
}

TEST_P(GpuNorm, LayerNormRegisterPathConstantRowsLargeMeansAndRepeatableBits) {
  const runtime::Device cpu = runtime::device("cpu");
  const LayerNormSolver* ref = find_solver_for<LayerNormProblem>("cpu", kRefLnormName);
  ASSERT_NE(ref, nullptr);
  std::vector<float> big = norm_test::uniform(40 * 512, -0.5f, 0.5f, 11);  // the longest rows below
  for (float& v : big) v += 1e4f;
  for (const LayerNormSolver* s : solvers_for<LayerNormProblem>(device_.backend())) {
    for (std::int64_t len : {24, 256, 512}) {
      LayerNormProblem p = LayerNormProblem::of({40, len}, 1);
      SCOPED_TRACE(std::string(s->name()) + " " + p.key());
      const std::vector<float> x(big.begin(), big.begin() + 40 * len);
      const auto flat = norm_test::run_solver(device_, ProblemRef::of(p), *s,
                                              {{ArgId::src, std::vector<float>(x.size(), 7.f)}});
      EXPECT_TRUE(norm_test::all_finite(flat.at(ArgId::dst)));
      EXPECT_TRUE(norm_test::all_finite(flat.at(ArgId::saved_invstd)));
      const auto got = norm_test::run_solver(device_, ProblemRef::of(p), *s, {{ArgId::src, x}});
      const auto want = norm_test::run_solver(cpu, ProblemRef::of(p), *ref, {{ArgId::src, x}});
      EXPECT_LT(norm_test::rel_err(got.at(ArgId::dst), want.at(ArgId::dst)), 1e-5);
      EXPECT_LT(norm_test::rel_err(got.at(ArgId::saved_invstd), want.at(ArgId::saved_invstd)), 1e-5);
      // The backward of constant rows with the statistics the forward saves for them (xhat 0,
      // invstd 1/sqrt(epsilon)).
      p.direction = NormDirection::backward;
      const norm_test::Values constant{{ArgId::src, std::vector<float>(x.size(), 7.f)},
                                       {ArgId::saved_mean, std::vector<float>(40, 7.f)},
                                       {ArgId::saved_invstd, std::vector<float>(40, 1.f / std::sqrt(1e-5f))}};
      const auto back = norm_test::run_solver(device_, ProblemRef::of(p), *s, constant);
      const auto back_want = norm_test::run_solver(cpu, ProblemRef::of(p), *ref, constant);
      EXPECT_TRUE(norm_test::all_finite(back.at(ArgId::diff_src)));
      EXPECT_LT(norm_test::rel_err(back.at(ArgId::diff_src), back_want.at(ArgId::diff_src)), 1e-4);
      EXPECT_LT(norm_test::rel_err(back.at(ArgId::diff_shift), back_want.at(ArgId::diff_shift)), 1e-5);
    }
    // Column sums over many blocks come out with the same bits every run.
    LayerNormProblem p = LayerNormProblem::of({12347, 256}, 1);
    p.dtype = DType::f16;
    p.direction = NormDirection::backward;
    const auto first = norm_test::run_solver(device_, ProblemRef::of(p), *s);
    const auto again = norm_test::run_solver(device_, ProblemRef::of(p), *s);
    EXPECT_EQ(first.at(ArgId::diff_scale), again.at(ArgId::diff_scale)) << s->name();
    EXPECT_EQ(first.at(ArgId::diff_shift), again.at(ArgId::diff_shift)) << s->name();
    EXPECT_EQ(first.at(ArgId::diff_src), again.at(ArgId::diff_src)) << s->name();
  }
}

TEST_P(GpuNorm, GroupNormMatchesTheReference) {
  // nhwc: 264 channels are two channel tiles; 3x40x31x29 has 5 vectors a row and splits each image;
  // 4x256x31x67 gives the f32 backward several rows in flight per thread with a partial last chunk.
  const std::int64_t shapes[][5] = {{1, 3, 31, 29, 3},  {2, 17, 5, 7, 1},    {3, 24, 3, 3, 8},
                                    {2, 32, 16, 16, 8}, {1, 64, 48, 48, 32}, {2, 8, 7, 7, 4},
                                    {2, 264, 7, 9, 33}, {3, 40, 31, 29, 5},  {4, 256, 31, 67, 32}};
  std::vector<GroupNormProblem> problems;
  for (const auto& sh : shapes) {
    for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
      for (Layout l : {Layout::nchw, Layout::nhwc}) {
        for (NormDirection d : {NormDirection::forward, NormDirection::backward}) {
          problems.push_back(GroupNormProblem{.n = sh[0],
                                              .c = sh[1],
                                              .h = sh[2],
                                              .w = sh[3],
                                              .groups = sh[4],
                                              .dtype = dt,
                                              .layout = l,
                                              .direction = d});
        }
      }
    }
  }
  EXPECT_GT(check_all(device_, problems), 0);
}

TEST_P(GpuNorm, ConstantChannelsLargeMeansAndRepeatableBits) {
  const runtime::Device cpu = runtime::device("cpu");
  const BatchNormSolver* ref = find_solver_for<BatchNormProblem>("cpu", kRefBnormName);
  ASSERT_NE(ref, nullptr);
  for (const BatchNormSolver* s : solvers_for<BatchNormProblem>(device_.backend())) {
    for (Layout l : {Layout::nchw, Layout::nhwc}) {
      const BatchNormProblem p{.n = 4, .c = 16, .h = 16, .w = 16, .layout = l};
      SCOPED_TRACE(std::string(s->name()) + " " + p.key());
      const auto flat = norm_test::run_solver(device_, ProblemRef::of(p), *s,
                                              {{ArgId::src, std::vector<float>(16384, 3.f)}});
      EXPECT_TRUE(norm_test::all_finite(flat.at(ArgId::dst)));
      EXPECT_TRUE(norm_test::all_finite(flat.at(ArgId::saved_invstd)));
      EXPECT_TRUE(norm_test::all_finite(flat.at(ArgId::variance)));
      std::vector<float> x = norm_test::uniform(16384, -0.5f, 0.5f, 9);
      for (float& v : x) v += 1e4f;
      const auto got = norm_test::run_solver(device_, ProblemRef::of(p), *s, {{ArgId::src, x}});
      const auto want = norm_test::run_solver(cpu, ProblemRef::of(p), *ref, {{ArgId::src, x}});
      // The own kernels shift the statistics by a sample and compensate the mean's f32 rounding, so
      // y is as exact as f32 allows; a vendor's f32 running means may cost y about 1e-2 here.
      const bool own = std::string_view(s->name()).starts_with("gpu.");
      EXPECT_LT(norm_test::rel_err(got.at(ArgId::saved_invstd), want.at(ArgId::saved_invstd)),
                own ? 1e-5 : 1e-3);
      EXPECT_LT(norm_test::rel_err(got.at(ArgId::dst), want.at(ArgId::dst)), own ? 1e-5 : 5e-2);
      const auto again = norm_test::run_solver(device_, ProblemRef::of(p), *s, {{ArgId::src, x}});
      EXPECT_EQ(again.at(ArgId::dst), got.at(ArgId::dst));
      EXPECT_EQ(again.at(ArgId::saved_mean), got.at(ArgId::saved_mean));
    }
  }
  std::vector<float> big = norm_test::uniform(8000, -0.5f, 0.5f, 10);
  for (float& v : big) v += 1e4f;
  for (const LayerNormSolver* s : solvers_for<LayerNormProblem>(device_.backend())) {
    const LayerNormProblem p = LayerNormProblem::of({8, 1000}, 1);
    const auto flat =
        norm_test::run_solver(device_, ProblemRef::of(p), *s, {{ArgId::src, std::vector<float>(8000, -2.f)}});
    EXPECT_TRUE(norm_test::all_finite(flat.at(ArgId::dst))) << s->name();
    const auto got = norm_test::run_solver(device_, ProblemRef::of(p), *s, {{ArgId::src, big}});
    const auto want =
        norm_test::run_solver(cpu, ProblemRef::of(p),
                              *find_solver_for<LayerNormProblem>("cpu", kRefLnormName), {{ArgId::src, big}});
    EXPECT_LT(norm_test::rel_err(got.at(ArgId::dst), want.at(ArgId::dst)), 1e-5) << s->name();
  }
  for (const GroupNormSolver* s : solvers_for<GroupNormProblem>(device_.backend())) {
    for (Layout l : {Layout::nchw, Layout::nhwc}) {
      const GroupNormProblem p{.n = 2, .c = 16, .h = 8, .w = 8, .groups = 4, .layout = l};
      const auto flat = norm_test::run_solver(device_, ProblemRef::of(p), *s,
                                              {{ArgId::src, std::vector<float>(2048, 5.f)}});
      EXPECT_TRUE(norm_test::all_finite(flat.at(ArgId::dst))) << s->name();
      const std::vector<float> x(big.begin(), big.begin() + 2048);
      const auto got = norm_test::run_solver(device_, ProblemRef::of(p), *s, {{ArgId::src, x}});
      const auto want =
          norm_test::run_solver(cpu, ProblemRef::of(p),
                                *find_solver_for<GroupNormProblem>("cpu", kRefGnormName), {{ArgId::src, x}});
      EXPECT_LT(norm_test::rel_err(got.at(ArgId::dst), want.at(ArgId::dst)), 1e-5)
          << s->name() << " " << p.key();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, GpuNorm, ::testing::Values("cuda", "hip"));

}  // namespace
}  // namespace galley::dnn
