// cpu.conv.gemm_1x1: a 1x1, unpadded convolution is a matrix product; at stride 1 it goes
// straight to SGEMM with no im2col copy.
//   NCHW, per image and group: Y[Kg x HW] = W[Kg x Cg] * X[Cg x HW]
//   NHWC, per group:           Y[NHW x Kg] = X[NHW x Cg] * W[Kg x Cg]^T   (row strides C and K)
// NCHW images under kSmallPlane pixels (7x7) would give GEMMs a few dozen columns wide that each
// pack all the weights again; there the images are copied side by side into one [Cg x n*HW]
// matrix and one GEMM, split over rows of W between the workers, computes them all at once.
//
// A strided 1x1 convolution (a ResNet downsample) reads only the pixels on the stride's grid:
// those of a bounded run of images are gathered into the workspace, [C x Ho*Wo] per image (NHWC:
// [Ho*Wo x C]), and the unit-stride product above runs on them, with its row blocks, packed
// weights and post-ops. A per-block im2col instead would leave batch 1 with a few uneven column
// blocks and no row split.
#include "backends/cpu/conv_gemm_1x1.hpp"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>

#include "backends/cpu/conv_base.hpp"
#include "backends/cpu/conv_blas.hpp"
#include "backends/cpu/conv_bwd_columns.hpp"
#include "backends/cpu/conv_epilogue.hpp"
#include "backends/cpu/conv_solvers.hpp"
#include "backends/cpu/thread_pool.hpp"

namespace galley::backends::cpu {
namespace {

// Fewer columns per GEMM than this and OpenBLAS's packing overhead dominates.
constexpr std::int64_t kMinColumns = 256;
// The AVX-512 SGEMM on prepared weights packs only its own block's columns of x: blocks down to
// this many columns let two workers split a small plane's pixels (each then streams half of x
// from L2), where splitting the rows of W would have each stream all of it.
constexpr std::int64_t kMinPackedColumns = 64;
// GEMM tasks per worker: more than one, so a worker that wakes late still takes a share.
constexpr std::int64_t kTasksPerWorker = 4;
constexpr std::int64_t kSmallPlane = 64;
constexpr std::size_t kGatherBytes = std::size_t{4} << 20;  // bound on the side-by-side copy

// Start of column block b of `blocks` over `columns`, on a multiple of 16 (one vector) so no block
// but the last ends in a part-filled vector.
std::int64_t column_block_start(std::int64_t columns, std::int64_t b, std::int64_t blocks) {
  const std::int64_t vectors = (columns + 15) / 16;
  return std::min(columns, 16 * (vectors * b / blocks));
}

std::int64_t images_per_gemm(const ConvShape& s) {
  const auto per_image = static_cast<std::int64_t>(sizeof(float)) * s.cg * s.h * s.w;
  return std::clamp<std::int64_t>(static_cast<std::int64_t>(kGatherBytes) / per_image, 1, s.n);
}

bool batched(const ConvShape& s) { return !s.nhwc && s.h * s.w < kSmallPlane; }

bool strided(const ConvShape& s) { return s.sh != 1 || s.sw != 1; }

// The unit-stride problem on the gathered pixels of `images` images: the output's plane as input.
ConvShape gathered_shape(const ConvShape& s, std::int64_t images) {
  ConvShape g = s;
  g.n = images;
  g.h = s.ho;
  g.w = s.wo;
  g.sh = g.sw = 1;
  return g;
}

// Images whose gathered pixels are kept at once: as many as kGatherBytes holds, at least one.
std::int64_t images_per_gather(const ConvShape& s) {
  const auto per_image = static_cast<std::int64_t>(sizeof(float)) * s.c * s.ho * s.wo;
  return std::clamp<std::int64_t>(static_cast<std::int64_t>(kGatherBytes) / per_image, 1, s.n);
}

std::size_t gather_bytes(const ConvShape& s) {
  return align_up64(static_cast<std::size_t>(images_per_gather(s) * s.c * s.ho * s.wo) * sizeof(float));
}

}  // namespace

std::size_t gemm_1x1_unit_stride_workspace_bytes(const ConvShape& s) {
  if (!batched(s)) return 0;
  const std::int64_t cols = images_per_gemm(s) * s.h * s.w;
  return align_up64(static_cast<std::size_t>(s.cg * cols) * sizeof(float)) +
         align_up64(static_cast<std::size_t>(s.kg * cols) * sizeof(float));
}

namespace {

// The pixels on the stride's grid of images [n0, n0 + count) into `out`, packed as gathered_shape()
// reads them, split over the pool.
void gather_strided(const ConvShape& s, const float* x, std::int64_t n0, std::int64_t count, float* out) {
  const std::int64_t pixels = s.ho * s.wo;
  if (!s.nhwc) {
    // Channel blocks of one image: each is one im2col of a 1x1 unpadded filter over those channels.
    constexpr std::int64_t kChannels = 16;
    const std::int64_t blocks = (s.c + kChannels - 1) / kChannels;
    parallel_for(0, count * blocks, [&](std::int64_t lo, std::int64_t hi) {
      for (std::int64_t t = lo; t < hi; ++t) {
        const std::int64_t i = t / blocks, c0 = t % blocks * kChannels;
        ConvShape part = s;
        part.cg = std::min(kChannels, s.c - c0);
        bwd::im2col_nchw(part, x + ((n0 + i) * s.c + c0) * s.h * s.w, 0, pixels,
                         out + (i * s.c + c0) * pixels, pixels);
      }
    });
    return;
  }
  const auto bytes = static_cast<std::size_t>(s.c) * sizeof(float);
  parallel_for(0, count * s.ho, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t t = lo; t < hi; ++t) {
      const std::int64_t i = t / s.ho, oh = t % s.ho;
      const float* in = x + ((n0 + i) * s.h + oh * s.sh) * s.w * s.c;
      float* row = out + (i * s.ho + oh) * s.wo * s.c;
      for (std::int64_t ow = 0; ow < s.wo; ++ow) std::memcpy(row + ow * s.c, in + ow * s.sw * s.c, bytes);
    }
  });
}

