// cpu.conv.winograd_f4x3: 3x3, stride 1, any dilation, groups 1, Winograd F(4x4, 3x3). Per pass
// over a block of tiles: transform the inputs (V), 36 independent GEMMs (M = V * U, one per
// transformed position), transform the outputs; each phase is split over the pool. The weight
// transform (U) runs once per call, or once per call site when the call brings a prepared slot.
// See conv_winograd_kernels.hpp for the layouts. A fused epilogue (bias, residual, activation) is
// applied to each output-transform task's tiles right after they are stored, while they are in
// cache, rather than in a pass over y afterwards.
#include <algorithm>
#include <memory>
#include <string>

#include "backends/cpu/conv_base.hpp"
#include "backends/cpu/conv_epilogue.hpp"
#include "backends/cpu/conv_isa.hpp"
#include "backends/cpu/conv_solvers.hpp"
#include "backends/cpu/conv_winograd_kernels.hpp"
#include "backends/cpu/thread_pool.hpp"

namespace galley::backends::cpu {
namespace winograd {

// V and M of one pass stay within this, so the workspace is bounded whatever the batch.
constexpr std::int64_t kPassBytes = std::int64_t{12} << 20;

Geometry Geometry::of(const ConvShape& s) {
  Geometry g{};
  g.s = s;
  // Every phase gets the grid of the largest one; tiles past a smaller phase's outputs are
  // clipped at the store (at most one tile row and column per phase).
  g.tiles_h = ((s.ho + s.dh - 1) / s.dh + 3) / 4;
  g.tiles_w = ((s.wo + s.dw - 1) / s.dw + 3) / 4;
  g.tiles = s.n * s.dh * s.dw * g.tiles_h * g.tiles_w;
  g.cp = (s.c + 7) / 8 * 8;
  g.k16 = (s.k + 15) / 16 * 16;
  const std::int64_t per_tile = 36 * (g.cp + g.k16) * static_cast<std::int64_t>(sizeof(float));
  g.block = std::clamp<std::int64_t>(kPassBytes / per_tile, 6, g.tiles);
  return g;
}

}  // namespace winograd

namespace {

// The epilogue on the outputs of the pass's tiles [t0, t1) (global tile indices), channels
// [k0, k0 + 8), dilation 1. Consecutive tiles of one tile row share their 4 output rows, so each
// run of them is one call per output row rather than one per tile.
void apply_epilogue_to_tiles(const winograd::Geometry& g, std::int64_t t0, std::int64_t t1, std::int64_t k0,
                             const ConvEpilogueRunner& epilogue, float* y) {
  const ConvShape& s = g.s;
  const std::int64_t lanes = std::min<std::int64_t>(8, s.k - k0);
  const std::int64_t plane = s.ho * s.wo;
  for (std::int64_t t = t0; t < t1;) {
    const std::int64_t end = std::min(t1, (t / g.tiles_w + 1) * g.tiles_w);
    const std::int64_t n = t / (g.tiles_h * g.tiles_w), th = t / g.tiles_w % g.tiles_h;
    const std::int64_t ow0 = t % g.tiles_w * 4, ow1 = std::min(s.wo, (end - 1) % g.tiles_w * 4 + 4);
    for (std::int64_t oh = th * 4; oh < std::min(s.ho, th * 4 + 4); ++oh) {
      if (s.nhwc) {
        const std::int64_t p0 = (n * s.ho + oh) * s.wo + ow0;
        epilogue.apply_tile(y + p0 * s.k + k0, s.k, n, k0, p0, ow1 - ow0, lanes);
      } else {
        const std::int64_t p0 = oh * s.wo + ow0;
        epilogue.apply_tile(y + (n * s.k + k0) * plane + p0, plane, n, k0, p0, lanes, ow1 - ow0);
      }
    }
    t = end;
  }
}

class ConvWinogradF4x3 final : public CpuConvSolver {
 public:
  std::string_view name() const override { return "cpu.conv.winograd_f4x3"; }

 protected:
  dnn::Applicability check_f32(const dnn::ConvProblem& p) const override {
    if (!cpu_has_avx2_fma()) return dnn::Applicability::no("needs AVX2 and FMA, which this CPU lacks");
    if (p.y != 3 || p.x != 3) {
      return dnn::Applicability::no("filter " + std::to_string(p.y) + "x" + std::to_string(p.x) +
                                    " is not 3x3");
    }
    if (p.stride_h != 1 || p.stride_w != 1) {
      return dnn::Applicability::no("stride " + std::to_string(p.stride_h) + "x" +
                                    std::to_string(p.stride_w) + " is not 1");
    }
    if (p.groups != 1) return dnn::Applicability::no("groups " + std::to_string(p.groups) + " is not 1");
    return dnn::Applicability::yes();
  }

  std::size_t f32_workspace_bytes(const dnn::ConvProblem& problem) const override {
    const winograd::Geometry g = winograd::Geometry::of(ConvShape::of(problem));
    return align_up64(static_cast<std::size_t>(g.u_floats()) * sizeof(float)) +
           align_up64(static_cast<std::size_t>(g.v_floats()) * sizeof(float)) +
           align_up64(static_cast<std::size_t>(g.m_floats()) * sizeof(float));
  }

