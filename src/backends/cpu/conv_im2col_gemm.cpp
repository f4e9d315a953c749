// cpu.conv.im2col_gemm: the general GEMM lowering. Each task gathers the input patches of a
// block of output pixels of one group into a column buffer and multiplies it by that group's
// weights, on the same thread, so the buffer is still in cache for the GEMM: Galley's AVX-512 SGEMM
// (sgemm_avx512, NCHW weights packed once per call, or once per call site with a prepared slot,
// and shared by the tasks) where the CPU has it, OpenBLAS otherwise.
//   NCHW: col[Cg*R*S x P] (rows in KCYX order), Y[Kg x P] = W[Kg x CgRS] * col, ldc = Ho*Wo
//   NHWC: col[P x R*S*Cg] (columns in KYXC order), Y[P x Kg] = col * W[Kg x RSCg]^T, ldc = K
// The buffer is per worker and bounded (kColumnBytes), so the workspace does not grow with the
// batch or the image.
//
// NCHW images smaller than kSmallPlane pixels (7x7 layers) would make GEMMs only a few dozen
// columns wide, each packing all the weights again: there the columns of several images sit side
// by side in one shared buffer and one GEMM, split over rows of W between the workers, computes
// them all into a staging buffer that is then copied out per image.
//
// NCHW with too few pixel blocks to share evenly between the workers (batch 1 on a 14x14 output:
// three blocks of 80, 80 and 36 pixels for two workers, one idle a third of the time), and
// batch 1 on a small plane: each image's columns are gathered whole, split over the workers by
// channel, and gemm_1x1's product (conv_gemm_1x1.hpp) splits the GEMM into column and row blocks
// that fill the workers evenly.
//
// A fused f32 epilogue (bias, residual, activation) is applied by the AVX-512 SGEMM as it stores
// each task's output block, where the kernel has the activation; else to the block right after its
// GEMM wrote it, while it is in cache. The batched small-plane path applies it to each image's rows
// as they are copied out; the implicit-GEMM path to each task's block after it.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "backends/cpu/conv_base.hpp"
#include "backends/cpu/conv_blas.hpp"
#include "backends/cpu/conv_epilogue.hpp"
#include "backends/cpu/conv_gemm_1x1.hpp"
#include "backends/cpu/conv_isa.hpp"
#include "backends/cpu/conv_solvers.hpp"
#include "backends/cpu/im2col_avx512.hpp"
#include "backends/cpu/sgemm_avx512.hpp"
#include "backends/cpu/thread_pool.hpp"

