// Layer norm's register path (gpu.lnorm.rows for rows of a multiple of 8 up to 32 *
// kMaxLaneVectors * 8 elements): a group of `lanes` lanes of one 32-lane group per row, each lane
// keeping K 16-byte vectors of the row in registers. The generic path reads a row twice and
// merges through shared memory with a barrier per step; here a row is read once, reduced with
// butterflies inside its lanes, and written from registers, so the forward moves x once and y
// once, and the backward x, dy once and dx once.
//
// Forward: a two-pass mean and variance over the registers, both shifted by the row's first value
// (as the generic path's Welford), so a constant row gives variance 0 and a mean of 1e4 keeps its
// low bits. Backward: persistent blocks, one per resident slot; each lane accumulates dscale and
// dshift for its columns over all its rows in registers, and each block writes one partial per
// column, merged in a fixed order by column_finalize (no atomics: the same bits on every run).
#include <atomic>
#include <type_traits>

#include "norm_device.cuh"
#include "norm_kernels.hpp"

namespace galley::backends::gpu {
namespace {

constexpr int kWarp = 32;
constexpr int kWarpsPerBlock = kNormThreads / kWarp;

/// The first element of lane `lane`'s k-th vector of a row (inside the row when below len).
__device__ __forceinline__ std::int64_t vector_start(const RowGeometry& g, int k, int lane) {
  return (std::int64_t(k) * g.lanes + lane) * 8;
}

template <typename T, int K, int R>
__global__ void __launch_bounds__(kNormThreads)
    row_forward_lanes(RowGeometry g, const T* __restrict__ x, const float* __restrict__ scale,
                      const float* __restrict__ shift, T* __restrict__ y, float* __restrict__ saved_mean,
                      float* __restrict__ saved_invstd, float epsilon) {
  const int lanes = g.lanes;
  const int lane = int(threadIdx.x) % lanes;
  const std::int64_t group = (std::int64_t(blockIdx.x) * kNormThreads + threadIdx.x) / lanes;
  bool valid[K];
#pragma unroll
  for (int k = 0; k < K; ++k) valid[k] = vector_start(g, k, lane) < g.len;
  // Every row's loads are issued before any is used. Rows past the end read nothing and reduce
  // zeros; every lane still takes part in the shuffles.
  float v[R][K][8];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const std::int64_t row = group * R + r;
#pragma unroll
    for (int k = 0; k < K; ++k) {
      if (row < g.rows && valid[k]) {
        load8(x + row * g.len + vector_start(g, k, lane), v[r][k]);
      } else {
#pragma unroll
        for (int j = 0; j < 8; ++j) v[r][k][j] = 0.f;
      }
    }
  }
  float center[R], sum[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    center[r] = lanes_first(v[r][0][0], lanes);
    sum[r] = 0.f;
#pragma unroll
    for (int k = 0; k < K; ++k) {
      if (!valid[k]) continue;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        v[r][k][j] -= center[r];
        sum[r] += v[r][k][j];
      }
    }
  }
  for (int m = lanes / 2; m > 0; m /= 2) {
#pragma unroll
    for (int r = 0; r < R; ++r) sum[r] += shfl_xor32(sum[r], m);
  }
  float mean[R], sq[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    mean[r] = sum[r] / float(g.len);
    sq[r] = 0.f;
#pragma unroll
    for (int k = 0; k < K; ++k) {
      if (!valid[k]) continue;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const float d = v[r][k][j] - mean[r];
        sq[r] = fmaf(d, d, sq[r]);
      }
    }
  }
  for (int m = lanes / 2; m > 0; m /= 2) {
#pragma unroll
    for (int r = 0; r < R; ++r) sq[r] += shfl_xor32(sq[r], m);
  }
  float invstd[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    invstd[r] = 1.0f / sqrtf(sq[r] / float(g.len) + epsilon);
    const std::int64_t row = group * R + r;
    if (lane == 0 && row < g.rows) {
      saved_mean[row] = center[r] + mean[r];
      saved_invstd[row] = invstd[r];
    }
  }
#pragma unroll
  for (int k = 0; k < K; ++k) {
    if (!valid[k]) continue;
    const std::int64_t e = vector_start(g, k, lane);
    float sc[8], sh[8];
    load8(scale + e, sc);
    load8(shift + e, sh);
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const std::int64_t row = group * R + r;
      if (row >= g.rows) continue;
      float o[8];
#pragma unroll
      for (int j = 0; j < 8; ++j) o[j] = fmaf((v[r][k][j] - mean[r]) * invstd[r], sc[j], sh[j]);
      store8(y + row * g.len + e, o);
    }
  }
}

/// Blocks per multiprocessor the backward asks the register allocator to allow: three for one
/// vector a lane (about 80 registers; two blocks leave too few rows in flight), else two.
/// (kMaxBackwardLaneVectors stops at 2: three or four vectors of x, dy, scale and the two column
/// sums do not fit 128 registers.)
template <int K>
constexpr int kBackwardMinBlocks = K == 1 ? 3 : 2;

