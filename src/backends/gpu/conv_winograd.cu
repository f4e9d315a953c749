// gpu.conv.winograd: Winograd F(4x4, 3x3) for fp32 3x3 stride-1 undilated ungrouped convolutions,
// NCHW or NHWC, in three memory-bound passes around one batched GEMM:
//   U[36][K][C]  = G g G^T      per (k, c)           (filter transform)
//   V[36][C][T]  = B^T d B      per (c, 6x6 tile)    (input transform, T = n * tiles_h * tiles_w)
//   M[36][K][T]  = U[i] * V[i]  for each of the 36 points i
//   y            = A^T m A      per (k, tile), 4x4 outputs each
// The 36 GEMMs are run as one grouped 1x1 convolution (groups = 36, n = 1, w = T) through
// gpu.conv.igemm_f32's kernel, so they get its tiling, double buffering and split-K. For NHWC
// the workspace tensors are channels-last ([T][36][C], [T][36][K]) so every pass stays coalesced.
// Per 4x4 output tile and (k, c) pair F(4x4,3x3) needs 36 products instead of 144 (4x less GEMM
// work), paid for with three memory-bound passes over tensors 36/16 = 2.25x the size of x and y.
//
// Matrices (Lavin & Gray, points 0, +-1, +-2, inf): winograd_f4x3.cuh.
#include <limits>

#include "conv_device.cuh"
#include "winograd_f4x3.cuh"

namespace galley::backends::gpu {
namespace {

constexpr int kThreads = 256;
constexpr std::size_t kAlign = 256;
// Longest run of input channels one GEMM accumulator sums before split-K takes over. Winograd-domain
// products are large and cancel in the output transform, so a long sequential fp32 sum costs
// accuracy: whole-C sums over 128 or 256 channels of 3x3 layers exceed the 1e-5 f32 tolerance,
// while 64-channel chunks, their partials summed in order, stay within it.
constexpr int kMaxChunk = 64;
std::size_t align_up(std::size_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

/// One thread per (k, c), c fastest. U[(i * K + k) * C + c], the 1x1 weights of the grouped GEMM.
template <bool kNhwc>
__global__ void __launch_bounds__(kThreads) winograd_filter_kernel(ConvParams p, const float* __restrict__ w,
                                                                     float* __restrict__ u) {
  const std::int64_t total = std::int64_t(p.k) * p.c;
  for (std::int64_t idx = std::int64_t(blockIdx.x) * kThreads + threadIdx.x; idx < total;
       idx += std::int64_t(gridDim.x) * kThreads) {
    const int k = int(idx / p.c), c = int(idx - std::int64_t(k) * p.c);
    float g[9];
#pragma unroll
    for (int rs = 0; rs < 9; ++rs)
      g[rs] = kNhwc ? __ldg(w + (std::int64_t(k) * 9 + rs) * p.c + c) : __ldg(w + (std::int64_t(k) * p.c + c) * 9 + rs);
    float t[6 * 3], v[36];
#pragma unroll
    for (int col = 0; col < 3; ++col) filter_1d(g + col, 3, t + col, 3);  // columns: t = G g
#pragma unroll
    for (int row = 0; row < 6; ++row) filter_1d(t + row * 3, 1, v + row * 6, 1);  // rows: (G g) G^T
#pragma unroll
    for (int i = 0; i < 36; ++i) u[(std::int64_t(i) * p.k + k) * p.c + c] = v[i];
  }
}

/// One thread per (c, tile): t fastest for NCHW, c fastest for NHWC (coalesced either way).
/// V: NCHW [36][C][T], NHWC [T][36][C].
template <bool kNhwc>
__global__ void __launch_bounds__(kThreads)
    winograd_input_kernel(ConvParams p, int tiles_h, int tiles_w, const float* __restrict__ x, float* __restrict__ v) {
  const int tiles = tiles_h * tiles_w;
  const std::int64_t t_count = std::int64_t(p.n) * tiles;
  const std::int64_t total = t_count * p.c;
  for (std::int64_t idx = std::int64_t(blockIdx.x) * kThreads + threadIdx.x; idx < total;
       idx += std::int64_t(gridDim.x) * kThreads) {
    std::int64_t t;
    int c;
    if (kNhwc) {
      t = idx / p.c;
      c = int(idx - t * p.c);
    } else {
      c = int(idx / t_count);
      t = idx - std::int64_t(c) * t_count;
    }
    int n, th, tw;
    tile_position(t, tiles_h, tiles_w, n, th, tw);
    float r[36];
    input_tile_transform<kNhwc>(p, x, n, c, th * 4 - p.pad_h, tw * 4 - p.pad_w, r);
#pragma unroll
    for (int i = 0; i < 36; ++i) {
      const std::int64_t at = kNhwc ? (t * 36 + i) * p.c + c : (std::int64_t(i) * p.c + c) * t_count + t;
      v[at] = r[i];
    }
  }
}

/// One thread per (k, tile), like the input pass; writes the tile's in-range outputs.
template <bool kNhwc>
__global__ void __launch_bounds__(kThreads)
    winograd_output_kernel(ConvParams p, int tiles_h, int tiles_w, const float* __restrict__ m, float* __restrict__ y) {
  const int tiles = tiles_h * tiles_w;
  const std::int64_t t_count = std::int64_t(p.n) * tiles;
  const std::int64_t total = t_count * p.k;
  for (std::int64_t idx = std::int64_t(blockIdx.x) * kThreads + threadIdx.x; idx < total;
       idx += std::int64_t(gridDim.x) * kThreads) {
    std::int64_t t;
    int k;
    if (kNhwc) {
      t = idx / p.k;
      k = int(idx - t * p.k);
    } else {
      k = int(idx / t_count);
      t = idx - std::int64_t(k) * t_count;
    }
    float a[36];
#pragma unroll
    for (int i = 0; i < 36; ++i)
      a[i] = __ldg(m + (kNhwc ? (t * 36 + i) * p.k + k : (std::int64_t(i) * p.k + k) * t_count + t));
    float tmp[4 * 6], out[16];
#pragma unroll
    for (int col = 0; col < 6; ++col) out_1d(a + col, 6, tmp + col, 6);  // A^T m
#pragma unroll
    for (int row = 0; row < 4; ++row) out_1d(tmp + row * 6, 1, out + row * 4, 1);  // (A^T m) A
    int n, th, tw;
    tile_position(t, tiles_h, tiles_w, n, th, tw);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int oh = th * 4 + i, ow = tw * 4 + j;
        if (oh >= p.p || ow >= p.q) continue;
        const std::int64_t at = kNhwc ? ((std::int64_t(n) * p.p + oh) * p.q + ow) * p.k + k
                                      : ((std::int64_t(n) * p.k + k) * p.p + oh) * p.q + ow;
        y[at] = out[i * 4 + j];
      }
    }
  }
}

int grid_for(std::int64_t total) { return int(std::min<std::int64_t>((total + kThreads - 1) / kThreads, 1 << 20)); }

}  // namespace