namespace galley::backends::cpu {
namespace {

constexpr std::size_t kColumnBytes = std::size_t{4} << 20;  // per worker: fits L2+L3 share
constexpr std::int64_t kMinPixels = 256;                    // keeps OpenBLAS's N large enough
constexpr std::int64_t kSmallPlane = 64;                    // output pixels per image
// Bound on an image's whole column buffer (all groups): past it, per-block gathers.
constexpr std::size_t kWholeImageBytes = std::size_t{32} << 20;

struct Plan {
  std::int64_t outer;   // NCHW: images x groups; NHWC: groups
  std::int64_t pixels;  // output pixels per outer item (an image's, or the whole batch's)
  std::int64_t chunks;  // pixel blocks per outer item
  std::int64_t block;   // pixels per block (the last may be shorter)
  std::int64_t patch;   // Cg * R * S
  std::int64_t slots;
  bool batched = false;     // NCHW small planes: images side by side, GEMM split over rows
  std::int64_t images = 0;  // batched: images per GEMM
  bool whole = false;       // NCHW: each image's columns gathered whole, then gemm_1x1's split
};

std::size_t whole_image_column_bytes(const ConvShape& s) {
  return align_up64(static_cast<std::size_t>(s.c * s.r * s.s * s.ho * s.wo) * sizeof(float));
}

// The 1x1 convolution that an image's whole column buffer [C*R*S x Ho*Wo] and the weights
// [K x Cg*R*S] per group make.
ConvShape whole_image_view(const ConvShape& s) {
  ConvShape v = s;
  v.n = 1;
  v.c = s.c * s.r * s.s;
  v.cg = s.cg * s.r * s.s;
  v.h = s.ho;
  v.w = s.wo;
  v.r = v.s = 1;
  v.ph = v.pw = 0;
  v.sh = v.sw = 1;
  v.dh = v.dw = 1;
  return v;
}

Plan make_plan(const ConvShape& s) {
  Plan p{};
  p.patch = s.cg * s.r * s.s;
  p.outer = s.nhwc ? s.g : s.n * s.g;
  p.pixels = s.nhwc ? s.n * s.ho * s.wo : s.ho * s.wo;
  const std::int64_t cap =
      std::max<std::int64_t>(kMinPixels, static_cast<std::int64_t>(kColumnBytes / (sizeof(float) * p.patch)));
  const std::int64_t workers = gemm_workers();
  // A few tasks per worker (so one that wakes late still takes a share), of at least 128 pixels.
  const std::int64_t want = std::max((p.pixels + cap - 1) / cap, (4 * workers + p.outer - 1) / p.outer);
  p.chunks = std::min(want, std::max<std::int64_t>(1, p.pixels / 128));
  // Too few items for the workers (batch 1 on a 14x14 plane: one block of 196 pixels): blocks down
  // to 64 pixels, so each worker gathers and multiplies its own share instead of one doing all.
  if (p.outer * p.chunks < workers) p.chunks = std::min(want, std::max(p.chunks, p.pixels / 64));
  p.block = (p.pixels + p.chunks - 1) / p.chunks;
  // Whole 16-float vectors per block where the pixels allow: a block of 196 (a 28x28 plane in four)
  // leaves a 4-column tail that the AVX-512 SGEMM computes in 16 lanes; 208 leaves 16 and 160 32.
  if (p.chunks > 1) p.block = std::min(p.pixels, (p.block + 15) / 16 * 16);
  p.chunks = (p.pixels + p.block - 1) / p.block;
  p.slots = blas_threaded() ? 1 : slot_count(p.outer * p.chunks);
  if (!s.nhwc && s.ho * s.wo < kSmallPlane) {
    p.batched = true;
    const auto per_image = static_cast<std::int64_t>(sizeof(float)) * p.patch * s.ho * s.wo;
    p.images = std::clamp<std::int64_t>(static_cast<std::int64_t>(kColumnBytes) / per_image, 1, s.n);
  }
  // Side by side needs two images or more to gain over one image's GEMM; fewer than two pixel
  // blocks per worker are spread evenly only by splitting the GEMM's rows too. With more, the
  // blocks' own gathers, still in cache for their GEMMs, win over a whole image's buffer that
  // each row block reads (and packs) again.
  p.whole = !s.nhwc && (p.batched ? s.n == 1 : p.outer * p.chunks < 2 * workers) &&
            whole_image_column_bytes(s) <= kWholeImageBytes;
  if (p.whole) p.batched = false;
  return p;
}

// NCHW, one image's pixel blocks per task, on Galley's AVX-512 SGEMM: the weights are packed
// into the SGEMM's panel layout once per call, by all workers, and every task reads that one copy
// (instead of each task packing all Kg x Cg*R*S weights again for its few hundred pixels). The
// workspace holds, after the column slots: one B packing block per slot, then the
// packed weights of every group. Reserved for every NCHW plan that is not batched, at any ISA
// level, so the size does not depend on the level at the moment it is asked.
bool shares_packed_weights(const ConvShape& s, const Plan& p) {
  return !s.nhwc && !p.batched && cpu_has_avx512() && !blas_threaded();
}

std::size_t column_slot_bytes(const Plan& p) {
  return align_up64(static_cast<std::size_t>(p.block * p.patch) * sizeof(float));
}

constexpr std::size_t kBPackBytes = static_cast<std::size_t>(avx512::kKc * avx512::kNc) * sizeof(float);

std::size_t packed_weight_bytes(const ConvShape& s, const Plan& p) {
  return packed_group_floats(s.kg, p.patch) * sizeof(float);
}

// Rows (c, r, s) x pixels [p0, p1) of image `xn` (channels of one group) into col, rows `ld` apart.
void im2col_nchw_baseline(const ConvShape& s, const float* xn, std::int64_t p0, std::int64_t p1, float* col,
                          std::int64_t ld) {
  // The output row and column of p0, found once, not by two divisions per output row.
  const std::int64_t oh_first = p0 / s.wo, ow_first = p0 % s.wo;
  for (std::int64_t c = 0; c < s.cg; ++c) {
    const float* xc = xn + c * s.h * s.w;
    for (std::int64_t r = 0; r < s.r; ++r) {
      for (std::int64_t q = 0; q < s.s; ++q) {
        float* row = col + ((c * s.r + r) * s.s + q) * ld;
        // Output columns whose input column lies inside the image.
        const std::int64_t shift = q * s.dw - s.pw;
        const std::int64_t ow_lo = std::min(s.wo, std::max<std::int64_t>(0, (-shift + s.sw - 1) / s.sw));
        const std::int64_t last = s.w - 1 - shift;  // largest ow * sw that stays inside
        const std::int64_t ow_hi = last < 0 ? ow_lo : std::max(ow_lo, std::min(s.wo, last / s.sw + 1));
        std::int64_t oh = oh_first, ow0 = ow_first;
        for (std::int64_t p = p0; p < p1; ++oh, ow0 = 0) {
          const std::int64_t ow1 = std::min(s.wo, ow0 + (p1 - p));
          float* out = row + (p - p0);
          const std::int64_t ih = oh * s.sh - s.ph + r * s.dh;
          if (ih < 0 || ih >= s.h) {
            std::fill(out, out + (ow1 - ow0), 0.0f);
          } else {
            const float* in = xc + ih * s.w + shift;
            const std::int64_t a = std::clamp(ow_lo, ow0, ow1), b = std::clamp(ow_hi, ow0, ow1);
            std::fill(out, out + (a - ow0), 0.0f);
            if (s.sw == 1) {
              std::memcpy(out + (a - ow0), in + a, static_cast<std::size_t>(b - a) * sizeof(float));
            } else {
              for (std::int64_t ow = a; ow < b; ++ow) out[ow - ow0] = in[ow * s.sw];
            }
            std::fill(out + (b - ow0), out + (ow1 - ow0), 0.0f);
          }
          p += ow1 - ow0;
        }
      }
    }
  }
}

void im2col_nchw(const ConvShape& s, const float* xn, std::int64_t p0, std::int64_t p1, float* col,
                 std::int64_t ld) {
  if (cpu_has_avx512()) {
    avx512::im2col_nchw(s, xn, p0, p1, col, ld);
  } else {
    im2col_nchw_baseline(s, xn, p0, p1, col, ld);
  }
}

// Global pixels [p0, p1) of the batch into rows of R*S*Cg (channels gi*Cg.. of each pixel).
void im2col_nhwc(const ConvShape& s, const float* x, std::int64_t gi, std::int64_t p0, std::int64_t p1,
                 float* col) {
  const std::int64_t patch = s.r * s.s * s.cg;
  const auto bytes = static_cast<std::size_t>(s.cg) * sizeof(float);
  for (std::int64_t p = p0; p < p1; ++p) {
    const std::int64_t n = p / (s.ho * s.wo), rem = p % (s.ho * s.wo);
    const std::int64_t oh = rem / s.wo, ow = rem % s.wo;
    float* out = col + (p - p0) * patch;
    for (std::int64_t r = 0; r < s.r; ++r) {
      const std::int64_t ih = oh * s.sh - s.ph + r * s.dh;
      for (std::int64_t q = 0; q < s.s; ++q, out += s.cg) {
        const std::int64_t iw = ow * s.sw - s.pw + q * s.dw;
        if (ih < 0 || ih >= s.h || iw < 0 || iw >= s.w) {
          std::memset(out, 0, bytes);
        } else {
          std::memcpy(out, x + ((n * s.h + ih) * s.w + iw) * s.c + gi * s.cg, bytes);
        }
      }
    }
  }
}

class ConvIm2colGemm final : public CpuConvSolver {
 public:
  std::string_view name() const override { return "cpu.conv.im2col_gemm"; }

