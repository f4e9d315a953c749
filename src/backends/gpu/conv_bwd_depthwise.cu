// The depthwise backward kernels (groups == c; k / c output channels per input channel). With one
// input channel per group, a weight's offset is k * r * s + tap in both layouts (KCRS and KRSC
// coincide), and each kernel reads one channel's few weights many times.
//
// Backward-data: where the problem allows, the forward depthwise kernels run it on a flipped filter
// (conv_bwd_depthwise_flip.cu). Elsewhere (strides, multipliers, large padding) one thread per dx
// element gathers its channel's dy taps; strides 1 and 2 are compile-time constants, and tensors below
// 2^31 elements take 32-bit index math (64-bit division is a long software sequence).
// Backward-weights: 3x3 and 5x5 filters with multiplier 1 take the row-strip kernel
// (conv_bwd_depthwise_weights_strips.cu). The general kernel here: a block owns channels x up to 16
// taps and reduces over a slice of the (n, p, q) pixels; nchw blocks hold one channel with all 256
// threads along pixels (contiguous in memory), nhwc blocks hold 32 neighbouring channels
// (contiguous) x 8 pixel lanes. Slices beyond one write fp32 partials that launch_bwd_splitk_sum adds
// in a fixed order.
#include "conv_bwd_kernels.hpp"
#include "conv_device.cuh"

