// Group norm: key and validation (groups not dividing c named), the reference against a hand case
// and finite differences, every cpu solver against the reference (odd shapes, every dtype, both
// layouts, both directions), constant groups and large means, and the Tensor entry points.
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

TEST(GnormProblem, KeyRoundTrips) {
  for (NormDirection d : {NormDirection::forward, NormDirection::backward}) {
    for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
      for (Layout l : {Layout::nchw, Layout::nhwc}) {
        GroupNormProblem p{
            .n = 3, .c = 24, .h = 31, .w = 29, .groups = 6, .dtype = dt, .layout = l, .direction = d};
        p.epsilon = 0.001;
        EXPECT_EQ(GroupNormProblem::parse_key(p.key()), p) << p.key();
        EXPECT_EQ(parse_problem_key(p.key()).ref().key(), p.key());
      }
    }
  }
  EXPECT_EQ((GroupNormProblem{.n = 8, .c = 64, .h = 28, .w = 28, .groups = 32}.key()),
            "gnorm-F-f32-nchw-n8-c64-h28-w28-g32-e0.00001");
  for (const char* key :
       {"gnorm-F-f32-nchw-n8-c64-h28-w28-g32", "gnorm-F-f32-nchw-n8-c64-h28-w28-g30-e0.00001",
        "gnorm-F-f32-nchw-n8-c64-h28-w28-x32-e0.00001", "gnorm-F-f32-nchw-n8-c64-h28-w28-g32-e-1"}) {
    expect_invalid([&] { GroupNormProblem::parse_key(key); }, {"gnorm"});
  }
}

TEST(GnormProblem, ValidationNamesTheField) {
  const GroupNormProblem p{.n = 2, .c = 6, .h = 4, .w = 5, .groups = 3};
  expect_invalid(
      [&] {
        GroupNormProblem q = p;
        q.groups = 4;
        q.validate();
      },
      {"groups (-g) = 4", "does not divide c", "6"});
  expect_invalid(
      [&] {
        GroupNormProblem q = p;
        q.groups = 0;
        q.validate();
      },
      {"groups"});
  expect_invalid(
      [&] {
        GroupNormProblem q = p;
        q.w = 0;
        q.validate();
      },
      {"w (width"});
  expect_invalid(
      [&] {
        GroupNormProblem q = p;
        q.epsilon = -1;
        q.validate();
      },
      {"epsilon"});
  expect_invalid(
      [&] {
        GroupNormProblem q = p;
        q.dtype = DType::i32;
        q.validate();
      },
      {"dtype i32"});
  EXPECT_EQ(p.stat_desc().elements(), 6);
  EXPECT_EQ(p.group_size(), 40);
}

TEST(GnormReference, HandComputedGroups) {
  // n 1, c 2, 1x2 pixels, one group: the group is {1, 3, 5, 7} (nchw), mean 4, variance 5.
  const GroupNormProblem p{.n = 1, .c = 2, .h = 1, .w = 2, .groups = 1, .epsilon = 1.0};
  const double x[4] = {1, 3, 5, 7}, scale[2] = {1, 2}, shift[2] = {0, -1};
  double y[4], sm[1], si[1];
  NormDoubleArgs a;
  a.x = x, a.scale = scale, a.shift = shift, a.y = y, a.saved_mean = sm, a.saved_invstd = si;
  reference_norm_double(p, a);
  const double r = 1 / std::sqrt(6.0);
  EXPECT_DOUBLE_EQ(sm[0], 4);
  EXPECT_NEAR(si[0], r, 1e-15);
  EXPECT_NEAR(y[0], -3 * r, 1e-14);
  EXPECT_NEAR(y[1], -1 * r, 1e-14);
  EXPECT_NEAR(y[2], 2 * r - 1, 1e-14);
  EXPECT_NEAR(y[3], 6 * r - 1, 1e-14);
}

