// Parallel plans of the backward GEMM lowerings (see conv_bwd_gemm.hpp for the products).
//
// Data gradient: col2im scatters each patch gradient onto overlapping input pixels, so two tasks
// must never own pixels of one input channel: tasks are (image, group, block of input channels),
// each zeroing its channels of dx and then walking the output pixels in blocks through a
// per-worker column buffer. In NHWC a block's weight columns are not contiguous in KYXC, so the
// weights are repacked per channel block once per call.
//
// Weight gradient: the sum runs over the batch and every output pixel, so either
//   (pixels) tasks are (image, group, pixel block), each worker summing into a private copy of
//            dW that is reduced at the end (worker 0 sums straight into dw), or
//   (rows)   tasks are (group, block of output channels), each summing its rows of dW over the
//            whole batch, which gathers the columns again once per row block;
// whichever moves fewer extra floats: the private copies (workers x |dW|) against the repeated
// gathers ((row blocks - 1) x |columns|). Late layers (large weights, few pixels) take rows.
#include "backends/cpu/conv_bwd_gemm.hpp"

#include <algorithm>
#include <cstring>

#include "backends/cpu/conv_blas.hpp"
#include "backends/cpu/conv_bwd_columns.hpp"
#include "backends/cpu/thread_pool.hpp"

namespace galley::backends::cpu::bwd {
namespace {

constexpr std::size_t kColumnBytes = std::size_t{4} << 20;  // per worker, as cpu.conv.im2col_gemm
constexpr std::int64_t kTasksPerWorker = 4;  // so a worker that wakes late still takes a share
constexpr std::int64_t kMinGemmColumns = 256;
constexpr std::int64_t kMinPixelBlock = 128;  // the depth of a weight-gradient GEMM
constexpr std::int64_t kMinRowBlock = 16;     // output channels per row block

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }
std::size_t floats(std::int64_t count) { return align_up64(static_cast<std::size_t>(count) * sizeof(float)); }

// ---- data -----------------------------------------------------------------------------------

struct DataPlan {
  std::int64_t channel_blocks;  // per group
  std::int64_t block_channels;  // channels per block (the last may have fewer)
  std::int64_t pixel_block;     // output pixels per GEMM
  std::int64_t slots;
  bool repack;                  // NHWC with several channel blocks
  std::size_t column_bytes;     // per slot
};

DataPlan make_data_plan(const ConvShape& s) {
  DataPlan p{};
  const std::int64_t taps = s.r * s.s, outer = s.n * s.g, pixels = s.ho * s.wo;
  const std::int64_t want = ceil_div(kTasksPerWorker * gemm_workers(), outer);
  // NHWC blocks keep at least a vector of channels: col2im adds them contiguously.
  const std::int64_t min_channels = s.nhwc ? std::min<std::int64_t>(s.cg, 16) : 1;
  p.channel_blocks = std::clamp<std::int64_t>(want, 1, std::max<std::int64_t>(1, s.cg / min_channels));
  p.block_channels = ceil_div(s.cg, p.channel_blocks);
  p.channel_blocks = ceil_div(s.cg, p.block_channels);
  const std::int64_t rows = p.block_channels * taps;
  const auto cap = static_cast<std::int64_t>(kColumnBytes / (sizeof(float) * static_cast<std::size_t>(rows)));
  p.pixel_block = std::clamp<std::int64_t>(cap / 16 * 16, std::min<std::int64_t>(pixels, 64), pixels);
  p.slots = blas_threaded() ? 1 : slot_count(outer * p.channel_blocks);
  p.repack = s.nhwc && p.channel_blocks > 1;
  p.column_bytes = floats(rows * p.pixel_block);
  return p;
}

void data_plain_1x1(const ConvShape& s, const float* dy, const float* w, float* dx) {
  const std::int64_t hw = s.h * s.w, workers = gemm_workers();
  if (!s.nhwc) {
    // Per image and group: dX[Cg x HW] = W^T[Cg x Kg] * dY[Kg x HW], split over pixel columns
    // when images x groups give the workers too few tasks.
    const std::int64_t outer = s.n * s.g;
    const std::int64_t cols = block_count(hw, kMinGemmColumns, ceil_div(kTasksPerWorker * workers, outer));
    for_gemm_tasks(0, outer * cols, [&](std::int64_t lo, std::int64_t hi) {
      for (std::int64_t t = lo; t < hi; ++t) {
        const std::int64_t col = t % cols, ng = t / cols, gi = ng % s.g, n = ng / s.g;
        const std::int64_t c0 = hw * col / cols, c1 = hw * (col + 1) / cols;
        sgemm(true, false, s.cg, c1 - c0, s.kg, 1.0f, w + gi * s.kg * s.cg, s.cg,
              dy + (n * s.k + gi * s.kg) * hw + c0, hw, 0.0f, dx + (n * s.c + gi * s.cg) * hw + c0, hw);
      }
    });
    return;
  }
  // dX[NHW x Cg] = dY[NHW x Kg] * W[Kg x Cg] per group, rows strided by K and C.
  const std::int64_t total = s.n * hw;
  const std::int64_t rows = block_count(total, kMinGemmColumns, ceil_div(kTasksPerWorker * workers, s.g));
  for_gemm_tasks(0, s.g * rows, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t t = lo; t < hi; ++t) {
      const std::int64_t blk = t % rows, gi = t / rows;
      const std::int64_t r0 = total * blk / rows, r1 = total * (blk + 1) / rows;
      sgemm(false, false, r1 - r0, s.cg, s.kg, 1.0f, dy + r0 * s.k + gi * s.kg, s.k, w + gi * s.kg * s.cg, s.cg, 0.0f,
            dx + r0 * s.c + gi * s.cg, s.c);
    }
  });
}

