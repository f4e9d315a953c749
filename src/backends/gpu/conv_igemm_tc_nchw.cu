// gpu.conv.igemm_tc_nchw: f16/bf16 NCHW on the tensor-core implicit GEMM of gpu.conv.igemm_tc.
//
// That kernel's loader wants NHWC activations and KRSC weights (8 channels = one 16-byte
// cp.async). So x is transposed NCHW -> NHWC into the workspace (one memory-bound pass: read and
// write x once), w KCRS -> KRSC likewise unless r*s == 1 (then both layouts are the same bytes),
// and the kernel's epilogue writes y as NCHW directly (kNchwOut in conv_igemm_tc.cu), so y never
// takes a second pass. Cost over NHWC: one read + one write of x (and of w).
//
// Workspace, each part 256-byte aligned: [x as NHWC][w as KRSC][split-K fp32 partials].
// On HIP (no mma.sync) the SIMT implicit GEMM runs on the NCHW tensors directly, as
// gpu.conv.igemm_tc's HIP fallback does for NHWC.
#include "conv_mma.cuh"

namespace galley::backends::gpu {
namespace {

#if GALLEY_GPU_MMA

constexpr std::size_t kAlign = 256;
constexpr int kTile = 64;  // transpose tile, elements per side
constexpr int kTransposeRowsPerPass = 8;

std::size_t align_up(std::size_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

/// Where the parts of the workspace are, for a problem and a split count.
struct NchwWorkspace {
  bool transpose_x = false, transpose_w = false;
  std::size_t x_bytes = 0, w_bytes = 0, partial_offset = 0, partial_bytes = 0, total = 0;
};

NchwWorkspace nchw_workspace(const ConvParams& p, int splits) {
  NchwWorkspace ws;
  // A transpose with one side of length 1 moves nothing: use the tensor as it is.
  ws.transpose_x = p.c > 1 && std::int64_t(p.h) * p.w > 1;
  ws.transpose_w = p.cg > 1 && p.r * p.s > 1;
  ws.x_bytes = ws.transpose_x ? align_up(std::size_t(p.x_elems()) * 2) : 0;
  ws.w_bytes = ws.transpose_w ? align_up(std::size_t(p.w_elems()) * 2) : 0;
  ws.partial_offset = ws.x_bytes + ws.w_bytes;
  ws.partial_bytes = splits > 1 ? std::size_t(splits) * std::size_t(p.y_elems()) * sizeof(float) : 0;
  ws.total = ws.partial_offset + ws.partial_bytes;
  return ws;
}

/// out[b][cols][rows] = in[b][rows][cols] for 16-bit elements, through a 64x64 shared tile so that
/// both the reads and the writes are coalesced; pairs of elements move as 32-bit words where the
/// row lengths are even. Block (32, 8); grid (cols / 64, rows / 64, batches, strided over b).
__global__ void __launch_bounds__(256)
    transpose16_kernel(const std::uint16_t* __restrict__ in, std::uint16_t* __restrict__ out, int batches,
                       int rows, int cols) {
  // +2 halves per row: rows stay 4-byte aligned for the paired accesses; column reads see 2-way
  // bank conflicts at most, cheap next to the global traffic.
  __shared__ std::uint16_t tile[kTile][kTile + 2];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int r0 = blockIdx.y * kTile, c0 = blockIdx.x * kTile;
  const bool pair_in = cols % 2 == 0, pair_out = rows % 2 == 0;
  const std::int64_t plane = std::int64_t(rows) * cols;
  for (int b = blockIdx.z; b < batches; b += gridDim.z) {
    const std::uint16_t* src = in + b * plane;
    std::uint16_t* dst = out + b * plane;
#pragma unroll
    for (int i = 0; i < kTile / kTransposeRowsPerPass; ++i) {
      const int lr = ty + kTransposeRowsPerPass * i, r = r0 + lr, c = c0 + 2 * tx;
      if (r >= rows) continue;
      const std::uint16_t* s = src + std::int64_t(r) * cols + c;
      if (pair_in && c + 1 < cols) {
        const std::uint32_t v = *reinterpret_cast<const std::uint32_t*>(s);
        tile[lr][2 * tx] = std::uint16_t(v & 0xffffu);
        tile[lr][2 * tx + 1] = std::uint16_t(v >> 16);
      } else {
        if (c < cols) tile[lr][2 * tx] = s[0];
        if (c + 1 < cols) tile[lr][2 * tx + 1] = s[1];
      }
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kTile / kTransposeRowsPerPass; ++i) {
      const int lc = ty + kTransposeRowsPerPass * i, c = c0 + lc, r = r0 + 2 * tx;
      if (c >= cols) continue;
      std::uint16_t* d = dst + std::int64_t(c) * rows + r;
      const std::uint16_t lo = tile[2 * tx][lc], hi = tile[2 * tx + 1][lc];
      if (pair_out && r + 1 < rows) {
        *reinterpret_cast<std::uint32_t*>(d) = std::uint32_t(lo) | (std::uint32_t(hi) << 16);
      } else {
        if (r < rows) d[0] = lo;
        if (r + 1 < rows) d[1] = hi;
      }
    }
    __syncthreads();  // the tile is reused by the next batch
  }
}

void launch_transpose16(const void* in, void* out, int batches, int rows, int cols, GpuStream stream) {
  const dim3 block(32, kTransposeRowsPerPass);
  const dim3 grid(ceil_div(cols, kTile), ceil_div(rows, kTile), std::min(batches, 65535));
  transpose16_kernel<<<grid, block, 0, stream>>>(static_cast<const std::uint16_t*>(in),
                                                 static_cast<std::uint16_t*>(out), batches, rows, cols);
  check_launch("gpu.conv.igemm_tc_nchw: transpose");
}

#endif  // GALLEY_GPU_MMA

}  // namespace

IgemmPlan igemm_tc_nchw_plan_for(const ConvParams& p, int tile, int splits) {
#if GALLEY_GPU_MMA
  ConvParams view = p;
  view.nhwc = true;  // the GEMM's shape does not depend on the layout; the kernel sees NHWC
  IgemmPlan plan = igemm_tc_without_wgmma(view, igemm_tc_plan_for(view, tile, splits));
  plan.workspace_bytes = nchw_workspace(p, plan.splits).total;
  return plan;
#else
  return igemm_f32_plan_for(p, tile, splits);
#endif
}

IgemmPlan plan_igemm_tc_nchw(const ConvParams& p, int sm_count) {
#if GALLEY_GPU_MMA
  ConvParams view = p;
  view.nhwc = true;
  const IgemmPlan model = plan_igemm_tc(view, sm_count, /*wgmma=*/false);
#else
  const IgemmPlan model = plan_igemm_f32(p, sm_count);
#endif
  return igemm_tc_nchw_plan_for(p, model.tile, model.splits);
}

void launch_conv_igemm_tc_nchw(const ConvParams& p, const IgemmPlan& plan, const void* x, const void* w,
                               void* y, void* workspace, void* stream) {
#if GALLEY_GPU_MMA
  if (p.nhwc || (p.dtype != DType::f16 && p.dtype != DType::bf16))
    throw Error(Status::unsupported, "gpu.conv.igemm_tc_nchw: needs f16/bf16 NCHW");
  const NchwWorkspace ws = nchw_workspace(p, plan.splits);
  if (ws.total > 0 && workspace == nullptr)
    throw Error(Status::invalid_argument, "gpu.conv.igemm_tc_nchw: needs a workspace of " +
                                              std::to_string(ws.total) + " bytes, got none");
  unsigned char* base = static_cast<unsigned char*>(workspace);
  const GpuStream s = as_stream(stream);
  const void* xt = x;
  const void* wt = w;
  if (ws.transpose_x) {  // x[n][c][h*w] -> [n][h*w][c]
    launch_transpose16(x, base, p.n, p.c, p.h * p.w, s);
    xt = base;
  }
  if (ws.transpose_w) {  // w[k][cg][r*s] -> [k][r*s][cg]
    launch_transpose16(w, base + ws.x_bytes, p.k, p.cg, p.r * p.s, s);
    wt = base + ws.x_bytes;
  }
  ConvParams view = p;
  view.nhwc = true;
  IgemmPlan tc = plan;
  tc.workspace_bytes = ws.partial_bytes;
  launch_conv_igemm_tc_nchw_out(view, tc, xt, wt, y,
                                ws.partial_bytes > 0 ? base + ws.partial_offset : nullptr, stream);
#else
  launch_conv_igemm_f32(p, plan, x, w, y, workspace, stream);
#endif
}

}  // namespace galley::backends::gpu