TEST(GnormReference, BackwardMatchesCentralDifferences) {
  for (Layout l : {Layout::nchw, Layout::nhwc}) {
    norm_test::expect_backward_matches_central_differences(
        GroupNormProblem{.n = 2, .c = 6, .h = 2, .w = 3, .groups = 3, .layout = l, .epsilon = 1e-3});
    norm_test::expect_backward_matches_central_differences(
        GroupNormProblem{.n = 1, .c = 4, .h = 1, .w = 5, .groups = 1, .layout = l, .epsilon = 1e-3});
  }
}

void expect_cpu_solvers_match_reference() {
  // 40 channels in 5 groups: whole vectors of channels and a partial one in NHWC rows.
  const std::int64_t shapes[][5] = {{1, 3, 31, 29, 3},
                                    {2, 17, 5, 7, 1},
                                    {3, 24, 3, 3, 8},
                                    {2, 32, 9, 1, 32},
                                    {2, 40, 3, 5, 5},
                                    // NHWC rows wider than one 64-channel chunk, over several images
                                    {2, 80, 3, 5, 16},
                                    {3, 136, 2, 2, 8},
                                    // images enough for the per-image NHWC passes on a small pool
                                    {8, 48, 5, 7, 6}};
  int checked = 0;
  for (const GroupNormSolver* s : solvers_for<GroupNormProblem>("cpu")) {
    if (s->is_reference()) continue;
    for (const auto& sh : shapes) {
      for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
        for (Layout l : {Layout::nchw, Layout::nhwc}) {
          for (NormDirection d : {NormDirection::forward, NormDirection::backward}) {
            const GroupNormProblem p{.n = sh[0],
                                     .c = sh[1],
                                     .h = sh[2],
                                     .w = sh[3],
                                     .groups = sh[4],
                                     .dtype = dt,
                                     .layout = l,
                                     .direction = d};
            norm_test::expect_matches_reference(cpu(), ProblemRef::of(p), *s);
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 0);
  EXPECT_TRUE(solvers_for<GroupNormProblem>("cpu").back()->is_reference());
}

TEST(GnormCpuSolvers, EveryShapeDtypeLayoutMatchesTheReference) { expect_cpu_solvers_match_reference(); }

// The plane loops have AVX-512 builds and scalar ones; a machine with AVX-512 takes the scalar
// ones only when capped.
TEST(GnormCpuSolvers, TheScalarLoopsMatchTheReference) {
  const IsaCap capped(backends::cpu::CpuIsa::scalar);
  expect_cpu_solvers_match_reference();
}

// f32 tensors of 16 MiB and more, whose outputs the AVX-512 loops write with non-temporal stores:
// 127x125 planes start off the 64-byte lines (head and tail of each plane masked), 144 channels
// give NHWC rows of whole aligned vectors, 4 images the per-image NHWC passes on a small pool.
TEST(GnormCpuSolvers, OutputsBeyondTheCachesMatchTheReference) {
  const std::int64_t shapes[][5] = {{2, 136, 127, 125, 68}, {4, 144, 86, 86, 72}};
  for (const GroupNormSolver* s : solvers_for<GroupNormProblem>("cpu")) {
    if (s->is_reference()) continue;
    for (const auto& sh : shapes) {
      for (Layout l : {Layout::nchw, Layout::nhwc}) {
        for (NormDirection d : {NormDirection::forward, NormDirection::backward}) {
          const GroupNormProblem p{
              .n = sh[0], .c = sh[1], .h = sh[2], .w = sh[3], .groups = sh[4], .layout = l, .direction = d};
          norm_test::expect_matches_reference(cpu(), ProblemRef::of(p), *s);
        }
      }
    }
  }
}

TEST(GnormCpuSolvers, ConstantGroupsAndLargeMeans) {
  const GroupNormSolver* ref = find_solver_for<GroupNormProblem>("cpu", kRefGnormName);
  ASSERT_NE(ref, nullptr);
  for (const GroupNormSolver* s : solvers_for<GroupNormProblem>("cpu")) {
    for (Layout l : {Layout::nchw, Layout::nhwc}) {
      const GroupNormProblem p{.n = 2, .c = 8, .h = 6, .w = 5, .groups = 4, .layout = l};
      SCOPED_TRACE(std::string(s->name()) + " " + p.key());
      const auto flat =
          norm_test::run_solver(cpu(), ProblemRef::of(p), *s, {{ArgId::src, std::vector<float>(480, 2.5f)}});
      EXPECT_TRUE(norm_test::all_finite(flat.at(ArgId::dst)));
      for (std::size_t e = 0; e < 480; ++e) {
        const std::size_t ch = l == Layout::nchw ? (e / 30) % 8 : e % 8;
        EXPECT_EQ(flat.at(ArgId::dst)[e], flat.at(ArgId::shift)[ch]);
      }
      std::vector<float> x = norm_test::uniform(480, -0.5f, 0.5f, 5);
      for (float& v : x) v += 1e4f;
      const auto got = norm_test::run_solver(cpu(), ProblemRef::of(p), *s, {{ArgId::src, x}});
      const auto want = norm_test::run_solver(cpu(), ProblemRef::of(p), *ref, {{ArgId::src, x}});
      EXPECT_LT(norm_test::rel_err(got.at(ArgId::saved_invstd), want.at(ArgId::saved_invstd)), 1e-5);
      EXPECT_LT(norm_test::rel_err(got.at(ArgId::dst), want.at(ArgId::dst)), 1e-5);
    }
  }
}

TEST(GnormEntryPoints, ForwardBackwardAndMismatchedTensors) {
  runtime::Stream stream(cpu());
  const GroupNormProblem p{.n = 2, .c = 6, .h = 3, .w = 4, .groups = 2, .layout = Layout::nhwc};
  const auto fill = [&](const TensorDesc& d, std::uint64_t seed) {
    Tensor t = Tensor::empty(stream, d);
    const auto v = norm_test::uniform(static_cast<std::size_t>(d.elements()), -1, 1, seed);
    t.copy_from_host(stream, v.data(), v.size() * sizeof(float));
    return t;
  };
  Tensor x = fill(p.data_desc(), 1), scale = fill(p.channel_desc(), 2), shift = fill(p.channel_desc(), 3);
  Tensor y = Tensor::empty(stream, p.data_desc());
  Tensor sm = Tensor::empty(stream, p.stat_desc()), si = Tensor::empty(stream, p.stat_desc());
  group_norm_forward(stream, p, x, scale, shift, y, sm, si);
  // Group (image 1, group 0): channels 0..2 of every pixel of image 1.
  const auto xv = x.to_host<float>(stream), mean = sm.to_host<float>(stream);
  double want = 0;
  for (int pix = 0; pix < 12; ++pix)
    for (int ch = 0; ch < 3; ++ch) want += xv[static_cast<std::size_t>((12 + pix) * 6 + ch)];
  EXPECT_NEAR(mean[2], want / 36, 1e-6);
  Tensor dy = fill(p.data_desc(), 4), dx = Tensor::empty(stream, p.data_desc());
  Tensor ds = Tensor::empty(stream, p.channel_desc()), db = Tensor::empty(stream, p.channel_desc());
  group_norm_backward(stream, p, dy, x, scale, sm, si, dx, ds, db);
  EXPECT_TRUE(norm_test::all_finite(dx.to_host<float>(stream)));
  Tensor nchw = Tensor::empty(stream, TensorDesc::packed(DType::f32, Layout::nchw, 2, 6, 3, 4));
  expect_invalid([&] { group_norm_forward(stream, p, nchw, scale, shift, y, sm, si); }, {"x (input)"});
  expect_invalid([&] { group_norm_forward(stream, p, x, scale, shift, y, ds, si); }, {"saved_mean"});
}

}  // namespace
}  // namespace galley::dnn
