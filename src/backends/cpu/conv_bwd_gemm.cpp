// Parallel plans of the backward GEMM lowerings (see conv_bwd_gemm.hpp for the products).
//
// Data gradient: col2im scatters each patch gradient onto overlapping input pixels, so two tasks
// must never own pixels of one input channel: tasks are (image, group, block of input channels),
// each zeroing its channels of dx and then walking the output pixels in blocks through a
// per-worker column buffer. In NHWC a block's weight columns are not contiguous in KYXC, so the
// weights are repacked per channel block once per call.
//
// Weight gradient, NHWC: the sum runs over every output pixel of the batch, so either
//   (pixels) tasks are (group, pixel block), each worker summing into a private copy of dW that
//            is reduced at the end (worker 0 sums straight into dw), or
//   (rows)   tasks are (group, block of output channels), each summing its rows of dW over the
//            whole batch, which gathers the columns again once per row block;
// whichever moves fewer extra floats: the private copies (workers x |dW|) against the repeated
// gathers ((row blocks - 1) x |columns|). Late layers (large weights, few pixels) take rows.
// Weight gradient, NCHW: see weights_nchw below.
#include "backends/cpu/conv_bwd_gemm.hpp"

#include <algorithm>
#include <cstring>

#include "backends/cpu/conv_blas.hpp"
#include "backends/cpu/conv_bwd_columns.hpp"
#include "backends/cpu/thread_pool.hpp"

