// cpu.bnorm.planes and cpu.gnorm.planes: batch and group norm from the same two plane loops
// (norm_planes.hpp). Statistics take one pass (sums and sums of squares about a pivot from the data,
// in double), so a constant channel has variance exactly 0 and a mean of 1e4 costs no precision; the
// elementwise passes run in f32. A statistic gathers planes: batch norm's channel c those of every
// image, group norm's (image, group) those of the group's channels.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "backends/cpu/broadcast_fill.hpp"
#include "backends/cpu/conv_isa.hpp"
#include "backends/cpu/norm_planes.hpp"
#include "backends/cpu/norm_planes_avx512.hpp"
#include "backends/cpu/norm_solvers.hpp"
#include "backends/cpu/thread_pool.hpp"
#include "galley/core/error.hpp"

namespace galley::backends::cpu {
namespace {

using dnn::Applicability;
using dnn::NormArgs;
using dnn::NormDirection;
using norm::PlaneShape;
using norm::PlaneSum;

/// Which statistic plane (image, channel) belongs to, and how many values each statistic has.
struct StatMap {
  std::int64_t stats = 0;
  std::int64_t groups = 0;  ///< 0: batch norm (statistic = channel); else group norm's groups
  double count = 0;
  std::int64_t of(std::int64_t image, std::int64_t channel, std::int64_t c) const {
    return groups == 0 ? channel : image * groups + channel / (c / groups);
  }
  /// Statistic st's planes: `count` of them from `first`, `stride` apart, in the order in which
  /// the plane-major loops below meet them (so sums over them come out the same).
  struct Planes {
    std::int64_t first, stride, count;
  };
  Planes planes_of(std::int64_t st, std::int64_t n, std::int64_t c) const {
    if (groups == 0) return {st, c, n};
    const std::int64_t per_group = c / groups;
    return {(st / groups) * c + (st % groups) * per_group, 1, per_group};
  }
};

/// Whether to run a statistic's passes back to back, one statistic per task (f32 nchw with
/// AVX-512, statistics enough to keep the pool busy, and each statistic's planes one run of
/// memory: group norm's, or batch norm's of a single image): its planes are still in the core's
/// cache when the second pass reads them, so x (and dy) come from memory once instead of twice.
/// Batch norm's planes of several images lie a whole image apart; read one channel at a time they
/// become many short streams, which memory serves worse than the plane-major passes' single one.
/// The result is the same bit for bit: each statistic sums its planes in the same order either way.
bool by_statistic(const PlaneShape& s, const StatMap& m) {
  const bool contiguous = m.groups != 0 || s.n == 1;
  return contiguous && s.dtype == DType::f32 && !s.nhwc && cpu_has_avx512() && m.stats >= 4 * pool_size();
}

/// Whether to run group norm's passes one image at a time, one image per task (f32 nhwc with
/// AVX-512, images enough to keep the pool busy): a group's values are strided over all of its
/// image's pixels, so one pass over the image's rows gathers every group's sums, and the map that
/// follows reads the image back from the core's caches (an image of 56x56x256 is 3.2 MB: most in
/// L3, its last rows in L2) instead of from memory. Each plane's sums run over all of the image's
/// rows at once, as the plane-major pass does where it gives an image one chunk (n >= 64).
/// Rows of an image that by_image()'s map takes at a time, from the image's last rows back to its
/// first: the sums' pass read the last ones just before, so they are still in L2.
constexpr std::int64_t kReverseMapRows = 64;

bool by_image(const PlaneShape& s, const StatMap& m) {
  return m.groups != 0 && s.nhwc && s.dtype == DType::f32 && cpu_has_avx512() && s.n >= 2 * pool_size();
}

/// Whether an f32 output of the shape is far beyond the caches, so written around them (a plain store
/// would first read each line).
bool beyond_caches(const PlaneShape& s) { return s.n * s.c * s.hw * std::int64_t{4} >= kBypassCacheBytes; }

/// Batch statistics: mean and biased variance per statistic, in one pass over x. Each statistic's
/// sums are taken about a pivot, the first value of its first plane, so that they stay small where
/// the mean is large: var = S2 / N - (S1 / N)^2 with S1 = sum (x - pivot), S2 = sum (x - pivot)^2
/// loses to cancellation only about (mean - pivot)^2 / var times double's 1e-16, and a pivot drawn
/// from the data sits within a few deviations of the mean. A constant statistic has every term 0,
/// so its variance is exactly 0.
void statistics(const PlaneShape& s, const StatMap& m, const void* x, std::vector<double>& mean,
                std::vector<double>& var) {
  const auto planes = static_cast<std::size_t>(s.n * s.c);
  std::vector<double> s1(planes), s2(planes), center(planes);
  std::vector<double> pivot(static_cast<std::size_t>(m.stats), 0.0);
  std::vector<bool> pivot_set(pivot.size(), false);
  for (std::int64_t i = 0; i < s.n; ++i) {
    for (std::int64_t ch = 0; ch < s.c; ++ch) {
      const auto st = static_cast<std::size_t>(m.of(i, ch, s.c));
      if (!pivot_set[st]) {
        pivot[st] = norm::plane_value(s, x, i * s.c + ch, 0);
        pivot_set[st] = true;
      }
      center[static_cast<std::size_t>(i * s.c + ch)] = pivot[st];
    }
  }
  norm::plane_reduce(s, PlaneSum::shifted_moments, x, nullptr, center.data(), s1.data(), s2.data());
  std::vector<double> sum1(pivot.size(), 0.0), sum2(pivot.size(), 0.0);
  for (std::int64_t i = 0; i < s.n; ++i) {
    for (std::int64_t ch = 0; ch < s.c; ++ch) {
      const auto st = static_cast<std::size_t>(m.of(i, ch, s.c));
      sum1[st] += s1[static_cast<std::size_t>(i * s.c + ch)];
      sum2[st] += s2[static_cast<std::size_t>(i * s.c + ch)];
    }
  }
  mean.assign(pivot.size(), 0.0);
  var.assign(pivot.size(), 0.0);
  for (std::size_t st = 0; st < pivot.size(); ++st) {
    const double shift = sum1[st] / m.count;
    mean[st] = pivot[st] + shift;
    var[st] = std::max(0.0, sum2[st] / m.count - shift * shift);
  }
}

/// y = (x - mean) * invstd * scale + shift, per plane.
void normalise(const PlaneShape& s, const StatMap& m, const NormArgs& a, const std::vector<double>& mean,
               const std::vector<double>& invstd) {
  const auto planes = static_cast<std::size_t>(s.n * s.c);
  std::vector<float> mul(planes), center(planes), center_lo(planes), add(planes);
  const auto* scale = static_cast<const float*>(a.scale);
  const auto* shift = static_cast<const float*>(a.shift);
  for (std::int64_t i = 0; i < s.n; ++i) {
    for (std::int64_t ch = 0; ch < s.c; ++ch) {
      const auto st = static_cast<std::size_t>(m.of(i, ch, s.c));
      const double k = invstd[st] * scale[ch];
      mul[static_cast<std::size_t>(i * s.c + ch)] = static_cast<float>(k);
      const float hi = static_cast<float>(mean[st]);
      center[static_cast<std::size_t>(i * s.c + ch)] = hi;
      center_lo[static_cast<std::size_t>(i * s.c + ch)] = static_cast<float>(mean[st] - hi);
      add[static_cast<std::size_t>(i * s.c + ch)] = shift[ch];
    }
  }
  norm::plane_map(s, a.x, nullptr, mul.data(), nullptr, center.data(), center_lo.data(), add.data(), a.y);
}

/// forward_training for by_statistic() shapes: per statistic, its moments, then its planes mapped.
std::vector<double> forward_training_by_statistic(const PlaneShape& s, const StatMap& m, const NormArgs& a,
                                                  double epsilon) {
  const auto* x = static_cast<const float*>(a.x);
  auto* y = static_cast<float*>(a.y);
  const auto* scale = static_cast<const float*>(a.scale);
  const auto* shift = static_cast<const float*>(a.shift);
  auto* saved_mean = static_cast<float*>(a.saved_mean);
  auto* saved_invstd = static_cast<float*>(a.saved_invstd);
  std::vector<double> var(static_cast<std::size_t>(m.stats));
  const bool stream = beyond_caches(s);
  parallel_for(0, m.stats, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t st = lo; st < hi; ++st) {
      const StatMap::Planes planes = m.planes_of(st, s.n, s.c);
      const double pivot = x[planes.first * s.hw];
      double sum1 = 0, sum2 = 0;
      for (std::int64_t k = 0; k < planes.count; ++k) {
        double s1 = 0, s2 = 0;
        // Readable up to the statistic's last plane: the map that follows reads from the first.
        const std::int64_t p = planes.first + k * planes.stride;
        const std::int64_t last = planes.first + (planes.count - 1) * planes.stride;
        avx512::plane_shifted_moments(x + p * s.hw, s.hw, (last + 1 - p) * s.hw, pivot, s1, s2);
        sum1 += s1;
        sum2 += s2;
      }
      const double shift_of_mean = sum1 / m.count;
      const double mean = pivot + shift_of_mean;
      const double v = std::max(0.0, sum2 / m.count - shift_of_mean * shift_of_mean);
      const double invstd = 1.0 / std::sqrt(v + epsilon);
      var[static_cast<std::size_t>(st)] = v;
      saved_mean[st] = static_cast<float>(mean);
      saved_invstd[st] = static_cast<float>(invstd);
      const float mean_hi = static_cast<float>(mean), mean_lo = static_cast<float>(mean - mean_hi);
      for (std::int64_t k = 0; k < planes.count; ++k) {
        const std::int64_t p = planes.first + k * planes.stride, ch = p % s.c;
        avx512::plane_map_one(x + p * s.hw, y + p * s.hw, s.hw, static_cast<float>(invstd * scale[ch]),
                              mean_hi, mean_lo, shift[ch], stream);
      }
    }
  });
  return var;
}

