// ref.bnorm, ref.lnorm, ref.gnorm: one plain double-precision core for the three normalisations,
// which differ only in which statistic and which affine entry each element belongs to.
#include "dnn/ref_norm.hpp"

#include <cmath>
#include <string>
#include <vector>

#include "dnn/tensor_data.hpp"
#include "galley/core/error.hpp"

namespace galley::dnn {
namespace {

/// Which statistic (0..stats) and affine entry (0..affine) element e belongs to; `count` elements
/// share each statistic.
struct Geometry {
  std::int64_t total = 0, stats = 0, affine = 0, count = 0;
};

template <class Map>
void batch_statistics(const Geometry& g, Map map, const double* x, std::vector<double>& mean,
                      std::vector<double>& var) {
  mean.assign(static_cast<std::size_t>(g.stats), 0.0);
  var.assign(static_cast<std::size_t>(g.stats), 0.0);
  for (std::int64_t e = 0; e < g.total; ++e) mean[static_cast<std::size_t>(map(e).first)] += x[e];
  for (double& m : mean) m /= static_cast<double>(g.count);
  for (std::int64_t e = 0; e < g.total; ++e) {
    const auto s = static_cast<std::size_t>(map(e).first);
    const double d = x[e] - mean[s];
    var[s] += d * d;
  }
  for (double& v : var) v /= static_cast<double>(g.count);
}

/// y = (x - mean) * invstd * scale + shift with the given per-statistic mean and invstd.
template <class Map>
void apply(const Geometry& g, Map map, const NormDoubleArgs& a, const std::vector<double>& mean,
           const std::vector<double>& invstd) {
  for (std::int64_t e = 0; e < g.total; ++e) {
    const auto [s, f] = map(e);
    a.y[e] = (a.x[e] - mean[static_cast<std::size_t>(s)]) * invstd[static_cast<std::size_t>(s)] * a.scale[f] +
             a.shift[f];
  }
}

/// Batch statistics, saved_mean/saved_invstd written, then y.
template <class Map>
void forward_batch(const Geometry& g, Map map, const NormDoubleArgs& a, double epsilon,
                   std::vector<double>* var_out) {
  std::vector<double> mean, var;
  batch_statistics(g, map, a.x, mean, var);
  std::vector<double> invstd(var.size());
  for (std::size_t s = 0; s < var.size(); ++s) {
    invstd[s] = 1.0 / std::sqrt(var[s] + epsilon);
    a.saved_mean[s] = mean[s];
    a.saved_invstd[s] = invstd[s];
  }
  apply(g, map, a, mean, invstd);
  if (var_out != nullptr) *var_out = std::move(var);
}

/// dx = invstd * (g - mean(g) - xhat * mean(g * xhat)) with g = dy * scale, per statistic;
/// dscale = sum dy * xhat and dshift = sum dy per affine entry.
template <class Map>
void backward(const Geometry& g, Map map, const NormDoubleArgs& a) {
  std::vector<double> sum_g(static_cast<std::size_t>(g.stats), 0.0), sum_gx(sum_g.size(), 0.0);
  for (std::int64_t f = 0; f < g.affine; ++f) a.dscale[f] = a.dshift[f] = 0.0;
  for (std::int64_t e = 0; e < g.total; ++e) {
    const auto [s, f] = map(e);
    const double xhat = (a.x[e] - a.saved_mean[s]) * a.saved_invstd[s];
    const double gr = a.dy[e] * a.scale[f];
    sum_g[static_cast<std::size_t>(s)] += gr;
    sum_gx[static_cast<std::size_t>(s)] += gr * xhat;
    a.dscale[f] += a.dy[e] * xhat;
    a.dshift[f] += a.dy[e];
  }
  const double m = static_cast<double>(g.count);
  for (std::int64_t e = 0; e < g.total; ++e) {
    const auto [s, f] = map(e);
    const double xhat = (a.x[e] - a.saved_mean[s]) * a.saved_invstd[s];
    const double gr = a.dy[e] * a.scale[f];
    a.dx[e] = a.saved_invstd[s] *
              (gr - sum_g[static_cast<std::size_t>(s)] / m - xhat * sum_gx[static_cast<std::size_t>(s)] / m);
  }
}

template <class Map>
void run_norm(const Geometry& g, Map map, NormDirection direction, const NormDoubleArgs& a, double epsilon) {
  if (direction == NormDirection::backward) {
    backward(g, map, a);
  } else {
    forward_batch(g, map, a, epsilon, nullptr);
  }
}

// Host staging between the problem's storage dtypes and double.
std::vector<double> widen(DType dtype, const void* data, std::int64_t count) {
  if (data == nullptr) return {};
  std::vector<float> f(static_cast<std::size_t>(count));
  to_float(dtype, data, f.data(), count);
  return std::vector<double>(f.begin(), f.end());
}

void narrow(DType dtype, const std::vector<double>& values, void* out) {
  if (out == nullptr) return;
  std::vector<float> f(values.begin(), values.end());
  from_float(dtype, f.data(), out, static_cast<std::int64_t>(f.size()));
}

/// Runs `core` on double copies of every tensor of `problem`, then rounds the outputs back.
template <class P, class Core>
void through_double(const P& p, const NormArgs& a, Core core) {
  std::vector<double> host[12];
  const void* in[12] = {a.x,          a.scale,        a.shift, a.y,  a.running_mean, a.running_var,
                        a.saved_mean, a.saved_invstd, a.dy,    a.dx, a.dscale,       a.dshift};
  const ArgId ids[12] = {ArgId::src,      ArgId::scale,    ArgId::shift,      ArgId::dst,
                         ArgId::mean,     ArgId::variance, ArgId::saved_mean, ArgId::saved_invstd,
                         ArgId::diff_dst, ArgId::diff_src, ArgId::diff_scale, ArgId::diff_shift};
  bool used[12] = {};
  DType dtypes[12] = {};
  for (const TensorArg& t : p.tensors()) {
    for (int i = 0; i < 12; ++i) {
      if (ids[i] != t.id) continue;
      if (in[i] == nullptr) {
        throw Error(Status::invalid_argument,
                    std::string(to_string(P::kKind)) + " reference: " + std::string(t.name) + " is null");
      }
      used[i] = true;
      dtypes[i] = t.desc.dtype;
      host[i] = !t.output || t.also_read ? widen(t.desc.dtype, in[i], t.desc.elements())
                                         : std::vector<double>(static_cast<std::size_t>(t.desc.elements()));
    }
  }
  const auto ptr = [&](int i) { return used[i] ? host[i].data() : nullptr; };
  NormDoubleArgs d{ptr(0), ptr(1), ptr(2), ptr(3), ptr(4),  ptr(5),
                   ptr(6), ptr(7), ptr(8), ptr(9), ptr(10), ptr(11)};
  core(d);
  for (const TensorArg& t : p.tensors()) {
    if (!t.output) continue;
    for (int i = 0; i < 12; ++i) {
      if (ids[i] == t.id) narrow(dtypes[i], host[i], const_cast<void*>(in[i]));
    }
  }
}

template <class P>
class RefNorm final : public Solver<P> {
 public:
  explicit RefNorm(const char* name) : name_(name) {}
  std::string_view name() const override { return name_; }
  bool is_reference() const override { return true; }
  Applicability check(const P& /*problem*/, const runtime::Device& device) const override {
    if (!device.is_cpu()) return Applicability::no("runs on the cpu backend only, not " + device.name());
    return Applicability::yes();
  }
  void run(runtime::Stream& stream, const P& problem, const NormArgs& args) const override {
    stream.launch(name_, [&] { stream.host_task([problem, args] { reference_norm(problem, args); }); });
  }