// The staged GEMM output is laid out [Kg x images * HW], not as y and the residual are, so the
// epilogue is applied to each image's rows as they are copied out, while they are in cache. A
// GEMM of one image (batch 1) needs neither copy: its group of x is already [Cg x HW] and its
// output rows are y's, so it reads x in place and stores into y with the epilogue as post-ops.
void compute_batched(const ConvShape& s, const float* x, const float* w, float* y, void* ws,
                     const ConvEpilogueRunner* epilogue, std::int64_t n_first) {
  const std::int64_t hw = s.h * s.w, images = images_per_gemm(s);
  auto* gathered = static_cast<float*>(ws);
  auto* staged = reinterpret_cast<float*>(
      static_cast<char*>(ws) + align_up64(static_cast<std::size_t>(s.cg * images * hw) * sizeof(float)));
  const std::int64_t row_blocks = block_count(s.kg, 16, 2 * gemm_workers());
  const auto plane_bytes = static_cast<std::size_t>(hw) * sizeof(float);
  for (std::int64_t gi = 0; gi < s.g; ++gi) {
    for (std::int64_t n0 = 0; n0 < s.n; n0 += images) {
      const std::int64_t count = std::min(images, s.n - n0), ld = count * hw;
      if (count == 1) {
        gemm_image_rows(s.kg, row_blocks, hw, s.cg, w + gi * s.kg * s.cg, x + (n0 * s.c + gi * s.cg) * hw,
                        y + (n0 * s.k + gi * s.kg) * hw, n_first + n0, gi * s.kg, epilogue);
        continue;
      }
      parallel_for(0, s.cg, [&](std::int64_t lo, std::int64_t hi) {
        for (std::int64_t c = lo; c < hi; ++c) {
          for (std::int64_t i = 0; i < count; ++i) {
            std::memcpy(gathered + c * ld + i * hw, x + ((n0 + i) * s.c + gi * s.cg + c) * hw, plane_bytes);
          }
        }
      });
      for_gemm_tasks(0, row_blocks, [&](std::int64_t lo, std::int64_t hi) {
        for (std::int64_t b = lo; b < hi; ++b) {
          const std::int64_t k0 = s.kg * b / row_blocks, k1 = s.kg * (b + 1) / row_blocks;
          sgemm(false, false, k1 - k0, ld, s.cg, 1.0f, w + (gi * s.kg + k0) * s.cg, s.cg, gathered, ld, 0.0f,
                staged + k0 * ld, ld);
          for (std::int64_t i = 0; i < count; ++i) {
            for (std::int64_t k = k0; k < k1; ++k) {
              std::memcpy(y + ((n0 + i) * s.k + gi * s.kg + k) * hw, staged + k * ld + i * hw, plane_bytes);
            }
            if (epilogue != nullptr) {
              epilogue->apply_tile(y + ((n0 + i) * s.k + gi * s.kg + k0) * hw, hw, n_first + n0 + i,
                                   gi * s.kg + k0, 0, k1 - k0, hw);
            }
          }
        }
      });
    }
  }
}

}  // namespace

