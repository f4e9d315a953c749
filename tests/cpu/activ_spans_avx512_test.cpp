// cpu.activ.blocked's hand-written AVX-512 loops (sigmoid, silu, gelu in its erf and tanh forms)
// against the functors' formulas in double: relative accuracy over the whole float range where the formula is
// well conditioned, absolute accuracy elsewhere, the saturated values at large |x|, signed zeros, denormals,
// inf and NaN as PyTorch's formulas give them, every span length's masked tail, and in-place calls.
#include "backends/cpu/activ_spans_avx512.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "backends/cpu/conv_isa.hpp"

namespace galley::backends::cpu {
namespace {

using dnn::Activation;
using dnn::ActivDirection;

struct Case {
  Activation activation;
  ActivDirection direction;
  const char* name;
};

constexpr Case kCases[] = {
    {Activation::sigmoid, ActivDirection::forward, "sigmoid forward"},
    {Activation::silu, ActivDirection::forward, "silu forward"},
    {Activation::silu, ActivDirection::backward, "silu backward"},
    {Activation::gelu_erf, ActivDirection::forward, "gelu_erf forward"},
    {Activation::gelu_erf, ActivDirection::backward, "gelu_erf backward"},
    {Activation::gelu_tanh, ActivDirection::forward, "gelu_tanh forward"},
    {Activation::gelu_tanh, ActivDirection::backward, "gelu_tanh backward"},
};

// The formulas of activation_math.hpp in double, with erfc for the normal cdf so that its tail
// stays exact.
double expected(const Case& c, double dy, double x) {
  const double s = 1 / (1 + std::exp(-x));
  const bool forward = c.direction == ActivDirection::forward;
  if (c.activation == Activation::sigmoid) return s;
  if (c.activation == Activation::silu) return forward ? x * s : dy * s * (1 + x * (1 - s));
  if (c.activation == Activation::gelu_tanh) {
    // x (1 + tanh(u)) / 2 = x sigmoid(2u); the derivative s + x s (1 - s) (2u)'.
    const double k = std::sqrt(2 / M_PI), two_u = 2 * k * (x + 0.044715 * x * x * x);
    const double s2 = 1 / (1 + std::exp(-two_u));
    return forward ? x * s2 : dy * s2 * (1 + x * (1 - s2) * 2 * k * (1 + 3 * 0.044715 * x * x));
  }
  const double cdf = 0.5 * std::erfc(-x / std::sqrt(2.0));
  const double pdf = std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI);
  return forward ? x * cdf : dy * (cdf + x * pdf);
}

std::vector<float> run(const Case& c, const std::vector<float>& x, float dy) {
  std::vector<float> out(x.size(), -12345.f);
  const std::vector<float> dys(x.size(), dy);
  const bool forward = c.direction == ActivDirection::forward;
  EXPECT_TRUE(avx512::activ_span(c.activation, c.direction, forward ? x.data() : dys.data(),
                                 forward ? nullptr : x.data(), out.data(),
                                 static_cast<std::int64_t>(x.size())));
  return out;
}

class ActivSpansAvx512 : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cpu_has_avx512()) GTEST_SKIP() << "this cpu has no AVX-512";
  }
};

