// The backward of a normalisation reference against central finite differences of its forward,
// all in double: L = sum(w * y(x, scale, shift)), dy = w.
#pragma once

#include <gtest/gtest.h>

#include <vector>

#include "dnn/norm_test_util.hpp"
#include "dnn/ref_norm.hpp"

namespace galley::dnn::norm_test {

template <class P>
void expect_backward_matches_central_differences(const P& forward) {
  SCOPED_TRACE(forward.key());
  P backward = forward;
  backward.direction = NormDirection::backward;
  std::size_t total = 0, affine = 0, stats = 0;
  for (const TensorArg& t : forward.tensors()) {
    if (t.id == ArgId::src) total = static_cast<std::size_t>(t.desc.elements());
    if (t.id == ArgId::scale) affine = static_cast<std::size_t>(t.desc.elements());
    if (t.id == ArgId::saved_mean) stats = static_cast<std::size_t>(t.desc.elements());
  }
  const auto widen = [](const std::vector<float>& f) { return std::vector<double>(f.begin(), f.end()); };
  std::vector<double> x = widen(uniform(total, -1, 1, 11)), w = widen(uniform(total, -1, 1, 12));
  std::vector<double> scale = widen(uniform(affine, 0.5, 1.5, 13)), shift = widen(uniform(affine, -1, 1, 14));
  const auto loss = [&](std::vector<double>* mean, std::vector<double>* invstd) {
    std::vector<double> y(total), rm(affine, 0.0), rv(affine, 1.0), sm(stats), si(stats);
    NormDoubleArgs a;
    a.x = x.data(), a.scale = scale.data(), a.shift = shift.data(), a.y = y.data();
    a.running_mean = rm.data(), a.running_var = rv.data(), a.saved_mean = sm.data(),
    a.saved_invstd = si.data();
    reference_norm_double(forward, a);
    if (mean != nullptr) *mean = sm, *invstd = si;
    double l = 0;
    for (std::size_t i = 0; i < total; ++i) l += w[i] * y[i];
    return l;
  };
  std::vector<double> mean, invstd;
  loss(&mean, &invstd);
  std::vector<double> dx(total), dscale(affine), dshift(affine);
  NormDoubleArgs b;
  b.dy = w.data(), b.x = x.data(), b.scale = scale.data(), b.saved_mean = mean.data(),
  b.saved_invstd = invstd.data();
  b.dx = dx.data(), b.dscale = dscale.data(), b.dshift = dshift.data();
  reference_norm_double(backward, b);
  const double h = 1e-5;
  const auto central = [&](std::vector<double>& v, std::size_t i) {
    const double keep = v[i];
    v[i] = keep + h;
    const double up = loss(nullptr, nullptr);
    v[i] = keep - h;
    const double down = loss(nullptr, nullptr);
    v[i] = keep;
    return (up - down) / (2 * h);
  };
  for (std::size_t i = 0; i < total; ++i) EXPECT_NEAR(dx[i], central(x, i), 1e-7) << "dx " << i;
  for (std::size_t i = 0; i < affine; ++i) {
    EXPECT_NEAR(dscale[i], central(scale, i), 1e-7) << "dscale " << i;
    EXPECT_NEAR(dshift[i], central(shift, i), 1e-7) << "dshift " << i;
  }
}

}  // namespace galley::dnn::norm_test
