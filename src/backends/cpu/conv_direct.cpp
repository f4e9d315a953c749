// cpu.conv.direct: the general direct convolution. Vectorised over output channels (blocks of 8
// or 16 with the weights repacked so a tap is one vector load) and register-blocked over output
// columns, so each input value is broadcast once per tap and feeds 8 or 16 FMAs. Any filter,
// stride, padding, dilation and group count; both layouts. Scalar fallback without AVX2.
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>

#include "backends/cpu/conv_base.hpp"
#include "backends/cpu/conv_direct_kernels.hpp"
#include "backends/cpu/conv_isa.hpp"
#include "backends/cpu/thread_pool.hpp"

namespace galley::backends::cpu {
namespace direct {

Geometry Geometry::of(const ConvShape& s) {
  Geometry g{};
  g.s = s;
  g.kbw = s.kg <= 8 ? 8 : 16;
  g.kblocks = (s.kg + g.kbw - 1) / g.kbw;
  if (s.nhwc) {
    g.x_cs = 1, g.x_hs = s.w * s.c, g.x_ws = s.c;
  } else {
    g.x_cs = s.h * s.w, g.x_hs = s.w, g.x_ws = 1;
  }
  // ow*sw - pw >= 0 and ow*sw - pw + (S-1)*dw <= W-1.
  g.ow_lo = std::min(s.wo, (s.pw + s.sw - 1) / s.sw);
  const std::int64_t last = s.w - 1 + s.pw - (s.s - 1) * s.dw;
  g.ow_hi = last < 0 ? g.ow_lo : std::max(g.ow_lo, std::min(s.wo, last / s.sw + 1));
  return g;
}

void row_scalar(const Geometry& g, const float* xg, const float* wp, std::int64_t oh, float* tile) {
  const ConvShape& s = g.s;
  std::fill(tile, tile + s.wo * g.kbw, 0.0f);
  for (std::int64_t c = 0; c < s.cg; ++c) {
    for (std::int64_t r = 0; r < s.r; ++r) {
      const std::int64_t ih = oh * s.sh - s.ph + r * s.dh;
      if (ih < 0 || ih >= s.h) continue;
      for (std::int64_t q = 0; q < s.s; ++q) {
        const float* wv = wp + ((c * s.r + r) * s.s + q) * g.kbw;
        for (std::int64_t ow = 0; ow < s.wo; ++ow) {
          const std::int64_t iw = ow * s.sw - s.pw + q * s.dw;
          if (iw < 0 || iw >= s.w) continue;
          const float xv = xg[c * g.x_cs + ih * g.x_hs + iw * g.x_ws];
          float* t = tile + ow * g.kbw;
          for (std::int64_t l = 0; l < g.kbw; ++l) t[l] += wv[l] * xv;
        }
      }
    }
  }
}

}  // namespace direct

namespace {

class ConvDirect final : public CpuConvSolver {
 public:
  std::string_view name() const override { return "cpu.conv.direct"; }

 protected:
  dnn::Applicability check_f32(const dnn::ConvProblem& /*p*/) const override {
    return dnn::Applicability::yes();  // general: any filter, stride, padding, dilation, groups, layout
  }

  // Packed weights, then one row tile [Wo][kbw] per worker.
  std::size_t f32_workspace_bytes(const dnn::ConvProblem& problem) const override {
    const direct::Geometry g = direct::Geometry::of(ConvShape::of(problem));
    return packed_bytes(g) + static_cast<std::size_t>(slot_count(tasks(g))) * tile_bytes(g);
  }

