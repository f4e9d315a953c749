// Backward-data as a forward convolution, so that it runs on gpu.conv.igemm_tc's tensor-core implicit
// GEMM (cp.async pipeline, wgmma tiles on Hopper) instead of a kernel of its own.
//
// With unit stride, dx[h] = sum_r dy[h + pad - r * dil] * w[r] is a forward convolution of dy with
// the filter flipped in both spatial axes, its k and c swapped, and padding (r - 1) * dil - pad: the
// output is H x W again. A 1x1 filter with a stride and no padding touches only the dx pixels on the
// stride's grid: there dx is dy times the transposed filter (a forward 1x1 convolution over dy's
// pixels, written compact into the workspace), everywhere else zero.
#include "conv_bwd_kernels.hpp"
#include "conv_device.cuh"

namespace galley::backends::gpu {
namespace {

constexpr int kThreads = 256;
constexpr std::size_t kAlign = 256;

std::size_t aligned(std::size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

bool unit_stride(const ConvParams& p) { return p.stride_h == 1 && p.stride_w == 1; }

// w (k, r, s, c) -> flipped (c, r, s, k) with both spatial axes reversed.
template <typename T>
__global__ void flip_filter_kernel(const T* __restrict__ w, T* __restrict__ flipped, int K, int R, int S,
                                   int C, int total) {
  for (int idx = blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += gridDim.x * blockDim.x) {
    const int k = idx % K;
    int t = idx / K;
    const int s = t % S;
    t /= S;
    const int r = t % R;
    const int c = t / R;
    flipped[idx] = w[((k * R + (R - 1 - r)) * S + (S - 1 - s)) * C + c];
  }
}

// dx (n, h, w, c) from the compact product on the stride grid (n, p, q, c); zero off the grid.
template <typename T>
__global__ void scatter_strided_kernel(const T* __restrict__ compact, T* __restrict__ dx, int H, int W, int C,
                                       int P, int Q, int stride_h, int stride_w, int total) {
  for (int idx = blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += gridDim.x * blockDim.x) {
    const int c = idx % C;
    int t = idx / C;
    const int x = t % W;
    t /= W;
    const int y = t % H;
    const int n = t / H;
    T v = from_f32<T>(0.f);
    if (y % stride_h == 0 && x % stride_w == 0) {
      const int p = y / stride_h, q = x / stride_w;
      if (p < P && q < Q) v = compact[((n * P + p) * Q + q) * C + c];
    }
    dx[idx] = v;
  }
}

unsigned grid_for(std::int64_t total) {
  return unsigned(std::min<std::int64_t>((total + kThreads - 1) / kThreads, 65535LL * 8));
}

std::size_t element_bytes(DType dtype) { return dtype == DType::f32 ? 4 : 2; }

}  // namespace

std::string bwd_data_tc_refusal(const ConvParams& p) {
  if (!p.nhwc) return "needs nhwc layout";
  if (p.dtype != DType::f16 && p.dtype != DType::bf16) return "needs f16 or bf16 (tensor cores)";
  if (p.groups != 1) return "groups " + std::to_string(p.groups) + " (needs 1)";
  if (unit_stride(p)) {
    if (p.pad_h > p.dil_h * (p.r - 1) || p.pad_w > p.dil_w * (p.s - 1))
      return "padding " + std::to_string(p.pad_h) + "x" + std::to_string(p.pad_w) +
             " beyond the filter's dilated extent less one (the flipped filter would need a negative pad)";
    return {};
  }
  if (p.r == 1 && p.s == 1 && p.pad_h == 0 && p.pad_w == 0) return {};
  return "stride " + std::to_string(p.stride_h) + "x" + std::to_string(p.stride_w) +
         " with a filter larger than 1x1 or padding (unit stride, or a 1x1 filter without padding)";
}

ConvParams bwd_data_tc_view(const ConvParams& p) {
  ConvParams v = p;
  v.c = v.cg = p.k;
  v.k = v.kg = p.c;
  v.h = p.p;
  v.w = p.q;
  v.groups = 1;
  v.stride_h = v.stride_w = 1;
  if (unit_stride(p)) {
    v.pad_h = p.dil_h * (p.r - 1) - p.pad_h;
    v.pad_w = p.dil_w * (p.s - 1) - p.pad_w;
    v.p = p.h;
    v.q = p.w;
  } else {  // 1x1, no padding: the compact product on dy's own pixels
    v.pad_h = v.pad_w = 0;
    v.dil_h = v.dil_w = 1;
    v.p = p.p;
    v.q = p.q;
  }
  return v;
}

BwdDataTcLayout bwd_data_tc_layout(const ConvParams& p, const IgemmPlan& plan) {
  const std::size_t elem = element_bytes(p.dtype);
  BwdDataTcLayout out;
  out.compact_offset = aligned(std::size_t(p.w_elems()) * elem);
  const std::size_t compact =
      unit_stride(p)
          ? 0
          : aligned(std::size_t(p.n) * std::size_t(p.p) * std::size_t(p.q) * std::size_t(p.c) * elem);
  out.gemm_offset = out.compact_offset + compact;
  out.workspace_bytes = out.gemm_offset + plan.workspace_bytes;
  return out;
}

void launch_conv_bwd_data_tc(const ConvParams& p, const IgemmPlan& plan, const void* dy, const void* w,
                             void* dx, void* workspace, void* stream) {
  if (workspace == nullptr) throw Error(Status::invalid_argument, "gpu.conv.bwd_data_tc: no workspace");
  const ConvParams view = bwd_data_tc_view(p);
  const BwdDataTcLayout layout = bwd_data_tc_layout(p, plan);
  auto* base = static_cast<unsigned char*>(workspace);
  void* flipped = base;
  void* compact = base + layout.compact_offset;
  void* gemm_workspace = plan.workspace_bytes > 0 ? base + layout.gemm_offset : nullptr;
  dispatch_dtype(p.dtype, "gpu.conv.bwd_data_tc", [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const int filter = int(p.w_elems());
    flip_filter_kernel<T><<<grid_for(filter), kThreads, 0, as_stream(stream)>>>(
        static_cast<const T*>(w), static_cast<T*>(flipped), p.k, p.r, p.s, p.c, filter);
  });
  check_launch("gpu.conv.bwd_data_tc (filter flip)");
  if (unit_stride(p)) {
    launch_conv_igemm_tc(view, plan, dy, flipped, dx, gemm_workspace, stream);
    return;
  }
  launch_conv_igemm_tc(view, plan, dy, flipped, compact, gemm_workspace, stream);
  dispatch_dtype(p.dtype, "gpu.conv.bwd_data_tc", [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const int total = int(p.x_elems());
    scatter_strided_kernel<T><<<grid_for(total), kThreads, 0, as_stream(stream)>>>(
        static_cast<const T*>(compact), static_cast<T*>(dx), p.h, p.w, p.c, p.p, p.q, p.stride_h, p.stride_w,
        total);
  });
  check_launch("gpu.conv.bwd_data_tc (strided scatter)");
}

}  // namespace galley::backends::gpu