// Block b of group gi's KYXC weights as a plain [Kg x R*S*cbs] matrix, at a stride of block_channels.
float* repacked_block(const ConvShape& s, const DataPlan& p, float* packed, std::int64_t gi, std::int64_t b) {
  return packed + (gi * p.channel_blocks + b) * s.kg * s.r * s.s * p.block_channels;
}

void repack_weights(const ConvShape& s, const DataPlan& p, const float* w, float* packed) {
  const std::int64_t taps = s.r * s.s, patch = taps * s.cg;
  parallel_for(0, s.g * s.kg, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t gk = lo; gk < hi; ++gk) {
      const std::int64_t gi = gk / s.kg, k = gk % s.kg;
      const float* src = w + gk * patch;
      for (std::int64_t b = 0; b < p.channel_blocks; ++b) {
        const std::int64_t c0 = b * p.block_channels, cbs = std::min(p.block_channels, s.cg - c0);
        float* dst = repacked_block(s, p, packed, gi, b) + k * taps * cbs;
        for (std::int64_t t = 0; t < taps; ++t) {
          std::memcpy(dst + t * cbs, src + t * s.cg + c0, static_cast<std::size_t>(cbs) * sizeof(float));
        }
      }
    }
  });
}

// ---- weights --------------------------------------------------------------------------------

struct WeightsPlan {
  bool by_rows;              // tasks (group, row block) over the whole batch; else (.., pixel block)
  std::int64_t row_blocks;   // by_rows: output-channel blocks per group
  std::int64_t pixels;       // pixels one task range runs over: an image's (NCHW), the batch's (NHWC)
  std::int64_t pixel_blocks; // by pixels: blocks per image (NCHW) or of the batch (NHWC)
  std::int64_t pixel_block;
  std::int64_t slots;
  std::size_t column_bytes;  // per slot; 0 for plain 1x1
  std::size_t partial_bytes; // by pixels: per slot after the first
};