 protected:
  dnn::Applicability check_f32(const dnn::ConvProblem& /*p*/) const override {
    return dnn::Applicability::yes();  // any filter, stride, padding, dilation, groups, layout
  }

  std::size_t f32_workspace_bytes(const dnn::ConvProblem& problem) const override {
    const ConvShape s = ConvShape::of(problem);
    const Plan p = make_plan(s);
    if (p.whole) {
      return whole_image_column_bytes(s) + gemm_1x1_unit_stride_workspace_bytes(whole_image_view(s));
    }
    if (p.batched) {
      const std::int64_t cols = p.images * s.ho * s.wo;
      return align_up64(static_cast<std::size_t>(p.patch * cols) * sizeof(float)) +
             align_up64(static_cast<std::size_t>(s.kg * cols) * sizeof(float));
    }
    std::size_t bytes = static_cast<std::size_t>(p.slots) * column_slot_bytes(p);
    if (!s.nhwc) {
      // + 64: the B blocks take aligned stores, and the workspace need not start on a cache line.
      bytes += 64 + static_cast<std::size_t>(p.slots) * kBPackBytes +
               static_cast<std::size_t>(s.g) * packed_weight_bytes(s, p);
    }
    return bytes;
  }

  void compute_f32(const dnn::ConvProblem& problem, const float* x, const float* w, float* y, void* ws,
                   const ConvEpilogueRunner* epilogue, const PreparedSlot* prepared) const override {
    const ConvShape s = ConvShape::of(problem);
    const Plan p = make_plan(s);
    if (cpu_has_avx512() && avx512::implicit_gemm_fits(s)) {
      // Few output channels per group: compute from x directly (no column buffer, workspace unused).
      run_slotted(p.outer * p.chunks, p.slots, [&](std::int64_t /*slot*/, std::int64_t task) {
        const std::int64_t chunk = task % p.chunks, outer = task / p.chunks;
        const std::int64_t p0 = chunk * p.block, p1 = std::min(p.pixels, p0 + p.block);
        const std::int64_t n = outer / s.g, gi = outer % s.g;
        avx512::implicit_gemm_nchw(s, x, w, y, n, gi, p0, p1);
        if (epilogue != nullptr) {
          epilogue->apply_tile(y + (n * s.k + gi * s.kg) * s.ho * s.wo + p0, s.ho * s.wo, n, gi * s.kg, p0,
                               s.kg, p1 - p0);
        }
      });
      return;
    }
    if (p.whole) {
      compute_whole_images(s, x, w, y, ws, epilogue, prepared);
      return;
    }
    if (p.batched) {
      compute_batched(s, p, x, w, y, ws, epilogue);
      return;
    }
    if (shares_packed_weights(s, p)) {
      compute_packed_weights(s, p, x, w, y, ws, epilogue, prepared);
      return;
    }
    const std::size_t slot_bytes = column_slot_bytes(p);
    run_slotted(p.outer * p.chunks, p.slots, [&](std::int64_t slot, std::int64_t task) {
      auto* col =
          reinterpret_cast<float*>(static_cast<char*>(ws) + static_cast<std::size_t>(slot) * slot_bytes);
      const std::int64_t chunk = task % p.chunks, outer = task / p.chunks;
      const std::int64_t p0 = chunk * p.block, p1 = std::min(p.pixels, p0 + p.block);
      const std::int64_t gi = outer % s.g;
      const float* wg = w + gi * s.kg * p.patch;
      if (!s.nhwc) {
        const std::int64_t n = outer / s.g;
        im2col_nchw(s, x + (n * s.c + gi * s.cg) * s.h * s.w, p0, p1, col, p1 - p0);
        float* const block = y + (n * s.k + gi * s.kg) * s.ho * s.wo + p0;
        const auto post = epilogue != nullptr ? epilogue->gemm_post_ops(n, gi * s.kg, p0) : std::nullopt;
        sgemm(false, false, s.kg, p1 - p0, p.patch, 1.0f, wg, p.patch, col, p1 - p0, 0.0f, block, s.ho * s.wo,
              post ? &*post : nullptr);
        if (epilogue != nullptr && !post)
          epilogue->apply_tile(block, s.ho * s.wo, n, gi * s.kg, p0, s.kg, p1 - p0);
      } else {
        im2col_nhwc(s, x, gi, p0, p1, col);
        float* const block = y + p0 * s.k + gi * s.kg;
        const auto post = epilogue != nullptr ? epilogue->gemm_post_ops(0, gi * s.kg, p0) : std::nullopt;
        sgemm(false, true, p1 - p0, s.kg, p.patch, 1.0f, col, p.patch, wg, p.patch, 0.0f, block, s.k,
              post ? &*post : nullptr);
        if (epilogue != nullptr && !post) epilogue->apply_tile(block, s.k, 0, gi * s.kg, p0, p1 - p0, s.kg);
      }
    });
  }

