// cpu.conv.depthwise: groups == C == K (one filter per channel). Each output element costs R*S
// multiply-adds over data that is read once, so the loops aim at memory bandwidth: NCHW works a
// whole channel plane at a time from an L1-sized padded copy (no bounds checks in the inner
// loop, any stride read contiguously); NHWC runs over contiguous channel vectors. Planes too
// small to fill a vector per row take one of two AVX-512 loops instead: 3x3 "same" planes read
// as flat runs of pixels, and width stride 2 through blocks of 16 channels per vector.
#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <string>

#include "backends/cpu/conv_base.hpp"
#include "backends/cpu/conv_depthwise_kernels.hpp"
#include "backends/cpu/conv_epilogue.hpp"
#include "backends/cpu/conv_isa.hpp"
#include "backends/cpu/conv_solvers.hpp"
#include "backends/cpu/datamove_shares.hpp"
#include "backends/cpu/im2col_avx512.hpp"
#include "backends/cpu/thread_pool.hpp"

namespace galley::backends::cpu {
namespace depthwise {

Plane Plane::of(const ConvShape& s) {
  Plane p{};
  p.phases = s.sw;
  p.rows = (s.ho - 1) * s.sh + (s.r - 1) * s.dh + 1;
  const std::int64_t max_shift = ((s.s - 1) * s.dw) / s.sw;
  const std::int64_t vec_wo = (s.wo + 15) / 16 * 16;  // the AVX2 loop reads whole 16-wide blocks
  p.row_stride = vec_wo + max_shift;
  p.phase_stride = p.rows * p.row_stride;
  return p;
}

PackedPlane PackedPlane::of(const ConvShape& s) {
  PackedPlane packed{};
  const std::int64_t pixels = s.h * s.w;
  packed.vectors = std::min((pixels + 15) / 16, kMaxVectors);  // whole only where fits(s)
  for (std::int64_t v = 0; v < packed.vectors; ++v) {
    for (std::int64_t dy = -1; dy <= 1; ++dy) {
      for (std::int64_t dx = -1; dx <= 1; ++dx) {
        std::uint16_t mask = 0;
        for (std::int64_t lane = 0; lane < 16; ++lane) {
          const std::int64_t p = v * 16 + lane, row = p / s.w + dy, col = p % s.w + dx;
          if (p < pixels && row >= 0 && row < s.h && col >= 0 && col < s.w) mask |= std::uint16_t(1u << lane);
        }
        packed.masks[v][(dy + 1) * 3 + dx + 1] = mask;
      }
    }
  }
  return packed;
}

ChannelBlock ChannelBlock::of(const ConvShape& s) {
  return {std::max(s.ph + s.h, (s.ho - 1) * s.sh + s.r), std::max(s.pw + s.w, (s.wo - 1) * s.sw + s.s),
          (s.ho * s.wo + 15) / 16 * 16 * 16};
}

void build_plane(const ConvShape& s, const Plane& plane, const float* xc, float* out) {
  for (std::int64_t j = 0; j < plane.phases; ++j) {
    for (std::int64_t i = 0; i < plane.rows; ++i) {
      float* row = out + j * plane.phase_stride + i * plane.row_stride;
      const std::int64_t ih = i - s.ph;
      if (ih < 0 || ih >= s.h) {
        std::fill(row, row + plane.row_stride, 0.0f);
        continue;
      }
      const float* in = xc + ih * s.w;
      // Position p holds input column p*sw + j - pw.
      const std::int64_t first = j - s.pw;
      const std::int64_t lo = std::clamp<std::int64_t>((-first + s.sw - 1) / s.sw, 0, plane.row_stride);
      const std::int64_t last = s.w - 1 - first;
      const std::int64_t hi = last < 0 ? lo : std::clamp<std::int64_t>(last / s.sw + 1, lo, plane.row_stride);
      std::fill(row, row + lo, 0.0f);
      if (s.sw == 1) {
        std::memcpy(row + lo, in + lo + first, static_cast<std::size_t>(hi - lo) * sizeof(float));
      } else if (s.sw == 2 && cpu_has_avx512()) {
        avx512::copy_every_second(in + lo * 2 + first, hi - lo, row + lo);
      } else {
        for (std::int64_t p = lo; p < hi; ++p) row[p] = in[p * s.sw + first];
      }
      std::fill(row + hi, row + plane.row_stride, 0.0f);
    }
  }
}

void nchw_plane_scalar(const ConvShape& s, const Plane& plane, const float* in, const float* w, float* out) {
  for (std::int64_t oh = 0; oh < s.ho; ++oh) {
    float* o = out + oh * s.wo;
    std::fill(o, o + s.wo, 0.0f);
    for (std::int64_t r = 0; r < s.r; ++r) {
      for (std::int64_t q = 0; q < s.s; ++q) {
        const float wv = w[r * s.s + q];
        const std::int64_t tap = q * s.dw;
        const float* src =
            in + (tap % s.sw) * plane.phase_stride + (oh * s.sh + r * s.dh) * plane.row_stride + tap / s.sw;
        for (std::int64_t ow = 0; ow < s.wo; ++ow) o[ow] += wv * src[ow];
      }
    }
  }
}

void nhwc_row_scalar(const ConvShape& s, const float* xn, const float* wt, std::int64_t oh, float* y_row) {
  for (std::int64_t ow = 0; ow < s.wo; ++ow) {
    float* o = y_row + ow * s.c;
    std::fill(o, o + s.c, 0.0f);
    for (std::int64_t r = 0; r < s.r; ++r) {
      const std::int64_t ih = oh * s.sh - s.ph + r * s.dh;
      if (ih < 0 || ih >= s.h) continue;
      for (std::int64_t q = 0; q < s.s; ++q) {
        const std::int64_t iw = ow * s.sw - s.pw + q * s.dw;
        if (iw < 0 || iw >= s.w) continue;
        const float* in = xn + (ih * s.w + iw) * s.c;
        const float* wv = wt + (r * s.s + q) * s.c;
        for (std::int64_t c = 0; c < s.c; ++c) o[c] += wv[c] * in[c];
      }
    }
  }
}

}  // namespace depthwise

namespace {

class ConvDepthwise final : public CpuConvSolver {
 public:
  std::string_view name() const override { return "cpu.conv.depthwise"; }

