// cpu.pool.direct: pooling on the cpu thread pool. nchw works plane by plane (one task per N*C
// plane); nhwc works output row by output row with the channels innermost, where the compiler
// vectorises the per-channel sums and comparisons. Backward is a gather: each input element sums
// the gradients of the outputs whose windows hold it, so no two threads write one element and the
// result does not depend on the thread count. Max backward without kept indices first finds the
// maxima again into the workspace, then gathers as with kept indices.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "backends/cpu/pool_solvers.hpp"
#include "backends/cpu/thread_pool.hpp"
#include "dnn/pool_geometry.hpp"
#include "galley/core/error.hpp"

namespace galley::backends::cpu {
namespace {

using dnn::PoolArgs;
using dnn::PoolAxis;
using dnn::PoolMode;
using dnn::PoolProblem;

struct Half {
  std::uint16_t bits;
};
struct BFloat {
  std::uint16_t bits;
};
inline float ld(float v) { return v; }
inline float ld(Half v) { return half_to_float(v.bits); }
inline float ld(BFloat v) {
  const std::uint32_t u = std::uint32_t(v.bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
template <class T>
T st(float v);
template <>
float st<float>(float v) {
  return v;
}
template <>
Half st<Half>(float v) {
  return {float_to_half(v)};
}
template <>
BFloat st<BFloat>(float v) {
  return {float_to_bfloat16(v)};
}

struct Shape {
  std::int64_t n, c, h, w, oh, ow;
  PoolAxis ah, aw;
  PoolMode mode;
  bool nhwc;
};

Shape shape_of(const PoolProblem& p) {
  return {p.n, p.c, p.h, p.w, p.out_h(), p.out_w(), dnn::pool_axis_h(p), dnn::pool_axis_w(p), p.mode,
          p.layout == dnn::Layout::nhwc};
}

// 1 / divisor of every output position of a plane (the same for every plane).
std::vector<float> inverse_divisors(const Shape& s) {
  std::vector<float> inv(static_cast<std::size_t>(s.oh * s.ow), 1.0f);
  if (s.mode == PoolMode::max) return inv;
  for (std::int64_t oh = 0; oh < s.oh; ++oh) {
    const PoolAxis::Span sh = s.ah.span(oh);
    for (std::int64_t ow = 0; ow < s.ow; ++ow) {
      inv[oh * s.ow + ow] = 1.0f / static_cast<float>(dnn::pool_divisor(s.mode, sh, s.aw.span(ow)));
    }
  }
  return inv;
}

// Forward. `y` or `idx` may be null (finding the maxima for backward writes indices only).
template <class T>
void forward_nchw(const Shape& s, const T* x, T* y, std::int32_t* idx, const std::vector<float>& inv) {
  const std::int64_t plane_in = s.h * s.w, plane_out = s.oh * s.ow;
  parallel_for(0, s.n * s.c, [&](std::int64_t p0, std::int64_t p1) {
    for (std::int64_t pl = p0; pl < p1; ++pl) {
      const T* xp = x + pl * plane_in;
      for (std::int64_t oh = 0; oh < s.oh; ++oh) {
        const PoolAxis::Span sh = s.ah.span(oh);
        for (std::int64_t ow = 0; ow < s.ow; ++ow) {
          const PoolAxis::Span sw = s.aw.span(ow);
          const std::int64_t o = pl * plane_out + oh * s.ow + ow;
          if (s.mode == PoolMode::max) {
            float best = -std::numeric_limits<float>::infinity();
            std::int64_t at = sh.begin * s.w + sw.begin;
            for (std::int64_t ih = sh.begin; ih < sh.end; ++ih) {
              for (std::int64_t iw = sw.begin; iw < sw.end; ++iw) {
                const float v = ld(xp[ih * s.w + iw]);
                if (v > best || std::isnan(v)) best = v, at = ih * s.w + iw;
              }
            }
            if (y != nullptr) y[o] = st<T>(best);
            if (idx != nullptr) idx[o] = static_cast<std::int32_t>(at);
          } else {
            float sum = 0;
            for (std::int64_t ih = sh.begin; ih < sh.end; ++ih) {
              const T* row = xp + ih * s.w;
              for (std::int64_t iw = sw.begin; iw < sw.end; ++iw) sum += ld(row[iw]);
            }
            y[o] = st<T>(sum * inv[oh * s.ow + ow]);
          }
        }
      }
    }
  });
}

template <class T>
void forward_nhwc(const Shape& s, const T* x, T* y, std::int32_t* idx, const std::vector<float>& inv) {
  const std::int64_t C = s.c;
  parallel_for(0, s.n * s.oh, [&](std::int64_t r0, std::int64_t r1) {
    std::vector<float> acc(static_cast<std::size_t>(C));
    std::vector<std::int32_t> at(static_cast<std::size_t>(C));
    float* a = acc.data();
    std::int32_t* ai = at.data();
    for (std::int64_t r = r0; r < r1; ++r) {
      const std::int64_t n = r / s.oh, oh = r % s.oh;
      const PoolAxis::Span sh = s.ah.span(oh);
      for (std::int64_t ow = 0; ow < s.ow; ++ow) {
        const PoolAxis::Span sw = s.aw.span(ow);
        const std::int64_t o = (r * s.ow + ow) * C;
        if (s.mode == PoolMode::max) {
          const auto first = static_cast<std::int32_t>(sh.begin * s.w + sw.begin);
          std::fill(a, a + C, -std::numeric_limits<float>::infinity());
          std::fill(ai, ai + C, first);
          for (std::int64_t ih = sh.begin; ih < sh.end; ++ih) {
            for (std::int64_t iw = sw.begin; iw < sw.end; ++iw) {
              const T* xr = x + ((n * s.h + ih) * s.w + iw) * C;
              const auto pos = static_cast<std::int32_t>(ih * s.w + iw);
              for (std::int64_t c = 0; c < C; ++c) {
                const float v = ld(xr[c]);
                const bool take = v > a[c] || v != v;
                a[c] = take ? v : a[c];
                ai[c] = take ? pos : ai[c];
              }
            }
          }
          if (y != nullptr) {
            for (std::int64_t c = 0; c < C; ++c) y[o + c] = st<T>(a[c]);
          }
          if (idx != nullptr) std::copy(ai, ai + C, idx + o);
        } else {
          std::fill(a, a + C, 0.0f);
          for (std::int64_t ih = sh.begin; ih < sh.end; ++ih) {
            for (std::int64_t iw = sw.begin; iw < sw.end; ++iw) {
              const T* xr = x + ((n * s.h + ih) * s.w + iw) * C;
              for (std::int64_t c = 0; c < C; ++c) a[c] += ld(xr[c]);
            }
          }
          const float k = inv[oh * s.ow + ow];
          for (std::int64_t c = 0; c < C; ++c) y[o + c] = st<T>(a[c] * k);
        }
      }
    }
  });
}

// Backward as a gather over the outputs whose windows hold each input; max compares the kept
// index with the input's own position, so an index outside its window contributes nothing.
template <class T>
void backward_nchw(const Shape& s, const T* dy, const std::int32_t* idx, T* dx, const std::vector<float>& inv) {
  const std::int64_t plane_in = s.h * s.w, plane_out = s.oh * s.ow;
  parallel_for(0, s.n * s.c, [&](std::int64_t p0, std::int64_t p1) {
    for (std::int64_t pl = p0; pl < p1; ++pl) {
      const T* g = dy + pl * plane_out;
      const std::int32_t* ip = idx != nullptr ? idx + pl * plane_out : nullptr;
      T* out = dx + pl * plane_in;
      for (std::int64_t ih = 0; ih < s.h; ++ih) {
        std::int64_t oh0 = 0, oh1 = -1;
        s.ah.covering(ih, oh0, oh1);
        for (std::int64_t iw = 0; iw < s.w; ++iw) {
          std::int64_t ow0 = 0, ow1 = -1;
          s.aw.covering(iw, ow0, ow1);
          const auto pos = static_cast<std::int32_t>(ih * s.w + iw);
          float sum = 0;
          for (std::int64_t oh = oh0; oh <= oh1; ++oh) {
            for (std::int64_t ow = ow0; ow <= ow1; ++ow) {
              const std::int64_t o = oh * s.ow + ow;
              if (ip != nullptr) {
                if (ip[o] == pos) sum += ld(g[o]);
              } else {
                sum += ld(g[o]) * inv[o];
              }
            }
          }
          out[ih * s.w + iw] = st<T>(sum);
        }
      }
    }
  });
}

template <class T>
void backward_nhwc(const Shape& s, const T* dy, const std::int32_t* idx, T* dx, const std::vector<float>& inv) {
  const std::int64_t C = s.c;
  parallel_for(0, s.n * s.h, [&](std::int64_t r0, std::int64_t r1) {
    std::vector<float> acc(static_cast<std::size_t>(C));
    float* a = acc.data();
    for (std::int64_t r = r0; r < r1; ++r) {
      const std::int64_t n = r / s.h, ih = r % s.h;
      std::int64_t oh0 = 0, oh1 = -1;
      s.ah.covering(ih, oh0, oh1);
      for (std::int64_t iw = 0; iw < s.w; ++iw) {
        std::int64_t ow0 = 0, ow1 = -1;
        s.aw.covering(iw, ow0, ow1);
        const auto pos = static_cast<std::int32_t>(ih * s.w + iw);
        std::fill(a, a + C, 0.0f);
        for (std::int64_t oh = oh0; oh <= oh1; ++oh) {
          for (std::int64_t ow = ow0; ow <= ow1; ++ow) {
            const std::int64_t o = ((n * s.oh + oh) * s.ow + ow) * C;
            const T* g = dy + o;
            if (idx != nullptr) {
              const std::int32_t* ip = idx + o;
              for (std::int64_t c = 0; c < C; ++c) a[c] += ip[c] == pos ? ld(g[c]) : 0.0f;
            } else {
              const float k = inv[oh * s.ow + ow];
              for (std::int64_t c = 0; c < C; ++c) a[c] += ld(g[c]) * k;
            }
          }
        }
        T* out = dx + ((n * s.h + ih) * s.w + iw) * C;
        for (std::int64_t c = 0; c < C; ++c) out[c] = st<T>(a[c]);
      }
    }
  });
}

template <class T>
void compute(const PoolProblem& p, const PoolArgs& a) {
  const Shape s = shape_of(p);
  const std::vector<float> inv = inverse_divisors(s);
  const auto fwd = s.nhwc ? forward_nhwc<T> : forward_nchw<T>;
  const auto bwd = s.nhwc ? backward_nhwc<T> : backward_nchw<T>;
  if (p.direction == dnn::PoolDirection::forward) {
    fwd(s, static_cast<const T*>(a.src), static_cast<T*>(a.dst),
        p.keep_indices ? static_cast<std::int32_t*>(a.indices) : nullptr, inv);
    return;
  }
  const std::int32_t* idx = nullptr;
  if (p.mode == PoolMode::max) {
    if (p.keep_indices) {
      idx = static_cast<const std::int32_t*>(a.indices);
    } else {
      auto* found = static_cast<std::int32_t*>(a.workspace);
      fwd(s, static_cast<const T*>(a.src), nullptr, found, inv);
      idx = found;
    }
  }
  bwd(s, static_cast<const T*>(a.diff_dst), idx, static_cast<T*>(a.diff_src), inv);
}

class PoolDirect final : public dnn::PoolSolver {
 public:
  std::string_view name() const override { return "cpu.pool.direct"; }
  dnn::Applicability check(const PoolProblem&, const runtime::Device& device) const override {
    if (!device.is_cpu()) return dnn::Applicability::no("runs on the cpu backend only, not " + device.name());
    return dnn::Applicability::yes();
  }
  std::size_t workspace_bytes(const PoolProblem& p, const runtime::Device&) const override {
    if (p.direction != dnn::PoolDirection::backward || !p.recomputes_indices()) return 0;
    return static_cast<std::size_t>(p.dst_desc().elements()) * sizeof(std::int32_t);
  }
  void run(runtime::Stream& stream, const PoolProblem& problem, const PoolArgs& args) const override {
    const std::size_t need = workspace_bytes(problem, stream.device());
    if (args.workspace_bytes < need) {
      throw Error(Status::invalid_argument, std::string(name()) + ": workspace of " +
                                                std::to_string(args.workspace_bytes) + " bytes, needs " +
                                                std::to_string(need));
    }
    stream.launch(name(), [&] {
      stream.host_task([problem, args] {
        switch (problem.dtype) {
          case DType::f32:
            compute<float>(problem, args);
            return;
          case DType::f16:
            compute<Half>(problem, args);
            return;
          case DType::bf16:
            compute<BFloat>(problem, args);
            return;
          default:
            throw Error(Status::unsupported, "cpu.pool.direct: dtype " + std::string(to_string(problem.dtype)));
        }
      });
    });
  }
  std::string detail(const PoolProblem& p, const runtime::Device&) const override {
    return p.layout == dnn::Layout::nhwc ? "rows, channels innermost" : "planes";
  }
};

}  // namespace

std::unique_ptr<dnn::PoolSolver> make_pool_direct() { return std::make_unique<PoolDirect>(); }

}  // namespace galley::backends::cpu
