// gpu.conv.igemm_f32's kernel: implicit GEMM on the SIMT cores in fp32 (f16/bf16 are loaded and
// converted, so the same kernel serves as the HIP build's tensor-core stand-in).
//
// Per group: D[M = kg out channels][N = n*p*q pixels] = A[M][kred] * B[kred][N], where A is the
// weights and B the im2col of the input, gathered on the fly. A 256-thread block computes a
// BM x BN tile with 8x8 (or 4x4, 4x8...) outer products per thread, BK = 8 reduction rows per step,
// double-buffered in shared memory with the next step's global loads in flight during the math.
//
// The reduction runs tap by tap, 8 channels at a time ("chunk" mode, cg % 8 == 0), so the input
// address of a thread's 4 rows needs one bounds check per step; other cg use "flat" mode, which
// walks kred in the weights' storage order and decodes each element. Optional split-K writes fp32
// partials to a workspace that launch_splitk_reduce sums.
#include <cmath>

#include "conv_device.cuh"

namespace galley::backends::gpu {
namespace {

constexpr int kThreads = 256;

struct TileShape {
  int bm, bn, bk;
  int blocks_per_sm;
  double efficiency;  // relative per-block throughput, for the planner
  bool planned;       // considered by the planner (others exist for measurement)
};
// Block tiles: BM over output channels, BN over pixels, BK reduction rows per step. Tiles 4 and 5
// double BK so each barrier and each global-load round trip covers twice the math; the planner
// takes them in place of their BK 8 twins (tiles 0 and 2), which stay for measurement.
constexpr TileShape kTiles[] = {{128, 128, 8, 1, 1.0, false}, {128, 64, 8, 2, 0.88, true},
                                {64, 128, 8, 2, 0.88, false}, {64, 64, 8, 2, 0.72, true},
                                {128, 128, 16, 1, 1.0, true}, {64, 128, 16, 2, 0.88, true},
                                {128, 64, 16, 2, 0.88, false}};
constexpr int kTileCount = 7;

template <typename T, bool kNhwc, bool kFlat, int BM, int BN, int kBk>
__global__ void __launch_bounds__(kThreads, (BM * BN > 128 * 64) ? 1 : 2)
    igemm_f32_kernel(ConvParams cp, const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y,
                     float* __restrict__ partial, int splits) {
  constexpr int EA = BM * kBk / kThreads;  // A elements per thread per step (4 or 2)
  constexpr int EB = BN * kBk / kThreads;
  constexpr int TM = BM / 16, TN = BN / 16;
  constexpr int kPadA = BM + 4, kPadB = BN + 4;  // +4 floats: no bank conflicts, float4 alignment kept
  __shared__ __align__(16) float As[2][kBk][kPadA];
  __shared__ __align__(16) float Bs[2][kBk][kPadB];

  const int tid = threadIdx.x;
  const int groups = cp.groups;
  const int g = blockIdx.z % groups;
  const int split = blockIdx.z / groups;
  const int m0 = blockIdx.y * BM;
  const int j0 = blockIdx.x * BN;
  const int RS = cp.r * cp.s;
  const int kred = cp.cg * RS;
  const int PQ = cp.p * cp.q;
  const int pixels = cp.n * PQ;
  const int HW = cp.h * cp.w;

  // Reduction steps of this split.
  const int cpr = kFlat ? 1 : cp.cg / kBk;  // channel chunks per tap (unused in flat mode)
  const int total_steps = kFlat ? (kred + kBk - 1) / kBk : RS * cpr;
  const int per_split = (total_steps + splits - 1) / splits;
  const int step_begin = split * per_split;
  const int step_end = min(total_steps, step_begin + per_split);

  // A loader: one output channel row, EA consecutive kred entries.
  constexpr int kTprA = kBk / EA;
  const int a_row = tid / kTprA;
  const int a_k = (tid % kTprA) * EA;
  const bool a_valid = m0 + a_row < cp.kg;
  const T* w_row = w + std::int64_t(g * cp.kg + (a_valid ? m0 + a_row : 0)) * kred;

  // B loader: one pixel, EB consecutive kred entries (threads run along pixels for nchw, along
  // channels for nhwc, so global loads are coalesced in both layouts).
  constexpr int kTprB = kBk / EB;
  const int b_j = kNhwc ? tid / kTprB : tid % BN;
  const int b_k = kNhwc ? (tid % kTprB) * EB : (tid / BN) * EB;
  const int pix = j0 + b_j;
  const bool b_valid = pix < pixels;
  int ih0 = 0, iw0 = 0;
  const T* x_img = x;
  {
    const int pp = b_valid ? pix : 0;
    const int nn = pp / PQ, pq = pp % PQ;
    ih0 = (pq / cp.q) * cp.stride_h - cp.pad_h;
    iw0 = (pq % cp.q) * cp.stride_w - cp.pad_w;
    x_img = kNhwc ? x + std::int64_t(nn) * HW * cp.c + g * cp.cg : x + (std::int64_t(nn) * cp.c + g * cp.cg) * HW;
  }

  float a_reg[EA], b_reg[EB];
  auto load_global = [&](int step) {
    if (kFlat) {
      const int k0 = step * kBk;
#pragma unroll
      for (int i = 0; i < EA; ++i) {
        const int kk = k0 + a_k + i;
        a_reg[i] = (a_valid && kk < kred) ? ldg_f32(w_row + kk) : 0.f;
      }
#pragma unroll
      for (int i = 0; i < EB; ++i) {
        const int kk = k0 + b_k + i;
        float v = 0.f;
        if (b_valid && kk < kred) {
          int c, rs;
          if (kNhwc) {
            rs = kk / cp.cg;
            c = kk - rs * cp.cg;
          } else {
            c = kk / RS;
            rs = kk - c * RS;
          }
          const int r = rs / cp.s, s = rs - r * cp.s;
          const int ih = ih0 + r * cp.dil_h, iw = iw0 + s * cp.dil_w;
          if (unsigned(ih) < unsigned(cp.h) && unsigned(iw) < unsigned(cp.w))
            v = kNhwc ? ldg_f32(x_img + (ih * cp.w + iw) * cp.c + c) : ldg_f32(x_img + c * HW + ih * cp.w + iw);
        }
        b_reg[i] = v;
      }
    } else {
      const int rs = step / cpr;
      const int c0 = (step - rs * cpr) * kBk;
      const int r = rs / cp.s, s = rs - r * cp.s;
#pragma unroll
      for (int i = 0; i < EA; ++i) {
        const int c = c0 + a_k + i;
        a_reg[i] = a_valid ? ldg_f32(w_row + (kNhwc ? rs * cp.cg + c : c * RS + rs)) : 0.f;
      }
      const int ih = ih0 + r * cp.dil_h, iw = iw0 + s * cp.dil_w;
      const bool inb = b_valid && unsigned(ih) < unsigned(cp.h) && unsigned(iw) < unsigned(cp.w);
      if (kNhwc) {
        const T* src = x_img + (ih * cp.w + iw) * cp.c + c0 + b_k;
#pragma unroll
        for (int i = 0; i < EB; ++i) b_reg[i] = inb ? ldg_f32(src + i) : 0.f;
      } else {
        const T* src = x_img + (c0 + b_k) * HW + ih * cp.w + iw;
#pragma unroll
        for (int i = 0; i < EB; ++i) b_reg[i] = inb ? ldg_f32(src + i * HW) : 0.f;
      }
    }
  };
  auto store_shared = [&](int buf) {
#pragma unroll
    for (int i = 0; i < EA; ++i) As[buf][a_k + i][a_row] = a_reg[i];
#pragma unroll
    for (int i = 0; i < EB; ++i) Bs[buf][b_k + i][b_j] = b_reg[i];
  };

  const int tx = tid % 16, ty = tid / 16;
  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = 0.f;

  if (step_begin < step_end) {
    load_global(step_begin);
    store_shared(0);
    __syncthreads();
    for (int step = step_begin; step < step_end; ++step) {
      const int buf = (step - step_begin) & 1;
      const bool more = step + 1 < step_end;
      if (more) load_global(step + 1);
#pragma unroll
      for (int kk = 0; kk < kBk; ++kk) {
        float a[TM], b[TN];
#pragma unroll
        for (int h = 0; h < TM / 4; ++h) {
          const float4 v = *reinterpret_cast<const float4*>(&As[buf][kk][h * (BM / 2) + ty * 4]);
          a[h * 4 + 0] = v.x, a[h * 4 + 1] = v.y, a[h * 4 + 2] = v.z, a[h * 4 + 3] = v.w;
        }
#pragma unroll
        for (int h = 0; h < TN / 4; ++h) {
          const float4 v = *reinterpret_cast<const float4*>(&Bs[buf][kk][h * (BN / 2) + tx * 4]);
          b[h * 4 + 0] = v.x, b[h * 4 + 1] = v.y, b[h * 4 + 2] = v.z, b[h * 4 + 3] = v.w;
        }
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
          for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
      }
      if (more) store_shared(buf ^ 1);
      __syncthreads();
    }
  }

  // Epilogue: row i of the thread is channel m, column j is a pixel.
  const std::int64_t y_elems = std::int64_t(pixels) * cp.k;
#pragma unroll
  for (int j = 0; j < TN; ++j) {
    const int col = (j / 4) * (BN / 2) + tx * 4 + (j % 4);
    const int pj = j0 + col;
    if (pj >= pixels) continue;
    const int nn = pj / PQ, pq = pj - nn * PQ;
#pragma unroll
    for (int i = 0; i < TM; ++i) {
      const int m = m0 + (i / 4) * (BM / 2) + ty * 4 + (i % 4);
      if (m >= cp.kg) continue;
      const int kk = g * cp.kg + m;
      const std::int64_t idx =
          kNhwc ? std::int64_t(pj) * cp.k + kk : (std::int64_t(nn) * cp.k + kk) * PQ + pq;
      if (splits > 1)
        partial[split * y_elems + idx] = acc[i][j];
      else
        y[idx] = from_f32<T>(acc[i][j]);
    }
  }
}

template <typename T>
__global__ void splitk_reduce_kernel(const float* __restrict__ partial, T* __restrict__ y, std::int64_t elems,
                                     int splits) {
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < elems;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    float s = 0.f;
    for (int k = 0; k < splits; ++k) s += partial[k * elems + i];
    y[i] = from_f32<T>(s);
  }
}

template <typename T, bool kNhwc, bool kFlat>
void launch_tile(const ConvParams& p, const IgemmPlan& plan, const T* x, const T* w, T* y, float* partial,
                 GpuStream stream) {
  const dim3 grid(ceil_div(p.pixels(), plan.bn), ceil_div(p.kg, plan.bm), p.groups * plan.splits);
  switch (plan.tile) {
    case 0: igemm_f32_kernel<T, kNhwc, kFlat, 128, 128, 8><<<grid, kThreads, 0, stream>>>(p, x, w, y, partial, plan.splits); break;
    case 1: igemm_f32_kernel<T, kNhwc, kFlat, 128, 64, 8><<<grid, kThreads, 0, stream>>>(p, x, w, y, partial, plan.splits); break;
    case 2: igemm_f32_kernel<T, kNhwc, kFlat, 64, 128, 8><<<grid, kThreads, 0, stream>>>(p, x, w, y, partial, plan.splits); break;
    case 3: igemm_f32_kernel<T, kNhwc, kFlat, 64, 64, 8><<<grid, kThreads, 0, stream>>>(p, x, w, y, partial, plan.splits); break;
    case 4: igemm_f32_kernel<T, kNhwc, kFlat, 128, 128, 16><<<grid, kThreads, 0, stream>>>(p, x, w, y, partial, plan.splits); break;
    case 5: igemm_f32_kernel<T, kNhwc, kFlat, 64, 128, 16><<<grid, kThreads, 0, stream>>>(p, x, w, y, partial, plan.splits); break;
    default: igemm_f32_kernel<T, kNhwc, kFlat, 128, 64, 16><<<grid, kThreads, 0, stream>>>(p, x, w, y, partial, plan.splits); break;
  }
}

std::int64_t f32_steps(const ConvParams& p, int bk) {
  return p.cg % bk != 0 ? (p.kred() + bk - 1) / bk : std::int64_t(p.r) * p.s * (p.cg / bk);
}

}  // namespace

