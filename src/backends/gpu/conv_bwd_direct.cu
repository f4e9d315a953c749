// The backward direct kernels: the GPU lists' safety nets for backward-data and backward-weights.
// Every dtype, layout, stride, dilation, padding and group count, 64-bit indexing; not fast paths.
#include "conv_bwd_kernels.hpp"
#include "conv_device.cuh"

namespace galley::backends::gpu {
namespace {

constexpr int kThreads = 256;
// A grid-stride loop: cap the grid so huge tensors still launch (gridDim.x limits differ by vendor).
constexpr std::int64_t kMaxBlocks = 65535LL * 32;

// Offset of weight (k, c within the group, r, s): KCRS for nchw, KRSC for nhwc.
template <bool kNhwc>
__device__ __forceinline__ std::int64_t weight_offset(const ConvParams& cp, std::int64_t k, std::int64_t cl,
                                                      int r, int s) {
  return kNhwc ? ((k * cp.r + r) * cp.s + s) * cp.cg + cl : ((k * cp.cg + cl) * cp.r + r) * cp.s + s;
}

template <typename T, bool kNhwc>
__global__ void bwd_data_direct_kernel(ConvParams cp, const T* __restrict__ dy, const T* __restrict__ w,
                                       T* __restrict__ dx, std::int64_t total) {
  const std::int64_t C = cp.c, H = cp.h, W = cp.w, K = cp.k, P = cp.p, Q = cp.q;
  for (std::int64_t idx = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += std::int64_t(gridDim.x) * blockDim.x) {
    std::int64_t n, c, h, ww;
    if (kNhwc) {
      c = idx % C;
      std::int64_t t = idx / C;
      ww = t % W;
      t /= W;
      h = t % H;
      n = t / H;
    } else {
      ww = idx % W;
      std::int64_t t = idx / W;
      h = t % H;
      t /= H;
      c = t % C;
      n = t / C;
    }
    const std::int64_t g = c / cp.cg, cl = c - g * cp.cg;
    float acc = 0.f;
    for (int r = 0; r < cp.r; ++r) {
      // dy row p reaches h through tap r when p * stride_h - pad_h + r * dil_h == h.
      const std::int64_t th = h + cp.pad_h - std::int64_t(r) * cp.dil_h;
      if (th < 0 || th % cp.stride_h != 0) continue;
      const std::int64_t op = th / cp.stride_h;
      if (op >= P) continue;
      for (int s = 0; s < cp.s; ++s) {
        const std::int64_t tw = ww + cp.pad_w - std::int64_t(s) * cp.dil_w;
        if (tw < 0 || tw % cp.stride_w != 0) continue;
        const std::int64_t oq = tw / cp.stride_w;
        if (oq >= Q) continue;
        for (std::int64_t k = g * cp.kg; k < (g + 1) * cp.kg; ++k) {
          const std::int64_t dy_idx =
              kNhwc ? ((n * P + op) * Q + oq) * K + k : ((n * K + k) * P + op) * Q + oq;
          acc += ldg_f32(dy + dy_idx) * ldg_f32(w + weight_offset<kNhwc>(cp, k, cl, r, s));
        }
      }
    }
    dx[idx] = from_f32<T>(acc);
  }
}

// kLanes threads share one dw element: they stride over the (n, p, q) pixels, then add their sums
// in a fixed tree order in shared memory (no atomics, so the result does not depend on timing).
constexpr int kLanes = 32;
constexpr int kPerBlock = kThreads / kLanes;

template <typename T, bool kNhwc>
__global__ void __launch_bounds__(kThreads)
    bwd_weights_direct_kernel(ConvParams cp, const T* __restrict__ x, const T* __restrict__ dy,
                              T* __restrict__ dw, std::int64_t total) {
  __shared__ float red[kThreads];
  const std::int64_t C = cp.c, H = cp.h, W = cp.w, K = cp.k, P = cp.p, Q = cp.q;
  const std::int64_t pixels = std::int64_t(cp.n) * P * Q;
  const int lane = threadIdx.x % kLanes;
  for (std::int64_t base = std::int64_t(blockIdx.x) * kPerBlock; base < total;
       base += std::int64_t(gridDim.x) * kPerBlock) {
    const std::int64_t e = base + threadIdx.x / kLanes;
    float acc = 0.f;
    if (e < total) {
      std::int64_t k, cl;
      int r, s;
      if (kNhwc) {
        cl = e % cp.cg;
        std::int64_t t = e / cp.cg;
        s = int(t % cp.s);
        t /= cp.s;
        r = int(t % cp.r);
        k = t / cp.r;
      } else {
        s = int(e % cp.s);
        std::int64_t t = e / cp.s;
        r = int(t % cp.r);
        t /= cp.r;
        cl = t % cp.cg;
        k = t / cp.cg;
      }
      const std::int64_t c = (k / cp.kg) * cp.cg + cl;
      for (std::int64_t pix = lane; pix < pixels; pix += kLanes) {
        const std::int64_t oq = pix % Q, t = pix / Q, op = t % P, n = t / P;
        const std::int64_t ih = op * cp.stride_h - cp.pad_h + std::int64_t(r) * cp.dil_h;
        const std::int64_t iw = oq * cp.stride_w - cp.pad_w + std::int64_t(s) * cp.dil_w;
        if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
        const std::int64_t x_idx = kNhwc ? ((n * H + ih) * W + iw) * C + c : ((n * C + c) * H + ih) * W + iw;
        const std::int64_t dy_idx = kNhwc ? pix * K + k : ((n * K + k) * P + op) * Q + oq;
        acc += ldg_f32(x + x_idx) * ldg_f32(dy + dy_idx);
      }
    }
    red[threadIdx.x] = acc;
    __syncthreads();
#pragma unroll
    for (int offset = kLanes / 2; offset > 0; offset /= 2) {
      if (lane < offset) red[threadIdx.x] += red[threadIdx.x + offset];
      __syncthreads();
    }
    if (lane == 0 && e < total) dw[e] = from_f32<T>(red[threadIdx.x]);
    __syncthreads();  // red is reused by the next element group
  }
}

}  // namespace

void launch_conv_bwd_data_direct(const ConvParams& p, const void* dy, const void* w, void* dx, void* stream) {
  const std::int64_t total = p.x_elems();
  const std::int64_t blocks = std::min<std::int64_t>((total + kThreads - 1) / kThreads, kMaxBlocks);
  dispatch_dtype(p.dtype, "gpu.conv.bwd_data_direct", [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    auto kernel = p.nhwc ? bwd_data_direct_kernel<T, true> : bwd_data_direct_kernel<T, false>;
    kernel<<<unsigned(blocks), kThreads, 0, as_stream(stream)>>>(
        p, static_cast<const T*>(dy), static_cast<const T*>(w), static_cast<T*>(dx), total);
  });
  check_launch("gpu.conv.bwd_data_direct");
}

void launch_conv_bwd_weights_direct(const ConvParams& p, const void* x, const void* dy, void* dw,
                                    void* stream) {
  const std::int64_t total = p.w_elems();
  const std::int64_t blocks = std::min<std::int64_t>((total + kPerBlock - 1) / kPerBlock, kMaxBlocks);
  dispatch_dtype(p.dtype, "gpu.conv.bwd_weights_direct", [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    auto kernel = p.nhwc ? bwd_weights_direct_kernel<T, true> : bwd_weights_direct_kernel<T, false>;
    kernel<<<unsigned(blocks), kThreads, 0, as_stream(stream)>>>(
        p, static_cast<const T*>(x), static_cast<const T*>(dy), static_cast<T*>(dw), total);
  });
  check_launch("gpu.conv.bwd_weights_direct");
}

}  // namespace galley::backends::gpu
