// The global-memory side of gpu.conv.bwd_weights_igemm's NHWC tensor-core kernels, the mma.sync
// kernel (conv_bwd_weights_nhwc_tc.cu) and the Hopper wgmma kernel (../cuda/conv_bwd_weights_wgmma.cu):
// the stage loader and the store of the accumulators.
//
// For one filter tap of one group pack, a step is kStepPixels output pixels: A holds their dy rows
// (BM output channels from m0), B the x rows under the tap (BN input channels from c0). Both are
// copied as 16-byte cp.async chunks (8 channels) to the offsets the kernel's shared-memory layout
// gives for (row, chunk); chunks past the channels, the pixels or the padded input are zero-filled.
// Each B row walks its output pixel (n, p, q) by adding the step, never dividing.
//
// A block's tile covers `group_pack` adjacent groups (narrow groups packed to fill it): rows (k) and
// columns (c) run across the pack, and only the blocks whose row and column are of one group are kept.
#pragma once

#include <cstdint>

#include "conv_bwd_igemm.cuh"
#include "conv_mma.cuh"
#include "conv_params.hpp"

namespace galley::backends::gpu {

/// Filter taps side by side in one column tile: a layer of one group whose cg channels fill at most
/// half of a BN-wide tile (an RGB stem padded to 8, a 64-channel layer on a 128-wide tile) takes
/// BN / cg taps a tile, column j being tap j / cg's channel j % cg, instead of leaving BN - cg columns
/// of every tap's tile idle. 1 otherwise.
__host__ __device__ inline int bwd_weights_tap_pack(const ConvParams& cp, int bn) {
  return cp.groups == 1 && 2 * cp.cg <= bn ? bn / cp.cg : 1;
}
/// grid.x of the NHWC tensor-core path: its column tiles (c tiles x taps, or tap packs).
__host__ __device__ inline int bwd_weights_column_blocks(const ConvParams& cp, int bn, int group_pack) {
  const int pack = bwd_weights_tap_pack(cp, bn);
  const int taps = cp.r * cp.s;
  return pack > 1 ? (taps + pack - 1) / pack : (cp.cg * group_pack + bn - 1) / bn * taps;
}

}  // namespace galley::backends::gpu

#if GALLEY_GPU_MMA
namespace galley::backends::gpu {

/// What a block of the grid (column tiles, k tiles, group packs x splits) works on: group pack g
/// (packed groups, k_end x c_end channels), tap (r, s) (the first of tap_pack), the tile at (m0, c0),
/// split `split` of the pixel steps, `steps` steps of `step_pixels` pixels from `first_step`.
struct BwdWeightsNhwcBlock {
  int g, k_end, c_end, tap, tap_pack, m0, c0, split, first_step, steps;
  __device__ __forceinline__ BwdWeightsNhwcBlock(const ConvParams& cp, int bm, int bn, int c_tiles,
                                                 int group_pack, int splits, int step_pixels) {
    const int group_tiles = (cp.groups + group_pack - 1) / group_pack;
    g = (blockIdx.z % group_tiles) * group_pack;
    split = blockIdx.z / group_tiles;
    const int packed = min(group_pack, cp.groups - g);
    k_end = packed * cp.kg, c_end = packed * cp.cg;
    tap_pack = bwd_weights_tap_pack(cp, bn);
    if (tap_pack > 1) {
      tap = blockIdx.x * tap_pack, c0 = 0;
    } else {
      tap = blockIdx.x / c_tiles;
      c0 = (blockIdx.x - tap * c_tiles) * bn;
    }
    m0 = blockIdx.y * bm;
    const int total_steps = (cp.n * cp.p * cp.q + step_pixels - 1) / step_pixels;
    const bwd_igemm::StepRange range = bwd_igemm::split_steps(total_steps, split, splits);
    first_step = range.begin;
    steps = max(0, range.end - range.begin);
  }
};

template <typename T, int BM, int BN, int kThreads, int kStepPixels>
struct BwdWeightsNhwcLoader {
  static constexpr int kAChunks = BM / 8, kBChunks = BN / 8;  // 16-byte chunks per stage row
  static constexpr int kALoads = kStepPixels * kAChunks / kThreads;
  static constexpr int kBLoads = kStepPixels * kBChunks / kThreads;
  static_assert(kALoads >= 1 && kBLoads >= 1 && kThreads % kAChunks == 0 && kThreads % kBChunks == 0,
                "each thread copies whole chunks of the same column every load");

  int a_chunk, b_chunk;  // this thread's column of chunks (its first row is threadIdx.x / chunks a row)
  bool a_ok, b_ok;
  const T* dy_col;
  const T* x_col;
  int dh, dwo, pixels;
  int next_step;  // the step the next load() copies
  // The B rows' output pixels (n, p, q), advanced by kStepPixels = step_n images + step_p rows +
  // step_q columns per step (step_q < q, step_p < p, so each carry happens at most once).
  int step_n, step_p, step_q;
  int b_n[kBLoads], b_p[kBLoads], b_q[kBLoads];

