// gpu.conv.depthwise's kernels (groups == c, any channel multiplier k / c). Depthwise work is a
// handful of FMAs per byte, so the kernels aim at the memory roofline: each input and output byte
// should cross DRAM once, with the 3x3 (or r x s) neighbourhood re-read from L1.
//
// NHWC, multiplier 1, c % 8 == 0: a thread owns 8 channels (one 16-byte vector of f16/bf16, two of
// f32) at kStrip output pixels along a row; the block stages all weights in shared memory as
// [tap][channel] fp32 so a warp reads them conflict-free. Consecutive threads take consecutive
// channel vectors, so every warp-wide load is contiguous.
// Anything else (NCHW, multipliers, odd channel counts): a thread owns kStrip outputs along a row of
// one channel plane; loads are scalar but coalesced along the row.
#include "conv_device.cuh"

namespace galley::backends::gpu {
namespace {

constexpr int kThreads = 256;
constexpr int kStrip = 4;
constexpr int kMaxSmemWeights = 12 * 1024;  // floats: 48 KiB

template <typename T>
__global__ void __launch_bounds__(kThreads)
    depthwise_nhwc_vec8_kernel(ConvParams cp, const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y) {
  extern __shared__ float ws[];  // [r*s][c]
  const int C = cp.c, RS = cp.r * cp.s;
  for (int i = threadIdx.x; i < C * RS; i += blockDim.x) {
    const int c = i % C, rs = i / C;
    ws[i] = ldg_f32(w + c * RS + rs);  // weights are k x 1 x r x s in both layouts
  }
  __syncthreads();

  const int vecs = C / 8;
  const int strips = (cp.q + kStrip - 1) / kStrip;
  const std::int64_t total = std::int64_t(cp.n) * cp.p * strips * vecs;
  for (std::int64_t t = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < total;
       t += std::int64_t(gridDim.x) * blockDim.x) {
    const int v = int(t % vecs);
    std::int64_t rest = t / vecs;
    const int strip = int(rest % strips);
    rest /= strips;
    const int op = int(rest % cp.p);
    const int n = int(rest / cp.p);
    const int c0 = v * 8;
    const T* x_img = x + std::int64_t(n) * cp.h * cp.w * C + c0;
    const float* wc = ws + c0;
#pragma unroll
    for (int j = 0; j < kStrip; ++j) {
      const int oq = strip * kStrip + j;
      if (oq >= cp.q) break;
      float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
      for (int r = 0; r < cp.r; ++r) {
        const int ih = op * cp.stride_h - cp.pad_h + r * cp.dil_h;
        if (unsigned(ih) >= unsigned(cp.h)) continue;
        for (int s = 0; s < cp.s; ++s) {
          const int iw = oq * cp.stride_w - cp.pad_w + s * cp.dil_w;
          if (unsigned(iw) >= unsigned(cp.w)) continue;
          float xv[8];
          load8(x_img + (ih * cp.w + iw) * C, xv);
          const float4 w0 = *reinterpret_cast<const float4*>(wc + (r * cp.s + s) * C);
          const float4 w1 = *reinterpret_cast<const float4*>(wc + (r * cp.s + s) * C + 4);
          acc[0] = fmaf(xv[0], w0.x, acc[0]);
          acc[1] = fmaf(xv[1], w0.y, acc[1]);
          acc[2] = fmaf(xv[2], w0.z, acc[2]);
          acc[3] = fmaf(xv[3], w0.w, acc[3]);
          acc[4] = fmaf(xv[4], w1.x, acc[4]);
          acc[5] = fmaf(xv[5], w1.y, acc[5]);
          acc[6] = fmaf(xv[6], w1.z, acc[6]);
          acc[7] = fmaf(xv[7], w1.w, acc[7]);
        }
      }
      store8(y + ((std::int64_t(n) * cp.p + op) * cp.q + oq) * C + c0, acc);
    }
  }
}

// One channel plane row strip per thread; k = c * multiplier + m reads input channel k / multiplier.
template <typename T, bool kNhwc>
__global__ void __launch_bounds__(kThreads)
    depthwise_scalar_kernel(ConvParams cp, const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y) {
  const int strips = (cp.q + kStrip - 1) / kStrip;
  const int RS = cp.r * cp.s;
  const std::int64_t total = std::int64_t(cp.n) * cp.k * cp.p * strips;
  for (std::int64_t t = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < total;
       t += std::int64_t(gridDim.x) * blockDim.x) {
    int k, strip, op, n;
    std::int64_t rest = t;
    if (kNhwc) {  // channel fastest: neighbouring threads touch neighbouring addresses
      k = int(rest % cp.k);
      rest /= cp.k;
      strip = int(rest % strips);
      rest /= strips;
    } else {
      strip = int(rest % strips);
      rest /= strips;
      k = int(rest % cp.k);
      rest /= cp.k;
    }
    op = int(rest % cp.p);
    n = int(rest / cp.p);
    const int c = k / cp.kg;
    const T* wk = w + std::int64_t(k) * RS;
    float acc[kStrip] = {};
    for (int r = 0; r < cp.r; ++r) {
      const int ih = op * cp.stride_h - cp.pad_h + r * cp.dil_h;
      if (unsigned(ih) >= unsigned(cp.h)) continue;
      for (int s = 0; s < cp.s; ++s) {
        const float wv = ldg_f32(wk + r * cp.s + s);
#pragma unroll
        for (int j = 0; j < kStrip; ++j) {
          const int iw = (strip * kStrip + j) * cp.stride_w - cp.pad_w + s * cp.dil_w;
          if (unsigned(iw) >= unsigned(cp.w)) continue;
          const std::int64_t xi = kNhwc ? ((std::int64_t(n) * cp.h + ih) * cp.w + iw) * cp.c + c
                                        : ((std::int64_t(n) * cp.c + c) * cp.h + ih) * cp.w + iw;
          acc[j] = fmaf(ldg_f32(x + xi), wv, acc[j]);
        }
      }
    }
#pragma unroll
    for (int j = 0; j < kStrip; ++j) {
      const int oq = strip * kStrip + j;
      if (oq >= cp.q) break;
      const std::int64_t yi = kNhwc ? ((std::int64_t(n) * cp.p + op) * cp.q + oq) * cp.k + k
                                    : ((std::int64_t(n) * cp.k + k) * cp.p + op) * cp.q + oq;
      y[yi] = from_f32<T>(acc[j]);
    }
  }
}

bool use_vec8(const ConvParams& p) {
  return p.nhwc && p.k == p.c && p.c % 8 == 0 && std::int64_t(p.c) * p.r * p.s <= kMaxSmemWeights;
}

}  // namespace

void launch_conv_depthwise(const ConvParams& p, const void* x, const void* w, void* y, void* stream) {
  const GpuStream s = as_stream(stream);
  const int strips = (p.q + kStrip - 1) / kStrip;
  dispatch_dtype(p.dtype, "gpu.conv.depthwise", [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const T* xt = static_cast<const T*>(x);
    const T* wt = static_cast<const T*>(w);
    T* yt = static_cast<T*>(y);
    if (use_vec8(p)) {
      const std::int64_t total = std::int64_t(p.n) * p.p * strips * (p.c / 8);
      const int blocks = int(std::min<std::int64_t>((total + kThreads - 1) / kThreads, 1 << 20));
      const int smem = p.c * p.r * p.s * int(sizeof(float));
      depthwise_nhwc_vec8_kernel<T><<<blocks, kThreads, smem, s>>>(p, xt, wt, yt);
    } else {
      const std::int64_t total = std::int64_t(p.n) * p.k * p.p * strips;
      const int blocks = int(std::min<std::int64_t>((total + kThreads - 1) / kThreads, 1 << 20));
      if (p.nhwc)
        depthwise_scalar_kernel<T, true><<<blocks, kThreads, 0, s>>>(p, xt, wt, yt);
      else
        depthwise_scalar_kernel<T, false><<<blocks, kThreads, 0, s>>>(p, xt, wt, yt);
    }
  });
  check_launch("gpu.conv.depthwise");
}

}  // namespace galley::backends::gpu
