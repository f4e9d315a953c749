// gpu.conv.bwd_weights_depthwise's row-strip kernel (3x3 and 5x5 filters, multiplier 1, tensors
// below 2^31 elements):
//   dw[c][r][s] = sum over (n, p, q) of dy[n,c,p,q] * x[n,c, p*u - pad_h + r*dil_h, q*v - pad_w + s*dil_w].
// A thread owns one channel (in nhwc, four neighbouring ones when c % 4 == 0, else two when c is
// even: one load for all of them) and keeps all r * s tap sums in registers while it walks tasks of
// `band` output rows x kCols output columns: per output row it loads the strip's dy values and, per
// filter row, the x values they touch (kCols + s - 1 neighbouring columns at unit stride and
// dilation, each feeding up to s taps). That is a few loads per pixel, each x value loaded once per
// filter row rather than once per tap, and no index division in the inner loop.
//
// Blocks: nhwc, neighbouring channel vectors (contiguous in memory, so warps load whole lines) x
// lanes; nchw, one channel x 256 lanes, consecutive lanes on consecutive strips of a row. Grid:
// (channel groups, slices); the slices' lanes take the tasks round-robin. The lanes of a channel
// are added in shared memory in a fixed tree, each block writes one fp32 partial per (weight,
// slice), and a second kernel adds a weight's slices with one 32-lane group in a fixed order, so a
// plan always gives the same bits.
#include "conv_bwd_kernels.hpp"
#include "conv_device.cuh"
#include "lane_shuffle.cuh"

