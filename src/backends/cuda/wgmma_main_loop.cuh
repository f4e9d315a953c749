// The cp.async -> wgmma main loop of the Hopper kernels (conv_igemm_wgmma.cu, conv_bwd_weights_wgmma.cu).
//
// STAGES stage buffers of kStageBytes each from smem_s. load(stage) fills one stage (its shared
// address) with the next step's operands by cp.async, each call the step after the previous one;
// issue(stage) issues that stage's wgmma into acc. Loads run STAGES - 2 steps ahead, and one wgmma
// group stays in flight across the next step's barrier: after step it's barrier every warpgroup has
// waited for its wgmma of step it - 2, so that buffer is free for the load of step it + STAGES - 2
// (one barrier per step). cp.async writes through the generic proxy and wgmma reads through the async
// proxy, hence the fence.proxy.async between the copies landing and the barrier.
#pragma once

#include "backends/cuda/conv_wgmma_ops.cuh"
#include "backends/gpu/conv_mma.cuh"

namespace galley::backends::gpu::wgmma {

template <int STAGES, int kStageBytes, int R, class Load, class Issue>
__device__ __forceinline__ void main_loop(unsigned smem_s, int nsteps, float (&acc)[R], Load&& load,
                                          Issue&& issue) {
  static_assert(STAGES >= 3, "loads run STAGES - 2 steps ahead of a wgmma group in flight");
#pragma unroll
  for (int st = 0; st < STAGES - 2; ++st) {
    if (st < nsteps) load(smem_s + st * kStageBytes);
    mma::cp_async_commit();
  }
  int read_stage = 0, write_stage = STAGES - 2;
  for (int it = 0; it < nsteps; ++it) {
    mma::cp_async_wait<STAGES - 3>();  // this thread's copies of step `it` have landed
    fence_proxy_async();
    __syncthreads();
    if (it + STAGES - 2 < nsteps) load(smem_s + write_stage * kStageBytes);
    mma::cp_async_commit();
    write_stage = write_stage + 1 == STAGES ? 0 : write_stage + 1;

    fence();
    issue(smem_s + read_stage * kStageBytes);
    commit();
    wait<1>();
    fence_operands(acc);
    read_stage = read_stage + 1 == STAGES ? 0 : read_stage + 1;
  }
  wait<0>();
  fence_operands(acc);
  mma::cp_async_wait<0>();
}

}  // namespace galley::backends::gpu::wgmma