/// forward_training for by_image() shapes: per image, every plane's moments in one pass over its
/// rows, each group's statistics from its planes' sums in channel order, then the image mapped.
std::vector<double> forward_training_by_image(const PlaneShape& s, const StatMap& m, const NormArgs& a,
                                              double epsilon) {
  const auto* x = static_cast<const float*>(a.x);
  auto* y = static_cast<float*>(a.y);
  const auto* scale = static_cast<const float*>(a.scale);
  const auto* shift = static_cast<const float*>(a.shift);
  auto* saved_mean = static_cast<float*>(a.saved_mean);
  auto* saved_invstd = static_cast<float*>(a.saved_invstd);
  const std::int64_t per_group = s.c / m.groups;
  const bool stream = beyond_caches(s) && s.c % 16 == 0 && reinterpret_cast<std::uintptr_t>(y) % 64 == 0;
  std::vector<double> var(static_cast<std::size_t>(m.stats));
  parallel_for(0, s.n, [&](std::int64_t lo, std::int64_t hi) {
    const auto c = static_cast<std::size_t>(s.c);
    std::vector<double> center(c), s1(c), s2(c);
    std::vector<float> mul(c), mean_hi(c), mean_lo(c);
    for (std::int64_t image = lo; image < hi; ++image) {
      const float* xi = x + image * s.hw * s.c;
      for (std::int64_t ch = 0; ch < s.c; ++ch)
        center[static_cast<std::size_t>(ch)] = xi[(ch / per_group) * per_group];
      std::fill(s1.begin(), s1.end(), 0.0);
      std::fill(s2.begin(), s2.end(), 0.0);
      avx512::nhwc_row_sums(avx512::RowSum::shifted_moments, xi, nullptr, s.hw, s.c, center.data(), s1.data(),
                            s2.data());
      for (std::int64_t g = 0; g < m.groups; ++g) {
        double sum1 = 0, sum2 = 0;
        for (std::int64_t ch = g * per_group; ch < (g + 1) * per_group; ++ch) {
          sum1 += s1[static_cast<std::size_t>(ch)];
          sum2 += s2[static_cast<std::size_t>(ch)];
        }
        const double pivot = center[static_cast<std::size_t>(g * per_group)];
        const double shift_of_mean = sum1 / m.count;
        const double mean = pivot + shift_of_mean;
        const double v = std::max(0.0, sum2 / m.count - shift_of_mean * shift_of_mean);
        const double invstd = 1.0 / std::sqrt(v + epsilon);
        const std::int64_t st = image * m.groups + g;
        var[static_cast<std::size_t>(st)] = v;
        saved_mean[st] = static_cast<float>(mean);
        saved_invstd[st] = static_cast<float>(invstd);
        const auto hi_part = static_cast<float>(mean), lo_part = static_cast<float>(mean - hi_part);
        for (std::int64_t ch = g * per_group; ch < (g + 1) * per_group; ++ch) {
          const auto k = static_cast<std::size_t>(ch);
          mul[k] = static_cast<float>(invstd * scale[ch]);
          mean_hi[k] = hi_part;
          mean_lo[k] = lo_part;
        }
      }
      float* yi = y + image * s.hw * s.c;
      for (std::int64_t r1 = s.hw; r1 > 0; r1 -= kReverseMapRows) {
        const std::int64_t r0 = std::max<std::int64_t>(0, r1 - kReverseMapRows);
        avx512::nhwc_rows_map_one(xi + r0 * s.c, yi + r0 * s.c, r1 - r0, s.c, mul.data(), mean_hi.data(),
                                  mean_lo.data(), shift, stream);
      }
    }
  });
  return var;
}