std::string winograd_refusal(const ConvParams& p) {
  if (p.dtype != DType::f32) return "f32 only (f16/bf16 run on the tensor-core solvers)";
  if (p.r != 3 || p.s != 3) return "needs a 3x3 filter, not " + std::to_string(p.r) + "x" + std::to_string(p.s);
  if (p.stride_h != 1 || p.stride_w != 1) return "needs stride 1";
  if (p.dil_h != 1 || p.dil_w != 1) return "needs dilation 1";
  if (p.groups != 1) return "needs groups == 1";
  // The transformed tensors go through the 32-bit GEMM kernel.
  const std::int64_t tiles = std::int64_t(p.n) * ceil_div(p.p, 4) * ceil_div(p.q, 4);
  const std::int64_t biggest = 36 * std::max({tiles * p.c, tiles * p.k, std::int64_t(p.k) * p.c});
  if (biggest > std::numeric_limits<int>::max())
    return "transformed tensors of " + std::to_string(biggest) + " elements (32-bit indexing)";
  return {};
}

WinogradPlan plan_winograd(const ConvParams& p, int sm_count) {
  WinogradPlan plan;
  plan.tiles_h = ceil_div(p.p, 4);
  plan.tiles_w = ceil_div(p.q, 4);
  const std::int64_t t_count = std::int64_t(p.n) * plan.tiles_h * plan.tiles_w;
  // winograd_refusal() keeps 36 * t_count * c within int.
  plan_winograd_gemm(plan, int(t_count), p.c, p.k, p.nhwc, ceil_div(p.c, kMaxChunk), true, sm_count);
  return plan;
}

