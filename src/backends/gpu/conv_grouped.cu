// gpu.conv.grouped's kernel: grouped convolution with few channels per group (ResNeXt's 32 groups
// of 4-32 channels), where an implicit GEMM per group wastes most of its tile and a vendor
// library falls far below the memory roofline.
//
// Tensor-core path (CUDA, f16/bf16 NHWC, cg % 8 == 0, kg % 8 == 0): one warp computes 16 output
// pixels x 8 output channels of one group with mma.sync m16n8k8, one instruction per (tap, 8-input-
// channel chunk). Operands come straight from global memory in the mma register layout: a lane
// reads 2 channels (4 bytes) of 2 pixels, so a quad reads one group's 16 contiguous bytes and the
// 8 warps of a block read 8 neighbouring groups. Taps re-read neighbours through L1; weights are
// small and stay in L1/L2. No shared memory, no barriers: the kernel is latency-bound only if
// occupancy is low, so it keeps register use small.
#include "conv_mma.cuh"

namespace galley::backends::gpu {
namespace {

constexpr int kThreads = 256;

#if GALLEY_GPU_MMA
template <typename T, int kTaps>
__global__ void __launch_bounds__(kThreads)
    grouped_mma_kernel(ConvParams cp, const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y,
                       std::int64_t tasks) {
  const int lane = threadIdx.x & 31;
  const int gid = lane >> 2, tig = lane & 3;
  const int RS = kTaps > 0 ? kTaps : cp.r * cp.s;
  const int ntiles = cp.kg / 8, kchunks = cp.cg / 8;
  const int PQ = cp.p * cp.q;
  const int pixels = cp.n * PQ;
  const std::int64_t warps = std::int64_t(gridDim.x) * (blockDim.x >> 5);
  for (std::int64_t task = std::int64_t(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5); task < tasks;
       task += warps) {
    // task = (pixel tile, group, n-tile), n-tile fastest, then group: a block's warps share pixels.
    const int nt = int(task % ntiles);
    std::int64_t rest = task / ntiles;
    const int g = int(rest % cp.groups);
    const int tile = int(rest / cp.groups);
    int ih0[2], iw0[2], xoff[2];
    bool pix_ok[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int pix = tile * 16 + gid + h * 8;
      pix_ok[h] = pix < pixels;
      const int pp = pix_ok[h] ? pix : 0;
      const int nn = pp / PQ, pq = pp - nn * PQ;
      const int op = pq / cp.q, oq = pq - op * cp.q;
      ih0[h] = pix_ok[h] ? op * cp.stride_h - cp.pad_h : -(1 << 28);
      iw0[h] = oq * cp.stride_w - cp.pad_w;
      xoff[h] = nn * cp.h * cp.w * cp.c + g * cp.cg + tig * 2;
    }
    const int kout = g * cp.kg + nt * 8;
    const T* wrow = w + std::int64_t(kout + gid) * RS * cp.cg + tig * 2;
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll(kTaps > 0 ? kTaps : 1)
    for (int rs = 0; rs < RS; ++rs) {
      const int r = kTaps == 9 ? rs / 3 : rs / cp.s;
      const int s = rs - r * (kTaps == 9 ? 3 : cp.s);
      const T* xa[2];
      bool ok[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int ih = ih0[h] + r * cp.dil_h, iw = iw0[h] + s * cp.dil_w;
        ok[h] = unsigned(ih) < unsigned(cp.h) && unsigned(iw) < unsigned(cp.w);
        xa[h] = x + xoff[h] + (ih * cp.w + iw) * cp.c;
      }
      for (int kc = 0; kc < kchunks; ++kc) {
        const unsigned a0 = ok[0] ? __ldg(reinterpret_cast<const unsigned*>(xa[0] + kc * 8)) : 0u;
        const unsigned a1 = ok[1] ? __ldg(reinterpret_cast<const unsigned*>(xa[1] + kc * 8)) : 0u;
        const unsigned b = __ldg(reinterpret_cast<const unsigned*>(wrow + rs * cp.cg + kc * 8));
        mma::mma_1688<T>(acc, a0, a1, b);
      }
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if (!pix_ok[h]) continue;
      const int pix = tile * 16 + gid + h * 8;
      *reinterpret_cast<unsigned*>(y + std::int64_t(pix) * cp.k + kout + tig * 2) =
          pack2<T>(acc[2 * h], acc[2 * h + 1]);
    }
  }
}
#endif

}  // namespace

bool grouped_uses_mma(const ConvParams& p) {
  return GALLEY_GPU_MMA && p.nhwc && (p.dtype == DType::f16 || p.dtype == DType::bf16) && p.cg % 8 == 0 &&
         p.kg % 8 == 0;
}

void launch_conv_grouped(const ConvParams& p, const void* x, const void* w, void* y, void* stream) {
  if (!grouped_uses_mma(p))
    throw Error(Status::unsupported, "gpu.conv.grouped: needs f16/bf16 NHWC with channels per group % 8 == 0 "
                                     "on a build with tensor-core instructions");
#if GALLEY_GPU_MMA
  const std::int64_t tiles = (p.pixels() + 15) / 16;
  const std::int64_t tasks = tiles * p.groups * (p.kg / 8);
  const int warps_per_block = kThreads / 32;
  const int blocks = int(std::min<std::int64_t>((tasks + warps_per_block - 1) / warps_per_block, 1 << 20));
  const GpuStream s = as_stream(stream);
  auto go = [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const T* xt = static_cast<const T*>(x);
    const T* wt = static_cast<const T*>(w);
    T* yt = static_cast<T*>(y);
    if (p.r * p.s == 9 && p.r == 3)
      grouped_mma_kernel<T, 9><<<blocks, kThreads, 0, s>>>(p, xt, wt, yt, tasks);
    else
      grouped_mma_kernel<T, 0><<<blocks, kThreads, 0, s>>>(p, xt, wt, yt, tasks);
  };
  if (p.dtype == DType::f16)
    go(static_cast<__half*>(nullptr));
  else
    go(static_cast<bf16_t*>(nullptr));
  check_launch("gpu.conv.grouped");
#else
  (void)x, (void)w, (void)y, (void)stream;
#endif
}

}  // namespace galley::backends::gpu