  /// Loader of the block's tile, from its first step on.
  __device__ __forceinline__ BwdWeightsNhwcLoader(const ConvParams& cp, const T* x, const T* dy, int tid,
                                                  const BwdWeightsNhwcBlock& blk)
      : a_chunk(tid % kAChunks),
        b_chunk(tid % kBChunks),
        a_ok(blk.m0 + a_chunk * 8 < blk.k_end),
        dy_col(dy + blk.g * cp.kg + blk.m0 + a_chunk * 8),
        pixels(cp.n * cp.p * cp.q),
        next_step(blk.first_step) {
    // This thread's B column: channel `col` of tap `tap` (a chunk never straddles two taps of a pack,
    // cg being a multiple of 8).
    int col = blk.c0 + b_chunk * 8, tap = blk.tap;
    if (blk.tap_pack > 1) {
      const int t = col / cp.cg;
      col -= t * cp.cg, tap += t;
      b_ok = t < blk.tap_pack && tap < cp.r * cp.s;
    } else {
      b_ok = col < blk.c_end;
    }
    const int r = tap / cp.s, s = tap - r * cp.s;
    x_col = x + blk.g * cp.cg + col;
    dh = r * cp.dil_h - cp.pad_h;
    dwo = s * cp.dil_w - cp.pad_w;
    const int PQ = cp.p * cp.q;
    step_n = kStepPixels / PQ;
    step_p = (kStepPixels / cp.q) % cp.p;
    step_q = kStepPixels % cp.q;
#pragma unroll
    for (int i = 0; i < kBLoads; ++i) {
      const int pix = blk.first_step * kStepPixels + tid / kBChunks + i * (kThreads / kBChunks);
      b_n[i] = pix / PQ;
      const int pq = pix - b_n[i] * PQ;
      b_p[i] = pq / cp.q;
      b_q[i] = pq - b_p[i] * cp.q;
    }
  }

  /// Copies the next step (the block's first, then each call the one after) into the stage at a_s / b_s;
  /// offset(row, chunk) is a chunk's byte offset in the kernel's layout of A (a_offset) and B (b_offset).
  template <class AOffset, class BOffset>
  __device__ __forceinline__ void load(const ConvParams& cp, const T* x, const T* dy, unsigned a_s,
                                       unsigned b_s, AOffset a_offset, BOffset b_offset) {
    const int pix0 = next_step++ * kStepPixels;
#pragma unroll
    for (int i = 0; i < kALoads; ++i) {
      const int row = int(threadIdx.x) / kAChunks + i * (kThreads / kAChunks);
      const int pix = pix0 + row;
      const bool ok = a_ok && pix < pixels;
      mma::cp_async16<false>(a_s + a_offset(row, a_chunk), ok ? dy_col + std::int64_t(pix) * cp.k : dy,
                             ok ? 16 : 0);
    }
#pragma unroll
    for (int i = 0; i < kBLoads; ++i) {
      const int row = int(threadIdx.x) / kBChunks + i * (kThreads / kBChunks);
      const int pix = pix0 + row;
      const int ih = b_p[i] * cp.stride_h + dh, iw = b_q[i] * cp.stride_w + dwo;
      const bool ok = b_ok && pix < pixels && unsigned(ih) < unsigned(cp.h) && unsigned(iw) < unsigned(cp.w);
      mma::cp_async16(b_s + b_offset(row, b_chunk),
                      ok ? x_col + ((std::int64_t(b_n[i]) * cp.h + ih) * cp.w + iw) * cp.c : x, ok ? 16 : 0);
      b_q[i] += step_q;
      const int carry_q = b_q[i] >= cp.q;
      b_q[i] -= carry_q ? cp.q : 0;
      b_p[i] += step_p + carry_q;
      const int carry_p = b_p[i] >= cp.p;
      b_p[i] -= carry_p ? cp.p : 0;
      b_n[i] += step_n + carry_p;
    }
  }
};

/// Stores the accumulators of row m, columns c and c + 1 (c even) of group pack g's tile of tap `tap`
/// (with tap_pack > 1, of the pack from tap `tap`): to split `split`'s fp32 partials when splits > 1,
/// else to dw. Pairs past the pack's channels or taps, or across two groups of a pack, are not stored.
/// cg is a multiple of 8, so a pair whose first column is in range lies in one group and one tap.
template <typename T>
__device__ __forceinline__ void store_dw_pair(const ConvParams& cp, int g, int group_pack, int k_end,
                                              int c_end, int tap, int tap_pack, int m, int c, float v0,
                                              float v1, int split, int splits, float* partial, T* dw) {
  if (tap_pack > 1) {
    const int t = c / cp.cg;
    if (t >= tap_pack || tap + t >= cp.r * cp.s) return;
    tap += t, c -= t * cp.cg;
  }
  if (m >= k_end || c >= c_end) return;
  if (group_pack > 1) {
    const int mg = m / cp.kg;  // the row's group within the pack
    if (c / cp.cg != mg) return;
    c -= mg * cp.cg;
  }
  const int RS = cp.r * cp.s;
  const std::int64_t row = ((std::int64_t(g) * cp.kg + m) * RS + tap) * cp.cg;
  if (splits > 1)
    *reinterpret_cast<float2*>(partial + split * (std::int64_t(cp.k) * cp.cg * RS) + row + c) =
        make_float2(v0, v1);
  else
    *reinterpret_cast<std::uint32_t*>(dw + row + c) = pack2<T>(v0, v1);
}

}  // namespace galley::backends::gpu
#endif  // GALLEY_GPU_MMA
