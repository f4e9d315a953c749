// The scalar fallbacks of the cpu conv solvers run only on CPUs without AVX2, so on this machine
// the solver tests never reach them. Here each scalar kernel is run directly and compared with
// its AVX2 twin (which the solver tests hold to the reference) on the same data, and the
// F16C/AVX2 conversions are checked bit for bit against galley/core/dtype.hpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/conv_convert.hpp"
#include "backends/cpu/conv_depthwise_kernels.hpp"
#include "backends/cpu/conv_direct_kernels.hpp"
#include "backends/cpu/conv_isa.hpp"
#include "backends/cpu/sgemm_avx512.hpp"
#include "galley/core/dtype.hpp"
#include "random_floats.hpp"

namespace galley::backends::cpu {
namespace {

using galley::test::random_floats;

ConvShape shape(std::int64_t c, std::int64_t h, std::int64_t w, std::int64_t k, std::int64_t r,
                std::int64_t s, std::int64_t pad, std::int64_t stride, std::int64_t dil, std::int64_t g,
                bool nhwc) {
  const dnn::ConvProblem p{.n = 2,
                           .c = c,
                           .h = h,
                           .w = w,
                           .k = k,
                           .y = r,
                           .x = s,
                           .pad_h = pad,
                           .pad_w = pad,
                           .stride_h = stride,
                           .stride_w = stride,
                           .dilation_h = dil,
                           .dilation_w = dil,
                           .groups = g,
                           .layout = nhwc ? dnn::Layout::nhwc : dnn::Layout::nchw};
  return ConvShape::of(p);
}

void expect_close(const std::vector<float>& a, const std::vector<float>& b, const char* what) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    ASSERT_FALSE(std::isnan(a[i]) || std::isnan(b[i])) << what << " NaN at " << i;
    ASSERT_NEAR(a[i], b[i], 1e-4f * (1.0f + std::fabs(b[i]))) << what << " at " << i;
  }
}

TEST(CpuConvKernels, DirectScalarMatchesAvx2) {
  if (!cpu_has_avx2_fma()) GTEST_SKIP() << "no AVX2 here: the solver tests already run the scalar path";
  for (bool nhwc : {false, true}) {
    for (const ConvShape& s :
         {shape(5, 9, 13, 21, 3, 3, 1, 1, 1, 1, nhwc), shape(6, 11, 10, 8, 5, 5, 2, 2, 1, 2, nhwc),
          shape(4, 12, 12, 16, 3, 3, 2, 1, 2, 1, nhwc)}) {
      const direct::Geometry g = direct::Geometry::of(s, 2);
      const auto x = random_floats(static_cast<std::size_t>(s.n * s.c * s.h * s.w), 1);
      const auto wp = random_floats(static_cast<std::size_t>(g.block_floats()), 2);
      const std::int64_t rows = std::min<std::int64_t>(g.rows_per_task, s.n * s.ho);
      std::vector<float> a(static_cast<std::size_t>(g.tile_floats()), NAN), b = a;
      // Rows from the end of image 0 into image 1, for the last group.
      const std::int64_t row0 = std::max<std::int64_t>(0, s.ho - rows / 2);
      const std::int64_t row1 = std::min(s.n * s.ho, row0 + rows);
      direct::rows_scalar(g, x.data(), s.g - 1, wp.data(), row0, row1, a.data());
      direct::rows_avx2(g, x.data(), s.g - 1, wp.data(), row0, row1, b.data());
      a.resize(static_cast<std::size_t>((row1 - row0) * s.wo * g.kbw));
      b.resize(a.size());
      expect_close(a, b, "direct rows");
    }
  }
}