/// Batch statistics, saved_mean/saved_invstd, y; returns the biased variance for the running update.
std::vector<double> forward_training(const PlaneShape& s, const StatMap& m, const NormArgs& a,
                                     double epsilon) {
  if (by_statistic(s, m)) return forward_training_by_statistic(s, m, a, epsilon);
  if (by_image(s, m)) return forward_training_by_image(s, m, a, epsilon);
  std::vector<double> mean, var;
  statistics(s, m, a.x, mean, var);
  std::vector<double> invstd(var.size());
  auto* saved_mean = static_cast<float*>(a.saved_mean);
  auto* saved_invstd = static_cast<float*>(a.saved_invstd);
  for (std::size_t i = 0; i < var.size(); ++i) {
    invstd[i] = 1.0 / std::sqrt(var[i] + epsilon);
    saved_mean[i] = static_cast<float>(mean[i]);
    saved_invstd[i] = static_cast<float>(invstd[i]);
  }
  normalise(s, m, a, mean, invstd);
  return var;
}

/// dx = A dy + B (x - mean) + C per plane, dscale and dshift; see the derivation in the comment of
/// BatchNormProblem (g = dy * scale within a statistic).
void backward(const PlaneShape& s, const StatMap& m, const NormArgs& a) {
  const auto planes = static_cast<std::size_t>(s.n * s.c);
  const auto* scale = static_cast<const float*>(a.scale);
  const auto* saved_mean = static_cast<const float*>(a.saved_mean);
  const auto* saved_invstd = static_cast<const float*>(a.saved_invstd);
  std::vector<double> center(planes), sum_dy(planes), sum_dyx(planes);
  if (by_statistic(s, m)) {
    // Per statistic: its planes' sums, then dx over the same planes while they are in cache; dscale
    // and dshift follow below from the per-plane sums, in the same order as otherwise.
    const auto* x = static_cast<const float*>(a.x);
    const auto* dy = static_cast<const float*>(a.dy);
    auto* dx = static_cast<float*>(a.dx);
    const bool stream = beyond_caches(s);
    parallel_for(0, m.stats, [&](std::int64_t lo, std::int64_t hi) {
      for (std::int64_t st = lo; st < hi; ++st) {
        const StatMap::Planes pl = m.planes_of(st, s.n, s.c);
        const double r = saved_invstd[st], mu = saved_mean[st];
        double sum_g = 0, sum_gx = 0;
        for (std::int64_t k = 0; k < pl.count; ++k) {
          const std::int64_t p = pl.first + k * pl.stride, ch = p % s.c;
          const auto pi = static_cast<std::size_t>(p);
          const std::int64_t last = pl.first + (pl.count - 1) * pl.stride;
          avx512::plane_gradient_sums(dy + p * s.hw, x + p * s.hw, s.hw, (last + 1 - p) * s.hw, mu,
                                      sum_dy[pi], sum_dyx[pi]);
          sum_g += scale[ch] * sum_dy[pi];
          sum_gx += scale[ch] * sum_dyx[pi] * r;
        }
        const float kb = static_cast<float>(-r * r * sum_gx / m.count);
        const float kc = static_cast<float>(-r * sum_g / m.count);
        for (std::int64_t k = 0; k < pl.count; ++k) {
          const std::int64_t p = pl.first + k * pl.stride, ch = p % s.c;
          avx512::plane_map_two(dy + p * s.hw, x + p * s.hw, dx + p * s.hw, s.hw,
                                static_cast<float>(r * scale[ch]), kb, static_cast<float>(mu), kc, stream);
        }
      }
    });
  } else if (by_image(s, m)) {
    // Per image: every plane's sums in one pass over its rows, then dx over the image while it is
    // in cache; dscale and dshift follow below from the per-plane sums.
    const auto* x = static_cast<const float*>(a.x);
    const auto* dy = static_cast<const float*>(a.dy);
    auto* dx = static_cast<float*>(a.dx);
    const std::int64_t per_group = s.c / m.groups;
    const bool stream = beyond_caches(s) && s.c % 16 == 0 && reinterpret_cast<std::uintptr_t>(dx) % 64 == 0;
    parallel_for(0, s.n, [&](std::int64_t lo, std::int64_t hi) {
      const auto c = static_cast<std::size_t>(s.c);
      std::vector<float> ka(c), kb(c), km(c), kc(c);
      for (std::int64_t image = lo; image < hi; ++image) {
        const std::int64_t first = image * s.hw * s.c;
        double* sdy = sum_dy.data() + image * s.c;
        double* sdyx = sum_dyx.data() + image * s.c;
        double* ctr = center.data() + image * s.c;
        for (std::int64_t ch = 0; ch < s.c; ++ch) ctr[ch] = saved_mean[m.of(image, ch, s.c)];
        avx512::nhwc_row_sums(avx512::RowSum::gradient, x + first, dy + first, s.hw, s.c, ctr, sdy, sdyx);
        for (std::int64_t g = 0; g < m.groups; ++g) {
          const std::int64_t st = image * m.groups + g;
          const double r = saved_invstd[st], mu = saved_mean[st];
          double sum_g = 0, sum_gx = 0;
          for (std::int64_t ch = g * per_group; ch < (g + 1) * per_group; ++ch) {
            sum_g += scale[ch] * sdy[ch];
            sum_gx += scale[ch] * sdyx[ch] * r;
          }
          for (std::int64_t ch = g * per_group; ch < (g + 1) * per_group; ++ch) {
            const auto k = static_cast<std::size_t>(ch);
            ka[k] = static_cast<float>(r * scale[ch]);
            kb[k] = static_cast<float>(-r * r * sum_gx / m.count);
            km[k] = static_cast<float>(mu);
            kc[k] = static_cast<float>(-r * sum_g / m.count);
          }
        }
        for (std::int64_t r1 = s.hw; r1 > 0; r1 -= kReverseMapRows) {
          const std::int64_t r0 = std::max<std::int64_t>(0, r1 - kReverseMapRows), at = first + r0 * s.c;
          avx512::nhwc_rows_map_two(dy + at, x + at, dx + at, r1 - r0, s.c, ka.data(), kb.data(), km.data(),
                                    kc.data(), stream);
        }
      }
    });
  } else {
    for (std::int64_t i = 0; i < s.n; ++i)
      for (std::int64_t ch = 0; ch < s.c; ++ch)
        center[static_cast<std::size_t>(i * s.c + ch)] = saved_mean[m.of(i, ch, s.c)];
    norm::plane_reduce(s, PlaneSum::gradient, a.x, a.dy, center.data(), sum_dy.data(), sum_dyx.data());
  }

  // Per statistic: sum of g and of g * xhat; per channel: dscale, dshift.
  std::vector<double> sum_g(static_cast<std::size_t>(m.stats), 0.0), sum_gx(sum_g.size(), 0.0);
  std::vector<double> dscale(static_cast<std::size_t>(s.c), 0.0), dshift(dscale.size(), 0.0);
  for (std::int64_t i = 0; i < s.n; ++i) {
    for (std::int64_t ch = 0; ch < s.c; ++ch) {
      const auto p = static_cast<std::size_t>(i * s.c + ch);
      const auto st = m.of(i, ch, s.c);
      const double r = saved_invstd[st];
      sum_g[static_cast<std::size_t>(st)] += scale[ch] * sum_dy[p];
      sum_gx[static_cast<std::size_t>(st)] += scale[ch] * sum_dyx[p] * r;
      dscale[static_cast<std::size_t>(ch)] += sum_dyx[p] * r;
      dshift[static_cast<std::size_t>(ch)] += sum_dy[p];
    }
  }
  for (std::int64_t ch = 0; ch < s.c; ++ch) {
    static_cast<float*>(a.dscale)[ch] = static_cast<float>(dscale[static_cast<std::size_t>(ch)]);
    static_cast<float*>(a.dshift)[ch] = static_cast<float>(dshift[static_cast<std::size_t>(ch)]);
  }
  if (by_statistic(s, m) || by_image(s, m)) return;  // dx is done
  std::vector<float> ka(planes), kb(planes), km(planes), kc(planes);
  for (std::int64_t i = 0; i < s.n; ++i) {
    for (std::int64_t ch = 0; ch < s.c; ++ch) {
      const auto p = static_cast<std::size_t>(i * s.c + ch);
      const auto st = m.of(i, ch, s.c);
      const double r = saved_invstd[st], mu = saved_mean[st];
      const double b = -r * r * sum_gx[static_cast<std::size_t>(st)] / m.count;
      ka[p] = static_cast<float>(r * scale[ch]);
      kb[p] = static_cast<float>(b);
      km[p] = static_cast<float>(mu);
      kc[p] = static_cast<float>(-r * sum_g[static_cast<std::size_t>(st)] / m.count);
    }
  }
  norm::plane_map(s, a.dy, a.x, ka.data(), kb.data(), km.data(), nullptr, kc.data(), a.dx);
}

