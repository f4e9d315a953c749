// gpu.conv.direct's kernel: one thread per output element, 64-bit indexing, every dtype, layout,
// stride, dilation and group count. It is the GPU list's safety net, not a fast path.
#include "conv_device.cuh"

namespace galley::backends::gpu {
namespace {

template <typename T, bool kNhwc>
__global__ void conv_direct_kernel(ConvParams cp, const T* __restrict__ x, const T* __restrict__ w,
                                   T* __restrict__ y, std::int64_t total) {
  const std::int64_t C = cp.c, H = cp.h, W = cp.w, K = cp.k, P = cp.p, Q = cp.q;
  for (std::int64_t idx = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += std::int64_t(gridDim.x) * blockDim.x) {
    std::int64_t n, k, op, oq;
    if (kNhwc) {
      k = idx % K;
      std::int64_t t = idx / K;
      oq = t % Q;
      t /= Q;
      op = t % P;
      n = t / P;
    } else {
      oq = idx % Q;
      std::int64_t t = idx / Q;
      op = t % P;
      t /= P;
      k = t % K;
      n = t / K;
    }
    const std::int64_t g = k / cp.kg;
    const std::int64_t c0 = g * cp.cg;
    float acc = 0.f;
    for (int r = 0; r < cp.r; ++r) {
      const std::int64_t ih = op * cp.stride_h - cp.pad_h + std::int64_t(r) * cp.dil_h;
      if (ih < 0 || ih >= H) continue;
      for (int s = 0; s < cp.s; ++s) {
        const std::int64_t iw = oq * cp.stride_w - cp.pad_w + std::int64_t(s) * cp.dil_w;
        if (iw < 0 || iw >= W) continue;
        if (kNhwc) {
          const T* xp = x + ((n * H + ih) * W + iw) * C + c0;
          const T* wp = w + ((k * cp.r + r) * cp.s + s) * cp.cg;
          for (int c = 0; c < cp.cg; ++c) acc += ldg_f32(xp + c) * ldg_f32(wp + c);
        } else {
          const T* xp = x + ((n * C + c0) * H + ih) * W + iw;
          const T* wp = w + (k * cp.cg * cp.r + r) * cp.s + s;
          const std::int64_t xs = H * W, ws = std::int64_t(cp.r) * cp.s;
          for (int c = 0; c < cp.cg; ++c) acc += ldg_f32(xp + c * xs) * ldg_f32(wp + c * ws);
        }
      }
    }
    y[idx] = from_f32<T>(acc);
  }
}

}  // namespace

void launch_conv_direct(const ConvParams& p, const void* x, const void* w, void* y, void* stream) {
  const std::int64_t total = p.y_elems();
  constexpr int kThreads = 256;
  // A grid-stride loop: cap the grid so huge outputs still launch (gridDim.x limits differ by vendor).
  const std::int64_t blocks = std::min<std::int64_t>((total + kThreads - 1) / kThreads, 65535LL * 32);
  dispatch_dtype(p.dtype, "gpu.conv.direct", [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    auto kernel = p.nhwc ? conv_direct_kernel<T, true> : conv_direct_kernel<T, false>;
    kernel<<<unsigned(blocks), kThreads, 0, as_stream(stream)>>>(p, static_cast<const T*>(x),
                                                                static_cast<const T*>(w), static_cast<T*>(y), total);
  });
  check_launch("gpu.conv.direct");
}

}  // namespace galley::backends::gpu