WeightsPlan make_weights_plan(const ConvShape& s) {
  WeightsPlan p{};
  const std::int64_t patch = s.cg * s.r * s.s, workers = gemm_workers();
  const bool plain = plain_1x1(s);
  p.pixels = s.nhwc ? s.n * s.ho * s.wo : s.ho * s.wo;
  const std::int64_t outer = s.nhwc ? s.g : s.n * s.g;
  const auto cap = std::max<std::int64_t>(
      kMinPixelBlock, static_cast<std::int64_t>(kColumnBytes / (sizeof(float) * static_cast<std::size_t>(patch))));

  // By pixels.
  const std::int64_t blocks_a = std::min(std::max(ceil_div(p.pixels, cap), ceil_div(kTasksPerWorker * workers, outer)),
                                         std::max<std::int64_t>(1, p.pixels / kMinPixelBlock));
  const std::int64_t tasks_a = outer * blocks_a;
  const std::int64_t slots_a = blas_threaded() ? 1 : slot_count(tasks_a);
  // By rows.
  const std::int64_t row_blocks =
      std::clamp<std::int64_t>(ceil_div(2 * workers, s.g), 1, std::max<std::int64_t>(1, s.kg / kMinRowBlock));
  const std::int64_t tasks_b = s.g * row_blocks;
  const double gathered = static_cast<double>(s.n) * s.ho * s.wo * patch * s.g;
  const double extra_b = static_cast<double>(row_blocks - 1) * (plain ? gathered / 4 : gathered);
  const double extra_a = static_cast<double>(slots_a - 1) * s.k * patch;
  p.by_rows = tasks_b >= std::min(workers, tasks_a) && extra_b <= extra_a;

  if (p.by_rows) {
    p.row_blocks = row_blocks;
    p.pixel_block = std::min(p.pixels, cap);
    p.pixel_blocks = ceil_div(p.pixels, p.pixel_block);
    p.slots = blas_threaded() ? 1 : slot_count(tasks_b);
  } else {
    p.pixel_block = ceil_div(p.pixels, blocks_a);
    p.pixel_blocks = ceil_div(p.pixels, p.pixel_block);
    p.slots = slots_a;
    p.partial_bytes = floats(s.k * patch);
  }
  p.column_bytes = plain ? 0 : floats(patch * p.pixel_block);
  return p;
}

// The columns of pixels [p0, p1) for group gi (of image n in NCHW): the gathered buffer, or x
// itself for a plain 1x1. Returns the matrix and its leading dimension.
std::pair<const float*, std::int64_t> columns(const ConvShape& s, const float* x, std::int64_t n, std::int64_t gi,
                                              std::int64_t p0, std::int64_t p1, float* col) {
  const bool plain = plain_1x1(s);
  if (!s.nhwc) {
    const float* xn = x + (n * s.c + gi * s.cg) * s.h * s.w;
    if (plain) return {xn + p0, s.h * s.w};
    im2col_nchw(s, xn, p0, p1, col, p1 - p0);
    return {col, p1 - p0};
  }
  if (plain) return {x + p0 * s.c + gi * s.cg, s.c};
  im2col_nhwc(s, x, gi, p0, p1, col);
  return {col, s.r * s.s * s.cg};
}

// dW rows [k0, k1) of group gi (+)= dY rows * columns^T over pixels [p0, p1) (of image n in NCHW).
void weights_product(const ConvShape& s, const float* dy, std::int64_t n, std::int64_t gi, std::int64_t k0,
                     std::int64_t k1, std::int64_t p0, std::int64_t p1, const float* cols, std::int64_t ldb,
                     float beta, float* c) {
  const std::int64_t patch = s.cg * s.r * s.s;
  if (!s.nhwc) {
    const std::int64_t plane = s.ho * s.wo;
    sgemm(false, true, k1 - k0, patch, p1 - p0, 1.0f, dy + (n * s.k + gi * s.kg + k0) * plane + p0, plane, cols, ldb,
          beta, c, patch);
  } else {
    sgemm(true, false, k1 - k0, patch, p1 - p0, 1.0f, dy + p0 * s.k + gi * s.kg + k0, s.k, cols, ldb, beta, c, patch);
  }
}