// The epilogue in each GEMM's stores where the kernel can apply it, else on each output block as
// soon as it is written.
void gemm_1x1_unit_stride(const ConvShape& s, const float* x, const float* w, float* y, void* ws,
                          const ConvEpilogueRunner* epilogue, const PreparedSlot* prepared,
                          std::int64_t n_first) {
  const std::int64_t hw = s.h * s.w;
  const std::int64_t workers = gemm_workers();
  if (batched(s)) {
    compute_batched(s, x, w, y, ws, epilogue, n_first);
    return;
  }
  if (!s.nhwc) {
    const bool packed_sgemm = prepared != nullptr && sgemm_applies_post_ops();
    // Tasks are (image, group, column block, row block); columns are split only when images x
    // groups give the workers too few tasks, rows of W only when the columns cannot be (a
    // plane under two kMinColumns blocks at batch 1).
    const std::int64_t outer = s.n * s.g;
    const std::int64_t min_columns = packed_sgemm ? kMinPackedColumns : kMinColumns;
    const std::int64_t cols = block_count(hw, min_columns, (kTasksPerWorker * workers + outer - 1) / outer);
    const std::int64_t rows = row_block_count(outer * cols, s.kg, workers);
    // With a prepared slot every group's weights are packed once for all calls, not by each
    // task's GEMM again for its column block.
    std::shared_ptr<const float> packed;
    const std::size_t group_floats = packed_group_floats(s.kg, s.cg);
    if (packed_sgemm) {
      packed = prepared->floats(static_cast<std::size_t>(s.g) * group_floats,
                                [&](float* out) { pack_weight_groups(w, s.g, s.kg, s.cg, out); });
    }
    for_gemm_tasks(0, outer * cols * rows, [&](std::int64_t lo, std::int64_t hi) {
      for (std::int64_t t = lo; t < hi; ++t) {
        const std::int64_t row = t % rows, col = t / rows % cols, ng = t / rows / cols;
        const std::int64_t gi = ng % s.g, n = ng / s.g;
        const std::int64_t c0 = column_block_start(hw, col, cols), c1 = column_block_start(hw, col + 1, cols);
        const std::int64_t k0 = row_block_start(s.kg, row, rows), k1 = row_block_start(s.kg, row + 1, rows);
        float* const tile = y + (n * s.k + gi * s.kg + k0) * hw + c0;
        const auto post =
            epilogue != nullptr ? epilogue->gemm_post_ops(n_first + n, gi * s.kg + k0, c0) : std::nullopt;
        const float* const xg = x + (n * s.c + gi * s.cg) * hw + c0;
        if (packed != nullptr) {
          const float* const wg = packed.get() + static_cast<std::size_t>(gi) * group_floats;
          sgemm_packed_rows(s.kg, k0, k1 - k0, c1 - c0, s.cg, wg, xg, hw, tile, hw, post ? &*post : nullptr);
        } else {
          sgemm(false, false, k1 - k0, c1 - c0, s.cg, 1.0f, w + (gi * s.kg + k0) * s.cg, s.cg, xg, hw, 0.0f,
                tile, hw, post ? &*post : nullptr);
        }
        if (epilogue != nullptr && !post) {
          epilogue->apply_tile(tile, hw, n_first + n, gi * s.kg + k0, c0, k1 - k0, c1 - c0);
        }
      }
    });
    return;
  }
  // NHWC tiles are addressed by pixel index over the whole batch.
  const std::int64_t rows_total = s.n * hw, pixel_first = n_first * hw;
  const std::int64_t rows = block_count(rows_total, kMinColumns, (kTasksPerWorker * workers + s.g - 1) / s.g);
  for_gemm_tasks(0, s.g * rows, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t t = lo; t < hi; ++t) {
      const std::int64_t blk = t % rows, gi = t / rows;
      const std::int64_t r0 = rows_total * blk / rows, r1 = rows_total * (blk + 1) / rows;
      float* const tile = y + r0 * s.k + gi * s.kg;
      const auto post =
          epilogue != nullptr ? epilogue->gemm_post_ops(0, gi * s.kg, pixel_first + r0) : std::nullopt;
      sgemm(false, true, r1 - r0, s.kg, s.cg, 1.0f, x + r0 * s.c + gi * s.cg, s.c, w + gi * s.kg * s.cg, s.cg,
            0.0f, tile, s.k, post ? &*post : nullptr);
      if (epilogue != nullptr && !post) {
        epilogue->apply_tile(tile, s.k, 0, gi * s.kg, pixel_first + r0, r1 - r0, s.kg);
      }
    }
  });
}