  void compute_f32(const dnn::ConvProblem& problem, const float* x, const float* w, float* y,
                   void* ws) const override {
    const direct::Geometry g = direct::Geometry::of(ConvShape::of(problem));
    const ConvShape& s = g.s;
    auto* packed = static_cast<float*>(ws);
    pack_weights(g, w, packed);
    char* tiles = static_cast<char*>(ws) + packed_bytes(g);
    const bool avx2 = cpu_has_avx2_fma();
    const std::int64_t hw_out = s.ho * s.wo;
    // Tasks run (image, group, channel block, row) with the row fastest, so consecutive tasks
    // of a worker reuse the same packed weights from cache.
    run_slotted(tasks(g), slot_count(tasks(g)), [&](std::int64_t slot, std::int64_t t) {
      auto* tile = reinterpret_cast<float*>(tiles + static_cast<std::size_t>(slot) * tile_bytes(g));
      const std::int64_t oh = t % s.ho;
      std::int64_t rest = t / s.ho;
      const std::int64_t kb = rest % g.kblocks;
      rest /= g.kblocks;
      const std::int64_t gi = rest % s.g, n = rest / s.g;
      const float* xg = x + n * s.c * s.h * s.w + gi * s.cg * g.x_cs;
      const float* wp = packed + (gi * g.kblocks + kb) * g.block_floats();
      if (avx2) {
        direct::row_avx2(g, xg, wp, oh, tile);
      } else {
        direct::row_scalar(g, xg, wp, oh, tile);
      }
      const std::int64_t k0 = gi * s.kg + kb * g.kbw;
      const std::int64_t kcount = std::min(g.kbw, s.kg - kb * g.kbw);
      if (s.nhwc) {
        float* yrow = y + ((n * s.ho + oh) * s.wo) * s.k + k0;
        for (std::int64_t ow = 0; ow < s.wo; ++ow) {
          std::memcpy(yrow + ow * s.k, tile + ow * g.kbw, static_cast<std::size_t>(kcount) * sizeof(float));
        }
      } else {
        float* yrow = y + (n * s.k + k0) * hw_out + oh * s.wo;
        for (std::int64_t l = 0; l < kcount; ++l) {
          for (std::int64_t ow = 0; ow < s.wo; ++ow) yrow[l * hw_out + ow] = tile[ow * g.kbw + l];
        }
      }
    });
  }

 private:
  static std::int64_t tasks(const direct::Geometry& g) { return g.s.n * g.s.g * g.kblocks * g.s.ho; }
  static std::size_t packed_bytes(const direct::Geometry& g) {
    return align_up64(static_cast<std::size_t>(g.s.g * g.kblocks * g.block_floats()) * sizeof(float));
  }
  static std::size_t tile_bytes(const direct::Geometry& g) {
    return align_up64(static_cast<std::size_t>(g.s.wo * g.kbw) * sizeof(float));
  }

  // KCYX (nchw) or KYXC (nhwc) -> [G][kblocks][Cg][R][S][kbw], zero-padded past Kg.
  static void pack_weights(const direct::Geometry& g, const float* w, float* packed) {
    const ConvShape& s = g.s;
    parallel_for(0, s.g * g.kblocks, [&](std::int64_t lo, std::int64_t hi) {
      for (std::int64_t blk = lo; blk < hi; ++blk) {
        const std::int64_t gi = blk / g.kblocks, kb = blk % g.kblocks;
        float* out = packed + blk * g.block_floats();
        for (std::int64_t c = 0; c < s.cg; ++c) {
          for (std::int64_t r = 0; r < s.r; ++r) {
            for (std::int64_t q = 0; q < s.s; ++q) {
              float* dst = out + ((c * s.r + r) * s.s + q) * g.kbw;
              for (std::int64_t l = 0; l < g.kbw; ++l) {
                const std::int64_t kk = kb * g.kbw + l;
                if (kk >= s.kg) {
                  dst[l] = 0.0f;
                  continue;
                }
                const std::int64_t k = gi * s.kg + kk;
                dst[l] = s.nhwc ? w[((k * s.r + r) * s.s + q) * s.cg + c] : w[((k * s.cg + c) * s.r + r) * s.s + q];
              }
            }
          }
        }
      }
    });
  }
};

const bool kRegistered = [] {
  dnn::register_conv_solver("cpu", 60, std::make_unique<ConvDirect>());
  return true;
}();

}  // namespace
}  // namespace galley::backends::cpu