TEST(CpuConvKernels, DepthwiseScalarMatchesAvx2) {
  if (!cpu_has_avx2_fma()) GTEST_SKIP() << "no AVX2 here: the solver tests already run the scalar path";
  for (const ConvShape& s :
       {shape(3, 17, 23, 3, 3, 3, 1, 1, 1, 3, false), shape(3, 17, 23, 3, 5, 5, 2, 2, 1, 3, false),
        shape(3, 9, 40, 3, 3, 3, 2, 1, 2, 3, false)}) {
    const depthwise::Plane plane = depthwise::Plane::of(s);
    const auto x = random_floats(static_cast<std::size_t>(s.h * s.w), 3);
    const auto w = random_floats(static_cast<std::size_t>(s.r * s.s), 4);
    std::vector<float> buf(static_cast<std::size_t>(plane.floats()));
    depthwise::build_plane(s, plane, x.data(), buf.data());
    std::vector<float> scalar(static_cast<std::size_t>(s.ho * s.wo), NAN), simd = scalar, in_place = scalar;
    depthwise::nchw_plane_scalar(s, plane, buf.data(), w.data(), scalar.data());
    depthwise::nchw_plane_avx2(s, plane, buf.data(), w.data(), simd.data());
    expect_close(simd, scalar, "depthwise plane");
    if (s.sw == 1) {
      depthwise::nchw_plane_s1_avx2(s, x.data(), w.data(), in_place.data());
      expect_close(in_place, scalar, "depthwise in place");
    }
  }
  for (const ConvShape& s :
       {shape(37, 7, 9, 37, 3, 3, 1, 1, 1, 37, true), shape(8, 7, 9, 8, 3, 3, 2, 2, 2, 8, true)}) {
    const auto x = random_floats(static_cast<std::size_t>(s.h * s.w * s.c), 5);
    const auto wt = random_floats(static_cast<std::size_t>(s.r * s.s * s.c), 6);
    for (std::int64_t oh = 0; oh < s.ho; ++oh) {
      std::vector<float> a(static_cast<std::size_t>(s.wo * s.c), NAN), b = a;
      depthwise::nhwc_row_scalar(s, x.data(), wt.data(), oh, a.data());
      depthwise::nhwc_row_avx2(s, x.data(), wt.data(), oh, b.data());
      expect_close(b, a, "depthwise nhwc row");
    }
  }
}

// The AVX-512 in-place plane loops against the scalar loop on the padded plane, over shapes that
// cut through their 16-column steps and row blocks: widths below, at and just past a vector,
// prime sizes, padding wider than the filter's reach, stride and dilation in height.
TEST(CpuConvKernels, DepthwiseAvx512MatchesScalar) {
  if (cpu_isa_supported() < CpuIsa::avx512) GTEST_SKIP() << "no AVX-512 on this CPU";
  for (const ConvShape& s :
       {shape(1, 56, 56, 1, 3, 3, 1, 1, 1, 1, false), shape(1, 17, 23, 1, 3, 3, 1, 1, 1, 1, false),
        shape(1, 3, 5, 1, 3, 3, 1, 1, 1, 1, false), shape(1, 16, 16, 1, 3, 3, 0, 1, 1, 1, false),
        shape(1, 9, 15, 1, 3, 3, 2, 1, 1, 1, false), shape(1, 31, 33, 1, 3, 3, 1, 1, 1, 1, false),
        shape(1, 17, 23, 1, 5, 5, 2, 1, 1, 1, false), shape(1, 9, 40, 1, 3, 3, 2, 1, 2, 1, false),
        shape(1, 11, 13, 1, 7, 7, 3, 1, 1, 1, false), shape(1, 8, 4, 1, 3, 3, 3, 1, 1, 1, false),
        // The rolling 3x3 loop (padding 1): one and two rows, widths at and past a vector, and rows
        // of several 64-column strips (each strip's edge columns read from its neighbours).
        shape(1, 1, 20, 1, 3, 3, 1, 1, 1, 1, false), shape(1, 2, 64, 1, 3, 3, 1, 1, 1, 1, false),
        shape(1, 4, 16, 1, 3, 3, 1, 1, 1, 1, false), shape(1, 5, 17, 1, 3, 3, 1, 1, 1, 1, false),
        shape(1, 7, 65, 1, 3, 3, 1, 1, 1, 1, false), shape(1, 29, 1, 1, 3, 3, 1, 1, 1, 1, false),
        shape(1, 112, 112, 1, 3, 3, 1, 1, 1, 1, false), shape(1, 3, 128, 1, 3, 3, 1, 1, 1, 1, false),
        shape(1, 6, 129, 1, 3, 3, 1, 1, 1, 1, false), shape(1, 5, 200, 1, 3, 3, 1, 1, 1, 1, false)}) {
    SCOPED_TRACE("h=" + std::to_string(s.h) + " w=" + std::to_string(s.w) + " r=" + std::to_string(s.r) +
                 " pad=" + std::to_string(s.ph) + " dil=" + std::to_string(s.dh));
    const depthwise::Plane plane = depthwise::Plane::of(s);
    const auto x = random_floats(static_cast<std::size_t>(s.h * s.w), 7);
    const auto w = random_floats(static_cast<std::size_t>(s.r * s.s), 8);
    std::vector<float> buf(static_cast<std::size_t>(plane.floats()));
    depthwise::build_plane(s, plane, x.data(), buf.data());
    // One spare float after the plane: a store past Wo x Ho would show there.
    std::vector<float> scalar(static_cast<std::size_t>(s.ho * s.wo), NAN), simd(scalar.size() + 1, NAN);
    depthwise::nchw_plane_scalar(s, plane, buf.data(), w.data(), scalar.data());
    depthwise::nchw_plane_s1_avx512(s, x.data(), w.data(), simd.data(), nullptr);
    EXPECT_TRUE(std::isnan(simd.back())) << "wrote past the plane";
    simd.pop_back();
    expect_close(simd, scalar, "depthwise avx512 in place");
  }
}