template <typename T, int K, int R>
__global__ void __launch_bounds__(kNormThreads, kBackwardMinBlocks<K>)
    row_backward_lanes(RowGeometry g, const T* __restrict__ x, const T* __restrict__ dy,
                       const float* __restrict__ scale, const float* __restrict__ saved_mean,
                       const float* __restrict__ saved_invstd, T* __restrict__ dx,
                       float* __restrict__ partial) {
  __shared__ float columns[kWarpsPerBlock][kWarp * K * 8];
  const int lanes = g.lanes;
  const int lane = int(threadIdx.x) % lanes;
  const int warp = int(threadIdx.x) / kWarp;
  const int group_in_warp = (int(threadIdx.x) % kWarp) / lanes;
  // Loop bounds are the same for the whole 32-lane group, so its shuffles never diverge.
  const std::int64_t warp_rows = std::int64_t(kWarp / lanes) * R;
  const std::int64_t warp_step = std::int64_t(gridDim.x) * kWarpsPerBlock * warp_rows;
  bool valid[K];
  float gamma[K][8], dscale[K][8], dshift[K][8];
#pragma unroll
  for (int k = 0; k < K; ++k) {
    valid[k] = vector_start(g, k, lane) < g.len;
    if (valid[k]) {
      load8(scale + vector_start(g, k, lane), gamma[k]);
    } else {
#pragma unroll
      for (int j = 0; j < 8; ++j) gamma[k][j] = 0.f;
    }
#pragma unroll
    for (int j = 0; j < 8; ++j) dscale[k][j] = dshift[k][j] = 0.f;
  }
  for (std::int64_t base = (std::int64_t(blockIdx.x) * kWarpsPerBlock + warp) * warp_rows; base < g.rows;
       base += warp_step) {
    const std::int64_t first = base + std::int64_t(group_in_warp) * R;
    float xv[R][K][8], dv[R][K][8], mean[R], rs[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const std::int64_t row = first + r;
      const bool ok = row < g.rows;
#pragma unroll
      for (int k = 0; k < K; ++k) {
        if (ok && valid[k]) {
          const std::int64_t at = row * g.len + vector_start(g, k, lane);
          load8(x + at, xv[r][k]);
          load8(dy + at, dv[r][k]);
        } else {
#pragma unroll
          for (int j = 0; j < 8; ++j) xv[r][k][j] = dv[r][k][j] = 0.f;
        }
      }
      // A row past the end has dy = 0 and r = 0: it adds nothing to any sum.
      mean[r] = ok ? saved_mean[row] : 0.f;
      rs[r] = ok ? saved_invstd[row] : 0.f;
    }
    // xv becomes xhat; sum_g = sum dy*scale and sum_gx = sum dy*scale*xhat over the row.
    float sum_g[R], sum_gx[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      sum_g[r] = sum_gx[r] = 0.f;
#pragma unroll
      for (int k = 0; k < K; ++k) {
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          const float xh = (xv[r][k][j] - mean[r]) * rs[r];
          const float d = dv[r][k][j];
          const float gj = d * gamma[k][j];
          xv[r][k][j] = xh;
          sum_g[r] += gj;
          sum_gx[r] = fmaf(gj, xh, sum_gx[r]);
          dscale[k][j] = fmaf(d, xh, dscale[k][j]);
          dshift[k][j] += d;
        }
      }
    }
    for (int m = lanes / 2; m > 0; m /= 2) {
#pragma unroll
      for (int r = 0; r < R; ++r) {
        sum_g[r] += shfl_xor32(sum_g[r], m);
        sum_gx[r] += shfl_xor32(sum_gx[r], m);
      }
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const std::int64_t row = first + r;
      if (row >= g.rows) continue;
      const float mg = sum_g[r] / float(g.len), mgx = sum_gx[r] / float(g.len);
#pragma unroll
      for (int k = 0; k < K; ++k) {
        if (!valid[k]) continue;
        float o[8];
#pragma unroll
        for (int j = 0; j < 8; ++j) o[j] = rs[r] * (dv[r][k][j] * gamma[k][j] - mg - xv[r][k][j] * mgx);
        store8(dx + row * g.len + vector_start(g, k, lane), o);
      }
    }
  }
  // The groups of a 32-lane group hold the same columns: fold them into its first group, then
  // add the block's groups in warp order through shared memory, one output at a time.
  for (int m = kWarp / 2; m >= lanes; m /= 2) {
#pragma unroll
    for (int k = 0; k < K; ++k) {
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        dscale[k][j] += shfl_xor32(dscale[k][j], m);
        dshift[k][j] += shfl_xor32(dshift[k][j], m);
      }
    }
  }
#pragma unroll
  for (int field = 0; field < 2; ++field) {
    __syncthreads();
    if (group_in_warp == 0) {
#pragma unroll
      for (int k = 0; k < K; ++k) {
        if (!valid[k]) continue;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          columns[warp][vector_start(g, k, lane) + j] = field == 0 ? dscale[k][j] : dshift[k][j];
        }
      }
    }
    __syncthreads();
    for (std::int64_t col = threadIdx.x; col < g.len; col += kNormThreads) {
      float t = 0.f;
#pragma unroll
      for (int w = 0; w < kWarpsPerBlock; ++w) t += columns[w][col];
      partial[(std::int64_t(blockIdx.x) * g.len + col) * 2 + field] = t;
    }
  }
}

