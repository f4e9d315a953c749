// gpu.conv.igemm_tc's Hopper tiles: the same implicit GEMM (f16/bf16 NHWC, channels per group a
// multiple of 8, fp32 accumulate) on wgmma, the sm_90a warpgroup MMA that reads both operands from
// shared memory. Compiled only for sm_90a (conv_igemm_wgmma.cu, its own object library), so it runs
// on compute capability 9.0 devices only; igemm_tc measures these tiles beside its mma.sync ones
// where igemm_wgmma_available() says yes.
#pragma once

#include <cstddef>

#include "backends/gpu/conv_params.hpp"

namespace galley::backends::gpu {

/// specialized = false: BM / 64 warpgroups both copy (cp.async) and multiply, loads run stages - 2
/// steps ahead, a block barrier per step. specialized = true: a producer warpgroup gathers the
/// activations by cp.async and has TMA copy the weights, up to `stages` steps ahead, while BM / 64
/// consumer warpgroups only issue wgmma, the stages handed over by mbarriers (see
/// conv_igemm_wgmma.cu).
struct WgmmaTile {
  int bm, bn, stages;
  bool specialized = false;
};
// Find-db rows store plan tiles by index, so entries are only ever appended. The specialized tiles
// keep ~192 KiB of stages in flight (one block per multiprocessor), but for 128x64, whose 96 KiB
// let two blocks share a multiprocessor (one's epilogue runs under the other's main loop); 192x128
// covers 3/2 the pixels of 128x128 for layers whose 128-row tiles leave a last wave mostly idle.
inline constexpr WgmmaTile kWgmmaTiles[] = {{128, 128, 4},      {128, 256, 4},       {128, 64, 4},
                                            {64, 128, 4},       {128, 128, 6, true}, {128, 256, 4, true},
                                            {128, 64, 4, true}, {192, 128, 5, true}};
inline constexpr int kWgmmaTileCount = int(sizeof(kWgmmaTiles) / sizeof(kWgmmaTiles[0]));

/// Shared memory of a tile's stage buffers (what decides how many of its blocks fit a multiprocessor).
constexpr int wgmma_stage_bytes(const WgmmaTile& t) { return t.stages * (t.bm + t.bn) * 64 * 2; }

/// True when this build has the sm_90a kernels and the current device runs them.
bool igemm_wgmma_available();

/// Enqueues the implicit GEMM with wgmma tile `tile` (index into kWgmmaTiles) and `splits` split-K
/// parts (> 1: fp32 partials in `partial`, y's layout, summed by the caller). x NHWC, w KRSC, y
/// NHWC; p.cg % 8 == 0 and f16/bf16; x and w 16-byte aligned. Throws Error(unsupported) where
/// igemm_wgmma_available() is false.
void launch_igemm_wgmma(const ConvParams& p, int tile, int splits, const void* x, const void* w, void* y,
                        float* partial, void* stream);

}  // namespace galley::backends::gpu