 private:
  const char* name_;
};

}  // namespace

void reference_norm_double(const BatchNormProblem& p, const NormDoubleArgs& a) {
  p.validate();
  const std::int64_t hw = p.h * p.w, c = p.c;
  const Geometry g{p.n * c * hw, c, c, p.n * hw};
  const bool nchw = p.layout == Layout::nchw;
  const auto map = [=](std::int64_t e) {
    const std::int64_t ch = nchw ? (e / hw) % c : e % c;
    return std::pair{ch, ch};
  };
  if (p.direction == NormDirection::backward) {
    backward(g, map, a);
    return;
  }
  if (p.mode == BatchNormMode::inference) {
    std::vector<double> mean(a.running_mean, a.running_mean + c), invstd(static_cast<std::size_t>(c));
    for (std::int64_t i = 0; i < c; ++i)
      invstd[static_cast<std::size_t>(i)] = 1.0 / std::sqrt(a.running_var[i] + p.epsilon);
    apply(g, map, a, mean, invstd);
    return;
  }
  std::vector<double> var;
  forward_batch(g, map, a, p.epsilon, &var);
  const double m = static_cast<double>(g.count);
  for (std::int64_t i = 0; i < c; ++i) {
    const double unbiased = var[static_cast<std::size_t>(i)] * m / (m - 1);
    a.running_mean[i] = (1 - p.momentum) * a.running_mean[i] + p.momentum * a.saved_mean[i];
    a.running_var[i] = (1 - p.momentum) * a.running_var[i] + p.momentum * unbiased;
  }
}

void reference_norm_double(const LayerNormProblem& p, const NormDoubleArgs& a) {
  p.validate();
  const std::int64_t inner = p.inner(), outer = p.outer();
  const Geometry g{outer * inner, outer, inner, inner};
  run_norm(
      g,
      [=](std::int64_t e) {
        return std::pair{e / inner, e % inner};
      },
      p.direction, a, p.epsilon);
}

void reference_norm_double(const GroupNormProblem& p, const NormDoubleArgs& a) {
  p.validate();
  const std::int64_t hw = p.h * p.w, c = p.c, groups = p.groups, cpg = p.channels_per_group();
  const Geometry g{p.n * c * hw, p.n * groups, c, cpg * hw};
  const bool nchw = p.layout == Layout::nchw;
  const auto map = [=](std::int64_t e) {
    const std::int64_t ch = nchw ? (e / hw) % c : e % c;
    const std::int64_t image = e / (c * hw);
    return std::pair{image * groups + ch / cpg, ch};
  };
  run_norm(g, map, p.direction, a, p.epsilon);
}

void reference_norm(const BatchNormProblem& p, const NormArgs& a) {
  p.validate();
  through_double(p, a, [&](const NormDoubleArgs& d) { reference_norm_double(p, d); });
}
void reference_norm(const LayerNormProblem& p, const NormArgs& a) {
  p.validate();
  through_double(p, a, [&](const NormDoubleArgs& d) { reference_norm_double(p, d); });
}
void reference_norm(const GroupNormProblem& p, const NormArgs& a) {
  p.validate();
  through_double(p, a, [&](const NormDoubleArgs& d) { reference_norm_double(p, d); });
}

std::unique_ptr<Solver<BatchNormProblem>> make_ref_bnorm() {
  return std::make_unique<RefNorm<BatchNormProblem>>(kRefBnormName);
}
std::unique_ptr<Solver<LayerNormProblem>> make_ref_lnorm() {
  return std::make_unique<RefNorm<LayerNormProblem>>(kRefLnormName);
}
std::unique_ptr<Solver<GroupNormProblem>> make_ref_gnorm() {
  return std::make_unique<RefNorm<GroupNormProblem>>(kRefGnormName);
}

}  // namespace galley::dnn
