// cpu.conv.direct: the general direct convolution. Vectorised over output channels (blocks of 8
// or 16 with the weights repacked so a tap is one vector load) and register-blocked over output
// columns, so each input value is broadcast once per tap and feeds 8 or 16 FMAs. Any filter,
// stride, padding, dilation and group count; both layouts. Scalar fallback without AVX2.
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>

#include "backends/cpu/conv_base.hpp"
#include "backends/cpu/conv_solvers.hpp"
#include "backends/cpu/conv_direct_kernels.hpp"
#include "backends/cpu/conv_isa.hpp"
#include "backends/cpu/thread_pool.hpp"

namespace galley::backends::cpu {
namespace direct {

// A task's tile of partial sums stays within this (L2), whatever the image width.
constexpr std::int64_t kTileBytes = 64 << 10;

Geometry Geometry::of(const ConvShape& s, std::int64_t workers) {
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
  // A task is a group of output rows for one block of output channels: its weights are read
  // once per task and each chunk of them stays in L1 across all the rows. Rows per task: as
  // many as fit the tile, but few enough that every worker gets about four tasks.
  const std::int64_t rows = s.n * s.ho;
  const std::int64_t blocks = s.g * g.kblocks;
  const std::int64_t want_groups = std::max<std::int64_t>(1, (4 * workers + blocks - 1) / blocks);
  const std::int64_t fit = std::max<std::int64_t>(1, kTileBytes / (s.wo * g.kbw * 4));
  g.rows_per_task = std::clamp<std::int64_t>((rows + want_groups - 1) / want_groups, 1, fit);
  return g;
}

void rows_scalar(const Geometry& g, const float* x, std::int64_t gi, const float* wp, std::int64_t row0,
                 std::int64_t row1, float* tile) {
  const ConvShape& s = g.s;
  std::fill(tile, tile + (row1 - row0) * s.wo * g.kbw, 0.0f);
  for (std::int64_t row = row0; row < row1; ++row) {
    const std::int64_t n = row / s.ho, oh = row % s.ho;
    const float* xg = x + n * s.c * s.h * s.w + gi * s.cg * g.x_cs;
    float* trow = tile + (row - row0) * s.wo * g.kbw;
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
            float* t = trow + ow * g.kbw;
            for (std::int64_t l = 0; l < g.kbw; ++l) t[l] += wv[l] * xv;
          }
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

  // Packed weights, then one tile of partial sums per worker.
  std::size_t f32_workspace_bytes(const dnn::ConvProblem& problem) const override {
    const direct::Geometry g = geometry(problem);
    return packed_bytes(g) + static_cast<std::size_t>(slot_count(g.tasks())) * tile_bytes(g);
  }

  // The epilogue on each output row of a task as it is copied out of the tile.
  void compute_f32(const dnn::ConvProblem& problem, const float* x, const float* w, float* y, void* ws,
                   const ConvEpilogueRunner* epilogue,
                   const PreparedSlot* /*prepared*/) const override {
    const direct::Geometry g = geometry(problem);
    const ConvShape& s = g.s;
    auto* packed = static_cast<float*>(ws);
    pack_weights(g, w, packed);
    char* tiles = static_cast<char*>(ws) + packed_bytes(g);
    const bool avx2 = cpu_has_avx2_fma();
    const std::int64_t hw_out = s.ho * s.wo, groups = g.row_groups();
    // Tasks run (group, channel block, row group) with row groups fastest, so consecutive
    // tasks of a worker reuse the same packed weights from cache.
    run_slotted(g.tasks(), slot_count(g.tasks()), [&](std::int64_t slot, std::int64_t t) {
      auto* tile = reinterpret_cast<float*>(tiles + static_cast<std::size_t>(slot) * tile_bytes(g));
      const std::int64_t rg = t % groups, blk = t / groups;
      const std::int64_t kb = blk % g.kblocks, gi = blk / g.kblocks;
      const std::int64_t row0 = rg * g.rows_per_task, row1 = std::min(s.n * s.ho, row0 + g.rows_per_task);
      const float* wp = packed + blk * g.block_floats();
      if (avx2) {
        direct::rows_avx2(g, x, gi, wp, row0, row1, tile);
      } else {
        direct::rows_scalar(g, x, gi, wp, row0, row1, tile);
      }
      const std::int64_t k0 = gi * s.kg + kb * g.kbw;
      const std::int64_t kcount = std::min(g.kbw, s.kg - kb * g.kbw);
      for (std::int64_t row = row0; row < row1; ++row) {
        const float* trow = tile + (row - row0) * s.wo * g.kbw;
        if (s.nhwc) {
          float* yrow = y + row * s.wo * s.k + k0;
          for (std::int64_t ow = 0; ow < s.wo; ++ow) {
            std::memcpy(yrow + ow * s.k, trow + ow * g.kbw, static_cast<std::size_t>(kcount) * sizeof(float));
          }
          if (epilogue != nullptr) epilogue->apply_tile(yrow, s.k, 0, k0, row * s.wo, s.wo, kcount);
        } else {
          const std::int64_t n = row / s.ho, oh = row % s.ho;
          float* yrow = y + (n * s.k + k0) * hw_out + oh * s.wo;
          for (std::int64_t l = 0; l < kcount; ++l) {
            for (std::int64_t ow = 0; ow < s.wo; ++ow) yrow[l * hw_out + ow] = trow[ow * g.kbw + l];
          }
          if (epilogue != nullptr) epilogue->apply_tile(yrow, hw_out, n, k0, oh * s.wo, kcount, s.wo);
        }
      }
    });
  }

 private:
  static direct::Geometry geometry(const dnn::ConvProblem& problem) {
    return direct::Geometry::of(ConvShape::of(problem), pool_size());
  }
  static std::size_t packed_bytes(const direct::Geometry& g) {
    return align_up64(static_cast<std::size_t>(g.s.g * g.kblocks * g.block_floats()) * sizeof(float));
  }
  static std::size_t tile_bytes(const direct::Geometry& g) {
    return align_up64(static_cast<std::size_t>(g.tile_floats()) * sizeof(float));
  }

  // KCYX (nchw) or KYXC (nhwc) -> [G][kblocks][Cg][R][S][kbw], zero-padded past Kg. Each output
  // channel's filter is read contiguously and scattered with stride kbw: a transpose that costs
  // about as much as reading the weights, which matters when C*K is large and the image small.
  static void pack_weights(const direct::Geometry& g, const float* w, float* packed) {
    const ConvShape& s = g.s;
    const std::int64_t rs = s.r * s.s, crs = s.cg * rs;
    parallel_for(0, s.g * g.kblocks, [&](std::int64_t lo, std::int64_t hi) {
      for (std::int64_t blk = lo; blk < hi; ++blk) {
        const std::int64_t gi = blk / g.kblocks, kb = blk % g.kblocks;
        float* out = packed + blk * g.block_floats();
        const std::int64_t kcount = std::min(g.kbw, s.kg - kb * g.kbw);
        if (kcount < g.kbw) std::fill(out, out + g.block_floats(), 0.0f);
        for (std::int64_t l = 0; l < kcount; ++l) {
          const float* src = w + (gi * s.kg + kb * g.kbw + l) * crs;
          float* dst = out + l;
          if (!s.nhwc) {
            for (std::int64_t t = 0; t < crs; ++t) dst[t * g.kbw] = src[t];
          } else {
            for (std::int64_t t = 0; t < rs; ++t) {
              for (std::int64_t c = 0; c < s.cg; ++c) dst[(c * rs + t) * g.kbw] = src[t * s.cg + c];
            }
          }
        }
      }
    });
  }
};

}  // namespace
std::unique_ptr<dnn::ConvSolver> make_conv_direct() { return std::make_unique<ConvDirect>(); }

}  // namespace galley::backends::cpu