ConvShape plane_shape(std::int64_t h, std::int64_t w, std::int64_t r, std::int64_t s, std::int64_t pad_h,
                      std::int64_t pad_w, std::int64_t stride_h, std::int64_t dil_h) {
  const dnn::ConvProblem p{.n = 1,
                           .c = 1,
                           .h = h,
                           .w = w,
                           .k = 1,
                           .y = r,
                           .x = s,
                           .pad_h = pad_h,
                           .pad_w = pad_w,
                           .stride_h = stride_h,
                           .stride_w = 2,
                           .dilation_h = dil_h,
                           .dilation_w = 1,
                           .groups = 1};
  return ConvShape::of(p);
}

// The width-stride-2 loop against the scalar loop on the padded plane: widths below, at and past
// one and two vectors of input (an output step reads 32 columns), odd and prime sizes, filters of
// odd and even width (the last tap of an even one has no partner), padding wider than the filter
// reaches, height strides 1 to 3 and height dilation.
TEST(CpuConvKernels, DepthwiseStride2Avx512MatchesScalar) {
  if (cpu_isa_supported() < CpuIsa::avx512) GTEST_SKIP() << "no AVX-512 on this CPU";
  for (const ConvShape& s : {plane_shape(112, 112, 3, 3, 1, 1, 2, 1), plane_shape(14, 14, 3, 3, 1, 1, 2, 1),
                             plane_shape(7, 7, 3, 3, 1, 1, 2, 1), plane_shape(1, 1, 3, 3, 1, 1, 2, 1),
                             plane_shape(2, 3, 3, 3, 1, 1, 2, 1), plane_shape(29, 31, 3, 3, 1, 1, 2, 1),
                             plane_shape(33, 33, 3, 3, 0, 0, 2, 1), plane_shape(37, 65, 5, 5, 2, 2, 2, 1),
                             plane_shape(23, 17, 2, 2, 0, 0, 2, 1), plane_shape(19, 40, 1, 1, 0, 0, 2, 1),
                             plane_shape(13, 47, 7, 7, 3, 3, 2, 1), plane_shape(11, 9, 4, 4, 5, 6, 1, 1),
                             plane_shape(41, 35, 3, 3, 1, 1, 3, 2), plane_shape(57, 113, 3, 3, 2, 1, 1, 1),
                             // 3x3 stride-2 "same" rows of 1 to 4 vectors and past them
                             plane_shape(128, 128, 3, 3, 1, 1, 2, 1), plane_shape(6, 97, 3, 3, 1, 1, 2, 1),
                             plane_shape(30, 33, 3, 3, 1, 1, 2, 1), plane_shape(9, 130, 3, 3, 1, 1, 2, 1)}) {
    SCOPED_TRACE("h=" + std::to_string(s.h) + " w=" + std::to_string(s.w) + " r=" + std::to_string(s.r) +
                 " s=" + std::to_string(s.s) + " pad=" + std::to_string(s.ph) + "," + std::to_string(s.pw) +
                 " sh=" + std::to_string(s.sh) + " dh=" + std::to_string(s.dh));
    ASSERT_TRUE(depthwise::nchw_plane_s2_fits(s));
    const depthwise::Plane plane = depthwise::Plane::of(s);
    const auto x = random_floats(static_cast<std::size_t>(s.h * s.w), 9);
    const auto w = random_floats(static_cast<std::size_t>(s.r * s.s), 10);
    std::vector<float> buf(static_cast<std::size_t>(plane.floats()));
    depthwise::build_plane(s, plane, x.data(), buf.data());
    std::vector<float> scalar(static_cast<std::size_t>(s.ho * s.wo), NAN), simd(scalar.size() + 1, NAN);
    depthwise::nchw_plane_scalar(s, plane, buf.data(), w.data(), scalar.data());
    depthwise::nchw_plane_s2_avx512(s, x.data(), w.data(), simd.data(), nullptr);
    EXPECT_TRUE(std::isnan(simd.back())) << "wrote past the plane";
    simd.pop_back();
    expect_close(simd, scalar, "depthwise avx512 stride 2");
  }
}