std::string common_no(DType dtype, const runtime::Device& device) {
  if (!device.is_cpu()) return "runs on the cpu backend only, not " + device.name();
  if (dtype != DType::f32 && dtype != DType::f16 && dtype != DType::bf16) {
    return std::string("dtype ") + to_string(dtype) + " is not f32, f16 or bf16";
  }
  return {};
}

class BnormPlanes final : public dnn::BatchNormSolver {
 public:
  std::string_view name() const override { return "cpu.bnorm.planes"; }
  Applicability check(const dnn::BatchNormProblem& p, const runtime::Device& device) const override {
    if (auto why = common_no(p.dtype, device); !why.empty()) return Applicability::no(why);
    return Applicability::yes();
  }
  void run(runtime::Stream& stream, const dnn::BatchNormProblem& p, const NormArgs& a) const override {
    stream.launch(name(), [&] { stream.host_task([p, a] { compute(p, a); }); });
  }
  std::string detail(const dnn::BatchNormProblem&, const runtime::Device&) const override {
    return "one-pass pivoted statistics in double, f32 elementwise";
  }

 private:
  static void compute(const dnn::BatchNormProblem& p, const NormArgs& a) {
    const PlaneShape s{p.n, p.c, p.h * p.w, p.layout == dnn::Layout::nhwc, p.dtype};
    const StatMap m{p.c, 0, static_cast<double>(p.reduce_size())};
    if (p.direction == NormDirection::backward) {
      backward(s, m, a);
      return;
    }
    if (p.mode == dnn::BatchNormMode::inference) {
      const auto* rm = static_cast<const float*>(a.running_mean);
      const auto* rv = static_cast<const float*>(a.running_var);
      std::vector<double> mean(rm, rm + p.c), invstd(static_cast<std::size_t>(p.c));
      for (std::int64_t ch = 0; ch < p.c; ++ch)
        invstd[static_cast<std::size_t>(ch)] = 1.0 / std::sqrt(double(rv[ch]) + p.epsilon);
      normalise(s, m, a, mean, invstd);
      return;
    }
    const std::vector<double> var = forward_training(s, m, a, p.epsilon);
    auto* rm = static_cast<float*>(a.running_mean);
    auto* rv = static_cast<float*>(a.running_var);
    const auto* saved_mean = static_cast<const float*>(a.saved_mean);
    const double count = m.count;
    for (std::int64_t ch = 0; ch < p.c; ++ch) {
      const double unbiased = var[static_cast<std::size_t>(ch)] * count / (count - 1);
      rm[ch] = static_cast<float>((1 - p.momentum) * rm[ch] + p.momentum * saved_mean[ch]);
      rv[ch] = static_cast<float>((1 - p.momentum) * rv[ch] + p.momentum * unbiased);
    }
  }
};