IgemmPlan plan_igemm_f32(const ConvParams& p, int sm_count) {
  // Model: a block of one split takes bm*bn*steps*8 FMAs at 1/slots of the chip's rate, scaled by
  // the tile's efficiency; blocks run in waves of `slots`; split-K adds a pass over fp32 partials.
  constexpr double kPeak = 60e12, kBandwidth = 3.0e12;
  IgemmPlan best;
  double best_time = INFINITY;
  for (int t = 0; t < kTileCount; ++t) {
    const TileShape& shape = kTiles[t];
    if (!shape.planned) continue;
    const int slots = std::max(1, sm_count) * shape.blocks_per_sm;
    const std::int64_t steps = f32_steps(p, shape.bk);
    const std::int64_t tiles = std::int64_t(ceil_div(p.kg, shape.bm)) * ceil_div(p.pixels(), shape.bn) * p.groups;
    for (int splits : {1, 2, 3, 4, 5, 6, 8, 12, 16}) {
      if (splits > 1 && steps / splits < 8) break;
      const std::int64_t per = (steps + splits - 1) / splits;
      const std::int64_t blocks = tiles * splits;
      const std::int64_t waves = (blocks + slots - 1) / slots;
      double time = double(waves) * 2.0 * shape.bm * shape.bn * shape.bk * per / (shape.efficiency * kPeak / slots);
      if (splits > 1) time += double(splits + 1) * p.y_elems() * 4.0 / kBandwidth + 3e-6;
      if (time < best_time * 0.97) {  // prefer the earlier (larger, unsplit) choice on near ties
        best_time = time;
        best.tile = t;
        best.bm = shape.bm;
        best.bn = shape.bn;
        best.splits = splits;
      }
    }
  }
  best.workspace_bytes = best.splits > 1 ? std::size_t(best.splits) * std::size_t(p.y_elems()) * sizeof(float) : 0;
  return best;
}