// The epilogue applied in the plane loops' stores is bit for bit the one applied to the stored
// plane afterwards (avx512::apply_post_ops, what the solver ran before): bias, residual and each
// compare-and-select activation, over every loop (rolling 3x3, blocked 3x3, any filter, stride 2),
// with NaN in the residual passing through as the scalar definitions let it.
TEST(CpuConvKernels, DepthwisePostOpsInStoresMatchAPassAfter) {
  if (cpu_isa_supported() < CpuIsa::avx512) GTEST_SKIP() << "no AVX-512 on this CPU";
  using Act = avx512::PostOps::Activation;
  const ConvShape shapes[] = {
      shape(1, 13, 29, 1, 3, 3, 1, 1, 1, 1, false), shape(1, 9, 70, 1, 3, 3, 1, 1, 1, 1, false),
      shape(1, 17, 23, 1, 5, 5, 2, 1, 1, 1, false), plane_shape(29, 31, 3, 3, 1, 1, 2, 1),
      plane_shape(8, 8, 5, 5, 2, 2, 2, 1),          plane_shape(20, 70, 3, 3, 1, 1, 2, 1)};
  for (const ConvShape& s : shapes) {
    for (const Act act : {Act::none, Act::relu, Act::leaky_relu, Act::clip}) {
      for (const bool residual : {false, true}) {
        SCOPED_TRACE("h=" + std::to_string(s.h) + " w=" + std::to_string(s.w) +
                     " sw=" + std::to_string(s.sw) + " act=" + std::to_string(static_cast<int>(act)) +
                     " residual=" + std::to_string(residual));
        const std::size_t count = static_cast<std::size_t>(s.ho * s.wo);
        const auto x = random_floats(static_cast<std::size_t>(s.h * s.w), 11);
        const auto w = random_floats(static_cast<std::size_t>(s.r * s.s), 12);
        auto res = random_floats(count, 13);
        res[count / 2] = NAN;
        const float bias = -0.25f;
        avx512::PostOps post;
        post.bias = &bias;
        post.residual = residual ? res.data() : nullptr;
        post.ld_residual = static_cast<std::int64_t>(count);
        post.activation = act;
        post.act_alpha = act == Act::clip ? -0.5f : 0.1f;
        post.act_beta = 0.5f;
        const auto run = [&](float* out, const avx512::PostOps* p) {
          if (s.sw == 2) {
            depthwise::nchw_plane_s2_avx512(s, x.data(), w.data(), out, p);
          } else {
            depthwise::nchw_plane_s1_avx512(s, x.data(), w.data(), out, p);
          }
        };
        std::vector<float> after(count + 1, 7.0f), fused(count + 1, 7.0f);
        run(after.data(), nullptr);
        avx512::apply_post_ops(1, static_cast<std::int64_t>(count), after.data(),
                               static_cast<std::int64_t>(count), post);
        run(fused.data(), &post);
        EXPECT_EQ(fused.back(), 7.0f) << "wrote past the plane";
        ASSERT_EQ(std::memcmp(after.data(), fused.data(), count * sizeof(float)), 0);
        if (residual) {
          EXPECT_TRUE(std::isnan(fused[count / 2])) << "a NaN residual must reach the output";
        }
      }
    }
  }
}