class GnormPlanes final : public dnn::GroupNormSolver {
 public:
  std::string_view name() const override { return "cpu.gnorm.planes"; }
  Applicability check(const dnn::GroupNormProblem& p, const runtime::Device& device) const override {
    if (auto why = common_no(p.dtype, device); !why.empty()) return Applicability::no(why);
    return Applicability::yes();
  }
  void run(runtime::Stream& stream, const dnn::GroupNormProblem& p, const NormArgs& a) const override {
    stream.launch(name(), [&] { stream.host_task([p, a] { compute(p, a); }); });
  }
  std::string detail(const dnn::GroupNormProblem&, const runtime::Device&) const override {
    return "one-pass pivoted statistics in double, f32 elementwise";
  }

 private:
  static void compute(const dnn::GroupNormProblem& p, const NormArgs& a) {
    const PlaneShape s{p.n, p.c, p.h * p.w, p.layout == dnn::Layout::nhwc, p.dtype};
    const StatMap m{p.n * p.groups, p.groups, static_cast<double>(p.group_size())};
    if (p.direction == NormDirection::backward) {
      backward(s, m, a);
    } else {
      forward_training(s, m, a, p.epsilon);
    }
  }
};

}  // namespace

std::unique_ptr<dnn::BatchNormSolver> make_bnorm_planes() { return std::make_unique<BnormPlanes>(); }
std::unique_ptr<dnn::GroupNormSolver> make_gnorm_planes() { return std::make_unique<GnormPlanes>(); }

}  // namespace galley::backends::cpu