void weights_by_rows(const ConvShape& s, const WeightsPlan& p, const float* x, const float* dy, float* dw,
                     bool accumulate, void* ws) {
  const std::int64_t patch = s.cg * s.r * s.s, images = s.nhwc ? 1 : s.n;
  run_slotted(s.g * p.row_blocks, p.slots, [&](std::int64_t slot, std::int64_t task) {
    auto* col = reinterpret_cast<float*>(static_cast<char*>(ws) + static_cast<std::size_t>(slot) * p.column_bytes);
    const std::int64_t gi = task / p.row_blocks, b = task % p.row_blocks;
    const std::int64_t k0 = s.kg * b / p.row_blocks, k1 = s.kg * (b + 1) / p.row_blocks;
    float* c = dw + (gi * s.kg + k0) * patch;
    bool first = true;
    for (std::int64_t n = 0; n < images; ++n) {
      for (std::int64_t p0 = 0; p0 < p.pixels; p0 += p.pixel_block) {
        const std::int64_t p1 = std::min(p.pixels, p0 + p.pixel_block);
        const auto [cols, ldb] = columns(s, x, n, gi, p0, p1, col);
        weights_product(s, dy, n, gi, k0, k1, p0, p1, cols, ldb, first && !accumulate ? 0.0f : 1.0f, c);
        first = false;
      }
    }
  });
}

void weights_by_pixels(const ConvShape& s, const WeightsPlan& p, const float* x, const float* dy, float* dw,
                       bool accumulate, void* ws) {
  const std::int64_t patch = s.cg * s.r * s.s, outer = s.nhwc ? s.g : s.n * s.g;
  auto* base = static_cast<char*>(ws);
  char* partials = base + static_cast<std::size_t>(p.slots) * p.column_bytes;
  // touched[slot * g + gi]: that slot's copy of group gi holds a sum (else it is garbage).
  auto* touched = reinterpret_cast<unsigned char*>(partials + static_cast<std::size_t>(p.slots - 1) * p.partial_bytes);
  std::memset(touched, 0, static_cast<std::size_t>(p.slots * s.g));
  const auto copy_of = [&](std::int64_t slot) {
    return slot == 0 ? dw : reinterpret_cast<float*>(partials + static_cast<std::size_t>(slot - 1) * p.partial_bytes);
  };
  run_slotted(outer * p.pixel_blocks, p.slots, [&](std::int64_t slot, std::int64_t task) {
    auto* col = reinterpret_cast<float*>(base + static_cast<std::size_t>(slot) * p.column_bytes);
    const std::int64_t blk = task % p.pixel_blocks, o = task / p.pixel_blocks;
    const std::int64_t gi = o % s.g, n = s.nhwc ? 0 : o / s.g;
    const std::int64_t p0 = blk * p.pixel_block, p1 = std::min(p.pixels, p0 + p.pixel_block);
    unsigned char& mark = touched[slot * s.g + gi];
    const bool sum_into = mark != 0 || (slot == 0 && accumulate);
    const auto [cols, ldb] = columns(s, x, n, gi, p0, p1, col);
    weights_product(s, dy, n, gi, 0, s.kg, p0, p1, cols, ldb, sum_into ? 1.0f : 0.0f,
                    copy_of(slot) + gi * s.kg * patch);
    mark = 1;
  });
  // dw = (slot 0's sum, or what dw held when accumulating, or zero) + every other slot's sum.
  const std::int64_t group_size = s.kg * patch;
  parallel_for(0, s.k * patch, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t gi = lo / group_size; gi * group_size < hi; ++gi) {
      const std::int64_t a = std::max(lo, gi * group_size), b = std::min(hi, (gi + 1) * group_size);
      if (touched[gi] == 0 && !accumulate) std::fill(dw + a, dw + b, 0.0f);
      for (std::int64_t slot = 1; slot < p.slots; ++slot) {
        if (touched[slot * s.g + gi] == 0) continue;
        const float* part = copy_of(slot);
        for (std::int64_t i = a; i < b; ++i) dw[i] += part[i];
      }
    }
  });
}

}  // namespace

bool plain_1x1(const ConvShape& s) {
  return s.r == 1 && s.s == 1 && s.sh == 1 && s.sw == 1 && s.ph == 0 && s.pw == 0;
}