// The per-channel scalar loop on each plane's padded copy: what the small-plane loops must match.
std::vector<float> scalar_planes(const ConvShape& s, std::int64_t planes, const std::vector<float>& x,
                                 const std::vector<float>& w) {
  const depthwise::Plane plane = depthwise::Plane::of(s);
  std::vector<float> buf(static_cast<std::size_t>(plane.floats()));
  std::vector<float> out(static_cast<std::size_t>(planes * s.ho * s.wo));
  for (std::int64_t c = 0; c < planes; ++c) {
    depthwise::build_plane(s, plane, x.data() + c * s.h * s.w, buf.data());
    depthwise::nchw_plane_scalar(s, plane, buf.data(), w.data() + c * 9, out.data() + c * s.ho * s.wo);
  }
  return out;
}

// Both planes NaN at the same places, the rest within fp32 rounding of the nine-term sums.
void expect_same_planes(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(std::isnan(got[i]), std::isnan(want[i])) << what << " NaN mismatch at " << i;
    if (!std::isnan(want[i]))
      ASSERT_NEAR(got[i], want[i], 1e-5f * (1.0f + std::fabs(want[i]))) << what << " at " << i;
  }
}

// One small-plane loop over `planes` channels of one image into y (one spare float after it).
// The channel-block loop runs over blocks of 16 with its scratch poisoned with NaN first, so a
// padding position it failed to zero, or a stale sum it stored, shows.
void run_small_planes(bool packed, const ConvShape& s, std::int64_t planes, const std::vector<float>& x,
                      const std::vector<float>& w, std::vector<float>& y, const avx512::PostOps* post) {
  const std::int64_t in = s.h * s.w, out = s.ho * s.wo;
  if (packed) {
    depthwise::nchw_planes_packed_avx512(s, depthwise::PackedPlane::of(s), x.data(), w.data(), planes,
                                         y.data(), post);
    return;
  }
  const depthwise::ChannelBlock block = depthwise::ChannelBlock::of(s);
  std::vector<float> scratch(static_cast<std::size_t>(block.floats() + 16), NAN);
  // 64-byte aligned start inside the vector.
  const auto misalign = reinterpret_cast<std::uintptr_t>(scratch.data()) % 64 / sizeof(float);
  float* aligned = scratch.data() + (misalign == 0 ? 0 : 16 - misalign);
  for (std::int64_t c0 = 0; c0 < planes; c0 += 16) {
    avx512::PostOps block_post;
    if (post != nullptr) {
      block_post = *post;
      if (block_post.bias != nullptr) block_post.bias += c0;
      if (block_post.residual != nullptr) block_post.residual += c0 * out;
    }
    depthwise::nchw_channel_block_avx512(s, block, x.data() + c0 * in, w.data() + c0 * 9,
                                         std::min<std::int64_t>(16, planes - c0), y.data() + c0 * out,
                                         aligned, post != nullptr ? &block_post : nullptr);
  }
}