 protected:
  dnn::Applicability check_f32(const dnn::ConvProblem& p) const override {
    if (p.groups != p.c || p.groups == 1) {
      return dnn::Applicability::no("groups " + std::to_string(p.groups) + " != channels " +
                                    std::to_string(p.c) + ": not depthwise");
    }
    if (p.k != p.c) {
      return dnn::Applicability::no("channel multiplier " + std::to_string(p.k / p.c) + " (K " +
                                    std::to_string(p.k) + " != C " + std::to_string(p.c) +
                                    "); only multiplier 1");
    }
    return dnn::Applicability::yes();  // any filter, stride, padding, dilation, both layouts
  }

  // NCHW with unit width stride reads the input planes in place (AVX2, or AVX-512 where the CPU
  // has it), width stride 2 too on AVX-512; other strides, and CPUs without AVX2, go through a
  // padded copy of each plane.
  static bool direct_planes(const ConvShape& s) {
    if (s.nhwc || !cpu_has_avx2_fma()) return false;
    return s.sw == 1 || (depthwise::nchw_plane_s2_fits(s) && cpu_has_avx512());
  }

  // Small 3x3 "same" planes as flat runs of pixels where that takes clearly fewer vectors than one
  // per row: a packed vector costs about one and a half row steps (eight permutes where a row
  // takes two), and on AVX-512 hosts the packed loop wins up to 9x9 planes and loses from 10x10.
  static bool packed_planes(const ConvShape& s) {
    if (!depthwise::PackedPlane::fits(s) || !cpu_has_avx512()) return false;
    return 3 * ((s.h * s.w + 15) / 16) <= 2 * s.h;
  }
  static std::int64_t channel_block_tasks(const ConvShape& s) { return s.n * ((s.c + 15) / 16); }
  // Width stride 2 through 16-channel blocks, whose stride costs nothing, where the plane loop
  // spends two loads and two permutes per pair of taps; while all workers' blocks together take
  // at most 512 KiB: the two workers of the AVX-512 hosts measured behave as if they shared one
  // 1 MiB L2, and past that (a 56x56 input on two workers, a 112x112 one on one) the blocks spill
  // from it and the plane loop wins again.
  static constexpr std::size_t kMaxChannelBlockBytes = std::size_t{512} << 10;
  // How far ahead the plane loop asks for its output lines (prefetch_for_write_avx512): a 14x14
  // plane takes under 0.1 us on these hosts, a 112x112 one a few; two planes ahead is enough for
  // the lines to come back from the other core in time.
  static constexpr std::int64_t kPrefetchPlanes = 2;
  // With more than one worker only for outputs of at most half a vector per row: the plane loop's
  // latency-bound chains gain from a second worker where the block loop, bound by its shuffles
  // and FMAs, gains little (14x14 outputs ran slower through blocks on two workers, 7x7 faster).
  static bool channel_blocks(const ConvShape& s) {
    if (!depthwise::channel_block_fits(s) || s.sw != 2 || !cpu_has_avx512()) return false;
    const std::int64_t workers = slot_count(channel_block_tasks(s));
    if (workers > 1 && s.wo > 8) return false;
    const auto block = static_cast<std::size_t>(depthwise::ChannelBlock::of(s).floats()) * sizeof(float);
    return static_cast<std::size_t>(workers) * block <= kMaxChannelBlockBytes;
  }