namespace {

class ConvGemm1x1 final : public CpuConvSolver {
 public:
  std::string_view name() const override { return "cpu.conv.gemm_1x1"; }

 protected:
  dnn::Applicability check_f32(const dnn::ConvProblem& p) const override {
    if (p.y != 1 || p.x != 1) {
      return dnn::Applicability::no("filter " + std::to_string(p.y) + "x" + std::to_string(p.x) +
                                    " is not 1x1");
    }
    if (p.pad_h != 0 || p.pad_w != 0) {
      return dnn::Applicability::no("padding " + std::to_string(p.pad_h) + "x" + std::to_string(p.pad_w) +
                                    " is not 0");
    }
    return dnn::Applicability::yes();  // dilation does not matter for a 1x1 filter
  }

  std::size_t f32_workspace_bytes(const dnn::ConvProblem& p) const override {
    const ConvShape s = ConvShape::of(p);
    if (!strided(s)) return gemm_1x1_unit_stride_workspace_bytes(s);
    return gather_bytes(s) + gemm_1x1_unit_stride_workspace_bytes(gathered_shape(s, images_per_gather(s)));
  }

  void compute_f32(const dnn::ConvProblem& p, const float* x, const float* w, float* y, void* ws,
                   const ConvEpilogueRunner* epilogue, const PreparedSlot* prepared) const override {
    const ConvShape s = ConvShape::of(p);
    if (!strided(s)) {
      gemm_1x1_unit_stride(s, x, w, y, ws, epilogue, prepared, 0);
      return;
    }
    const std::int64_t run = images_per_gather(s), y_image = s.k * s.ho * s.wo;
    auto* gathered = static_cast<float*>(ws);
    void* rest = static_cast<char*>(ws) + gather_bytes(s);
    for (std::int64_t n0 = 0; n0 < s.n; n0 += run) {
      const std::int64_t count = std::min(run, s.n - n0);
      gather_strided(s, x, n0, count, gathered);
      gemm_1x1_unit_stride(gathered_shape(s, count), gathered, w, y + n0 * y_image, rest, epilogue, prepared,
                           n0);
    }
  }
};

}  // namespace
std::unique_ptr<dnn::ConvSolver> make_conv_gemm_1x1() { return std::make_unique<ConvGemm1x1>(); }

}  // namespace galley::backends::cpu
