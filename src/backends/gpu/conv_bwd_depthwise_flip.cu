// Depthwise backward-data as a forward depthwise convolution. With unit stride and multiplier 1,
//   dx[n,c,h,w] = sum_{r,s} dy[n,c, h + pad_h - r*dil_h, w + pad_w - s*dil_w] * w[c,r,s]
// and substituting r' = R-1-r, s' = S-1-s turns it into
//   dx[n,c,h,w] = sum_{r',s'} dy[n,c, h - pad'_h + r'*dil_h, w - pad'_w + s'*dil_w] * w[c,R-1-r',S-1-s']
// with pad' = (R-1)*dil - pad: the forward convolution of dy (P x Q) with the flipped filter, whose
// output is H x W again (P + 2 pad' - (R-1) dil = H). dy taps outside P x Q are the forward kernels'
// zero padding, which needs pad' >= 0, i.e. pad <= (R-1)*dil. So the forward kernels' tiles, vector
// loads and staged rows serve the backward pass too, at the cost of one tiny filter copy.
#include "conv_bwd_kernels.hpp"
#include "conv_device.cuh"

namespace galley::backends::gpu {
namespace {

template <typename T>
__global__ void flip_depthwise_filter_kernel(const T* __restrict__ w, T* __restrict__ flipped, int filters,
                                             int taps) {
  const int total = filters * taps;  // < 2^31: the flipped path requires 32-bit tensors
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
    const int filter = i / taps, tap = i - filter * taps;
    // (r, s) -> (R-1-r, S-1-s) is tap -> taps-1-tap in row-major r x s order.
    flipped[i] = w[filter * taps + (taps - 1 - tap)];
  }
}

}  // namespace

ConvParams depthwise_bwd_data_as_forward(const ConvParams& p) {
  ConvParams f = p;  // n, r, s, dilation, groups, layout and dtype carry over
  f.c = p.k;
  f.h = p.p;
  f.w = p.q;
  f.k = p.c;
  f.p = p.h;
  f.q = p.w;
  f.pad_h = (p.r - 1) * p.dil_h - p.pad_h;
  f.pad_w = (p.s - 1) * p.dil_w - p.pad_w;
  f.stride_h = 1;
  f.stride_w = 1;
  f.cg = 1;
  f.kg = 1;
  return f;
}

void launch_flip_depthwise_filter(const ConvParams& p, const void* w, void* flipped, void* stream) {
  const int taps = p.r * p.s;
  const std::int64_t total = std::int64_t(p.k) * taps;
  const int blocks = int(std::clamp<std::int64_t>((total + 255) / 256, 1, 4096));
  dispatch_dtype(p.dtype, "gpu.conv.bwd_data_depthwise filter flip", [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    flip_depthwise_filter_kernel<T><<<blocks, 256, 0, as_stream(stream)>>>(
        static_cast<const T*>(w), static_cast<T*>(flipped), p.k, taps);
  });
  check_launch("gpu.conv.bwd_data_depthwise filter flip");
}

}  // namespace galley::backends::gpu
