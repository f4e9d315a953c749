#include "dnn/ref_pool.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "dnn/pool_geometry.hpp"
#include "dnn/tensor_data.hpp"

namespace galley::dnn {
namespace {

// Element strides of a packed N, C, H, W tensor in `layout`.
struct Strides {
  std::int64_t n, c, h, w;
};
Strides strides_of(Layout layout, std::int64_t c, std::int64_t h, std::int64_t w) {
  if (layout == Layout::nhwc) return {h * w * c, 1, w * c, c};
  return {c * h * w, h * w, w, 1};
}

std::vector<float> load(const PoolProblem& p, const void* data, std::int64_t count) {
  std::vector<float> out(static_cast<std::size_t>(count));
  to_float(p.dtype, data, out.data(), count);
  return out;
}

// The maximum of one window by the documented rule: scanning row by row, an element takes over when
// it is greater or NaN; before any does, the first element of the window holds it.
std::int64_t argmax(const float* plane, std::int64_t hs, std::int64_t ws, std::int64_t w,
                    const PoolAxis::Span& sh, const PoolAxis::Span& sw) {
  double best = -std::numeric_limits<double>::infinity();
  std::int64_t at = sh.begin * w + sw.begin;
  for (std::int64_t ih = sh.begin; ih < sh.end; ++ih) {
    for (std::int64_t iw = sw.begin; iw < sw.end; ++iw) {
      const double v = plane[ih * hs + iw * ws];
      if (v > best || std::isnan(v)) {
        best = v;
        at = ih * w + iw;
      }
    }
  }
  return at;
}

void forward(const PoolProblem& p, const PoolArgs& a) {
  const PoolAxis ah = pool_axis_h(p), aw = pool_axis_w(p);
  const std::int64_t oh_n = p.out_h(), ow_n = p.out_w();
  const Strides si = strides_of(p.layout, p.c, p.h, p.w), so = strides_of(p.layout, p.c, oh_n, ow_n);
  const std::vector<float> x = load(p, a.src, p.src_desc().elements());
  const std::int64_t out_count = p.dst_desc().elements();
  std::vector<float> y(static_cast<std::size_t>(out_count));
  auto* idx = static_cast<std::int32_t*>(a.indices);
  for (std::int64_t n = 0; n < p.n; ++n) {
    for (std::int64_t c = 0; c < p.c; ++c) {
      const float* plane = x.data() + n * si.n + c * si.c;
      for (std::int64_t oh = 0; oh < oh_n; ++oh) {
        const PoolAxis::Span sh = ah.span(oh);
        for (std::int64_t ow = 0; ow < ow_n; ++ow) {
          const PoolAxis::Span sw = aw.span(ow);
          const std::int64_t o = n * so.n + c * so.c + oh * so.h + ow * so.w;
          if (p.mode == PoolMode::max) {
            const std::int64_t at = argmax(plane, si.h, si.w, p.w, sh, sw);
            y[o] = plane[(at / p.w) * si.h + (at % p.w) * si.w];
            if (p.keep_indices) idx[o] = static_cast<std::int32_t>(at);
          } else {
            double sum = 0;
            for (std::int64_t ih = sh.begin; ih < sh.end; ++ih) {
              for (std::int64_t iw = sw.begin; iw < sw.end; ++iw) sum += plane[ih * si.h + iw * si.w];
            }
            y[o] = static_cast<float>(sum / static_cast<double>(pool_divisor(p.mode, sh, sw)));
          }
        }
      }
    }
  }
  from_float(p.dtype, y.data(), a.dst, out_count);
}

void backward(const PoolProblem& p, const PoolArgs& a) {
  const PoolAxis ah = pool_axis_h(p), aw = pool_axis_w(p);
  const std::int64_t oh_n = p.out_h(), ow_n = p.out_w();
  const Strides si = strides_of(p.layout, p.c, p.h, p.w), so = strides_of(p.layout, p.c, oh_n, ow_n);
  const std::vector<float> dy = load(p, a.diff_dst, p.dst_desc().elements());
  std::vector<float> x;
  if (p.recomputes_indices()) x = load(p, a.src, p.src_desc().elements());
  const auto* idx = static_cast<const std::int32_t*>(a.indices);
  const std::int64_t in_count = p.src_desc().elements();
  std::vector<double> dx(static_cast<std::size_t>(in_count), 0.0);
  for (std::int64_t n = 0; n < p.n; ++n) {
    for (std::int64_t c = 0; c < p.c; ++c) {
      const std::int64_t base = n * si.n + c * si.c;
      for (std::int64_t oh = 0; oh < oh_n; ++oh) {
        const PoolAxis::Span sh = ah.span(oh);
        for (std::int64_t ow = 0; ow < ow_n; ++ow) {
          const PoolAxis::Span sw = aw.span(ow);
          const std::int64_t o = n * so.n + c * so.c + oh * so.h + ow * so.w;
          const double g = dy[o];
          if (p.mode == PoolMode::max) {
            std::int64_t at = 0;
            if (p.keep_indices) {
              at = idx[o];
              const std::int64_t ih = at / p.w, iw = at % p.w;
              // An index outside its own window is not this output's maximum: it contributes nothing.
              if (at < 0 || ih < sh.begin || ih >= sh.end || iw < sw.begin || iw >= sw.end) continue;
            } else {
              at = argmax(x.data() + base, si.h, si.w, p.w, sh, sw);
            }
            dx[base + (at / p.w) * si.h + (at % p.w) * si.w] += g;
          } else {
            const double share = g / static_cast<double>(pool_divisor(p.mode, sh, sw));
            for (std::int64_t ih = sh.begin; ih < sh.end; ++ih) {
              for (std::int64_t iw = sw.begin; iw < sw.end; ++iw) dx[base + ih * si.h + iw * si.w] += share;
            }
          }
        }
      }
    }
  }
  std::vector<float> out(dx.begin(), dx.end());
  from_float(p.dtype, out.data(), a.diff_src, in_count);
}

class RefPool final : public PoolSolver {
 public:
  std::string_view name() const override { return kRefPoolName; }
  Applicability check(const PoolProblem&, const runtime::Device& device) const override {
    if (!device.is_cpu()) return Applicability::no("runs on the cpu backend only, not " + device.name());
    return Applicability::yes();
  }
  void run(runtime::Stream& stream, const PoolProblem& problem, const PoolArgs& args) const override {
    stream.launch(name(), [&] { stream.host_task([problem, args] { reference_pool(problem, args); }); });
  }
  bool is_reference() const override { return true; }
};

}  // namespace

void reference_pool(const PoolProblem& problem, const PoolArgs& args) {
  problem.validate();
  if (problem.direction == PoolDirection::forward) {
    forward(problem, args);
  } else {
    backward(problem, args);
  }
}

std::unique_ptr<PoolSolver> make_ref_pool() { return std::make_unique<RefPool>(); }

}  // namespace galley::dnn
