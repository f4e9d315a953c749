// gpu.conv.bwd_weights_igemm's Hopper tiles: the NHWC tensor-core path (f16/bf16, channels per group a
// multiple of 8, fp32 accumulate) on wgmma, the sm_90a warpgroup MMA. Compiled only for sm_90a, beside
// igemm_tc's wgmma tiles (conv_igemm_wgmma.cu), so it runs where igemm_wgmma_available() says yes;
// the path's planner (../gpu/conv_bwd_weights_nhwc_tc.cu) lists these tiles after its mma.sync ones.
#pragma once

#include "backends/gpu/conv_params.hpp"

namespace galley::backends::gpu {

struct BwdWeightsWgmmaTile {
  int bm, bn, stages;  // block tile k x c, BM / 64 warpgroups; loads run stages - 2 steps ahead
  int blocks_per_sm;   // resident at once (shared memory)
  double efficiency;   // relative per-block throughput, for the planner (1.0: its first mma.sync tile)
};
// The efficiencies are fitted, like the mma.sync tiles', to the tuner's timings of every tile on the
// benchmark list's layers (bench/tile_timings.py; bench/RESULTS.md): per tile, the geomean of its
// best time over each layer's best tile. wgmma gains little over mma.sync here, so the step's loads
// (a pixel walk per tap), not the MMAs, bound these kernels.
inline constexpr BwdWeightsWgmmaTile kBwdWeightsWgmmaTiles[] = {{128, 256, 4, 1, 1.0},
                                                                {128, 128, 4, 1, 1.15},
                                                                {128, 64, 4, 2, 0.9},
                                                                {64, 128, 4, 2, 0.85},
                                                                {64, 64, 4, 3, 0.7}};
inline constexpr int kBwdWeightsWgmmaTileCount =
    int(sizeof(kBwdWeightsWgmmaTiles) / sizeof(kBwdWeightsWgmmaTiles[0]));
/// Output pixels a pipeline step reduces over (the wgmma K of a stage).
inline constexpr int kBwdWeightsWgmmaStep = 64;

/// Enqueues tile `tile` (index into kBwdWeightsWgmmaTiles) with `splits` split-K parts (> 1: fp32
/// partials, dw's layout, in `partial`, summed by the caller) and `group_pack` groups a tile. x, dy
/// NHWC and dw KRSC, 16-byte aligned; p.cg and p.kg multiples of 8. Throws Error(unsupported) where
/// igemm_wgmma_available() is false.
void launch_bwd_weights_wgmma(const ConvParams& p, int tile, int splits, int group_pack, const void* x,
                              const void* dy, void* dw, float* partial, void* stream);

}  // namespace galley::backends::gpu