void plan_winograd_gemm(WinogradPlan& plan, int pixels, int cg, int kg, bool nhwc, int min_splits,
                        bool u_is_weights, int sm_count) {
  ConvParams& g = plan.gemm;
  g.n = 1;
  g.c = 36 * cg;
  g.h = 1;
  g.w = pixels;
  g.k = 36 * kg;
  g.r = g.s = 1;
  g.groups = 36;
  g.p = 1;
  g.q = g.w;
  g.cg = cg;
  g.kg = kg;
  g.nhwc = nhwc;
  g.dtype = DType::f32;
  plan.gemm_plan = plan_igemm_f32(g, sm_count);
  if (plan.gemm_plan.splits < min_splits) plan.gemm_plan = igemm_f32_plan_for(g, plan.gemm_plan.tile, min_splits);
  const std::size_t u_elems = std::size_t(u_is_weights ? g.w_elems() : g.x_elems());
  const std::size_t v_elems = std::size_t(u_is_weights ? g.x_elems() : g.w_elems());
  plan.u_offset = 0;
  plan.v_offset = align_up(u_elems * sizeof(float));
  plan.m_offset = plan.v_offset + align_up(v_elems * sizeof(float));
  plan.gemm_offset = plan.m_offset + align_up(std::size_t(g.y_elems()) * sizeof(float));
  plan.workspace_bytes = plan.gemm_offset + plan.gemm_plan.workspace_bytes;
}

WinogradBuffers winograd_buffers(const WinogradPlan& plan, void* workspace, const std::string& who) {
  if (workspace == nullptr)
    throw Error(Status::invalid_argument,
                who + ": needs a workspace of " + std::to_string(plan.workspace_bytes) + " bytes, got none");
  auto* base = static_cast<unsigned char*>(workspace);
  WinogradBuffers b;
  b.u = reinterpret_cast<float*>(base + plan.u_offset);
  b.v = reinterpret_cast<float*>(base + plan.v_offset);
  b.m = reinterpret_cast<float*>(base + plan.m_offset);
  b.gemm = plan.gemm_plan.workspace_bytes > 0 ? base + plan.gemm_offset : nullptr;
  return b;
}

void launch_conv_winograd(const ConvParams& p, const WinogradPlan& plan, const void* x, const void* w, void* y,
                          void* workspace, void* stream) {
  if (auto why = winograd_refusal(p); !why.empty()) throw Error(Status::unsupported, "gpu.conv.winograd: " + why);
  const WinogradBuffers b = winograd_buffers(plan, workspace, "gpu.conv.winograd");
  float *u = b.u, *v = b.v, *m = b.m;
  const auto* xf = static_cast<const float*>(x);
  const auto* wf = static_cast<const float*>(w);
  auto* yf = static_cast<float*>(y);
  const GpuStream s = as_stream(stream);
  const std::int64_t t_count = std::int64_t(p.n) * plan.tiles_h * plan.tiles_w;
  const int gf = grid_for(std::int64_t(p.k) * p.c), gi = grid_for(t_count * p.c), go = grid_for(t_count * p.k);
  if (p.nhwc) {
    winograd_filter_kernel<true><<<gf, kThreads, 0, s>>>(p, wf, u);
    winograd_input_kernel<true><<<gi, kThreads, 0, s>>>(p, plan.tiles_h, plan.tiles_w, xf, v);
  } else {
    winograd_filter_kernel<false><<<gf, kThreads, 0, s>>>(p, wf, u);
    winograd_input_kernel<false><<<gi, kThreads, 0, s>>>(p, plan.tiles_h, plan.tiles_w, xf, v);
  }
  check_launch("gpu.conv.winograd: transforms");
  launch_conv_igemm_f32(plan.gemm, plan.gemm_plan, v, u, m, b.gemm, stream);
  if (p.nhwc) {
    winograd_output_kernel<true><<<go, kThreads, 0, s>>>(p, plan.tiles_h, plan.tiles_w, m, yf);
  } else {
    winograd_output_kernel<false><<<go, kThreads, 0, s>>>(p, plan.tiles_h, plan.tiles_w, m, yf);
  }
  check_launch("gpu.conv.winograd: output transform");
}

}  // namespace galley::backends::gpu