/// Blocks of `kernel` (kNormThreads threads) resident at once on the current device, asked once
/// per device: the occupancy query is a driver call, too slow for every launch.
template <typename Kernel>
std::int64_t resident_blocks(Kernel kernel, std::atomic<int> (&cache)[64], const char* what) {
  int device = 0;
#if GALLEY_GPU_HIP
  if (hipGetDevice(&device) != hipSuccess)
    throw Error(Status::backend_error, std::string(what) + ": hipGetDevice failed");
#else
  if (cudaGetDevice(&device) != cudaSuccess)
    throw Error(Status::backend_error, std::string(what) + ": cudaGetDevice failed");
#endif
  std::atomic<int>& slot = cache[device & 63];
  if (const int known = slot.load(std::memory_order_relaxed); known > 0) return known;
  int sms = 0, per_sm = 0;
#if GALLEY_GPU_HIP
  const bool ok = hipDeviceGetAttribute(&sms, hipDeviceAttributeMultiprocessorCount, device) == hipSuccess &&
                  hipOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, reinterpret_cast<const void*>(kernel),
                                                               kNormThreads, 0) == hipSuccess;
#else
  const bool ok = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) == cudaSuccess &&
                  cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                      &per_sm, reinterpret_cast<const void*>(kernel), kNormThreads, 0) == cudaSuccess;
#endif
  if (!ok || sms <= 0) {
    throw Error(Status::backend_error, std::string(what) +
                                           ": cannot query the multiprocessors and occupancy of device " +
                                           std::to_string(device));
  }
  const int blocks = sms * std::max(1, per_sm);
  slot.store(blocks, std::memory_order_relaxed);
  return blocks;
}

/// Calls f(K, R) with the register path's compile-time shape as integral constants, K up to kMax.
template <int kMax, typename F>
void dispatch_lane_vectors(const RowGeometry& g, const char* what, F&& f) {
  using One = std::integral_constant<int, 1>;
  using Two = std::integral_constant<int, 2>;
  static_assert(kMax >= 2 && kMax <= 4);
  switch (g.lane_vectors) {
    case 1:
      f(One{}, Two{});
      return;
    case 2:
      f(Two{}, One{});
      return;
    case 3:
      if constexpr (kMax >= 3) {
        f(std::integral_constant<int, 3>{}, One{});
        return;
      }
      break;
    case 4:
      if constexpr (kMax >= 4) {
        f(std::integral_constant<int, 4>{}, One{});
        return;
      }
      break;
    default:
      break;
  }
  throw Error(Status::internal, std::string(what) + ": register path with " + std::to_string(g.lane_vectors) +
                                    " vectors a lane (expected 1 to " + std::to_string(kMax) + ")");
}

}  // namespace

void launch_row_forward_lanes(const RowGeometry& g, const dnn::NormArgs& a, double epsilon, void* stream,
                              const char* what) {
  const GpuStream s = as_stream(stream);
  const std::int64_t rows_per_block = std::int64_t(kNormThreads / g.lanes) * g.rows_per_group();
  const auto blocks = unsigned((g.rows + rows_per_block - 1) / rows_per_block);
  dispatch_dtype(g.dtype, what, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    dispatch_lane_vectors<kMaxLaneVectors>(g, what, [&](auto k, auto r) {
      static_assert(decltype(r)::value == (decltype(k)::value == 1 ? 2 : 1));
      row_forward_lanes<T, decltype(k)::value, decltype(r)::value><<<blocks, kNormThreads, 0, s>>>(
          g, static_cast<const T*>(a.x), static_cast<const float*>(a.scale),
          static_cast<const float*>(a.shift), static_cast<T*>(a.y), static_cast<float*>(a.saved_mean),
          static_cast<float*>(a.saved_invstd), float(epsilon));
    });
  });
}

std::int64_t launch_row_backward_lanes(const RowGeometry& g, const dnn::NormArgs& a, std::int64_t max_blocks,
                                       float* partial, void* stream, const char* what) {
  const GpuStream s = as_stream(stream);
  std::int64_t blocks = 0;
  dispatch_dtype(g.dtype, what, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    dispatch_lane_vectors<kMaxBackwardLaneVectors>(g, what, [&](auto k, auto r) {
      constexpr int K = decltype(k)::value, R = decltype(r)::value;
      auto kernel = row_backward_lanes<T, K, R>;
      static std::atomic<int> cache[64];
      blocks = std::min(max_blocks, resident_blocks(kernel, cache, what));
      kernel<<<unsigned(blocks), kNormThreads, 0, s>>>(
          g, static_cast<const T*>(a.x), static_cast<const T*>(a.dy), static_cast<const float*>(a.scale),
          static_cast<const float*>(a.saved_mean), static_cast<const float*>(a.saved_invstd),
          static_cast<T*>(a.dx), partial);
    });
  });
  return blocks;
}

}  // namespace galley::backends::gpu
