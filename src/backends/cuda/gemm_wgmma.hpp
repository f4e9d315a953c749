// gpu.gemm.tc's Hopper tiles: the same product (f16/bf16 in, f32 accumulation, alpha, beta, bias,
// strided batches or batches summed) on wgmma, the sm_90a warpgroup MMA. Compiled only for sm_90a,
// beside igemm_tc's wgmma tiles (conv_igemm_wgmma.cu), so it runs where igemm_wgmma_available()
// says yes; gpu.gemm.tc lists these tiles before its mma.sync ones there. The TMA tiles also need the
// driver's cuTensorMapEncodeTiled.
#pragma once

#include "dnn/gemm_lowering.hpp"
#include "galley/core/dtype.hpp"

namespace galley::backends::gpu {

struct GemmWgmmaTile {
  int bm, bn, stages;  // block tile m x n over bm / 64 consumer warpgroups
  bool tma;            // stages filled by TMA from a producer warp, else by cp.async (gemm_wgmma.cu)
};
inline constexpr GemmWgmmaTile kGemmWgmmaTiles[] = {
    {128, 256, 4, true}, {128, 128, 6, true}, {128, 256, 4, false}, {64, 128, 4, false}};
inline constexpr int kGemmWgmmaTileCount = int(sizeof(kGemmWgmmaTiles) / sizeof(kGemmWgmmaTiles[0]));

/// Enqueues out = alpha op(X) op(Y) + beta out + bias with wgmma tile `tile` (index into
/// kGemmWgmmaTiles). f16/bf16 only; operands 16-byte aligned with contiguous extents and row pitches
/// multiples of 8 (gemm_tc_unfit()). Throws Error(unsupported) where igemm_wgmma_available() is false.
void launch_gemm_wgmma(const dnn::GemmCall& call, DType dtype, int tile, const void* x, const void* y,
                       void* out, const void* bias, void* stream);

}  // namespace galley::backends::gpu