TEST_F(ActivSpansAvx512, AccurateOverTheWholeRange) {
  std::vector<float> xs;
  for (float x = -120.f; x <= 120.f; x += 0.00137f) xs.push_back(x);
  for (float x = -1e-3f; x <= 1e-3f; x += 1.3e-7f) xs.push_back(x);
  const float dy = 0.75f;
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name);
    const auto got = run(c, xs, dy);
    double worst_rel = 0, worst_abs = 0;
    float at_rel = 0, at_abs = 0;
    for (std::size_t i = 0; i < xs.size(); ++i) {
      const double want = expected(c, dy, xs[i]);
      const double err = std::abs(got[i] - want);
      // Relative accuracy where the result is at least 1e-3 and the formula is well conditioned:
      // gelu's 1/2 + erf / 2 cancels for negative x (as PyTorch's 1 + erf does), and the
      // derivatives of silu and gelu have zeros near x = -1.2785 and x = -0.7518.
      const bool conditioned =
          (c.activation != Activation::gelu_erf || xs[i] > -0.5f) &&
          (c.direction == ActivDirection::forward ||
           std::abs(xs[i] - (c.activation == Activation::silu ? -1.2785f : -0.7518f)) > 0.2f);
      if (conditioned && std::abs(want) > 1e-3 && err / std::abs(want) > worst_rel) {
        worst_rel = err / std::abs(want);
        at_rel = xs[i];
      }
      // Elsewhere absolute, on the scale of x too: x * f(x) carries f's absolute error times x.
      const double scale = 1 + std::abs(want) + std::abs(xs[i]);
      if (err / scale > worst_abs) {
        worst_abs = err / scale;
        at_abs = xs[i];
      }
    }
    // gelu's tanh form: 2u rounds in f32 and the exp multiplies that relative error by |2u|, up to
    // about 7 where the result is still above 1e-3, so about 1e-6 there (the functor's 1 + tanh(u)
    // loses 3e-5 to cancellation at the same x).
    EXPECT_LT(worst_rel, c.activation == Activation::gelu_tanh ? 2e-6 : 5e-7) << "at x = " << at_rel;
    EXPECT_LT(worst_abs, 3e-7) << "at x = " << at_abs;
  }
}

// The tails, where the results are tiny but must keep their relative accuracy (a log-likelihood
// takes their log): sigmoid and silu down to x = -87, where 1 / (1 + exp(-x)) is still above the
// denormals, and silu's derivative there.
TEST_F(ActivSpansAvx512, TailsKeepTheirRelativeAccuracy) {
  std::vector<float> xs;
  for (float x = -87.f; x <= -5.f; x += 0.0071f) xs.push_back(x);
  for (const Case& c : {kCases[0], kCases[1], kCases[2]}) {
    SCOPED_TRACE(c.name);
    const auto got = run(c, xs, 0.75f);
    double worst = 0;
    float at = 0;
    for (std::size_t i = 0; i < xs.size(); ++i) {
      const double want = expected(c, 0.75, xs[i]);
      const double rel = std::abs(got[i] - want) / std::abs(want);
      if (rel > worst) worst = rel, at = xs[i];
    }
    EXPECT_LT(worst, 6e-7) << "at x = " << at;
  }
}

TEST_F(ActivSpansAvx512, ExtremesAndSpecialValues) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const float big = std::numeric_limits<float>::max(), denormal = 1e-39f;
  const std::vector<float> xs = {0.f, -0.f, denormal, -denormal, 1e4f,  -1e4f,  1e30f, -1e30f,
                                 big, -big, 88.8f,    -88.8f,    200.f, -200.f, 6.f,   -6.f};
  const float dy = 0.75f;
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name);
    const auto got = run(c, xs, dy);
    for (std::size_t i = 0; i < xs.size(); ++i) {
      EXPECT_FALSE(std::isnan(got[i])) << "x = " << xs[i];
      const double want = expected(c, dy, xs[i]);
      EXPECT_NEAR(got[i], want, 3e-7 * (1 + std::abs(want))) << "x = " << xs[i];
    }
  }
  // Saturation is exact, as with libm's functions: no remainder of a fit multiplied by a large x.
  const Case sigmoid = kCases[0], silu = kCases[1], gelu = kCases[3], gelu_backward = kCases[4];
  EXPECT_EQ(run(sigmoid, {-1e4f, 1e4f, inf, -inf}, 1), (std::vector<float>{0.f, 1.f, 1.f, 0.f}));
  EXPECT_EQ(run(silu, {-1e4f, 1e4f, inf}, 1), (std::vector<float>{0.f, 1e4f, inf}));
  EXPECT_EQ(run(gelu, {-1e4f, -1e30f, -big, 1e4f, 1e30f, big, inf}, 1),
            (std::vector<float>{0.f, 0.f, 0.f, 1e4f, 1e30f, big, inf}));
  EXPECT_EQ(run(gelu_backward, {-1e4f, -1e30f, -big, 1e4f, 1e30f, big}, 1),
            (std::vector<float>{0.f, 0.f, 0.f, 1.f, 1.f, 1.f}));
  const Case gelu_tanh = kCases[5], gelu_tanh_backward = kCases[6];
  EXPECT_EQ(run(gelu_tanh, {-1e4f, -1e30f, -big, 1e4f, 1e30f, big, inf}, 1),
            (std::vector<float>{0.f, 0.f, 0.f, 1e4f, 1e30f, big, inf}));
  EXPECT_EQ(run(gelu_tanh_backward, {-1e4f, -1e30f, -big, 1e4f, 1e30f, big}, 1),
            (std::vector<float>{0.f, 0.f, 0.f, 1.f, 1.f, 1.f}));
  // Signed zeros keep their sign through x * (...).
  EXPECT_TRUE(std::signbit(run(silu, {-0.f}, 1)[0]));
  EXPECT_TRUE(std::signbit(run(gelu, {-0.f}, 1)[0]));
  EXPECT_TRUE(std::signbit(run(gelu_tanh, {-0.f}, 1)[0]));
}

