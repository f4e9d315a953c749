// gpu.conv.bwd_weights_winograd: the weight gradient of fp32 3x3 stride-1 undilated ungrouped
// convolutions, NCHW or NHWC, as Winograd F(3x3, 4x4), the transpose of gpu.conv.winograd's F(4x4, 3x3)
// (winograd_f4x3.cuh). dw[k][c] = sum over 4x4 tiles of dy (tile t of T = n * tiles_h * tiles_w) of the
// 3x3 correlation of the 6x6 x tile under it with that dy tile:
//   U[K][36][T]  = A e A^T   per (k, tile)     (output-gradient transform)
//   V[36][C][T]  = B^T d B   per (c, tile)     (input transform, the forward's)
//   M[K][36][C]  = sum over t of U[k][i][t] V[i][c][t]   for each of the 36 points i
//   dw           = G^T m G   per (k, c)
// The 36 GEMMs reduce over the tiles, so they run as one grouped 1x1 convolution (groups = 36) whose
// pixels are k and whose channels are the tiles, NHWC, through gpu.conv.igemm_f32's kernel with its
// tiling and split-K. Per tile and (k, c) it takes 36 products instead of 144, for three memory-bound
// passes over the transformed tensors.
#include <algorithm>

#include "conv_bwd_kernels.hpp"
#include "conv_device.cuh"
#include "winograd_f4x3.cuh"

namespace galley::backends::gpu {
namespace {

constexpr int kThreads = 256;
// Longest run of tiles one GEMM accumulator sums before split-K takes over: the Winograd-domain
// products are large and cancel in the output transform, so shorter sequential fp32 sums, their
// partials added in a fixed order, keep the rounding near a direct sum's.
constexpr int kMaxChunkTiles = 256;
int grid_for(std::int64_t total) {
  return int(std::min<std::int64_t>((total + kThreads - 1) / kThreads, 1 << 20));
}

/// One thread per (k, tile), tile fastest (so U's rows are written coalesced): U[(k * 36 + i) * T + t].
template <bool kNhwc>
__global__ void __launch_bounds__(kThreads)
    grad_transform_kernel(ConvParams p, int tiles_h, int tiles_w, const float* __restrict__ dy,
                          float* __restrict__ u) {
  const int tiles = tiles_h * tiles_w;
  const std::int64_t t_count = std::int64_t(p.n) * tiles;
  const std::int64_t total = t_count * p.k;
  for (std::int64_t idx = std::int64_t(blockIdx.x) * kThreads + threadIdx.x; idx < total;
       idx += std::int64_t(gridDim.x) * kThreads) {
    const int k = int(idx / t_count);
    const std::int64_t t = idx - std::int64_t(k) * t_count;
    int n, th, tw;
    tile_position(t, tiles_h, tiles_w, n, th, tw);
    float e[16];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int oh = th * 4 + i, ow = tw * 4 + j;
        const bool ok = oh < p.p && ow < p.q;
        const std::int64_t at = kNhwc ? ((std::int64_t(n) * p.p + oh) * p.q + ow) * p.k + k
                                      : ((std::int64_t(n) * p.k + k) * p.p + oh) * p.q + ow;
        e[i * 4 + j] = ok ? __ldg(dy + at) : 0.f;
      }
    }
    float tmp[6 * 4], r[36];
#pragma unroll
    for (int col = 0; col < 4; ++col) grad_1d(e + col, 4, tmp + col, 4);  // A e
#pragma unroll
    for (int row = 0; row < 6; ++row) grad_1d(tmp + row * 4, 1, r + row * 6, 1);  // (A e) A^T
#pragma unroll
    for (int i = 0; i < 36; ++i) u[(std::int64_t(k) * 36 + i) * t_count + t] = r[i];
  }
}

/// One thread per (c, tile), tile fastest: V[(i * C + c) * T + t], the 6x6 x tile at
/// (4 * th - pad_h, 4 * tw - pad_w), zero outside x.
template <bool kNhwc>
__global__ void __launch_bounds__(kThreads)
    input_transform_kernel(ConvParams p, int tiles_h, int tiles_w, const float* __restrict__ x,
                           float* __restrict__ v) {
  const int tiles = tiles_h * tiles_w;
  const std::int64_t t_count = std::int64_t(p.n) * tiles;
  const std::int64_t total = t_count * p.c;
  for (std::int64_t idx = std::int64_t(blockIdx.x) * kThreads + threadIdx.x; idx < total;
       idx += std::int64_t(gridDim.x) * kThreads) {
    const int c = int(idx / t_count);
    const std::int64_t t = idx - std::int64_t(c) * t_count;
    int n, th, tw;
    tile_position(t, tiles_h, tiles_w, n, th, tw);
    float r[36];
    input_tile_transform<kNhwc>(p, x, n, c, th * 4 - p.pad_h, tw * 4 - p.pad_w, r);
#pragma unroll
    for (int i = 0; i < 36; ++i) v[(std::int64_t(i) * p.c + c) * t_count + t] = r[i];
  }
}