  std::size_t f32_workspace_bytes(const dnn::ConvProblem& problem) const override {
    const ConvShape s = ConvShape::of(problem);
    if (channel_blocks(s)) {
      const auto block = static_cast<std::size_t>(depthwise::ChannelBlock::of(s).floats()) * sizeof(float);
      // Slack to start the blocks on a cache line, which the workspace need not.
      return static_cast<std::size_t>(slot_count(channel_block_tasks(s))) * align_up64(block) + 64;
    }
    if (s.nhwc) return align_up64(static_cast<std::size_t>(s.r * s.s * s.c) * sizeof(float));
    if (direct_planes(s)) return 0;
    const auto plane = static_cast<std::size_t>(depthwise::Plane::of(s).floats()) * sizeof(float);
    return static_cast<std::size_t>(slot_count(s.n * s.c)) * align_up64(plane);
  }

  // The epilogue in the AVX-512 plane loops' stores where it is a compare and a select, else on
  // each output plane (NCHW) or row (NHWC) as soon as it is written.
  void compute_f32(const dnn::ConvProblem& problem, const float* x, const float* w, float* y, void* ws,
                   const ConvEpilogueRunner* epilogue, const PreparedSlot* /*prepared*/) const override {
    const ConvShape s = ConvShape::of(problem);
    const bool avx2 = cpu_has_avx2_fma();
    // Input and output planes, for the split of the plane loops (datamove_shares.hpp).
    const std::int64_t plane_bytes =
        s.n * s.c * (s.h * s.w + s.ho * s.wo) * static_cast<std::int64_t>(sizeof(float));
    if (packed_planes(s)) {
      const depthwise::PackedPlane packed = depthwise::PackedPlane::of(s);
      const std::int64_t pixels = s.h * s.w;
      parallel_for_shares(s.n * s.c, plane_bytes, [&](std::int64_t lo, std::int64_t hi) {
        // One call per image's share of the range: the post-ops address one image's channels.
        while (lo < hi) {
          const std::int64_t n = lo / s.c, c0 = lo % s.c, planes = std::min(hi - lo, s.c - c0);
          float* out = y + lo * pixels;
          const auto post = epilogue != nullptr ? epilogue->gemm_post_ops(n, c0, 0) : std::nullopt;
          depthwise::nchw_planes_packed_avx512(s, packed, x + lo * pixels, w + c0 * 9, planes, out,
                                               post ? &*post : nullptr);
          if (epilogue != nullptr && !post) epilogue->apply_tile(out, pixels, n, c0, 0, planes, pixels);
          lo += planes;
        }
      });
      return;
    }
    if (channel_blocks(s)) {
      const depthwise::ChannelBlock block = depthwise::ChannelBlock::of(s);
      const std::size_t slot_bytes = align_up64(static_cast<std::size_t>(block.floats()) * sizeof(float));
      const std::int64_t blocks_per_image = (s.c + 15) / 16, tasks = channel_block_tasks(s);
      char* first_line = static_cast<char*>(ws) + (64 - reinterpret_cast<std::uintptr_t>(ws) % 64) % 64;
      const std::int64_t slots = slot_count(tasks);
      // Each slot a fixed, even share of the blocks, as the plane loops' parallel_for splits them.
      parallel_for(0, slots, [&](std::int64_t slot_lo, std::int64_t slot_hi) {
        for (std::int64_t slot = slot_lo; slot < slot_hi; ++slot) {
          auto* scratch = reinterpret_cast<float*>(first_line + static_cast<std::size_t>(slot) * slot_bytes);
          for (std::int64_t task = slot * tasks / slots; task < (slot + 1) * tasks / slots; ++task) {
            const std::int64_t n = task / blocks_per_image, c0 = task % blocks_per_image * 16;
            const std::int64_t channels = std::min<std::int64_t>(16, s.c - c0);
            float* out = y + (n * s.c + c0) * s.ho * s.wo;
            const auto post = epilogue != nullptr ? epilogue->gemm_post_ops(n, c0, 0) : std::nullopt;
            depthwise::nchw_channel_block_avx512(s, block, x + (n * s.c + c0) * s.h * s.w, w + c0 * 9,
                                                 channels, out, scratch, post ? &*post : nullptr);
            if (epilogue != nullptr && !post)
              epilogue->apply_tile(out, s.ho * s.wo, n, c0, 0, channels, s.ho * s.wo);
          }
        }
      });
      return;
    }
    if (direct_planes(s)) {
      const bool avx512 = cpu_has_avx512();
      const std::int64_t out_plane = s.ho * s.wo;
      parallel_for_shares(s.n * s.c, plane_bytes, [&](std::int64_t lo, std::int64_t hi) {
        for (std::int64_t nc = lo; nc < hi; ++nc) {
          if (avx512 && nc + kPrefetchPlanes < hi) {
            depthwise::prefetch_for_write_avx512(y + (nc + kPrefetchPlanes) * out_plane,
                                                 out_plane * static_cast<std::int64_t>(sizeof(float)));
          }
          const std::int64_t n = nc / s.c, c = nc % s.c;
          const float* xc = x + nc * s.h * s.w;
          const float* wc = w + c * s.r * s.s;
          float* out = y + nc * s.ho * s.wo;
          const auto post = avx512 && epilogue != nullptr ? epilogue->gemm_post_ops(n, c, 0) : std::nullopt;
          const avx512::PostOps* plane_post = post ? &*post : nullptr;
          if (!avx512) {
            depthwise::nchw_plane_s1_avx2(s, xc, wc, out);
          } else if (s.sw == 2) {
            depthwise::nchw_plane_s2_avx512(s, xc, wc, out, plane_post);
          } else {
            depthwise::nchw_plane_s1_avx512(s, xc, wc, out, plane_post);
          }
          if (epilogue != nullptr && !post) epilogue->apply_tile(out, s.ho * s.wo, n, c, 0, 1, s.ho * s.wo);
        }
      });
      return;
    }
    if (!s.nhwc) {
      const depthwise::Plane plane = depthwise::Plane::of(s);
      const std::size_t slot_bytes = align_up64(static_cast<std::size_t>(plane.floats()) * sizeof(float));
      run_slotted(s.n * s.c, slot_count(s.n * s.c), [&](std::int64_t slot, std::int64_t nc) {
        auto* buf =
            reinterpret_cast<float*>(static_cast<char*>(ws) + static_cast<std::size_t>(slot) * slot_bytes);
        const std::int64_t c = nc % s.c;
        depthwise::build_plane(s, plane, x + nc * s.h * s.w, buf);
        float* out = y + nc * s.ho * s.wo;
        if (avx2) {
          depthwise::nchw_plane_avx2(s, plane, buf, w + c * s.r * s.s, out);
        } else {
          depthwise::nchw_plane_scalar(s, plane, buf, w + c * s.r * s.s, out);
        }
        if (epilogue != nullptr) epilogue->apply_tile(out, s.ho * s.wo, nc / s.c, c, 0, 1, s.ho * s.wo);
      });
      return;
    }
    // KYXC with one input channel per group is [C][R*S]; transpose it to [R*S][C].
    auto* wt = static_cast<float*>(ws);
    for (std::int64_t c = 0; c < s.c; ++c) {
      for (std::int64_t t = 0; t < s.r * s.s; ++t) wt[t * s.c + c] = w[c * s.r * s.s + t];
    }
    parallel_for(0, s.n * s.ho, [&](std::int64_t lo, std::int64_t hi) {
      for (std::int64_t row = lo; row < hi; ++row) {
        const std::int64_t n = row / s.ho, oh = row % s.ho;
        const float* xn = x + n * s.h * s.w * s.c;
        float* y_row = y + row * s.wo * s.c;
        if (avx2) {
          depthwise::nhwc_row_avx2(s, xn, wt, oh, y_row);
        } else {
          depthwise::nhwc_row_scalar(s, xn, wt, oh, y_row);
        }
        if (epilogue != nullptr) epilogue->apply_tile(y_row, s.c, 0, 0, row * s.wo, s.wo, s.c);
      }
    });
  }
};

}  // namespace
std::unique_ptr<dnn::ConvSolver> make_conv_depthwise() { return std::make_unique<ConvDepthwise>(); }

}  // namespace galley::backends::cpu
