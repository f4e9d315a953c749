// The reference itself must be right, since every other solver is judged by it: hand-computed
// outputs, an independent textbook loop over general strides, layout and group identities.
#include "dnn/ref_conv_direct.hpp"

#include <gtest/gtest.h>

#include <cstring>

#include "conv_grid.hpp"
#include "dnn/tensor_data.hpp"
#include "galley/core/error.hpp"
#include "galley/dnn/conv_solver.hpp"
#include "galley/runtime/device.hpp"
#include "galley/runtime/stream.hpp"

namespace galley::dnn {
namespace {

std::vector<float> run_reference_f32(const ConvProblem& p, const std::vector<float>& x,
                                     const std::vector<float>& w) {
  std::vector<float> y(static_cast<std::size_t>(p.y_desc().elements()),
                       std::numeric_limits<float>::quiet_NaN());
  reference_conv_forward(p, x.data(), w.data(), y.data());
  return y;
}

// The textbook seven loops, indexing through the descriptors' strides, one value at a time:
// shares no code with the reference beyond the element conversion.
std::vector<std::byte> textbook(const ConvProblem& p, const void* x, const void* w) {
  const TensorDesc xd = p.x_desc(), wd = p.w_desc(), yd = p.y_desc();
  const auto at = [](const TensorDesc& d, std::int64_t a, std::int64_t b, std::int64_t c, std::int64_t e) {
    return a * d.strides[0] + b * d.strides[1] + c * d.strides[2] + e * d.strides[3];
  };
  const auto load = [&](const void* base, std::int64_t i) {
    float f;
    to_float(p.dtype, static_cast<const std::byte*>(base) + i * size_of(p.dtype), &f, 1);
    return static_cast<double>(f);
  };
  std::vector<std::byte> y(static_cast<std::size_t>(yd.elements()) * size_of(p.dtype));
  const std::int64_t cg = p.c / p.groups, kg = p.k / p.groups;
  for (std::int64_t n = 0; n < p.n; ++n)
    for (std::int64_t k = 0; k < p.k; ++k)
      for (std::int64_t oh = 0; oh < p.out_h(); ++oh)
        for (std::int64_t ow = 0; ow < p.out_w(); ++ow) {
          double sum = 0;
          for (std::int64_t c = 0; c < cg; ++c)
            for (std::int64_t r = 0; r < p.y; ++r)
              for (std::int64_t s = 0; s < p.x; ++s) {
                const std::int64_t ih = oh * p.stride_h + r * p.dilation_h - p.pad_h;
                const std::int64_t iw = ow * p.stride_w + s * p.dilation_w - p.pad_w;
                if (ih < 0 || iw < 0 || ih >= p.h || iw >= p.w) continue;
                sum += load(x, at(xd, n, (k / kg) * cg + c, ih, iw)) * load(w, at(wd, k, c, r, s));
              }
          const float f = static_cast<float>(sum);
          from_float(p.dtype, &f, y.data() + at(yd, n, k, oh, ow) * size_of(p.dtype), 1);
        }
  return y;
}

TEST(RefConvDirect, HandComputed) {
  // x = 1..9 in a 3x3 image; w = identity diagonal 2x2.
  const std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  ConvProblem p{.n = 1, .c = 1, .h = 3, .w = 3, .k = 1, .y = 2, .x = 2};
  EXPECT_EQ(run_reference_f32(p, x, {1, 0, 0, 1}), (std::vector<float>{6, 8, 12, 14}));
  // 3x3 of ones, pad 1, stride 2: the sums around the four corners.
  p = ConvProblem{.n = 1,
                  .c = 1,
                  .h = 3,
                  .w = 3,
                  .k = 1,
                  .y = 3,
                  .x = 3,
                  .pad_h = 1,
                  .pad_w = 1,
                  .stride_h = 2,
                  .stride_w = 2};
  EXPECT_EQ(run_reference_f32(p, x, std::vector<float>(9, 1.0f)), (std::vector<float>{12, 16, 24, 28}));
  // Dilation 2 on a 3x3 filter over a 5x5 image touches only the corners and centre lines.
  std::vector<float> x25(25);
  for (int i = 0; i < 25; ++i) x25[i] = static_cast<float>(i);
  p = ConvProblem{.n = 1, .c = 1, .h = 5, .w = 5, .k = 1, .y = 3, .x = 3, .dilation_h = 2, .dilation_w = 2};
  EXPECT_EQ(run_reference_f32(p, x25, {1, 0, 1, 0, 0, 0, 1, 0, 1}), (std::vector<float>{0 + 4 + 20 + 24}));
  // Two groups of one channel each, two output channels each: group 1 sees only channel 1.
  p = ConvProblem{.n = 1, .c = 2, .h = 1, .w = 2, .k = 4, .y = 1, .x = 1, .groups = 2};
  EXPECT_EQ(run_reference_f32(p, {1, 2, 10, 20}, {1, 2, 3, 4}),
            (std::vector<float>{1, 2, 2, 4, 30, 60, 40, 80}));
  // The same with NHWC: x is (w0: c0 c1), (w1: c0 c1); y is (w0: k0..k3), (w1: k0..k3).
  p.layout = Layout::nhwc;
  EXPECT_EQ(run_reference_f32(p, {1, 10, 2, 20}, {1, 2, 3, 4}),
            (std::vector<float>{1, 2, 30, 40, 2, 4, 60, 80}));
}

TEST(RefConvDirect, MatchesTextbookLoopOnTheGrid) {
  const auto grid = test::conv_grid();
  int checked = 0;
  for (std::size_t i = 0; i < grid.size(); i += 3) {  // a third of the grid keeps the slow loop quick
    for (DType d : {DType::f32, DType::f16, DType::bf16}) {
      for (Layout l : {Layout::nchw, Layout::nhwc}) {
        ConvProblem p = grid[i];
        p.dtype = d, p.layout = l;
        const auto x = random_tensor(d, p.x_desc().elements(), 100 + i);
        const auto w = random_tensor(d, p.w_desc().elements(), 200 + i);
        std::vector<std::byte> y(p.y_desc().bytes(), std::byte{0xff});
        reference_conv_forward(p, x.data(), w.data(), y.data());
        const auto want = textbook(p, x.data(), w.data());
        // Both sum in double; only the order differs, so f32 agrees to an ulp or two and the
        // 16-bit types to one rounding step at most.
        const double tol = d == DType::f32 ? 1e-6 : (d == DType::f16 ? 1e-3 : 8e-3);
        const Comparison c = compare_outputs(d, y.data(), want.data(), p.y_desc().elements(), tol);
        EXPECT_TRUE(c.passed) << p.key() << ": " << c.summary;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 100);
}

TEST(RefConvDirect, LayoutsAgree) {
  // The same logical data in NCHW and in NHWC gives the same logical output.
  ConvProblem p = test::geometry(2, 17, 9, 7, 23, 3, 5, 1, 2, 2, 1, 1, 2, 1);
  const auto x = random_tensor(DType::f32, p.x_desc().elements(), 1);
  const auto w = random_tensor(DType::f32, p.w_desc().elements(), 2);
  std::vector<float> y_nchw(p.y_desc().elements());
  reference_conv_forward(p, x.data(), w.data(), y_nchw.data());
  // Transpose x (NCHW -> NHWC) and w (KCYX -> KYXC).
  const auto* xf = reinterpret_cast<const float*>(x.data());
  const auto* wf = reinterpret_cast<const float*>(w.data());
  std::vector<float> xt(x.size() / 4), wt(w.size() / 4);
  for (std::int64_t n = 0; n < p.n; ++n)
    for (std::int64_t c = 0; c < p.c; ++c)
      for (std::int64_t h = 0; h < p.h; ++h)
        for (std::int64_t v = 0; v < p.w; ++v)
          xt[((n * p.h + h) * p.w + v) * p.c + c] = xf[((n * p.c + c) * p.h + h) * p.w + v];
  for (std::int64_t k = 0; k < p.k; ++k)
    for (std::int64_t c = 0; c < p.c; ++c)
      for (std::int64_t r = 0; r < p.y; ++r)
        for (std::int64_t s = 0; s < p.x; ++s)
          wt[((k * p.y + r) * p.x + s) * p.c + c] = wf[((k * p.c + c) * p.y + r) * p.x + s];
  p.layout = Layout::nhwc;
  std::vector<float> y_nhwc(p.y_desc().elements());
  reference_conv_forward(p, xt.data(), wt.data(), y_nhwc.data());
  for (std::int64_t n = 0; n < p.n; ++n)
    for (std::int64_t k = 0; k < p.k; ++k)
      for (std::int64_t h = 0; h < p.out_h(); ++h)
        for (std::int64_t v = 0; v < p.out_w(); ++v)
          ASSERT_EQ(y_nchw[((n * p.k + k) * p.out_h() + h) * p.out_w() + v],
                    y_nhwc[((n * p.out_h() + h) * p.out_w() + v) * p.k + k]);
}

TEST(RefConvDirect, RunsAsAStreamTask) {
  const runtime::Device cpu = runtime::device("cpu");
  const ConvSolver* ref = find_conv_solver("cpu", kRefConvDirectName);
  ASSERT_NE(ref, nullptr);
  const ConvProblem p = test::geometry(1, 17, 31, 29, 23, 3, 3, 1, 1, 1, 1, 1, 1, 1);
  ASSERT_TRUE(ref->check(p, cpu));
  EXPECT_EQ(ref->workspace_bytes(p, cpu), 0u);
  const auto x = random_tensor(p.dtype, p.x_desc().elements(), 5);
  const auto w = random_tensor(p.dtype, p.w_desc().elements(), 6);
  std::vector<std::byte> y(p.y_desc().bytes(), std::byte{0xff}), want(p.y_desc().bytes());
  runtime::Stream stream(cpu);
  ref->run(stream, p, ConvArgs{x.data(), w.data(), y.data()});
  stream.synchronize();
  reference_conv_forward(p, x.data(), w.data(), want.data());
  EXPECT_EQ(y, want);
}

TEST(RefConvDirect, SaysNoWithAReason) {
  const runtime::Device cpu = runtime::device("cpu");
  const ConvSolver* ref = find_conv_solver("cpu", kRefConvDirectName);
  ASSERT_NE(ref, nullptr);
  ConvProblem p = test::geometry(1, 3, 8, 8, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1);
  p.direction = ConvDirection::backward_data;
  const Applicability a = ref->check(p, cpu);
  EXPECT_FALSE(a);
  EXPECT_NE(a.reason.find("forward"), std::string::npos) << a.reason;
  for (const runtime::Device& d : runtime::devices()) {
    if (d.is_cpu()) continue;
    const Applicability b = ref->check(test::geometry(1, 3, 8, 8, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1), d);
    EXPECT_FALSE(b) << d.name();
    EXPECT_NE(b.reason.find(d.name()), std::string::npos) << b.reason;
  }
  // The direct entry point refuses invalid problems and other directions.
  std::vector<float> buf(64);
  p.direction = ConvDirection::forward;
  p.groups = 2;  // 3 channels
  EXPECT_THROW(reference_conv_forward(p, buf.data(), buf.data(), buf.data()), Error);
}

}  // namespace
}  // namespace galley::dnn