std::size_t data_gemm_workspace(const ConvShape& s) {
  if (plain_1x1(s)) return 0;
  const DataPlan p = make_data_plan(s);
  return static_cast<std::size_t>(p.slots) * p.column_bytes + (p.repack ? floats(s.g * p.channel_blocks * s.kg * s.r * s.s * p.block_channels) : 0);
}

void data_gemm(const ConvShape& s, const float* dy, const float* w, float* dx, void* ws) {
  if (plain_1x1(s)) {
    data_plain_1x1(s, dy, w, dx);
    return;
  }
  const DataPlan p = make_data_plan(s);
  const std::int64_t taps = s.r * s.s, patch = taps * s.cg, pixels = s.ho * s.wo;
  auto* packed = reinterpret_cast<float*>(static_cast<char*>(ws) + static_cast<std::size_t>(p.slots) * p.column_bytes);
  if (p.repack) repack_weights(s, p, w, packed);
  run_slotted(s.n * s.g * p.channel_blocks, p.slots, [&](std::int64_t slot, std::int64_t task) {
    auto* col = reinterpret_cast<float*>(static_cast<char*>(ws) + static_cast<std::size_t>(slot) * p.column_bytes);
    const std::int64_t b = task % p.channel_blocks, ng = task / p.channel_blocks;
    const std::int64_t gi = ng % s.g, n = ng / s.g;
    const std::int64_t c0 = b * p.block_channels, cbs = std::min(p.block_channels, s.cg - c0);
    const std::int64_t rows = cbs * taps;
    if (!s.nhwc) {
      float* dxn = dx + (n * s.c + gi * s.cg + c0) * s.h * s.w;
      std::fill(dxn, dxn + cbs * s.h * s.w, 0.0f);
      const float* dyg = dy + (n * s.k + gi * s.kg) * pixels;
      for (std::int64_t p0 = 0; p0 < pixels; p0 += p.pixel_block) {
        const std::int64_t p1 = std::min(pixels, p0 + p.pixel_block);
        // Rows c0*RS.. of W_g^T are columns of the stored [Kg x CgRS] weights.
        sgemm(true, false, rows, p1 - p0, s.kg, 1.0f, w + gi * s.kg * patch + c0 * taps, patch, dyg + p0, pixels,
              0.0f, col, p1 - p0);
        col2im_add_nchw(s, col, p1 - p0, cbs, p0, p1, dxn);
      }
      return;
    }
    const std::int64_t ch = gi * s.cg + c0;
    for (std::int64_t i = 0; i < s.h * s.w; ++i) {
      std::fill(dx + (n * s.h * s.w + i) * s.c + ch, dx + (n * s.h * s.w + i) * s.c + ch + cbs, 0.0f);
    }
    const float* wb = p.repack ? repacked_block(s, p, packed, gi, b) : w + gi * s.kg * patch;
    for (std::int64_t p0 = 0; p0 < pixels; p0 += p.pixel_block) {
      const std::int64_t p1 = std::min(pixels, p0 + p.pixel_block);
      sgemm(false, false, p1 - p0, rows, s.kg, 1.0f, dy + (n * pixels + p0) * s.k + gi * s.kg, s.k, wb, rows, 0.0f,
            col, rows);
      col2im_add_nhwc(s, col, rows, n, ch, cbs, p0, p1, dx);
    }
  });
}

std::size_t weights_gemm_workspace(const ConvShape& s) {
  const WeightsPlan p = make_weights_plan(s);
  std::size_t bytes = static_cast<std::size_t>(p.slots) * p.column_bytes;
  if (!p.by_rows) bytes += static_cast<std::size_t>(p.slots - 1) * p.partial_bytes + static_cast<std::size_t>(p.slots * s.g);
  return bytes;
}

void weights_gemm(const ConvShape& s, const float* x, const float* dy, float* dw, bool accumulate, void* ws) {
  const WeightsPlan p = make_weights_plan(s);
  if (p.by_rows) {
    weights_by_rows(s, p, x, dy, dw, accumulate, ws);
  } else {
    weights_by_pixels(s, p, x, dy, dw, accumulate, ws);
  }
}

}  // namespace galley::backends::cpu::bwd