namespace galley::backends::gpu {
namespace {

constexpr int kCols = 4;  // output columns per task
constexpr int kBlockThreads = 256;
constexpr int kVecsPerBlockMax = 32;  // nhwc: one warp's width of channel vectors
constexpr int kChunk = 16;            // tap sums reduced per pass through shared memory
constexpr int kMaxSlices = 2048;
constexpr int kMaxBand = 16;

// kVec consecutive elements of T as floats, in one load; kVec > 1 needs an address aligned to
// kVec * sizeof(T).
template <typename T, int kVec>
__device__ __forceinline__ void load_vec(const T* ptr, float (&out)[kVec]) {
  static_assert(kVec == 1 || kVec == 2 || kVec == 4, "one load of 1, 2 or 4 elements");
  if constexpr (kVec == 1) {
    out[0] = ldg_f32(ptr);
  } else if constexpr (std::is_same_v<T, float> && kVec == 2) {
    const float2 v = __ldg(reinterpret_cast<const float2*>(ptr));
    out[0] = v.x, out[1] = v.y;
  } else if constexpr (std::is_same_v<T, float>) {
    const float4 v = __ldg(reinterpret_cast<const float4*>(ptr));
    out[0] = v.x, out[1] = v.y, out[2] = v.z, out[3] = v.w;
  } else if constexpr (kVec == 2) {
    const float2 v = unpack2(__ldg(reinterpret_cast<const unsigned int*>(ptr)), static_cast<T*>(nullptr));
    out[0] = v.x, out[1] = v.y;
  } else {
    const uint2 w = __ldg(reinterpret_cast<const uint2*>(ptr));
    const float2 lo = unpack2(w.x, static_cast<T*>(nullptr)), hi = unpack2(w.y, static_cast<T*>(nullptr));
    out[0] = lo.x, out[1] = lo.y, out[2] = hi.x, out[3] = hi.y;
  }
}

// Block shape: `vecs_per_block` channel vectors (threadIdx.x % vecs_per_block) x `lanes`.
template <typename T, bool kNhwc, int kVec, int R, int S>
__global__ void __launch_bounds__(kBlockThreads)
    bwd_weights_depthwise_strips_kernel(ConvParams cp, const T* __restrict__ x, const T* __restrict__ dy,
                                        float* __restrict__ partial, int vecs_per_block, int band) {
  constexpr int kTaps = R * S, kSums = kTaps * kVec, kIn = kCols + S - 1;
  __shared__ float red[kChunk][kBlockThreads];
  const int tid = int(threadIdx.x);
  const int lanes = int(blockDim.x) / vecs_per_block;
  const int cv = tid % vecs_per_block, lane = tid / vecs_per_block;
  const int vec = int(blockIdx.x) * vecs_per_block + cv;
  const bool active = vec < cp.c / kVec;
  const int c0 = vec * kVec;
  const int slices = int(gridDim.y), slice = int(blockIdx.y);

  float acc[kSums];
#pragma unroll
  for (int i = 0; i < kSums; ++i) acc[i] = 0.f;

  if (active) {
    // 32-bit offsets: check() bounds every tensor below 2^31 elements, and each offset below is
    // an element of x or dy.
    const int col_stride = kNhwc ? cp.c : 1;
    const int x_row_stride = cp.w * col_stride, dy_row_stride = cp.q * col_stride;
    const int strips = (cp.q + kCols - 1) / kCols, bands = (cp.p + band - 1) / band;
    const int tasks = cp.n * bands * strips;  // <= n * p * q
    const bool sliding = cp.stride_w == 1 && cp.dil_w == 1;
    for (int t = slice * lanes + lane; t < tasks; t += slices * lanes) {
      const int strip = t % strips, rest = t / strips;
      const int b = rest % bands, n = rest / bands;
      const int q0 = strip * kCols, op0 = b * band, op1 = min(cp.p, op0 + band);
      const T* x_img = x + (kNhwc ? n * cp.h * x_row_stride + c0 : (n * cp.c + c0) * cp.h * cp.w);
      const T* dy_img = dy + (kNhwc ? n * cp.p * dy_row_stride + c0 : (n * cp.k + c0) * cp.p * cp.q);
      // Padding and the strip's columns past q add nothing: they are skipped, not multiplied by
      // zero, so an inf on the other side of the product cannot turn into a NaN.
      bool out_ok[kCols];
#pragma unroll
      for (int j = 0; j < kCols; ++j) out_ok[j] = q0 + j < cp.q;
      bool in_ok[kIn];
#pragma unroll
      for (int i = 0; i < kIn; ++i) in_ok[i] = unsigned(q0 - cp.pad_w + i) < unsigned(cp.w);

      for (int op = op0; op < op1; ++op) {
        float g[kCols][kVec];
        const T* dy_row = dy_img + op * dy_row_stride;
#pragma unroll
        for (int j = 0; j < kCols; ++j) {
          if (out_ok[j]) {
            load_vec<T, kVec>(dy_row + (q0 + j) * col_stride, g[j]);
          } else {
#pragma unroll
            for (int e = 0; e < kVec; ++e) g[j][e] = 0.f;
          }
        }
#pragma unroll
        for (int r = 0; r < R; ++r) {
          const int ih = op * cp.stride_h - cp.pad_h + r * cp.dil_h;
          if (unsigned(ih) >= unsigned(cp.h)) continue;
          const T* x_row = x_img + ih * x_row_stride;
          if (sliding) {
#pragma unroll
            for (int i = 0; i < kIn; ++i) {
              if (!in_ok[i]) continue;
              float xv[kVec];
              load_vec<T, kVec>(x_row + (q0 - cp.pad_w + i) * col_stride, xv);
#pragma unroll
              for (int s = 0; s < S; ++s) {
                const int j = i - s;  // output column fed by input column i through tap s
                if (j < 0 || j >= kCols || !out_ok[j]) continue;
#pragma unroll
                for (int e = 0; e < kVec; ++e)
                  acc[(r * S + s) * kVec + e] = fmaf(g[j][e], xv[e], acc[(r * S + s) * kVec + e]);
              }
            }
          } else {
#pragma unroll
            for (int j = 0; j < kCols; ++j) {
              if (!out_ok[j]) continue;
#pragma unroll
              for (int s = 0; s < S; ++s) {
                const int iw = (q0 + j) * cp.stride_w - cp.pad_w + s * cp.dil_w;
                if (unsigned(iw) >= unsigned(cp.w)) continue;
                float xv[kVec];
                load_vec<T, kVec>(x_row + iw * col_stride, xv);
#pragma unroll
                for (int e = 0; e < kVec; ++e)
                  acc[(r * S + s) * kVec + e] = fmaf(g[j][e], xv[e], acc[(r * S + s) * kVec + e]);
              }
            }
          }
        }
      }
    }
  }

  // The lanes of one channel vector sit vecs_per_block threads apart; a fixed tree adds them.
  int span = 1;
  while (span < lanes) span *= 2;
#pragma unroll
  for (int e0 = 0; e0 < kSums; e0 += kChunk) {
#pragma unroll
    for (int i = 0; i < kChunk; ++i)
      if (e0 + i < kSums) red[i][tid] = acc[e0 + i];
    __syncthreads();
    for (int half = span / 2; half > 0; half /= 2) {
      if (lane < half && lane + half < lanes) {
#pragma unroll
        for (int i = 0; i < kChunk; ++i)
          if (e0 + i < kSums) red[i][tid] += red[i][tid + half * vecs_per_block];
      }
      __syncthreads();
    }
    if (lane == 0 && active) {
#pragma unroll
      for (int i = 0; i < kChunk; ++i) {
        const int e = e0 + i;
        if (e >= kSums) continue;
        const std::int64_t weight = std::int64_t(c0 + e % kVec) * kTaps + e / kVec;
        partial[weight * slices + slice] = red[i][tid];
      }
    }
    __syncthreads();
  }
}

// One 32-lane group per weight adds its `slices` partials (stored contiguously): lane l takes
// slices l, l + 32, ... in order, then a fixed butterfly adds the lanes.
template <typename T>
__global__ void sum_weight_slices_kernel(const float* __restrict__ partial, T* __restrict__ dw,
                                         std::int64_t weights, int slices) {
  const std::int64_t weight = (std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = int(threadIdx.x % 32);
  if (weight >= weights) return;  // the same for all 32 lanes of a group
  const float* row = partial + weight * slices;
  float s = 0.f;
  for (int i = lane; i < slices; i += 32) s += row[i];
  s = lanes_sum<32>(s);
  if (lane == 0) dw[weight] = from_f32<T>(s);
}

// Channels a thread owns: four (or two) where nhwc channel runs make one aligned load, so a thread
// issues a quarter of the loads and address arithmetic of one channel a thread (alignment of the
// pointers is checked at launch; the plan does not depend on it).
// Four only for 3x3 filters: a 5x5's 100 tap sums would hold one 256-thread block a multiprocessor.
int preferred_vec(const ConvParams& p) {
  if (!p.nhwc) return 1;
  if (p.c % 4 == 0 && p.r == 3) return 4;
  return p.c % 2 == 0 ? 2 : 1;
}

struct BlockShape {
  int groups = 1;          // blocks along channels (grid.x)
  int vecs_per_block = 1;  // channel vectors a block holds
  int lanes = kBlockThreads;
};

BlockShape block_shape(const ConvParams& p, int vec) {
  BlockShape b;
  if (!p.nhwc) {
    b.groups = p.c;
    return b;
  }
  // As few groups as a warp's width allows, split evenly so no group is mostly idle.
  const int vecs = p.c / vec;
  b.groups = ceil_div(vecs, kVecsPerBlockMax);
  b.vecs_per_block = ceil_div(vecs, b.groups);
  b.lanes = kBlockThreads / b.vecs_per_block;
  return b;
}

int tasks_for(const ConvParams& p, int band) { return p.n * ceil_div(p.p, band) * ceil_div(p.q, kCols); }

template <typename T, bool kNhwc, int kVec>
void launch_kernel(const ConvParams& p, const DepthwiseBwdWeightsPlan& plan, const T* x, const T* dy,
                   float* partial, GpuStream s) {
  const BlockShape b = block_shape(p, kVec);
  const dim3 grid(unsigned(b.groups), unsigned(plan.splits));
  const unsigned threads = unsigned(b.vecs_per_block * b.lanes);
  if (p.r == 3)
    bwd_weights_depthwise_strips_kernel<T, kNhwc, kVec, 3, 3>
        <<<grid, threads, 0, s>>>(p, x, dy, partial, b.vecs_per_block, plan.band);
  else
    bwd_weights_depthwise_strips_kernel<T, kNhwc, kVec, 5, 5>
        <<<grid, threads, 0, s>>>(p, x, dy, partial, b.vecs_per_block, plan.band);
}

bool aligned_to(const void* ptr, std::size_t bytes) {
  return reinterpret_cast<std::uintptr_t>(ptr) % bytes == 0;
}

}  // namespace

bool bwd_weights_depthwise_strips_apply(const ConvParams& p) {
  const bool filter = (p.r == 3 && p.s == 3) || (p.r == 5 && p.s == 5);
  return filter && p.groups == p.c && p.k == p.c && p.kg == 1 && p.cg == 1 && too_large_for_int32(p).empty();
}

DepthwiseBwdWeightsPlan plan_bwd_weights_depthwise_strips(const ConvParams& p, int sm_count) {
  // About 1024 threads a multiprocessor in one wave (512 with four channels a thread, whose tap sums
  // double its registers; each of those loads twice the bytes): each thread has a dozen or more
  // independent loads per output row in flight, so half occupancy hides their latency.
  const int vec = preferred_vec(p);
  const BlockShape b = block_shape(p, vec);
  const std::int64_t vec_threads = std::int64_t(b.groups) * b.vecs_per_block;
  const std::int64_t wanted =
      std::max<std::int64_t>(1, std::int64_t(std::max(1, sm_count)) * (vec == 4 ? 512 : 1024) / vec_threads);
  // Longest band that still gives every wanted lane a task (shorter bands cost more halo rows).
  int band = kMaxBand;
  while (band > 1 && tasks_for(p, band) < wanted) band /= 2;
  const std::int64_t tasks = tasks_for(p, band);
  // Lanes that each take the same number of tasks, within one.
  const std::int64_t rounds = (tasks + wanted - 1) / wanted;
  const std::int64_t lanes = (tasks + rounds - 1) / rounds;
  DepthwiseBwdWeightsPlan plan;
  plan.strips = true;
  plan.band = band;
  plan.splits = int(std::clamp<std::int64_t>((lanes + b.lanes - 1) / b.lanes, 1, kMaxSlices));
  plan.workspace_bytes = std::size_t(plan.splits) * std::size_t(p.w_elems()) * sizeof(float);
  return plan;
}

void launch_bwd_weights_depthwise_strips(const ConvParams& p, const DepthwiseBwdWeightsPlan& plan,
                                         const void* x, const void* dy, void* dw, void* workspace,
                                         void* stream) {
  if (workspace == nullptr)
    throw Error(Status::invalid_argument, "gpu.conv.bwd_weights_depthwise: a plan of " +
                                              std::to_string(plan.splits) + " slices needs a workspace of " +
                                              std::to_string(plan.workspace_bytes) + " bytes, got none");
  if (plan.band < 1 || plan.band > kMaxBand || plan.splits < 1 || plan.splits > kMaxSlices)
    throw Error(Status::invalid_argument, "gpu.conv.bwd_weights_depthwise: plan of band " +
                                              std::to_string(plan.band) + ", " + std::to_string(plan.splits) +
                                              " slices is not one of the row-strip kernel's");
  float* partial = static_cast<float*>(workspace);
  const GpuStream s = as_stream(stream);
  dispatch_dtype(p.dtype, "gpu.conv.bwd_weights_depthwise", [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const T* xt = static_cast<const T*>(x);
    const T* dyt = static_cast<const T*>(dy);
    const auto fits = [&](int vec) {
      return preferred_vec(p) >= vec && p.c % vec == 0 && aligned_to(x, vec * sizeof(T)) &&
             aligned_to(dy, vec * sizeof(T));
    };
    if (!p.nhwc)
      launch_kernel<T, false, 1>(p, plan, xt, dyt, partial, s);
    else if (fits(4))
      launch_kernel<T, true, 4>(p, plan, xt, dyt, partial, s);
    else if (fits(2))
      launch_kernel<T, true, 2>(p, plan, xt, dyt, partial, s);
    else
      launch_kernel<T, true, 1>(p, plan, xt, dyt, partial, s);
  });
  check_launch("gpu.conv.bwd_weights_depthwise");
  const std::int64_t weights = p.w_elems();
  const std::int64_t blocks = (weights * 32 + 255) / 256;
  dispatch_dtype(p.dtype, "gpu.conv.bwd_weights_depthwise slice sum", [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    sum_weight_slices_kernel<T>
        <<<unsigned(blocks), 256, 0, s>>>(partial, static_cast<T*>(dw), weights, plan.splits);
  });
  check_launch("gpu.conv.bwd_weights_depthwise slice sum");
}

}  // namespace galley::backends::gpu