IgemmPlan igemm_f32_plan_for(const ConvParams& p, int tile, int splits) {
  IgemmPlan plan;
  plan.tile = std::clamp(tile, 0, kTileCount - 1);
  plan.bm = kTiles[plan.tile].bm;
  plan.bn = kTiles[plan.tile].bn;
  plan.splits = std::max(1, splits);
  plan.workspace_bytes = plan.splits > 1 ? std::size_t(plan.splits) * std::size_t(p.y_elems()) * sizeof(float) : 0;
  return plan;
}

void launch_conv_igemm_f32(const ConvParams& p, const IgemmPlan& plan, const void* x, const void* w, void* y,
                           void* workspace, void* stream) {
  if (plan.splits > 1 && workspace == nullptr)
    throw Error(Status::invalid_argument, "gpu.conv.igemm_f32: split-K plan needs a workspace of " +
                                              std::to_string(plan.workspace_bytes) + " bytes, got none");
  float* partial = static_cast<float*>(workspace);
  const GpuStream s = as_stream(stream);
  const bool flat = p.cg % kTiles[plan.tile].bk != 0;
  dispatch_dtype(p.dtype, "gpu.conv.igemm_f32", [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const T* xt = static_cast<const T*>(x);
    const T* wt = static_cast<const T*>(w);
    T* yt = static_cast<T*>(y);
    if (p.nhwc)
      flat ? launch_tile<T, true, true>(p, plan, xt, wt, yt, partial, s)
           : launch_tile<T, true, false>(p, plan, xt, wt, yt, partial, s);
    else
      flat ? launch_tile<T, false, true>(p, plan, xt, wt, yt, partial, s)
           : launch_tile<T, false, false>(p, plan, xt, wt, yt, partial, s);
  });
  check_launch("gpu.conv.igemm_f32");
  if (plan.splits > 1) launch_splitk_reduce(p, plan.splits, partial, y, stream);
}

void launch_splitk_reduce(const ConvParams& p, int splits, const float* partial, void* y, void* stream) {
  const std::int64_t elems = p.y_elems();
  const int blocks = int(std::min<std::int64_t>((elems + 255) / 256, 65535));
  dispatch_dtype(p.dtype, "split-k reduce", [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    splitk_reduce_kernel<T><<<blocks, 256, 0, as_stream(stream)>>>(partial, static_cast<T*>(y), elems, splits);
  });
  check_launch("gpu.conv split-k reduce");
}

}  // namespace galley::backends::gpu