// The packed 3x3 "same" loop and the 16-channel block loop against the scalar loop, planes
// side by side as in an image: channel counts that leave a block part full (1, 17, 33) or fill it,
// prime and oblong planes, the narrowest widths, strides 1 and 2 (the block loop), unpadded. A
// NaN input pixel must reach exactly the outputs whose taps cover it.
TEST(CpuConvKernels, DepthwiseSmallPlanesMatchScalar) {
  if (cpu_isa_supported() < CpuIsa::avx512) GTEST_SKIP() << "no AVX-512 on this CPU";
  const ConvShape shapes[] = {plane_shape(7, 7, 3, 3, 1, 1, 1, 1),   plane_shape(13, 13, 3, 3, 1, 1, 1, 1),
                              plane_shape(5, 11, 3, 3, 1, 1, 1, 1),  plane_shape(16, 4, 3, 3, 1, 1, 1, 1),
                              plane_shape(3, 2, 3, 3, 1, 1, 1, 1),   plane_shape(1, 15, 3, 3, 1, 1, 1, 1),
                              plane_shape(14, 14, 3, 3, 1, 1, 2, 1), plane_shape(13, 13, 3, 3, 1, 1, 2, 1),
                              plane_shape(28, 28, 3, 3, 1, 1, 2, 1), plane_shape(7, 7, 3, 3, 1, 1, 2, 1),
                              plane_shape(2, 3, 3, 3, 1, 1, 2, 1),   plane_shape(17, 11, 3, 3, 0, 0, 2, 1),
                              plane_shape(9, 12, 3, 3, 2, 1, 1, 1),  plane_shape(11, 9, 3, 3, 2, 2, 3, 1)};
  for (const ConvShape& shape : shapes) {
    for (const bool packed : {true, false}) {
      ConvShape s = shape;
      if (packed) {  // plane_shape makes width stride 2; the packed loop takes unit strides
        s.sw = 1;
        s.wo = s.w + 2 * s.pw - 2;
      }
      if (packed ? !depthwise::PackedPlane::fits(s) : !depthwise::channel_block_fits(s)) continue;
      for (const std::int64_t planes : {1, 16, 17, 33}) {
        SCOPED_TRACE(std::string(packed ? "packed" : "channel block") + " h=" + std::to_string(s.h) +
                     " w=" + std::to_string(s.w) + " pad=" + std::to_string(s.ph) + "," +
                     std::to_string(s.pw) + " sh=" + std::to_string(s.sh) + " sw=" + std::to_string(s.sw) +
                     " planes=" + std::to_string(planes));
        auto x = random_floats(static_cast<std::size_t>(planes * s.h * s.w), 21);
        const auto w = random_floats(static_cast<std::size_t>(planes * 9), 22);
        for (const bool nan : {false, true}) {
          if (nan) x[static_cast<std::size_t>((planes - 1) * s.h * s.w + s.h * s.w / 2)] = NAN;
          const std::size_t count = static_cast<std::size_t>(planes * s.ho * s.wo);
          std::vector<float> got(count + 1, 7.0f);
          run_small_planes(packed, s, planes, x, w, got, nullptr);
          EXPECT_EQ(got.back(), 7.0f) << "wrote past the planes";
          got.pop_back();
          expect_same_planes(got, scalar_planes(s, planes, x, w), packed ? "packed" : "channel block");
        }
      }
    }
  }
}

// The epilogue in the small-plane loops' stores is bit for bit the one applied to the stored
// planes afterwards: a bias per channel, the residual and each compare-and-select activation,
// with a NaN residual passing through.
TEST(CpuConvKernels, DepthwiseSmallPlanePostOpsMatchAPassAfter) {
  if (cpu_isa_supported() < CpuIsa::avx512) GTEST_SKIP() << "no AVX-512 on this CPU";
  using Act = avx512::PostOps::Activation;
  ConvShape packed_shape = plane_shape(7, 7, 3, 3, 1, 1, 1, 1);
  packed_shape.sw = 1;
  packed_shape.wo = 7;
  ASSERT_TRUE(depthwise::PackedPlane::fits(packed_shape));
  const ConvShape block_shape = plane_shape(14, 14, 3, 3, 1, 1, 2, 1);
  const std::int64_t planes = 21;
  for (const bool packed : {true, false}) {
    const ConvShape& s = packed ? packed_shape : block_shape;
    for (const Act act : {Act::none, Act::relu, Act::leaky_relu, Act::clip}) {
      for (const bool residual : {false, true}) {
        SCOPED_TRACE(std::string(packed ? "packed" : "channel block") + " act=" +
                     std::to_string(static_cast<int>(act)) + " residual=" + std::to_string(residual));
        const std::size_t count = static_cast<std::size_t>(planes * s.ho * s.wo);
        const auto x = random_floats(static_cast<std::size_t>(planes * s.h * s.w), 23);
        const auto w = random_floats(static_cast<std::size_t>(planes * 9), 24);
        const auto bias = random_floats(static_cast<std::size_t>(planes), 25);
        auto res = random_floats(count, 26);
        res[count / 2] = NAN;
        avx512::PostOps post;
        post.bias = bias.data();
        post.residual = residual ? res.data() : nullptr;
        post.ld_residual = s.ho * s.wo;
        post.activation = act;
        post.act_alpha = act == Act::clip ? -0.5f : 0.1f;
        post.act_beta = 0.5f;
        std::vector<float> after(count + 1, 7.0f), fused(count + 1, 7.0f);
        run_small_planes(packed, s, planes, x, w, after, nullptr);
        avx512::apply_post_ops(planes, s.ho * s.wo, after.data(), s.ho * s.wo, post);
        run_small_planes(packed, s, planes, x, w, fused, &post);
        EXPECT_EQ(fused.back(), 7.0f) << "wrote past the planes";
        ASSERT_EQ(std::memcmp(after.data(), fused.data(), count * sizeof(float)), 0);
        if (residual) {
          EXPECT_TRUE(std::isnan(fused[count / 2])) << "a NaN residual must reach the output";
        }
      }
    }
  }
}

