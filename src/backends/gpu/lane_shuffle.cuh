// Butterfly shuffles within aligned groups of lanes that mean the same on both vendors: a group is
// at most 32 lanes, so a HIP wavefront of 64 lanes is two groups and a CUDA warp one.
#pragma once

#include "conv_device.cuh"

namespace galley::backends::gpu {

/// v of the lane `mask` apart within an aligned group of kLanes lanes (a power of two up to 32);
/// every lane of the group calls it.
template <int kLanes>
__device__ __forceinline__ float shfl_xor_lanes(float v, int mask) {
#if GALLEY_GPU_HIP
  return __shfl_xor(v, mask, kLanes);
#else
  return __shfl_xor_sync(0xffffffffu, v, mask, kLanes);
#endif
}

__device__ __forceinline__ float shfl_xor32(float v, int mask) { return shfl_xor_lanes<32>(v, mask); }

/// The sum over each aligned group of kLanes lanes, in every lane of it (a fixed butterfly, so the
/// same bits in every lane and on every run).
template <int kLanes>
__device__ __forceinline__ float lanes_sum(float v) {
#pragma unroll
  for (int m = kLanes / 2; m > 0; m >>= 1) v += shfl_xor_lanes<kLanes>(v, m);
  return v;
}

}  // namespace galley::backends::gpu
