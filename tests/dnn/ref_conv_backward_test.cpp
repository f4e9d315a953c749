// The backward references must be right, since every backward solver is judged by them: against
// central finite differences of L = sum(dy * conv_forward(x, w)) computed in double by a forward
// loop written here, against the adjoint identity on larger shapes, and by exact identities
// between dtypes and layouts.
#include "dnn/ref_conv_backward.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "dnn/conv_backward_args.hpp"
#include "dnn/ref_conv_direct.hpp"
#include "dnn/tensor_data.hpp"
#include "galley/core/error.hpp"
#include "galley/dnn/conv_solver.hpp"
#include "galley/runtime/device.hpp"
#include "galley/runtime/stream.hpp"

namespace galley::dnn {
namespace {

ConvProblem make(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, std::int64_t k,
                 std::int64_t fy, std::int64_t fx, std::int64_t ph, std::int64_t pw, std::int64_t sh,
                 std::int64_t sw, std::int64_t dh, std::int64_t dw, std::int64_t g,
                 Layout layout = Layout::nchw) {
  return ConvProblem{.n = n,
                     .c = c,
                     .h = h,
                     .w = w,
                     .k = k,
                     .y = fy,
                     .x = fx,
                     .pad_h = ph,
                     .pad_w = pw,
                     .stride_h = sh,
                     .stride_w = sw,
                     .dilation_h = dh,
                     .dilation_w = dw,
                     .groups = g,
                     .layout = layout};
}

std::int64_t at(const TensorDesc& d, std::int64_t a, std::int64_t b, std::int64_t c, std::int64_t e) {
  return a * d.strides[0] + b * d.strides[1] + c * d.strides[2] + e * d.strides[3];
}

// L = sum(dy * conv_forward(x, w)) in double, indexing every tensor through its descriptor, so it
// shares no code with the references.
double loss(const ConvProblem& p, const std::vector<double>& x, const std::vector<double>& w,
            const std::vector<double>& dy) {
  const TensorDesc xd = p.x_desc(), wd = p.w_desc(), yd = p.y_desc();
  const std::int64_t cg = p.c / p.groups, kg = p.k / p.groups;
  double total = 0;
  for (std::int64_t n = 0; n < p.n; ++n)
    for (std::int64_t k = 0; k < p.k; ++k)
      for (std::int64_t oh = 0; oh < p.out_h(); ++oh)
        for (std::int64_t ow = 0; ow < p.out_w(); ++ow) {
          double y = 0;
          for (std::int64_t c = 0; c < cg; ++c)
            for (std::int64_t r = 0; r < p.y; ++r)
              for (std::int64_t s = 0; s < p.x; ++s) {
                const std::int64_t ih = oh * p.stride_h + r * p.dilation_h - p.pad_h;
                const std::int64_t iw = ow * p.stride_w + s * p.dilation_w - p.pad_w;
                if (ih < 0 || iw < 0 || ih >= p.h || iw >= p.w) continue;
                y += x[at(xd, n, (k / kg) * cg + c, ih, iw)] * w[at(wd, k, c, r, s)];
              }
          total += y * dy[at(yd, n, k, oh, ow)];
        }
  return total;
}

std::vector<float> random_floats(std::int64_t count, std::uint64_t seed) {
  const auto bytes = random_tensor(DType::f32, count, seed);
  std::vector<float> out(static_cast<std::size_t>(count));
  std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

std::vector<double> widen(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// d L / d v[i] by a central difference, for every i. L is linear in v, so the step may be large
// and the only error is double rounding.
std::vector<double> numeric_gradient(std::vector<double>& v, const std::function<double()>& l) {
  constexpr double kStep = 0.25;
  std::vector<double> grad(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    const double keep = v[i];
    v[i] = keep + kStep;
    const double up = l();
    v[i] = keep - kStep;
    const double down = l();
    v[i] = keep;
    grad[i] = (up - down) / (2 * kStep);
  }
  return grad;
}

// Every element within 1e-6 of the largest gradient (the f32 rounding of the reference is 6e-8).
void expect_close(const std::vector<float>& got, const std::vector<double>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  double norm = 0;
  for (double v : want) norm = std::max(norm, std::abs(v));
  ASSERT_GT(norm, 0) << what << ": all-zero gradient, the case tests nothing";
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(std::isfinite(got[i])) << what << " element " << i;
    EXPECT_LE(std::abs(got[i] - want[i]), 1e-6 * norm)
        << what << " element " << i << ": got " << got[i] << ", finite difference " << want[i];
  }
}

void check_against_finite_differences(const ConvProblem& p) {
  SCOPED_TRACE(p.key());
  const auto xf = random_floats(p.x_desc().elements(), 11);
  const auto wf = random_floats(p.w_desc().elements(), 12);
  const auto dyf = random_floats(p.y_desc().elements(), 13);
  std::vector<double> x = widen(xf), w = widen(wf), dy = widen(dyf);

  std::vector<float> dx(xf.size(), std::numeric_limits<float>::quiet_NaN());
  std::vector<float> dw(wf.size(), std::numeric_limits<float>::quiet_NaN());
  reference_conv_backward_data(p, dyf.data(), wf.data(), dx.data());
  reference_conv_backward_weights(p, xf.data(), dyf.data(), dw.data());

  const auto l = [&] { return loss(p, x, w, dy); };
  expect_close(dx, numeric_gradient(x, l), "dx");
  expect_close(dw, numeric_gradient(w, l), "dw");
}

TEST(RefConvBackward, MatchesFiniteDifferences) {
  for (Layout l : {Layout::nchw, Layout::nhwc}) {
    //                                   n  c  h  w  k  y  x  p  q  u  v  l  j  g
    check_against_finite_differences(make(2, 3, 7, 6, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, l));   // same padding
    check_against_finite_differences(make(1, 4, 7, 5, 6, 3, 3, 1, 1, 1, 1, 1, 1, 2, l));   // groups 2
    check_against_finite_differences(make(2, 5, 6, 7, 5, 3, 3, 1, 1, 1, 1, 1, 1, 5, l));   // depthwise
    check_against_finite_differences(make(1, 3, 6, 7, 6, 3, 3, 1, 1, 1, 1, 1, 1, 3, l));   // multiplier 2
    check_against_finite_differences(make(1, 3, 9, 8, 2, 3, 3, 2, 2, 1, 1, 2, 2, 1, l));   // dilation 2
    check_against_finite_differences(make(2, 3, 11, 7, 3, 3, 3, 1, 0, 2, 2, 1, 1, 1, l));  // stride 2
    check_against_finite_differences(make(1, 2, 7, 8, 3, 1, 1, 0, 0, 3, 3, 1, 1, 1, l));   // stride > filter
    check_against_finite_differences(make(1, 2, 5, 7, 3, 2, 3, 2, 1, 3, 2, 1, 2, 1, l));   // all axes differ
    check_against_finite_differences(
        make(1, 3, 5, 5, 2, 5, 5, 2, 2, 1, 1, 1, 1, 1, l));  // 5x5, 1x1 image edge
    check_against_finite_differences(make(1, 2, 3, 3, 2, 3, 3, 3, 3, 1, 1, 1, 1, 1, l));  // pad past reach
  }
}

// Input pixels that no output reads (stride 3 past a 1x1 filter) get an exact zero, not poison.
TEST(RefConvBackward, UnreadInputPixelsGetZero) {
  for (Layout l : {Layout::nchw, Layout::nhwc}) {
    const ConvProblem p = make(1, 2, 7, 8, 3, 1, 1, 0, 0, 3, 3, 1, 1, 1, l);
    const auto wf = random_floats(p.w_desc().elements(), 3);
    const auto dyf = random_floats(p.y_desc().elements(), 4);
    std::vector<float> dx(static_cast<std::size_t>(p.x_desc().elements()),
                          std::numeric_limits<float>::quiet_NaN());
    reference_conv_backward_data(p, dyf.data(), wf.data(), dx.data());
    const TensorDesc xd = p.x_desc();
    int read = 0;
    for (std::int64_t c = 0; c < p.c; ++c)
      for (std::int64_t h = 0; h < p.h; ++h)
        for (std::int64_t w = 0; w < p.w; ++w) {
          const float v = dx[static_cast<std::size_t>(at(xd, 0, c, h, w))];
          if (h % 3 == 0 && w % 3 == 0) {
            EXPECT_NE(v, 0.0f) << c << "," << h << "," << w;
            ++read;
          } else {
            EXPECT_EQ(v, 0.0f) << c << "," << h << "," << w;
          }
        }
    EXPECT_EQ(read, p.c * 3 * 3);
  }
}

double dot(const std::vector<float>& a, const std::vector<float>& b) {
  double sum = 0;
  for (std::size_t i = 0; i < a.size(); ++i) sum += static_cast<double>(a[i]) * b[i];
  return sum;
}

// <conv_fwd(x, w), dy> == <x, bwd_data(dy, w)> == <w, bwd_weights(x, dy)> on shapes too large
// for finite differences, every product rounded to f32 once.
TEST(RefConvBackward, AdjointIdentity) {
  const std::vector<ConvProblem> shapes = {
      make(2, 17, 31, 29, 23, 3, 3, 1, 1, 1, 1, 1, 1, 1), make(1, 23, 31, 29, 17, 3, 3, 1, 1, 2, 2, 1, 1, 1),
      make(2, 34, 15, 13, 46, 3, 3, 1, 1, 1, 1, 1, 1, 2), make(1, 17, 31, 29, 17, 7, 7, 2, 2, 1, 1, 2, 2, 17),
      make(3, 3, 31, 29, 23, 7, 7, 3, 3, 2, 2, 1, 1, 1),  make(1, 64, 15, 13, 32, 3, 3, 1, 1, 1, 1, 1, 1, 32),
      make(1, 23, 31, 29, 17, 1, 1, 0, 0, 3, 3, 1, 1, 1), make(2, 17, 13, 11, 23, 5, 1, 2, 0, 1, 1, 1, 1, 1),
  };
  for (Layout l : {Layout::nchw, Layout::nhwc}) {
    for (ConvProblem p : shapes) {
      p.layout = l;
      SCOPED_TRACE(p.key());
      const auto x = random_floats(p.x_desc().elements(), 21);
      const auto w = random_floats(p.w_desc().elements(), 22);
      const auto dy = random_floats(p.y_desc().elements(), 23);
      std::vector<float> y(dy.size()), dx(x.size()), dw(w.size());
      reference_conv_forward(p, x.data(), w.data(), y.data());
      reference_conv_backward_data(p, dy.data(), w.data(), dx.data());
      reference_conv_backward_weights(p, x.data(), dy.data(), dw.data());
      const double forward = dot(y, dy), data = dot(x, dx), weights = dot(w, dw);
      EXPECT_LE(std::abs(data - forward), 1e-5 * std::abs(forward)) << forward << " vs " << data;
      EXPECT_LE(std::abs(weights - forward), 1e-5 * std::abs(forward)) << forward << " vs " << weights;
    }
  }
}

// Low precision stages its inputs exactly and rounds once, so it is the f32 answer rounded.
TEST(RefConvBackward, LowPrecisionIsTheF32ResultRoundedOnce) {
  for (DType dt : {DType::f16, DType::bf16}) {
    for (Layout l : {Layout::nchw, Layout::nhwc}) {
      ConvProblem p = make(2, 6, 9, 7, 4, 3, 3, 1, 1, 2, 1, 1, 2, 2, l);
      p.dtype = dt;
      SCOPED_TRACE(p.key());
      const auto x = random_tensor(dt, p.x_desc().elements(), 31);
      const auto w = random_tensor(dt, p.w_desc().elements(), 32);
      const auto dy = random_tensor(dt, p.y_desc().elements(), 33);
      const auto widen_dt = [dt](const std::vector<std::byte>& v, std::int64_t count) {
        std::vector<float> out(static_cast<std::size_t>(count));
        to_float(dt, v.data(), out.data(), count);
        return out;
      };
      const auto x32 = widen_dt(x, p.x_desc().elements());
      const auto w32 = widen_dt(w, p.w_desc().elements());
      const auto dy32 = widen_dt(dy, p.y_desc().elements());
      ConvProblem p32 = p;
      p32.dtype = DType::f32;
      std::vector<float> dx32(x32.size()), dw32(w32.size());
      reference_conv_backward_data(p32, dy32.data(), w32.data(), dx32.data());
      reference_conv_backward_weights(p32, x32.data(), dy32.data(), dw32.data());
      std::vector<std::byte> dx(x.size()), dw(w.size()), want_dx(x.size()), want_dw(w.size());
      reference_conv_backward_data(p, dy.data(), w.data(), dx.data());
      reference_conv_backward_weights(p, x.data(), dy.data(), dw.data());
      from_float(dt, dx32.data(), want_dx.data(), static_cast<std::int64_t>(dx32.size()));
      from_float(dt, dw32.data(), want_dw.data(), static_cast<std::int64_t>(dw32.size()));
      EXPECT_EQ(dx, want_dx);
      EXPECT_EQ(dw, want_dw);
    }
  }
}

// The same numbers in NHWC/KYXC give the same gradients, moved to their NHWC/KYXC places.
TEST(RefConvBackward, LayoutsAgreeExactly) {
  ConvProblem nchw = make(2, 6, 9, 7, 9, 3, 2, 1, 1, 2, 1, 1, 2, 3);
  ConvProblem nhwc = nchw;
  nhwc.layout = Layout::nhwc;
  const auto x = random_floats(nchw.x_desc().elements(), 41);
  const auto w = random_floats(nchw.w_desc().elements(), 42);
  const auto dy = random_floats(nchw.y_desc().elements(), 43);
  // Moves a tensor of `from`'s layout into `to`'s, element by element through the descriptors.
  const auto move = [](const std::vector<float>& v, const TensorDesc& from, const TensorDesc& to) {
    std::vector<float> out(v.size());
    for (std::int64_t a = 0; a < from.dims[0]; ++a)
      for (std::int64_t b = 0; b < from.dims[1]; ++b)
        for (std::int64_t c = 0; c < from.dims[2]; ++c)
          for (std::int64_t d = 0; d < from.dims[3]; ++d)
            out[static_cast<std::size_t>(at(to, a, b, c, d))] =
                v[static_cast<std::size_t>(at(from, a, b, c, d))];
    return out;
  };
  std::vector<float> dx(x.size()), dw(w.size()), dx_nhwc(x.size()), dw_nhwc(w.size());
  reference_conv_backward_data(nchw, dy.data(), w.data(), dx.data());
  reference_conv_backward_weights(nchw, x.data(), dy.data(), dw.data());
  const auto w_nhwc = move(w, nchw.w_desc(), nhwc.w_desc());
  const auto dy_nhwc = move(dy, nchw.y_desc(), nhwc.y_desc());
  reference_conv_backward_data(nhwc, dy_nhwc.data(), w_nhwc.data(), dx_nhwc.data());
  reference_conv_backward_weights(nhwc, move(x, nchw.x_desc(), nhwc.x_desc()).data(), dy_nhwc.data(),
                                  dw_nhwc.data());
  EXPECT_EQ(dx_nhwc, move(dx, nchw.x_desc(), nhwc.x_desc()));
  EXPECT_EQ(dw_nhwc, move(dw, nchw.w_desc(), nhwc.w_desc()));
}

template <typename Fn>
void expect_error(Status status, Fn&& fn, const std::string& fragment) {
  try {
    fn();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), status) << e.what();
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(RefConvBackward, RejectsBadArguments) {
  ConvProblem p = make(1, 4, 5, 5, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1);
  std::vector<float> a(1000), b(1000), c(1000);
  expect_error(
      Status::invalid_argument, [&] { reference_conv_backward_data(p, nullptr, b.data(), c.data()); }, "dy");
  expect_error(
      Status::invalid_argument, [&] { reference_conv_backward_data(p, a.data(), b.data(), nullptr); }, "dx");
  expect_error(
      Status::invalid_argument, [&] { reference_conv_backward_weights(p, a.data(), b.data(), nullptr); },
      "dw");
  expect_error(
      Status::invalid_argument, [&] { reference_conv_backward_weights(p, nullptr, b.data(), c.data()); },
      "x");
  ConvProblem bad = p;
  bad.groups = 3;  // 4 channels do not split into 3 groups
  expect_error(
      Status::invalid_argument, [&] { reference_conv_backward_data(bad, a.data(), b.data(), c.data()); },
      "group");
  ConvProblem int8 = p;
  int8.dtype = DType::i8;
  expect_error(
      Status::invalid_argument, [&] { reference_conv_backward_weights(int8, a.data(), b.data(), c.data()); },
      "i8");
}

// The registered reference solvers check their direction and run the functions through the
// ConvArgs mapping of conv_backward_args.hpp.
TEST(RefConvBackward, SolversCheckDirectionAndRunThroughConvArgs) {
  const runtime::Device cpu = runtime::device("cpu");
  const ConvSolver* data = find_conv_solver("cpu", kRefConvBackwardDataName);
  const ConvSolver* weights = find_conv_solver("cpu", kRefConvBackwardWeightsName);
  ASSERT_NE(data, nullptr);
  ASSERT_NE(weights, nullptr);
  EXPECT_TRUE(data->is_reference());
  EXPECT_TRUE(weights->is_reference());

  ConvProblem p = make(2, 6, 9, 7, 4, 3, 3, 1, 1, 2, 1, 1, 1, 2, Layout::nhwc);
  for (ConvDirection d : {ConvDirection::forward, ConvDirection::backward_weights}) {
    p.direction = d;
    const auto a = data->check(p, cpu);
    EXPECT_FALSE(a);
    EXPECT_NE(a.reason.find(to_string(d)), std::string::npos) << a.reason;
  }
  for (ConvDirection d : {ConvDirection::forward, ConvDirection::backward_data}) {
    p.direction = d;
    EXPECT_FALSE(weights->check(p, cpu));
  }
  p.direction = ConvDirection::backward_data;
  p.dtype = DType::i8;
  EXPECT_FALSE(data->check(p, cpu));
  p.dtype = DType::f32;
  EXPECT_TRUE(data->check(p, cpu));

  const auto x = random_floats(p.x_desc().elements(), 51);
  const auto w = random_floats(p.w_desc().elements(), 52);
  const auto dy = random_floats(p.y_desc().elements(), 53);
  std::vector<float> want_dx(x.size()), want_dw(w.size());
  reference_conv_backward_data(p, dy.data(), w.data(), want_dx.data());
  reference_conv_backward_weights(p, x.data(), dy.data(), want_dw.data());

  runtime::Stream stream(cpu);
  std::vector<float> dx(x.size(), std::numeric_limits<float>::quiet_NaN());
  data->run(stream, p, conv_args(BackwardDataArgs{dy.data(), w.data(), dx.data()}));
  std::vector<float> dw(w.size(), std::numeric_limits<float>::quiet_NaN());
  p.direction = ConvDirection::backward_weights;
  EXPECT_TRUE(weights->check(p, cpu));
  weights->run(stream, p, conv_args(BackwardWeightsArgs{x.data(), dy.data(), dw.data()}));
  stream.synchronize();
  EXPECT_EQ(dx, want_dx);
  EXPECT_EQ(dw, want_dw);
}

}  // namespace
}  // namespace galley::dnn