  void compute_f32(const dnn::ConvProblem& problem, const float* x, const float* w, float* y, void* ws,
                   const ConvEpilogueRunner* epilogue, const PreparedSlot* prepared) const override {
    // A dilated problem's tiles hold strided outputs: its epilogue in one pass over y afterwards.
    const bool dilated = problem.dilation_h != 1 || problem.dilation_w != 1;
    compute(problem, x, w, y, ws, dilated ? nullptr : epilogue, prepared);
    if (dilated && epilogue != nullptr) epilogue->apply(0, problem.n, y, y);
  }

 private:
  // U (the transformed weights) is made on every call in the workspace, or with a prepared slot
  // once per call site and read from there.
  static void compute(const dnn::ConvProblem& problem, const float* x, const float* w, float* y, void* ws,
                      const ConvEpilogueRunner* epilogue, const PreparedSlot* prepared) {
    const winograd::Geometry g = winograd::Geometry::of(ConvShape::of(problem));
    const ConvShape& s = g.s;
    char* base = static_cast<char*>(ws);
    auto* u_workspace = reinterpret_cast<float*>(base);
    base += align_up64(static_cast<std::size_t>(g.u_floats()) * sizeof(float));
    auto* v = reinterpret_cast<float*>(base);
    base += align_up64(static_cast<std::size_t>(g.v_floats()) * sizeof(float));
    auto* m = reinterpret_cast<float*>(base);

    // U: tasks of 8 output channels x up to 64 input channels.
    const std::int64_t k8 = (s.k + 7) / 8;
    const auto transform = [&](float* u) {
      const std::int64_t c_parts = (s.c + 63) / 64;
      if (g.k16 != (k8 * 8)) std::fill(u, u + g.u_floats(), 0.0f);  // zero the padded panel lanes
      parallel_for(0, k8 * c_parts, [&](std::int64_t lo, std::int64_t hi) {
        for (std::int64_t t = lo; t < hi; ++t) {
          const std::int64_t kq = t / c_parts, cq = t % c_parts;
          winograd::transform_weights(g, w, kq * 8, cq * 64, std::min(s.c, cq * 64 + 64), u);
        }
      });
    };
    std::shared_ptr<const float> kept;
    const float* u =
        prepared_or_scratch(prepared, static_cast<std::size_t>(g.u_floats()), u_workspace, transform, kept);

    const std::int64_t c8 = g.cp / 8, kb16 = g.k16 / 16;
    const bool avx512 = cpu_has_avx512();
    constexpr std::int64_t kTileGroup = 8;  // tiles per transform task
    for (std::int64_t first = 0; first < g.tiles; first += g.block) {
      const std::int64_t count = std::min(g.block, g.tiles - first);
      const std::int64_t groups = (count + kTileGroup - 1) / kTileGroup;
      parallel_for(0, groups * c8, [&](std::int64_t lo, std::int64_t hi) {
        for (std::int64_t t = lo; t < hi; ++t) {
          const std::int64_t tg = t / c8, cq = t % c8;
          winograd::transform_input(g, x, first, tg * kTileGroup,
                                    std::min(count, tg * kTileGroup + kTileGroup), cq * 8, v);
        }
      });
      if (avx512) {
        // Pairs of 16-channel panels: 24 zmm accumulators per 12 tiles.
        const std::int64_t pairs = (kb16 + 1) / 2;
        parallel_for(0, 36 * pairs, [&](std::int64_t lo, std::int64_t hi) {
          for (std::int64_t t = lo; t < hi; ++t) {
            const std::int64_t kb = t % pairs * 2;
            winograd::multiply_avx512(g, u, v, t / pairs, kb, std::min<std::int64_t>(2, kb16 - kb), count, m);
          }
        });
      } else {
        parallel_for(0, 36 * kb16, [&](std::int64_t lo, std::int64_t hi) {
          for (std::int64_t t = lo; t < hi; ++t) winograd::multiply(g, u, v, t / kb16, t % kb16, count, m);
        });
      }
      parallel_for(0, groups * k8, [&](std::int64_t lo, std::int64_t hi) {
        for (std::int64_t t = lo; t < hi; ++t) {
          const std::int64_t tg = t / k8, kq = t % k8;
          const std::int64_t t0 = tg * kTileGroup, t1 = std::min(count, tg * kTileGroup + kTileGroup);
          winograd::transform_output(g, m, first, t0, t1, kq * 8, y);
          if (epilogue != nullptr) apply_epilogue_to_tiles(g, first + t0, first + t1, kq * 8, *epilogue, y);
        }
      });
    }
  }
};

}  // namespace
std::unique_ptr<dnn::ConvSolver> make_conv_winograd_f4x3() { return std::make_unique<ConvWinogradF4x3>(); }

}  // namespace galley::backends::cpu
