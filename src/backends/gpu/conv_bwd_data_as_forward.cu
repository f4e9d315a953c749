// The kernels that let a forward convolution solver compute backward-data (conv_bwd_solvers.cu's
// BwdDataAsForward): with unit stride, dx[h] = sum_r dy[h + pad - r * dil] * w[r] is a forward
// convolution of dy with the filter flipped in both spatial axes and its k and c swapped, padded by
// (r - 1) * dil - pad, whose output is H x W again. A 1x1 filter with a stride and no padding touches
// only the dx pixels on the stride's grid: there dx is a forward 1x1 convolution of dy (written compact
// into the workspace), everywhere else zero.
#include "conv_bwd_kernels.hpp"
#include "conv_device.cuh"

namespace galley::backends::gpu {
namespace {

constexpr int kThreads = 256;

unsigned grid_for(std::int64_t total) {
  return unsigned(std::min<std::int64_t>((total + kThreads - 1) / kThreads, 65535LL * 8));
}

// flipped is the view's filter: (c, r, s, k) for nhwc, (c, k, r, s) for nchw, from w's (k, r, s, c)
// or (k, c, r, s), both spatial axes reversed.
template <typename T, bool kNhwc>
__global__ void flip_filter_kernel(const T* __restrict__ w, T* __restrict__ flipped, int K, int C, int R,
                                   int S, int total) {
  for (int idx = blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += gridDim.x * blockDim.x) {
    int k, c, r, s, t = idx;
    if (kNhwc) {
      k = t % K, t /= K;
      s = t % S, t /= S;
      r = t % R, c = t / R;
      flipped[idx] = w[((k * R + (R - 1 - r)) * S + (S - 1 - s)) * C + c];
    } else {
      s = t % S, t /= S;
      r = t % R, t /= R;
      k = t % K, c = t / K;
      flipped[idx] = w[((k * C + c) * R + (R - 1 - r)) * S + (S - 1 - s)];
    }
  }
}

// dx from the compact product on the stride grid (n, p, q, c) or (n, c, p, q); zero off the grid.
template <typename T, bool kNhwc>
__global__ void scatter_stride_grid_kernel(const T* __restrict__ compact, T* __restrict__ dx, int C, int H,
                                           int W, int P, int Q, int stride_h, int stride_w, int total) {
  for (int idx = blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += gridDim.x * blockDim.x) {
    int n, c, y, x, t = idx;
    if (kNhwc) {
      c = t % C, t /= C;
      x = t % W, t /= W;
      y = t % H, n = t / H;
    } else {
      x = t % W, t /= W;
      y = t % H, t /= H;
      c = t % C, n = t / C;
    }
    T v = from_f32<T>(0.f);
    if (y % stride_h == 0 && x % stride_w == 0) {
      const int p = y / stride_h, q = x / stride_w;
      if (p < P && q < Q) v = compact[kNhwc ? ((n * P + p) * Q + q) * C + c : ((n * C + c) * P + p) * Q + q];
    }
    dx[idx] = v;
  }
}

}  // namespace

void launch_flip_filter(const ConvParams& p, const void* w, void* flipped, void* stream) {
  dispatch_dtype(p.dtype, "backward-data filter flip", [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const int total = int(p.w_elems());
    auto kernel = p.nhwc ? flip_filter_kernel<T, true> : flip_filter_kernel<T, false>;
    kernel<<<grid_for(total), kThreads, 0, as_stream(stream)>>>(
        static_cast<const T*>(w), static_cast<T*>(flipped), p.k, p.c, p.r, p.s, total);
  });
  check_launch("backward-data filter flip");
}

void launch_scatter_stride_grid(const ConvParams& p, const void* compact, void* dx, void* stream) {
  dispatch_dtype(p.dtype, "backward-data stride-grid scatter", [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const int total = int(p.x_elems());
    auto kernel = p.nhwc ? scatter_stride_grid_kernel<T, true> : scatter_stride_grid_kernel<T, false>;
    kernel<<<grid_for(total), kThreads, 0, as_stream(stream)>>>(static_cast<const T*>(compact),
                                                                static_cast<T*>(dx), p.c, p.h, p.w, p.p, p.q,
                                                                p.stride_h, p.stride_w, total);
  });
  check_launch("backward-data stride-grid scatter");
}

}  // namespace galley::backends::gpu
