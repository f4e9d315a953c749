// The last step of the column-sum kernels (the channels-last bias gradient, reductions over
// middle axes): a block of block_cols lanes across columns by block_rows lanes down the rows holds
// kV partial sums per lane; they are added down the rows in a fixed tree through shared memory, so
// a result never depends on scheduling.
#pragma once

#include "conv_device.cuh"

namespace galley::backends::gpu {

/// Adds `acc` over the block's rows of lanes (threadIdx.y < block_rows), through `sums`, room for
/// block_cols * block_rows * kV floats. Every lane of the block must call it (it synchronises);
/// on return the lanes of row 0 hold their column's totals in `acc`.
template <int kV>
__device__ __forceinline__ void column_tree_sum(float* sums, float (&acc)[kV], int block_cols,
                                                int block_rows) {
  const int y = int(threadIdx.y);
  const auto at = [&](int lane, int i) -> float& { return sums[(lane * kV + i) * block_cols + threadIdx.x]; };
#pragma unroll
  for (int i = 0; i < kV; ++i) at(y, i) = acc[i];
  __syncthreads();
  int span = 1;
  while (span < block_rows) span <<= 1;
  for (int s = span / 2; s > 0; s >>= 1) {
    if (y < s && y + s < block_rows) {
#pragma unroll
      for (int i = 0; i < kV; ++i) at(y, i) += at(y + s, i);
    }
    __syncthreads();
  }
  if (y == 0) {
#pragma unroll
    for (int i = 0; i < kV; ++i) acc[i] = at(0, i);
  }
}

}  // namespace galley::backends::gpu
