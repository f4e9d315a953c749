// im2col for the GEMM-based solvers (cuda.conv.cublas_gemm): unfolds the input so that a
// convolution becomes one (batched) matrix product. Padding becomes explicit zeros.
//   nchw: col[n][(c, r, s)][(p, q)]  -> y_n[k][pq] = w[k][crs] * col_n[crs][pq]
//   nhwc: col[(n, p, q)][(r, s, c)]  -> y[npq][k] = col[npq][rsc] * w[k][rsc]^T
#include "conv_device.cuh"

namespace galley::backends::gpu {
namespace {

template <typename T, bool kNhwc>
__global__ void im2col_kernel(ConvParams cp, const T* __restrict__ x, T* __restrict__ col, std::int64_t total) {
  const int RS = cp.r * cp.s;
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    int n, c, r, s, op, oq;
    std::int64_t rest = i;
    if (kNhwc) {
      c = int(rest % cp.c);
      rest /= cp.c;
      const int rs = int(rest % RS);
      rest /= RS;
      r = rs / cp.s;
      s = rs % cp.s;
      oq = int(rest % cp.q);
      rest /= cp.q;
      op = int(rest % cp.p);
      n = int(rest / cp.p);
    } else {
      oq = int(rest % cp.q);
      rest /= cp.q;
      op = int(rest % cp.p);
      rest /= cp.p;
      const int rs = int(rest % RS);
      rest /= RS;
      r = rs / cp.s;
      s = rs % cp.s;
      c = int(rest % cp.c);
      n = int(rest / cp.c);
    }
    const int ih = op * cp.stride_h - cp.pad_h + r * cp.dil_h;
    const int iw = oq * cp.stride_w - cp.pad_w + s * cp.dil_w;
    T v = from_f32<T>(0.f);
    if (unsigned(ih) < unsigned(cp.h) && unsigned(iw) < unsigned(cp.w))
      v = kNhwc ? x[((std::int64_t(n) * cp.h + ih) * cp.w + iw) * cp.c + c]
                : x[((std::int64_t(n) * cp.c + c) * cp.h + ih) * cp.w + iw];
    col[i] = v;
  }
}

}  // namespace

void launch_im2col(const ConvParams& p, const void* x, void* col, void* stream) {
  if (p.groups != 1) throw Error(Status::unsupported, "im2col: groups must be 1, got " + std::to_string(p.groups));
  const std::int64_t total = p.pixels() * p.c * p.r * p.s;
  const int blocks = int(std::min<std::int64_t>((total + 255) / 256, 1 << 20));
  dispatch_dtype(p.dtype, "im2col", [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    if (p.nhwc)
      im2col_kernel<T, true><<<blocks, 256, 0, as_stream(stream)>>>(p, static_cast<const T*>(x), static_cast<T*>(col), total);
    else
      im2col_kernel<T, false><<<blocks, 256, 0, as_stream(stream)>>>(p, static_cast<const T*>(x), static_cast<T*>(col), total);
  });
  check_launch("im2col");
}

}  // namespace galley::backends::gpu