namespace galley::backends::gpu {
namespace {

constexpr int kThreads = 256;
constexpr int kTapsPerBlock = 16;
constexpr std::uintptr_t kFlipAlign = 16;

// kStride: the stride on both axes when known at compile time (1 skips the divisibility test, 2
// makes it a bit test and a shift), 0 when read from cp.
template <typename T, bool kNhwc, int kStride, typename Index>
__global__ void bwd_data_depthwise_kernel(ConvParams cp, const T* __restrict__ dy, const T* __restrict__ w,
                                          T* __restrict__ dx, Index total) {
  const Index C = cp.c, H = cp.h, W = cp.w, K = cp.k, P = cp.p, Q = cp.q;
  const int RS = cp.r * cp.s;
  const Index stride_h = kStride > 0 ? kStride : cp.stride_h, stride_w = kStride > 0 ? kStride : cp.stride_w;
  for (Index idx = Index(blockIdx.x) * Index(blockDim.x) + Index(threadIdx.x); idx < total;
       idx += Index(gridDim.x) * Index(blockDim.x)) {
    Index n, c, h, ww;
    if (kNhwc) {
      c = idx % C;
      Index t = idx / C;
      ww = t % W;
      t /= W;
      h = t % H;
      n = t / H;
    } else {
      ww = idx % W;
      Index t = idx / W;
      h = t % H;
      t /= H;
      c = t % C;
      n = t / C;
    }
    float acc = 0.f;
    for (int r = 0; r < cp.r; ++r) {
      Index op = h + cp.pad_h - Index(r) * cp.dil_h;
      if (op < 0) continue;
      if (kStride != 1) {
        if (op % stride_h != 0) continue;
        op /= stride_h;
      }
      if (op >= P) continue;
      for (int s = 0; s < cp.s; ++s) {
        Index oq = ww + cp.pad_w - Index(s) * cp.dil_w;
        if (oq < 0) continue;
        if (kStride != 1) {
          if (oq % stride_w != 0) continue;
          oq /= stride_w;
        }
        if (oq >= Q) continue;
        for (int m = 0; m < cp.kg; ++m) {
          const Index k = c * cp.kg + m;
          const Index dy_idx = kNhwc ? ((n * P + op) * Q + oq) * K + k : ((n * K + k) * P + op) * Q + oq;
          acc += ldg_f32(dy + dy_idx) * ldg_f32(w + k * RS + r * cp.s + s);
        }
      }
    }
    dx[idx] = from_f32<T>(acc);
  }
}

// kChannels threads along channels x (256 / kChannels) lanes along pixels. Grid: (channel blocks,
// tap blocks, pixel slices).
template <typename T, bool kNhwc, int kChannels>
__global__ void __launch_bounds__(kThreads)
    bwd_weights_depthwise_kernel(ConvParams cp, const T* __restrict__ x, const T* __restrict__ dy,
                                 T* __restrict__ dw, float* __restrict__ partial, std::int64_t per_slice) {
  constexpr int kPixelLanes = kThreads / kChannels;
  __shared__ float red[kThreads];
  const std::int64_t C = cp.c, H = cp.h, W = cp.w, K = cp.k, P = cp.p, Q = cp.q;
  const int RS = cp.r * cp.s;
  const int tid = threadIdx.x;
  const int lane = tid / kChannels;
  const std::int64_t k = std::int64_t(blockIdx.x) * kChannels + tid % kChannels;
  const bool k_valid = k < K;
  const std::int64_t c = k / cp.kg;
  const int tap0 = blockIdx.y * kTapsPerBlock;
  const int taps = min(kTapsPerBlock, RS - tap0);
  const std::int64_t pixels = std::int64_t(cp.n) * P * Q;
  const std::int64_t begin = std::int64_t(blockIdx.z) * per_slice;
  const std::int64_t end = min(pixels, begin + per_slice);

  int dh[kTapsPerBlock], dwo[kTapsPerBlock];  // each tap's offset from the pixel's window corner
#pragma unroll
  for (int t = 0; t < kTapsPerBlock; ++t) {
    const int tap = min(tap0 + t, RS - 1);
    dh[t] = (tap / cp.s) * cp.dil_h;
    dwo[t] = (tap % cp.s) * cp.dil_w;
  }
  float acc[kTapsPerBlock];
#pragma unroll
  for (int t = 0; t < kTapsPerBlock; ++t) acc[t] = 0.f;

  if (k_valid) {
    for (std::int64_t pix = begin + lane; pix < end; pix += kPixelLanes) {
      const std::int64_t oq = pix % Q, rest = pix / Q, op = rest % P, n = rest / P;
      const float g = ldg_f32(dy + (kNhwc ? pix * K + k : ((n * K + k) * P + op) * Q + oq));
      const std::int64_t ih0 = op * cp.stride_h - cp.pad_h, iw0 = oq * cp.stride_w - cp.pad_w;
      const T* x_img = kNhwc ? x + n * H * W * C + c : x + (n * C + c) * H * W;
#pragma unroll
      for (int t = 0; t < kTapsPerBlock; ++t) {  // predicated, not cut short: acc stays in registers
        const std::int64_t ih = ih0 + dh[t], iw = iw0 + dwo[t];
        if (t < taps && ih >= 0 && ih < H && iw >= 0 && iw < W)
          acc[t] += g * ldg_f32(x_img + (kNhwc ? (ih * W + iw) * C : ih * W + iw));
      }
    }
  }

  const std::int64_t w_elems = K * RS;
#pragma unroll
  for (int t = 0; t < kTapsPerBlock; ++t) {
    if (t >= taps) continue;  // uniform across the block
    red[tid] = acc[t];
    __syncthreads();
    for (int offset = kPixelLanes / 2; offset > 0; offset /= 2) {
      if (lane < offset) red[tid] += red[tid + offset * kChannels];
      __syncthreads();
    }
    if (lane == 0 && k_valid) {
      const std::int64_t out = k * RS + tap0 + t;
      if (partial != nullptr)
        partial[blockIdx.z * w_elems + out] = red[tid];
      else
        dw[out] = from_f32<T>(red[tid]);
    }
    __syncthreads();
  }
}

int channels_per_block(const ConvParams& p) { return p.nhwc ? 32 : 1; }

}  // namespace

DepthwiseBwdDataPlan plan_conv_bwd_data_depthwise(const ConvParams& p) {
  DepthwiseBwdDataPlan plan;
  plan.flipped = p.groups == p.c && p.cg == 1 && p.kg == 1 && p.k == p.c && p.stride_h == 1 &&
                 p.stride_w == 1 && p.pad_h >= 0 && p.pad_w >= 0 && p.pad_h <= (p.r - 1) * p.dil_h &&
                 p.pad_w <= (p.s - 1) * p.dil_w && too_large_for_int32(p).empty();
  // The flipped filter, plus room to align it to 16 bytes for the forward kernels' vector loads.
  if (plan.flipped) plan.workspace_bytes = std::size_t(p.w_elems()) * size_of(p.dtype) + kFlipAlign;
  return plan;
}

void launch_conv_bwd_data_depthwise(const ConvParams& p, const DepthwiseBwdDataPlan& plan, const void* dy,
                                    const void* w, void* dx, void* workspace, void* stream) {
  if (plan.flipped) {
    if (workspace == nullptr)
      throw Error(Status::invalid_argument,
                  "gpu.conv.bwd_data_depthwise: the flipped filter needs a workspace of " +
                      std::to_string(plan.workspace_bytes) + " bytes, got none");
    const std::uintptr_t at = reinterpret_cast<std::uintptr_t>(workspace);
    void* flipped = reinterpret_cast<void*>((at + kFlipAlign - 1) / kFlipAlign * kFlipAlign);
    launch_flip_depthwise_filter(p, w, flipped, stream);
    launch_conv_depthwise(depthwise_bwd_data_as_forward(p), dy, flipped, dx, stream);
    return;
  }
  const std::int64_t total = p.x_elems();
  const std::int64_t blocks = std::min<std::int64_t>((total + kThreads - 1) / kThreads, 65535LL * 32);
  // 32-bit indices need every index the kernel forms (dx, dy and weight offsets, and the grid-stride
  // loop's next index, below total + grid threads) to stay below 2^31.
  const bool narrow = too_large_for_int32(p).empty() && total + blocks * kThreads < (std::int64_t(1) << 31);
  dispatch_dtype(p.dtype, "gpu.conv.bwd_data_depthwise", [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const T* dyt = static_cast<const T*>(dy);
    const T* wt = static_cast<const T*>(w);
    T* dxt = static_cast<T*>(dx);
    const GpuStream s = as_stream(stream);
    auto run = [&](auto index_tag) {
      using Index = decltype(index_tag);
      auto pick = [&](auto stride_tag) {
        constexpr int kStride = decltype(stride_tag)::value;
        return p.nhwc ? bwd_data_depthwise_kernel<T, true, kStride, Index>
                      : bwd_data_depthwise_kernel<T, false, kStride, Index>;
      };
      const bool square = p.stride_h == p.stride_w;
      auto kernel = square && p.stride_h == 1   ? pick(std::integral_constant<int, 1>{})
                    : square && p.stride_h == 2 ? pick(std::integral_constant<int, 2>{})
                                                : pick(std::integral_constant<int, 0>{});
      kernel<<<unsigned(blocks), kThreads, 0, s>>>(p, dyt, wt, dxt, Index(total));
    };
    if (narrow)
      run(int{});
    else
      run(std::int64_t{});
  });
  check_launch("gpu.conv.bwd_data_depthwise");
}

DepthwiseBwdWeightsPlan plan_conv_bwd_weights_depthwise(const ConvParams& p, int sm_count) {
  if (bwd_weights_depthwise_strips_apply(p)) return plan_bwd_weights_depthwise_strips(p, sm_count);
  // Enough blocks for about four per multiprocessor, each keeping at least 4096 pixels to add so the
  // partials' extra pass stays small next to the reduction itself.
  const std::int64_t base_blocks =
      std::int64_t(ceil_div(p.k, channels_per_block(p))) * ceil_div(std::int64_t(p.r) * p.s, kTapsPerBlock);
  const std::int64_t wanted = (4LL * std::max(1, sm_count) + base_blocks - 1) / base_blocks;
  const std::int64_t most = std::max<std::int64_t>(1, p.pixels() / 4096);
  DepthwiseBwdWeightsPlan plan;
  plan.splits = int(std::clamp<std::int64_t>(std::min(wanted, most), 1, 256));
  plan.workspace_bytes =
      plan.splits > 1 ? std::size_t(plan.splits) * std::size_t(p.w_elems()) * sizeof(float) : 0;
  return plan;
}

void launch_conv_bwd_weights_depthwise(const ConvParams& p, const DepthwiseBwdWeightsPlan& plan,
                                       const void* x, const void* dy, void* dw, void* workspace,
                                       void* stream) {
  if (plan.strips) return launch_bwd_weights_depthwise_strips(p, plan, x, dy, dw, workspace, stream);
  if (plan.splits > 1 && workspace == nullptr)
    throw Error(Status::invalid_argument, "gpu.conv.bwd_weights_depthwise: a plan of " +
                                              std::to_string(plan.splits) + " slices needs a workspace of " +
                                              std::to_string(plan.workspace_bytes) + " bytes, got none");
  float* partial = plan.splits > 1 ? static_cast<float*>(workspace) : nullptr;
  const std::int64_t per_slice = (p.pixels() + plan.splits - 1) / plan.splits;
  const dim3 grid(ceil_div(p.k, channels_per_block(p)), ceil_div(std::int64_t(p.r) * p.s, kTapsPerBlock),
                  plan.splits);
  dispatch_dtype(p.dtype, "gpu.conv.bwd_weights_depthwise", [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    auto kernel =
        p.nhwc ? bwd_weights_depthwise_kernel<T, true, 32> : bwd_weights_depthwise_kernel<T, false, 1>;
    kernel<<<grid, kThreads, 0, as_stream(stream)>>>(p, static_cast<const T*>(x), static_cast<const T*>(dy),
                                                     static_cast<T*>(dw), partial, per_slice);
  });
  check_launch("gpu.conv.bwd_weights_depthwise");
  if (plan.splits > 1) launch_bwd_splitk_sum(p.dtype, p.w_elems(), plan.splits, partial, dw, stream);
}

std::string DepthwiseBwdWeightsPlan::describe(const ConvParams& p) const {
  std::string s;
  if (strips)
    s = std::string(p.nhwc ? "neighbouring channels" : "one channel") + " x 4-column strips of " +
        std::to_string(band) + " rows a thread, all taps in registers";
  else
    s = std::string(p.nhwc ? "32 channels x 8 pixel lanes" : "one channel x 256 pixel lanes") + " a block";
  return s + ", " + std::to_string(splits) + " pixel slice" + (splits > 1 ? "s" : "");
}

}  // namespace galley::backends::gpu
