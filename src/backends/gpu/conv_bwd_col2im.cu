// col2im for cuda.conv.cublas_bwd_data: folds the fp32 column matrix of a backward-data GEMM back
// into dx. Each dx element gathers its (r, s) taps (those whose dy pixel exists), so there are no
// atomics and the sum order is fixed. Column layouts as launch_im2col's (groups == 1):
//   nchw: col[n][(c, r, s)][(p, q)]      nhwc: col[(n, p, q)][(r, s, c)]
#include "conv_bwd_kernels.hpp"
#include "conv_device.cuh"

namespace galley::backends::gpu {
namespace {

template <typename T, bool kNhwc>
__global__ void col2im_kernel(ConvParams cp, const float* __restrict__ col, T* __restrict__ dx,
                              std::int64_t total) {
  const std::int64_t RS = std::int64_t(cp.r) * cp.s, PQ = std::int64_t(cp.p) * cp.q;
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    std::int64_t n, c, h, w;
    if (kNhwc) {
      c = i % cp.c;
      std::int64_t t = i / cp.c;
      w = t % cp.w;
      t /= cp.w;
      h = t % cp.h;
      n = t / cp.h;
    } else {
      w = i % cp.w;
      std::int64_t t = i / cp.w;
      h = t % cp.h;
      t /= cp.h;
      c = t % cp.c;
      n = t / cp.c;
    }
    float acc = 0.f;
    for (int r = 0; r < cp.r; ++r) {
      const std::int64_t th = h + cp.pad_h - std::int64_t(r) * cp.dil_h;
      if (th < 0 || th % cp.stride_h != 0 || th / cp.stride_h >= cp.p) continue;
      const std::int64_t op = th / cp.stride_h;
      for (int s = 0; s < cp.s; ++s) {
        const std::int64_t tw = w + cp.pad_w - std::int64_t(s) * cp.dil_w;
        if (tw < 0 || tw % cp.stride_w != 0 || tw / cp.stride_w >= cp.q) continue;
        const std::int64_t oq = tw / cp.stride_w;
        const std::int64_t tap = std::int64_t(r) * cp.s + s;
        acc += kNhwc ? col[((n * cp.p + op) * cp.q + oq) * RS * cp.c + tap * cp.c + c]
                     : col[(n * cp.c * RS + c * RS + tap) * PQ + op * cp.q + oq];
      }
    }
    dx[i] = from_f32<T>(acc);
  }
}

}  // namespace

void launch_bwd_col2im(const ConvParams& p, const float* col, void* dx, void* stream) {
  if (p.groups != 1)
    throw Error(Status::unsupported, "col2im: groups must be 1, got " + std::to_string(p.groups));
  const std::int64_t total = p.x_elems();
  const int blocks = int(std::clamp<std::int64_t>((total + 255) / 256, 1, 1 << 20));
  dispatch_dtype(p.dtype, "col2im", [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    auto kernel = p.nhwc ? col2im_kernel<T, true> : col2im_kernel<T, false>;
    kernel<<<blocks, 256, 0, as_stream(stream)>>>(p, col, static_cast<T*>(dx), total);
  });
  check_launch("col2im");
}

}  // namespace galley::backends::gpu