/// One thread per (k, c), c fastest: the 36 sums M[(k * 36 + i) * C + c] to dw's 3x3 taps.
template <bool kNhwc>
__global__ void __launch_bounds__(kThreads)
    weight_transform_kernel(ConvParams p, const float* __restrict__ m, float* __restrict__ dw) {
  const std::int64_t total = std::int64_t(p.k) * p.c;
  for (std::int64_t idx = std::int64_t(blockIdx.x) * kThreads + threadIdx.x; idx < total;
       idx += std::int64_t(gridDim.x) * kThreads) {
    const int k = int(idx / p.c), c = int(idx - std::int64_t(k) * p.c);
    float a[36];
#pragma unroll
    for (int i = 0; i < 36; ++i) a[i] = __ldg(m + (std::int64_t(k) * 36 + i) * p.c + c);
    float tmp[3 * 6], out[9];
#pragma unroll
    for (int col = 0; col < 6; ++col) weight_grad_1d(a + col, 6, tmp + col, 6);  // G^T m
#pragma unroll
    for (int row = 0; row < 3; ++row) weight_grad_1d(tmp + row * 6, 1, out + row * 3, 1);  // (G^T m) G
#pragma unroll
    for (int rs = 0; rs < 9; ++rs)
      dw[kNhwc ? (std::int64_t(k) * 9 + rs) * p.c + c : (std::int64_t(k) * p.c + c) * 9 + rs] = out[rs];
  }
}

std::int64_t tile_count(const ConvParams& p) {
  return std::int64_t(p.n) * ceil_div(p.p, 4) * ceil_div(p.q, 4);
}

}  // namespace

WinogradPlan plan_bwd_weights_winograd(const ConvParams& p, int sm_count) {
  WinogradPlan plan;
  plan.tiles_h = ceil_div(p.p, 4);
  plan.tiles_w = ceil_div(p.q, 4);
  const std::int64_t t_count = tile_count(p);
  // The GEMM's pixels are k, its channels the tiles (winograd_refusal() keeps 36 * tiles
  // within int); U (dy's transform) is its activations, V (x's) its weights, NHWC whatever p's layout.
  plan_winograd_gemm(plan, p.k, int(t_count), p.c, true, int(ceil_div(t_count, std::int64_t(kMaxChunkTiles))),
                     false, sm_count);
  return plan;
}

void launch_conv_bwd_weights_winograd(const ConvParams& p, const WinogradPlan& plan, const void* x,
                                      const void* dy, void* dw, void* workspace, void* stream) {
  if (auto why = winograd_refusal(p); !why.empty())
    throw Error(Status::unsupported, "gpu.conv.bwd_weights_winograd: " + why);
  const WinogradBuffers b = winograd_buffers(plan, workspace, "gpu.conv.bwd_weights_winograd");
  float *u = b.u, *v = b.v, *m = b.m;
  const auto* xf = static_cast<const float*>(x);
  const auto* dyf = static_cast<const float*>(dy);
  auto* dwf = static_cast<float*>(dw);
  const GpuStream s = as_stream(stream);
  const std::int64_t t_count = tile_count(p);
  const int gu = grid_for(t_count * p.k), gv = grid_for(t_count * p.c),
            gw = grid_for(std::int64_t(p.k) * p.c);
  if (p.nhwc) {
    grad_transform_kernel<true><<<gu, kThreads, 0, s>>>(p, plan.tiles_h, plan.tiles_w, dyf, u);
    input_transform_kernel<true><<<gv, kThreads, 0, s>>>(p, plan.tiles_h, plan.tiles_w, xf, v);
  } else {
    grad_transform_kernel<false><<<gu, kThreads, 0, s>>>(p, plan.tiles_h, plan.tiles_w, dyf, u);
    input_transform_kernel<false><<<gv, kThreads, 0, s>>>(p, plan.tiles_h, plan.tiles_w, xf, v);
  }
  check_launch("gpu.conv.bwd_weights_winograd: transforms");
  launch_conv_igemm_f32(plan.gemm, plan.gemm_plan, u, v, m, b.gemm, stream);
  if (p.nhwc)
    weight_transform_kernel<true><<<gw, kThreads, 0, s>>>(p, m, dwf);
  else
    weight_transform_kernel<false><<<gw, kThreads, 0, s>>>(p, m, dwf);
  check_launch("gpu.conv.bwd_weights_winograd: weight transform");
}

}  // namespace galley::backends::gpu