namespace galley::backends::cpu::bwd {
namespace {

constexpr std::size_t kColumnBytes = std::size_t{4} << 20;  // per worker, as cpu.conv.im2col_gemm
constexpr std::int64_t kTasksPerWorker = 4;                 // so a worker that wakes late still takes a share
constexpr std::int64_t kMinGemmColumns = 256;
constexpr std::int64_t kMinPixelBlock = 128;  // the depth of a weight-gradient GEMM
constexpr std::int64_t kMinRowBlock = 16;     // output channels per row block
constexpr std::int64_t kSmallPlane = 256;     // NCHW weights: output pixels per image to batch images
constexpr std::int64_t kTinyPlane = 64;       // NCHW data: output pixels per image to transpose the product
constexpr std::int64_t kInPlaceRows = 128;    // sgemm reads a plain B in place for this many rows of A
constexpr std::int64_t kMinBlockRows = 24;    // rows (channels x taps) of a weight-gradient channel block

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }
std::size_t floats(std::int64_t count) { return align_up64(static_cast<std::size_t>(count) * sizeof(float)); }

// ---- data -----------------------------------------------------------------------------------

struct DataPlan {
  std::int64_t channel_blocks;  // per group
  std::int64_t block_channels;  // channels per block (the last may have fewer)
  std::int64_t pixel_block;     // output pixels per GEMM
  std::int64_t slots;
  bool repack;               // NHWC with several channel blocks
  bool transposed;           // NCHW small planes: dcol^T = dY^T * W, the weights read in place
  std::size_t column_bytes;  // per slot
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
  // With few pixels per image each weight would be packed for a few dozen uses; computing the
  // transposed product instead lets the GEMM read the weights in place (it does so for at most
  // kInPlaceRows rows of its left operand, here the pixels).
  p.transposed = !s.nhwc && pixels <= kTinyPlane;
  if (p.transposed) p.pixel_block = ceil_div(pixels, ceil_div(pixels, kInPlaceRows));
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
      sgemm(false, false, r1 - r0, s.cg, s.kg, 1.0f, dy + r0 * s.k + gi * s.kg, s.k, w + gi * s.kg * s.cg,
            s.cg, 0.0f, dx + r0 * s.c + gi * s.cg, s.c);
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

// ---- weights, NHWC --------------------------------------------------------------------------

struct WeightsPlan {
  bool by_rows;               // tasks (group, row block) over the whole batch; else (.., pixel block)
  std::int64_t row_blocks;    // by_rows: output-channel blocks per group
  std::int64_t pixels;        // of the whole batch
  std::int64_t pixel_blocks;  // by pixels: blocks of the batch's pixels
  std::int64_t pixel_block;
  std::int64_t slots;
  std::size_t column_bytes;   // per slot; 0 for plain 1x1
  std::size_t partial_bytes;  // by pixels: per slot after the first
};

WeightsPlan make_weights_plan(const ConvShape& s) {
  WeightsPlan p{};
  const std::int64_t patch = s.cg * s.r * s.s, workers = gemm_workers();
  const bool plain = plain_1x1(s);
  p.pixels = s.n * s.ho * s.wo;
  const std::int64_t outer = s.g;
  const auto cap = std::max<std::int64_t>(
      kMinPixelBlock,
      static_cast<std::int64_t>(kColumnBytes / (sizeof(float) * static_cast<std::size_t>(patch))));

  // By pixels.
  const std::int64_t blocks_a =
      std::min(std::max(ceil_div(p.pixels, cap), ceil_div(kTasksPerWorker * workers, outer)),
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

// The columns of the batch's pixels [p0, p1) for group gi: the gathered buffer, or x itself for
// a plain 1x1. Returns the matrix and its leading dimension.
std::pair<const float*, std::int64_t> columns(const ConvShape& s, const float* x, std::int64_t gi,
                                              std::int64_t p0, std::int64_t p1, float* col) {
  if (plain_1x1(s)) return {x + p0 * s.c + gi * s.cg, s.c};
  im2col_nhwc(s, x, gi, p0, p1, col);
  return {col, s.r * s.s * s.cg};
}

// dW rows [k0, k1) of group gi (+)= dY^T rows * columns over the batch's pixels [p0, p1).
void weights_product(const ConvShape& s, const float* dy, std::int64_t gi, std::int64_t k0, std::int64_t k1,
                     std::int64_t p0, std::int64_t p1, const float* cols, std::int64_t ldb, float beta,
                     float* c) {
  const std::int64_t patch = s.cg * s.r * s.s;
  sgemm(true, false, k1 - k0, patch, p1 - p0, 1.0f, dy + p0 * s.k + gi * s.kg + k0, s.k, cols, ldb, beta, c,
        patch);
}

void weights_by_rows(const ConvShape& s, const WeightsPlan& p, const float* x, const float* dy, float* dw,
                     bool accumulate, void* ws) {
  const std::int64_t patch = s.cg * s.r * s.s;
  run_slotted(s.g * p.row_blocks, p.slots, [&](std::int64_t slot, std::int64_t task) {
    auto* col =
        reinterpret_cast<float*>(static_cast<char*>(ws) + static_cast<std::size_t>(slot) * p.column_bytes);
    const std::int64_t gi = task / p.row_blocks, b = task % p.row_blocks;
    const std::int64_t k0 = s.kg * b / p.row_blocks, k1 = s.kg * (b + 1) / p.row_blocks;
    float* c = dw + (gi * s.kg + k0) * patch;
    bool first = true;
    for (std::int64_t p0 = 0; p0 < p.pixels; p0 += p.pixel_block) {
      const std::int64_t p1 = std::min(p.pixels, p0 + p.pixel_block);
      const auto [cols, ldb] = columns(s, x, gi, p0, p1, col);
      weights_product(s, dy, gi, k0, k1, p0, p1, cols, ldb, first && !accumulate ? 0.0f : 1.0f, c);
      first = false;
    }
  });
}

void weights_by_pixels(const ConvShape& s, const WeightsPlan& p, const float* x, const float* dy, float* dw,
                       bool accumulate, void* ws) {
  const std::int64_t patch = s.cg * s.r * s.s;
  auto* base = static_cast<char*>(ws);
  char* partials = base + static_cast<std::size_t>(p.slots) * p.column_bytes;
  // touched[slot * g + gi]: that slot's copy of group gi holds a sum (else it is garbage).
  auto* touched =
      reinterpret_cast<unsigned char*>(partials + static_cast<std::size_t>(p.slots - 1) * p.partial_bytes);
  std::memset(touched, 0, static_cast<std::size_t>(p.slots * s.g));
  const auto copy_of = [&](std::int64_t slot) {
    return slot == 0
               ? dw
               : reinterpret_cast<float*>(partials + static_cast<std::size_t>(slot - 1) * p.partial_bytes);
  };
  run_slotted(s.g * p.pixel_blocks, p.slots, [&](std::int64_t slot, std::int64_t task) {
    auto* col = reinterpret_cast<float*>(base + static_cast<std::size_t>(slot) * p.column_bytes);
    const std::int64_t blk = task % p.pixel_blocks, gi = task / p.pixel_blocks;
    const std::int64_t p0 = blk * p.pixel_block, p1 = std::min(p.pixels, p0 + p.pixel_block);
    unsigned char& mark = touched[slot * s.g + gi];
    const bool sum_into = mark != 0 || (slot == 0 && accumulate);
    const auto [cols, ldb] = columns(s, x, gi, p0, p1, col);
    weights_product(s, dy, gi, 0, s.kg, p0, p1, cols, ldb, sum_into ? 1.0f : 0.0f,
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

// ---- weights, NCHW --------------------------------------------------------------------------
//
// NCHW columns run along the pixels, as dY does, so one operand of dW = dY * col^T must be
// transposed, and a GEMM that packs its operand transposed (a strided gather per element) runs
// at a fraction of its speed. Which operand to transpose, and where, depends on the plane:
//   the columns transposed, col^T[pixel][c*RS + t] (gathered, then transposed in L2-sized tiles),
//     and dW = dY * col^T written in place; or
//   dY transposed once per call into [N*P x K] and dW^T[CgRS x Kg] = col * dY^T summed in the
//     workspace, transposed into dw at the end;
// whichever transposes fewer floats (|col| against |dY| + |dW|): late layers, whose weights
// outweigh their activations, take the first, early ones the second. Small planes put the pixels
// of several images one after another (against dY gathered once as [K x N*P] for the first), so
// each GEMM runs deep.
// Either way the product splits over the input channels: tasks are (group, block of input
// channels), each gathering only its channels and writing only its part of dW (or dW^T), so
// nothing is gathered twice and no output is shared or reduced.

struct NchwWeightsPlan {
  std::int64_t channel_blocks;  // per group
  std::int64_t block_channels;
  bool transposed_columns;   // col^T gathered, dW written in place (else dW^T summed)
  std::int64_t images;       // transposed columns: images per GEMM
  std::int64_t pixel_block;  // pixels per GEMM of one image (when images == 1)
  bool gather;               // dW^T: false when a plain 1x1 image is its own columns
  std::int64_t slots;
  std::size_t column_bytes;      // per slot
  std::size_t transposed_bytes;  // dW^T
  std::size_t dy_bytes;          // dY as [N*P x K] (dW^T) or [K x N*P] (several images per GEMM)
};

constexpr std::size_t kTransposedColumnBytes = std::size_t{1} << 20;  // its scattered stores stay in L2

NchwWeightsPlan make_nchw_weights_plan(const ConvShape& s) {
  NchwWeightsPlan p{};
  const std::int64_t taps = s.r * s.s, pixels = s.ho * s.wo;
  const std::int64_t most = std::clamp<std::int64_t>(s.cg * taps / kMinBlockRows, 1, s.cg);
  p.channel_blocks = std::clamp<std::int64_t>(ceil_div(kTasksPerWorker * gemm_workers(), s.g), 1, most);
  p.block_channels = ceil_div(s.cg, p.channel_blocks);
  p.channel_blocks = ceil_div(s.cg, p.block_channels);
  const std::int64_t rows = p.block_channels * taps;
  // Each way moves one tensor more than the GEMM needs: col^T (gathered, then transposed), or
  // dY^T and dW^T (both transposed); take the smaller.
  const double columns_size = static_cast<double>(s.n) * pixels * s.c * taps;
  const double transposed_size =
      static_cast<double>(s.k) * s.n * pixels + static_cast<double>(s.k) * s.cg * taps;
  p.transposed_columns = columns_size < transposed_size;
  p.slots = blas_threaded() ? 1 : slot_count(s.g * p.channel_blocks);
  p.dy_bytes = floats(s.n * s.k * pixels);
  if (p.transposed_columns) {
    const std::int64_t cap = std::max<std::int64_t>(
        16,
        static_cast<std::int64_t>(kTransposedColumnBytes / (sizeof(float) * static_cast<std::size_t>(rows))));
    p.images = pixels <= kSmallPlane ? std::clamp<std::int64_t>(cap / pixels, 1, s.n) : 1;
    p.pixel_block = std::min(pixels, cap);
    p.column_bytes = 2 * floats(rows * std::max(p.images * pixels, p.pixel_block));  // gathered, transposed
    if (p.images == 1) p.dy_bytes = 0;  // dY read in place, one image at a time
  } else {
    const std::int64_t cap = std::max<std::int64_t>(
        kMinPixelBlock,
        static_cast<std::int64_t>(kColumnBytes / (sizeof(float) * static_cast<std::size_t>(rows))));
    p.images = pixels <= kSmallPlane ? std::clamp<std::int64_t>(cap / pixels, 1, s.n) : 1;
    p.pixel_block = std::min(pixels, cap);
    p.gather = p.images > 1 || !plain_1x1(s);
    p.column_bytes = p.gather ? floats(rows * std::max(p.images * pixels, p.pixel_block)) : 0;
    p.transposed_bytes = floats(s.k * s.cg * taps);
  }
  return p;
}

// out[j][i] = in[i][j] for an [rows x cols] matrix with rows `ld_in` apart, in L1-sized tiles.
void transpose(const float* in, std::int64_t ld_in, std::int64_t rows, std::int64_t cols, float* out,
               std::int64_t ld_out) {
  constexpr std::int64_t kTile = 32;
  for (std::int64_t i0 = 0; i0 < rows; i0 += kTile) {
    const std::int64_t i1 = std::min(rows, i0 + kTile);
    for (std::int64_t j0 = 0; j0 < cols; j0 += kTile) {
      const std::int64_t j1 = std::min(cols, j0 + kTile);
      for (std::int64_t j = j0; j < j1; ++j) {
        for (std::int64_t i = i0; i < i1; ++i) out[j * ld_out + i] = in[i * ld_in + j];
      }
    }
  }
}

void weights_nchw_summed_transposed(const ConvShape& s, const NchwWeightsPlan& p, const float* x,
                                    const float* dy, float* dw, bool accumulate, void* ws) {
  const std::int64_t taps = s.r * s.s, patch = s.cg * taps, pixels = s.ho * s.wo, plane = s.h * s.w;
  auto* base = static_cast<char*>(ws);
  auto* dy_t = reinterpret_cast<float*>(base);
  auto* transposed = reinterpret_cast<float*>(base + p.dy_bytes);
  char* columns = base + p.dy_bytes + p.transposed_bytes;
  // dY [N][K][P] -> [N][P][K], in blocks of 32 output channels so that every worker has a share.
  const std::int64_t k_blocks = ceil_div(s.k, 32);
  parallel_for(0, s.n * k_blocks, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t t = lo; t < hi; ++t) {
      const std::int64_t n = t / k_blocks, k0 = t % k_blocks * 32, k1 = std::min(s.k, k0 + 32);
      transpose(dy + (n * s.k + k0) * pixels, pixels, k1 - k0, pixels, dy_t + n * pixels * s.k + k0, s.k);
    }
  });
  run_slotted(s.g * p.channel_blocks, p.slots, [&](std::int64_t slot, std::int64_t task) {
    auto* col = reinterpret_cast<float*>(columns + static_cast<std::size_t>(slot) * p.column_bytes);
    const std::int64_t gi = task / p.channel_blocks, b = task % p.channel_blocks;
    const std::int64_t c0 = b * p.block_channels, cbs = std::min(p.block_channels, s.cg - c0),
                       rows = cbs * taps;
    ConvShape block = s;  // the gathers see this block's channels only
    block.cg = cbs;
    float* out = transposed + gi * s.kg * patch + c0 * taps * s.kg;  // rows c0*RS.. of dW_g^T [CgRS x Kg]
    const float* xg = x + (gi * s.cg + c0) * plane;
    bool first = true;
    if (p.images > 1) {
      // Images side by side in the columns; their rows of dY^T follow one another already.
      for (std::int64_t n0 = 0; n0 < s.n; n0 += p.images) {
        const std::int64_t count = std::min(p.images, s.n - n0), ld = count * pixels;
        for (std::int64_t i = 0; i < count; ++i) {
          im2col_nchw(block, xg + (n0 + i) * s.c * plane, 0, pixels, col + i * pixels, ld);
        }
        sgemm(false, false, rows, s.kg, ld, 1.0f, col, ld, dy_t + n0 * pixels * s.k + gi * s.kg, s.k,
              first ? 0.0f : 1.0f, out, s.kg);
        first = false;
      }
      return;
    }
    for (std::int64_t n = 0; n < s.n; ++n) {
      for (std::int64_t p0 = 0; p0 < pixels; p0 += p.pixel_block) {
        const std::int64_t p1 = std::min(pixels, p0 + p.pixel_block);
        const float* a = xg + n * s.c * plane + p0;
        std::int64_t lda = plane;
        if (p.gather) {
          im2col_nchw(block, xg + n * s.c * plane, p0, p1, col, p1 - p0);
          a = col, lda = p1 - p0;
        }
        sgemm(false, false, rows, s.kg, p1 - p0, 1.0f, a, lda, dy_t + (n * pixels + p0) * s.k + gi * s.kg,
              s.k, first ? 0.0f : 1.0f, out, s.kg);
        first = false;
      }
    }
  });
  // dw[g][k][j] (+)= dW^T[g][j][k].
  parallel_for(0, s.g, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t gi = lo; gi < hi; ++gi) {
      float* dst = dw + gi * s.kg * patch;
      const float* src = transposed + gi * s.kg * patch;
      if (accumulate) {
        for (std::int64_t j = 0; j < patch; ++j)
          for (std::int64_t k = 0; k < s.kg; ++k) dst[k * patch + j] += src[j * s.kg + k];
      } else {
        transpose(src, s.kg, patch, s.kg, dst, patch);
      }
    }
  });
}

void weights_nchw_transposed_columns(const ConvShape& s, const NchwWeightsPlan& p, const float* x,
                                     const float* dy, float* dw, bool accumulate, void* ws) {
  const std::int64_t taps = s.r * s.s, patch = s.cg * taps, pixels = s.ho * s.wo, plane = s.h * s.w;
  auto* base = static_cast<char*>(ws);
  auto* dy_rows = reinterpret_cast<float*>(base);  // images > 1: [K][N*P]
  char* columns = base + p.dy_bytes;
  const std::int64_t all_pixels = s.n * pixels;
  if (p.images > 1) {
    parallel_for(0, s.n * s.k, [&](std::int64_t lo, std::int64_t hi) {
      for (std::int64_t nk = lo; nk < hi; ++nk) {
        const std::int64_t n = nk / s.k, k = nk % s.k;
        std::memcpy(dy_rows + k * all_pixels + n * pixels, dy + nk * pixels,
                    static_cast<std::size_t>(pixels) * sizeof(float));
      }
    });
  }
  run_slotted(s.g * p.channel_blocks, p.slots, [&](std::int64_t slot, std::int64_t task) {
    auto* col = reinterpret_cast<float*>(columns + static_cast<std::size_t>(slot) * p.column_bytes);
    float* gathered = reinterpret_cast<float*>(reinterpret_cast<char*>(col) + p.column_bytes / 2);
    const std::int64_t gi = task / p.channel_blocks, b = task % p.channel_blocks;
    const std::int64_t c0 = b * p.block_channels, cbs = std::min(p.block_channels, s.cg - c0),
                       rows = cbs * taps;
    ConvShape block = s;
    block.cg = cbs;
    // col^T rows [0, count) of pixels p0.. of image xn: gathered as im2col lays it, then transposed
    // in tiles (a gather that stores transposed scatters every element).
    const auto columns_t = [&](const float* xn, std::int64_t p0, std::int64_t p1, float* out) {
      im2col_nchw(block, xn, p0, p1, gathered, p1 - p0);
      transpose(gathered, p1 - p0, rows, p1 - p0, out, rows);
    };
    float* out = dw + gi * s.kg * patch + c0 * taps;  // columns c0*RS.. of dW_g [Kg x CgRS]
    const float* xg = x + (gi * s.cg + c0) * plane;
    if (p.images > 1) {
      for (std::int64_t n0 = 0; n0 < s.n; n0 += p.images) {
        const std::int64_t count = std::min(p.images, s.n - n0);
        for (std::int64_t i = 0; i < count; ++i) {
          columns_t(xg + (n0 + i) * s.c * plane, 0, pixels, col + i * pixels * rows);
        }
        sgemm(false, false, s.kg, rows, count * pixels, 1.0f, dy_rows + gi * s.kg * all_pixels + n0 * pixels,
              all_pixels, col, rows, n0 == 0 && !accumulate ? 0.0f : 1.0f, out, patch);
      }
      return;
    }
    for (std::int64_t n = 0; n < s.n; ++n) {
      for (std::int64_t p0 = 0; p0 < pixels; p0 += p.pixel_block) {
        const std::int64_t p1 = std::min(pixels, p0 + p.pixel_block);
        columns_t(xg + n * s.c * plane, p0, p1, col);
        sgemm(false, false, s.kg, rows, p1 - p0, 1.0f, dy + (n * s.k + gi * s.kg) * pixels + p0, pixels, col,
              rows, n == 0 && p0 == 0 && !accumulate ? 0.0f : 1.0f, out, patch);
      }
    }
  });
}

// A plain 1x1 NCHW problem with small planes would pack every weight for a few dozen uses; the
// general plan's transposed product reads them in place instead.
bool data_as_one_gemm(const ConvShape& s) { return plain_1x1(s) && (s.nhwc || s.ho * s.wo > kTinyPlane); }

}  // namespace

bool plain_1x1(const ConvShape& s) {
  return s.r == 1 && s.s == 1 && s.sh == 1 && s.sw == 1 && s.ph == 0 && s.pw == 0;
}

std::size_t data_gemm_workspace(const ConvShape& s) {
  if (data_as_one_gemm(s)) return 0;
  const DataPlan p = make_data_plan(s);
  return static_cast<std::size_t>(p.slots) * p.column_bytes +
         (p.repack ? floats(s.g * p.channel_blocks * s.kg * s.r * s.s * p.block_channels) : 0);
}

void data_gemm(const ConvShape& s, const float* dy, const float* w, float* dx, void* ws) {
  if (data_as_one_gemm(s)) {
    data_plain_1x1(s, dy, w, dx);
    return;
  }
  const DataPlan p = make_data_plan(s);
  const std::int64_t taps = s.r * s.s, patch = taps * s.cg, pixels = s.ho * s.wo;
  auto* packed =
      reinterpret_cast<float*>(static_cast<char*>(ws) + static_cast<std::size_t>(p.slots) * p.column_bytes);
  if (p.repack) repack_weights(s, p, w, packed);
  run_slotted(s.n * s.g * p.channel_blocks, p.slots, [&](std::int64_t slot, std::int64_t task) {
    auto* col =
        reinterpret_cast<float*>(static_cast<char*>(ws) + static_cast<std::size_t>(slot) * p.column_bytes);
    const std::int64_t b = task % p.channel_blocks, ng = task / p.channel_blocks;
    const std::int64_t gi = ng % s.g, n = ng / s.g;
    const std::int64_t c0 = b * p.block_channels, cbs = std::min(p.block_channels, s.cg - c0);
    const std::int64_t rows = cbs * taps;
    if (!s.nhwc) {
      float* dxn = dx + (n * s.c + gi * s.cg + c0) * s.h * s.w;
      std::fill(dxn, dxn + cbs * s.h * s.w, 0.0f);
      const float* dyg = dy + (n * s.k + gi * s.kg) * pixels;
      const float* wg = w + gi * s.kg * patch + c0 * taps;  // columns c0*RS.. of the [Kg x CgRS] weights
      for (std::int64_t p0 = 0; p0 < pixels; p0 += p.pixel_block) {
        const std::int64_t p1 = std::min(pixels, p0 + p.pixel_block);
        if (p.transposed) {
          sgemm(true, false, p1 - p0, rows, s.kg, 1.0f, dyg + p0, pixels, wg, patch, 0.0f, col, rows);
          col2im_add_nchw_transposed(s, col, rows, cbs, p0, p1, dxn);
        } else {
          sgemm(true, false, rows, p1 - p0, s.kg, 1.0f, wg, patch, dyg + p0, pixels, 0.0f, col, p1 - p0);
          col2im_add_nchw(s, col, p1 - p0, cbs, p0, p1, dxn);
        }
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
      sgemm(false, false, p1 - p0, rows, s.kg, 1.0f, dy + (n * pixels + p0) * s.k + gi * s.kg, s.k, wb, rows,
            0.0f, col, rows);
      col2im_add_nhwc(s, col, rows, n, ch, cbs, p0, p1, dx);
    }
  });
}

std::size_t weights_gemm_workspace(const ConvShape& s) {
  if (!s.nhwc) {
    const NchwWeightsPlan p = make_nchw_weights_plan(s);
    return p.dy_bytes + p.transposed_bytes + static_cast<std::size_t>(p.slots) * p.column_bytes;
  }
  const WeightsPlan p = make_weights_plan(s);
  std::size_t bytes = static_cast<std::size_t>(p.slots) * p.column_bytes;
  if (!p.by_rows)
    bytes +=
        static_cast<std::size_t>(p.slots - 1) * p.partial_bytes + static_cast<std::size_t>(p.slots * s.g);
  return bytes;
}

void weights_gemm(const ConvShape& s, const float* x, const float* dy, float* dw, bool accumulate, void* ws) {
  if (!s.nhwc) {
    const NchwWeightsPlan p = make_nchw_weights_plan(s);
    if (p.transposed_columns) {
      weights_nchw_transposed_columns(s, p, x, dy, dw, accumulate, ws);
    } else {
      weights_nchw_summed_transposed(s, p, x, dy, dw, accumulate, ws);
    }
    return;
  }
  const WeightsPlan p = make_weights_plan(s);
  if (p.by_rows) {
    weights_by_rows(s, p, x, dy, dw, accumulate, ws);
  } else {
    weights_by_pixels(s, p, x, dy, dw, accumulate, ws);
  }
}

}  // namespace galley::backends::cpu::bwd