// PyTorch's formulas: NaN in, NaN out; -inf gives -inf * 0 = NaN in silu, gelu and their
// derivatives, and +inf in the derivatives gives inf * 0 = NaN too (gelu: x * pdf; silu:
// s * (1 + inf * 0)).
TEST_F(ActivSpansAvx512, NaNAndInfinityAsInTorch) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name);
    const auto got = run(c, {nan, 0.5f, -inf, inf}, 2.f);
    EXPECT_TRUE(std::isnan(got[0]));
    EXPECT_FALSE(std::isnan(got[1]));
    const bool forward = c.direction == ActivDirection::forward;
    // gelu's tanh form saturates its derivative exactly, as the functor does (tanh' is 0 there):
    // 0 at -inf and dy at +inf.
    const bool saturating_derivative = c.activation == Activation::gelu_tanh && !forward;
    EXPECT_EQ(std::isnan(got[2]), c.activation != Activation::sigmoid && !saturating_derivative) << got[2];
    EXPECT_EQ(std::isnan(got[3]), !forward && !saturating_derivative) << got[3];
    if (saturating_derivative) {
      EXPECT_EQ(got[2], 0.f);
      EXPECT_EQ(got[3], 2.f);
    }
  }
}

// Every length up to three vectors and then some: the masked tail reads and writes only [0, n),
// and an in-place call gives the out-of-place result bit for bit.
TEST_F(ActivSpansAvx512, EveryTailLengthAndInPlace) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name);
    const bool forward = c.direction == ActivDirection::forward;
    for (std::int64_t n = 1; n <= 50; ++n) {
      std::vector<float> x(static_cast<std::size_t>(n) + 8), dy(x.size());
      for (std::size_t i = 0; i < x.size(); ++i) {
        x[i] = std::sin(static_cast<float>(i) * 1.7f) * 6.f;
        dy[i] = std::cos(static_cast<float>(i) * 0.3f);
      }
      std::vector<float> out(x.size(), -7.f);
      avx512::activ_span(c.activation, c.direction, forward ? x.data() : dy.data(),
                         forward ? nullptr : x.data(), out.data(), n);
      for (std::size_t i = 0; i < x.size(); ++i) {
        if (i < static_cast<std::size_t>(n)) {
          EXPECT_NEAR(out[i], expected(c, dy[i], x[i]), 1e-6) << "n = " << n << ", i = " << i;
        } else {
          EXPECT_EQ(out[i], -7.f) << "written past the span: n = " << n << ", i = " << i;
        }
      }
      std::vector<float> in_place = forward ? x : dy;
      avx512::activ_span(c.activation, c.direction, in_place.data(), forward ? nullptr : x.data(),
                         in_place.data(), n);
      for (std::int64_t i = 0; i < n; ++i) EXPECT_EQ(in_place[i], out[i]) << "in place, n = " << n;
    }
  }
}

TEST_F(ActivSpansAvx512, OtherActivationsAreLeftToTheFunctorLoops) {
  float x = 1.f, y = -7.f;
  EXPECT_FALSE(avx512::activ_span(Activation::relu, ActivDirection::forward, &x, nullptr, &y, 1));
  EXPECT_FALSE(avx512::activ_span(Activation::sigmoid, ActivDirection::backward, &x, &x, &y, 1));
  EXPECT_FALSE(avx512::activ_span(Activation::tanh, ActivDirection::forward, &x, nullptr, &y, 1));
  EXPECT_EQ(y, -7.f);
}

}  // namespace
}  // namespace galley::backends::cpu