 private:
  // Image by image: its columns, all groups, gathered by channel blocks over the pool, then the
  // 1x1 product of them. With a prepared slot the packed weights are made on the first call.
  static void compute_whole_images(const ConvShape& s, const float* x, const float* w, float* y, void* ws,
                                   const ConvEpilogueRunner* epilogue, const PreparedSlot* prepared) {
    const ConvShape view = whole_image_view(s);
    const std::int64_t plane = s.ho * s.wo, taps = s.r * s.s;
    auto* col = static_cast<float*>(ws);
    void* rest = static_cast<char*>(ws) + whole_image_column_bytes(s);
    // A few channel blocks per worker, so one that wakes late still takes a share.
    const std::int64_t blocks = std::min<std::int64_t>(s.c, 4 * pool_size());
    for (std::int64_t n = 0; n < s.n; ++n) {
      parallel_for(0, blocks, [&](std::int64_t lo, std::int64_t hi) {
        for (std::int64_t b = lo; b < hi; ++b) {
          const std::int64_t c0 = s.c * b / blocks, c1 = s.c * (b + 1) / blocks;
          ConvShape part = s;
          part.cg = c1 - c0;
          im2col_nchw(part, x + (n * s.c + c0) * s.h * s.w, 0, plane, col + c0 * taps * plane, plane);
        }
      });
      gemm_1x1_unit_stride(view, col, w, y + n * s.k * plane, rest, epilogue, prepared, n);
    }
  }