// Every f16 bit pattern, and f32 values around every rounding boundary, NaN, inf and subnormals.
TEST(CpuConvKernels, VectorConversionsAreBitExact) {
  if (!cpu_has_f16c()) GTEST_SKIP() << "no F16C here: the scalar conversions are the only path";
  std::vector<std::uint16_t> all(65536);
  for (std::uint32_t i = 0; i < 65536; ++i) all[i] = static_cast<std::uint16_t>(i);
  std::vector<float> wide(all.size());
  avx2::half_to_float(all.data(), wide.data(), all.size());
  for (std::size_t i = 0; i < all.size(); ++i) {
    const float want = half_to_float(all[i]);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(wide[i])) << i;
    } else {
      ASSERT_EQ(std::memcmp(&want, &wide[i], 4), 0) << "half " << i;
    }
  }
  avx2::bf16_to_float(all.data(), wide.data(), all.size());
  for (std::size_t i = 0; i < all.size(); ++i) {
    const float want = bfloat16_to_float(all[i]);
    ASSERT_EQ(std::memcmp(&want, &wide[i], 4), 0) << "bf16 " << i;
  }
  std::vector<float> values;
  std::mt19937 gen(9);
  for (int i = 0; i < 200000; ++i) {
    std::uint32_t bits = gen();
    if (i % 4 == 0) bits = (bits & 0xffff0000u) | 0x8000u;  // exact bf16 ties
    if (i % 4 == 1) bits = (bits & 0xffffe000u) | 0x1000u;  // exact f16 ties
    float f;
    std::memcpy(&f, &bits, 4);
    values.push_back(f);
  }
  for (float f : {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 65504.0f, 65520.0f, 6e-8f, 3e-8f, 1e-45f, 3.4e38f}) {
    values.push_back(f);
  }
  std::vector<std::uint16_t> got(values.size());
  avx2::float_to_half(values.data(), got.data(), values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    const std::uint16_t want = float_to_half(values[i]);
    if (std::isnan(values[i])) {
      ASSERT_TRUE((got[i] & 0x7c00u) == 0x7c00u && (got[i] & 0x3ffu) != 0) << "NaN stays NaN";
    } else {
      ASSERT_EQ(got[i], want) << "f16 of " << values[i];
    }
  }
  avx2::float_to_bf16(values.data(), got.data(), values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    const std::uint16_t want = float_to_bfloat16(values[i]);
    if (std::isnan(values[i])) {
      ASSERT_TRUE((got[i] & 0x7f80u) == 0x7f80u && (got[i] & 0x7fu) != 0) << "NaN stays NaN";
    } else {
      ASSERT_EQ(got[i], want) << "bf16 of " << values[i];
    }
  }
}

}  // namespace
}  // namespace galley::backends::cpu
