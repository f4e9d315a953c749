// Device helpers of the softmax and reduce kernels: 32-lane group reductions that mean the same on
// both vendors (a HIP wavefront of 64 lanes is two groups of 32), and the online (max, sum of
// exp) pair that lets softmax read its input once for both statistics.
#pragma once

#include <cmath>

#include "conv_device.cuh"
#include "lane_shuffle.cuh"

namespace galley::backends::gpu::softmax_device {

__device__ __forceinline__ float group_sum(float v) { return lanes_sum<32>(v); }

/// The running maximum m and sum s of exp(x - m) over what was seen. -inf entries add nothing
/// (their exp is 0), so a row's -inf logits get probability 0; a row of only -inf keeps m = -inf,
/// s = 0, whose outputs come out NaN as in PyTorch; NaN and +inf make s NaN, poisoning the row.
struct MaxSum {
  float m = -INFINITY;
  float s = 0.0f;
  __device__ __forceinline__ void add(float x) {
    const float M = fmaxf(m, x);
    const float kept = m == M ? s : s * __expf(m - M);
    s = kept + (x == -INFINITY ? 0.0f : __expf(x - M));
    m = M;
    if (x != x) s = x;
  }
  __device__ __forceinline__ void merge(float m2, float s2) {
    const float M = fmaxf(m, m2);
    const float a = m == M ? s : s * __expf(m - M);
    const float b = m2 == M ? s2 : s2 * __expf(m2 - M);
    s = a + b;
    m = M;
  }
  __device__ __forceinline__ void group_merge() {
#pragma unroll
    for (int k = 16; k > 0; k >>= 1) {
      const float m2 = shfl_xor32(m, k);
      const float s2 = shfl_xor32(s, k);
      merge(m2, s2);
    }
  }
};

}  // namespace galley::backends::gpu::softmax_device