  // With a prepared slot the packed weights are made on the first call and read by later ones;
  // without, they are packed into the workspace on every call.
  static void compute_packed_weights(const ConvShape& s, const Plan& p, const float* x, const float* w,
                                     float* y, void* ws, const ConvEpilogueRunner* epilogue,
                                     const PreparedSlot* prepared) {
    auto* base = static_cast<char*>(ws);
    const std::size_t slot_bytes = column_slot_bytes(p);
    const auto after_slots =
        reinterpret_cast<std::uintptr_t>(base + static_cast<std::size_t>(p.slots) * slot_bytes);
    char* b_packs = reinterpret_cast<char*>((after_slots + 63) & ~std::uintptr_t{63});
    const std::size_t group_floats = packed_weight_bytes(s, p) / sizeof(float);
    const auto pack_weights = [&](float* out) { pack_weight_groups(w, s.g, s.kg, p.patch, out); };
    std::shared_ptr<const float> kept;
    const float* packed = prepared_or_scratch(
        prepared, static_cast<std::size_t>(s.g) * group_floats,
        reinterpret_cast<float*>(b_packs + static_cast<std::size_t>(p.slots) * kBPackBytes), pack_weights,
        kept);
    run_slotted(p.outer * p.chunks, p.slots, [&](std::int64_t slot, std::int64_t task) {
      auto* col = reinterpret_cast<float*>(base + static_cast<std::size_t>(slot) * slot_bytes);
      auto* b_pack = reinterpret_cast<float*>(b_packs + static_cast<std::size_t>(slot) * kBPackBytes);
      const std::int64_t chunk = task % p.chunks, outer = task / p.chunks;
      const std::int64_t p0 = chunk * p.block, p1 = std::min(p.pixels, p0 + p.block);
      const std::int64_t n = outer / s.g, gi = outer % s.g;
      im2col_nchw(s, x + (n * s.c + gi * s.cg) * s.h * s.w, p0, p1, col, p1 - p0);
      float* const block = y + (n * s.k + gi * s.kg) * s.ho * s.wo + p0;
      const auto post = epilogue != nullptr ? epilogue->gemm_post_ops(n, gi * s.kg, p0) : std::nullopt;
      avx512::sgemm_packed_a(s.kg, p1 - p0, p.patch, 1.0f,
                             packed + static_cast<std::size_t>(gi) * group_floats, col, p1 - p0, 0.0f, block,
                             s.ho * s.wo, b_pack, post ? &*post : nullptr);
      if (epilogue != nullptr && !post)
        epilogue->apply_tile(block, s.ho * s.wo, n, gi * s.kg, p0, s.kg, p1 - p0);
    });
  }

