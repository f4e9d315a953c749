// Device helpers of the normalisation kernels: Welford (count, mean, M2) states merged with Chan's
// formula, which stay exact for a constant input and lose nothing to a large mean, fixed-order
// shared-memory tree reductions, and butterfly sums within aligned 32-lane groups (the warp is 32
// lanes on NVIDIA and 64 on AMD, so nothing assumes more than 32; a butterfly of additions gives
// every lane the same bits on every run, as addition commutes exactly).
#pragma once

#include "conv_device.cuh"
#include "lane_shuffle.cuh"

namespace galley::backends::gpu {

constexpr int kNormThreads = 256;

template <typename Real>
struct Welford {
  // No member initialisers: __shared__ arrays of these must be trivially constructible (hipcc
  // refuses otherwise); declare them with {} for zeros.
  Real n, mean, m2;

  __device__ __forceinline__ void add(Real v) {
    n += 1;
    const Real d = v - mean;
    mean += d / n;
    m2 += d * (v - mean);
  }
  /// add() for a state whose count is known to be `count - 1` before, with `inverse` = 1/count:
  /// states advancing in step (the channels of one pixel) share one division.
  __device__ __forceinline__ void add_counted(Real v, Real count, Real inverse) {
    n = count;
    const Real d = v - mean;
    mean += d * inverse;
    m2 += d * (v - mean);
  }
  __device__ __forceinline__ void merge(const Welford& o) {
    if (o.n == 0) return;
    if (n == 0) {
      *this = o;
      return;
    }
    const Real total = n + o.n;
    const Real d = o.mean - mean;
    const Real wo = o.n / total;
    mean += d * wo;
    m2 += o.m2 + d * d * n * wo;
    n = total;
  }
};

/// Adds 8 values as one Chan merge: their own two-pass mean and M2, then one division.
__device__ __forceinline__ void welford_add8(Welford<float>& w, const float (&v)[8]) {
  float s = 0;
#pragma unroll
  for (int j = 0; j < 8; ++j) s += v[j];
  Welford<float> b{};
  b.n = 8;
  b.mean = s * 0.125f;
  float q = 0;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const float d = v[j] - b.mean;
    q += d * d;
  }
  b.m2 = q;
  w.merge(b);
}

/// Merges the kThreads values of `shared` (indexed by threadIdx.x, already written; kThreads a
/// power of two, the block's size) in a fixed tree; thread 0 gets the total in shared[0]. Every
/// thread of the block must call it.
template <class T, int kThreads = kNormThreads>
__device__ __forceinline__ void tree_merge(T* shared) {
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (int(threadIdx.x) < stride) shared[threadIdx.x].merge(shared[threadIdx.x + stride]);
    __syncthreads();
  }
}

/// Merges the values of `shared` (indexed by threadIdx.x, already written) within each group of
/// `group` consecutive threads (a power of two dividing kNormThreads) in a fixed tree and returns
/// the group's total to every thread of the group. Every thread of the block must call it.
template <class T>
__device__ __forceinline__ T group_merge(T* shared, int group) {
  __syncthreads();
  const int lane = int(threadIdx.x) % group;
  for (int stride = group / 2; stride > 0; stride /= 2) {
    if (lane < stride) shared[threadIdx.x].merge(shared[threadIdx.x + stride]);
    __syncthreads();
  }
  return shared[threadIdx.x - lane];
}

/// Threads per row or plane for `steps` loads: a power of two from 32 to kNormThreads, so short
/// rows share a block instead of idling most of it.
inline int threads_for(std::int64_t steps) {
  int group = 32;
  while (group < kNormThreads && group < steps) group *= 2;
  return group;
}

/// Two sums merged together (the backward's sum dy and sum dy * xhat).
template <typename Real>
struct Sum2 {
  Real a, b;  // trivially constructible, as Welford
  __device__ __forceinline__ void merge(const Sum2& o) {
    a += o.a;
    b += o.b;
  }
};

/// v of lane 0 of each aligned group of `width` lanes (a power of two up to 32).
__device__ __forceinline__ float lanes_first(float v, int width) {
#if GALLEY_GPU_HIP
  return __shfl(v, 0, width);
#else
  return __shfl_sync(0xffffffffu, v, 0, width);
#endif
}

__device__ __forceinline__ std::int64_t min64(std::int64_t a, std::int64_t b) { return a < b ? a : b; }

__device__ __forceinline__ std::int64_t grid_stride_start() {
  return std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ std::int64_t grid_stride_step() { return std::int64_t(gridDim.x) * blockDim.x; }

inline unsigned grid_for(std::int64_t work, int threads) {
  const std::int64_t blocks = (work + threads - 1) / threads;
  return unsigned(std::max<std::int64_t>(1, std::min<std::int64_t>(blocks, 65535LL * 32)));
}

}  // namespace galley::backends::gpu
