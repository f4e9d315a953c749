// The scalar fallbacks of the cpu conv solvers run only on CPUs without AVX2, so on this machine
// the solver tests never reach them. Here each scalar kernel is run directly and compared with
// its AVX2 twin (which the solver tests hold to the reference) on the same data, and the
// F16C/AVX2 conversions are checked bit for bit against galley/core/dtype.hpp.
#include <gtest/gtest.h>

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
        // The rolling 3x3 loop (padding 1, W <= 64): one and two rows, widths at and past a vector.
        shape(1, 1, 20, 1, 3, 3, 1, 1, 1, 1, false), shape(1, 2, 64, 1, 3, 3, 1, 1, 1, 1, false),
        shape(1, 4, 16, 1, 3, 3, 1, 1, 1, 1, false), shape(1, 5, 17, 1, 3, 3, 1, 1, 1, 1, false),
        shape(1, 7, 65, 1, 3, 3, 1, 1, 1, 1, false), shape(1, 29, 1, 1, 3, 3, 1, 1, 1, 1, false)}) {
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
                             plane_shape(41, 35, 3, 3, 1, 1, 3, 2), plane_shape(57, 113, 3, 3, 2, 1, 1, 1)}) {
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
  const ConvShape shapes[] = {shape(1, 13, 29, 1, 3, 3, 1, 1, 1, 1, false),
                              shape(1, 9, 70, 1, 3, 3, 1, 1, 1, 1, false),
                              shape(1, 17, 23, 1, 5, 5, 2, 1, 1, 1, false),
                              plane_shape(29, 31, 3, 3, 1, 1, 2, 1), plane_shape(8, 8, 5, 5, 2, 2, 2, 1)};
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