  // The staged GEMM output is laid out [Kg x images * plane], not as y and the residual are, so the
  // epilogue is applied to each image's rows as they are copied out, while they are in cache. A
  // GEMM of one image (batch 1) stores into y directly, the epilogue as its post-ops.
  static void compute_batched(const ConvShape& s, const Plan& p, const float* x, const float* w, float* y,
                              void* ws, const ConvEpilogueRunner* epilogue) {
    const std::int64_t plane = s.ho * s.wo;
    auto* col = static_cast<float*>(ws);
    auto* staged = reinterpret_cast<float*>(
        static_cast<char*>(ws) +
        align_up64(static_cast<std::size_t>(p.patch * p.images * plane) * sizeof(float)));
    // Row blocks of W: a few per worker, at least 16 rows so each GEMM keeps its register tile.
    const std::int64_t row_blocks = block_count(s.kg, 16, 2 * gemm_workers());
    for (std::int64_t gi = 0; gi < s.g; ++gi) {
      const float* wg = w + gi * s.kg * p.patch;
      for (std::int64_t n0 = 0; n0 < s.n; n0 += p.images) {
        const std::int64_t count = std::min(p.images, s.n - n0), ld = count * plane;
        parallel_for(0, count, [&](std::int64_t lo, std::int64_t hi) {
          for (std::int64_t i = lo; i < hi; ++i) {
            im2col_nchw(s, x + ((n0 + i) * s.c + gi * s.cg) * s.h * s.w, 0, plane, col + i * plane, ld);
          }
        });
        if (count == 1) {
          gemm_image_rows(s.kg, row_blocks, plane, p.patch, wg, col, y + (n0 * s.k + gi * s.kg) * plane, n0,
                          gi * s.kg, epilogue);
          continue;
        }
        for_gemm_tasks(0, row_blocks, [&](std::int64_t lo, std::int64_t hi) {
          for (std::int64_t b = lo; b < hi; ++b) {
            const std::int64_t k0 = s.kg * b / row_blocks, k1 = s.kg * (b + 1) / row_blocks;
            sgemm(false, false, k1 - k0, ld, p.patch, 1.0f, wg + k0 * p.patch, p.patch, col, ld, 0.0f,
                  staged + k0 * ld, ld);
            for (std::int64_t i = 0; i < count; ++i) {
              for (std::int64_t k = k0; k < k1; ++k) {
                std::memcpy(y + ((n0 + i) * s.k + gi * s.kg + k) * plane, staged + k * ld + i * plane,
                            static_cast<std::size_t>(plane) * sizeof(float));
              }
              if (epilogue != nullptr) {
                epilogue->apply_tile(y + ((n0 + i) * s.k + gi * s.kg + k0) * plane, plane, n0 + i,
                                     gi * s.kg + k0, 0, k1 - k0, plane);
              }
            }
          }
        });
      }
    }
  }
};

}  // namespace
std::unique_ptr<dnn::ConvSolver> make_conv_im2col_gemm() { return std::make_unique<ConvIm2colGemm>(); }

}  // namespace galley::backends::cpu
