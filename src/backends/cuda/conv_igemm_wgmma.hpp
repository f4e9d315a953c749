// gpu.conv.igemm_tc's Hopper tiles: the same implicit GEMM (f16/bf16 NHWC, channels per group a
// multiple of 8, fp32 accumulate) on wgmma, the sm_90a warpgroup MMA that reads both operands from
// shared memory. Compiled only for sm_90a (conv_igemm_wgmma.cu, its own object library), so it runs
// on compute capability 9.0 devices only; igemm_tc measures these tiles beside its mma.sync ones
// where igemm_wgmma_available() says yes.
#pragma once

#include <cstddef>

#include "backends/gpu/conv_params.hpp"

namespace galley::backends::gpu {

struct WgmmaTile {
  int bm, bn, stages;
};
// BM / 64 warpgroups per block; loads run stages - 2 steps ahead (see conv_igemm_wgmma.cu).
inline constexpr WgmmaTile kWgmmaTiles[] = {{128, 128, 4}, {128, 256, 4}, {128, 64, 4}, {64, 128, 4}};
inline constexpr int kWgmmaTileCount = int(sizeof(kWgmmaTiles) / sizeof(kWgmmaTiles[0]));

/// True when this build has the sm_90a kernels and the current device runs them.
bool igemm_wgmma_available();

/// Enqueues the implicit GEMM with wgmma tile `tile` (index into kWgmmaTiles) and `splits` split-K
/// parts (> 1: fp32 partials in `partial`, y's layout, summed by the caller). x NHWC, w KRSC, y
/// NHWC; p.cg % 8 == 0 and f16/bf16. Throws Error(unsupported) where igemm_wgmma_available() is false.
void launch_igemm_wgmma(const ConvParams& p, int tile, int splits, const void* x, const void* w, void* y,
                        float* partial, void* stream);

}  // namespace galley::backends::gpu
