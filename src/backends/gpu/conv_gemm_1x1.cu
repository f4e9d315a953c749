// gpu.conv.gemm_1x1's kernel: an fp32 NCHW 1x1 convolution is, per image, the SGEMM
//   Y[n] (K x P*Q) = W (K x C) * X[n] (C x P*Q)
// with pixels contiguous in X and Y. The kernel treats all images' pixels as one GEMM column range
// (column j = n * P*Q + pq) and runs a register-blocked SIMT SGEMM over it: a 256-thread block owns a
// BM x BN tile (TM x TN = BM/16 x BN/16 outer products per thread), BK input channels per step,
// double-buffered in shared memory with the next step's global loads in flight during the math.
//
// Unlike gpu.conv.igemm_f32 (one gather per element, scalar stores 16 bytes apart), every global
// access here is a coalesced 16-byte vector where the shape allows: weights as float4 along C
// (C % 4 == 0), pixels as float4 along P*Q (stride 1, P*Q % 4 == 0, so 4 aligned columns never
// straddle two images), and the output as float4 rows of 4 pixels, 256 contiguous bytes per
// half-warp. Other shapes (strided 1x1, odd P*Q or C) take the same kernel with scalar accesses
// whose addresses are computed once per thread. Blocks walk output-channel tiles fastest, so the
// blocks that share one pixel tile of X run together and read it from L2, not DRAM.
// 2 blocks per multiprocessor (at most 128 registers a thread) let one block's epilogue overlap
// another's math, which matters for the small-C layers (C = 64: 4-8 steps per block).
// Problems with too few tiles to fill the chip (7x7 and 14x14 layers with large C) split the
// channel range over several blocks (split-K) that write fp32 partial outputs to the workspace,
// summed by launch_splitk_reduce.
#include <cmath>

#include "conv_device.cuh"
#include "conv_gemm_1x1.hpp"

namespace galley::backends::gpu {
namespace {

constexpr int kThreads = 256;

struct Tile {
  int bm, bn, bk;
  double efficiency;  // relative per-block throughput, for the planner
};
// Efficiencies fitted to sweeps of bench/gemm_1x1_tiles.cu (every tile at split-K 1, 2 and 4 over
// ResNet-50's 1x1 layers): the half-size tiles reach ~0.55 of 128x128's per-block rate, 64x64
// ~0.45. Tile 0 (BK 8) is never planned: tile 1's doubled BK halves its barriers per MAC.
constexpr Tile kTiles[] = {
    {128, 128, 8, 1.0}, {128, 128, 16, 1.0}, {128, 64, 16, 0.55}, {64, 128, 16, 0.55}, {64, 64, 16, 0.45}};
constexpr int kTileCount = 5;

/// kVecB: the pixels of X load as float4 (stride 1, P*Q % 4 == 0); otherwise each thread gathers 4
/// pixel columns BN/4 apart with scalar loads from offsets computed once, so each load instruction
/// of a warp reads consecutive pixels.
/// kTaps: any filter, padding, stride and dilation (gpu.conv.igemm_f32_nchw): the reduction runs tap
/// by tap, ceil(C / BK) steps a tap; `w` is then the weights rearranged as [tap][K][C] (so A still
/// loads as float4 along C) and each pixel's input row/column is checked per tap.
template <int BM, int BN, int BK, bool kVecB, bool kTaps>
__global__ void __launch_bounds__(kThreads, 2)
    gemm_1x1_kernel(ConvParams cp, const float* __restrict__ x, const float* __restrict__ w,
                    float* __restrict__ y, int m_tiles, int n_tiles, int steps_per_split,
                    Gemm1x1StoreEpilogue epilogue) {
  constexpr int TM = BM / 16, TN = BN / 16;
  constexpr int kPadA = BM + 4, kPadB = BN + 4;  // +4 floats: conflict-free float4 reads, alignment kept
  constexpr int kAQuadsPerRow = BK / 4;          // float4s of one weight row in a step
  constexpr int kBQuadsPerRow = BN / 4;          // float4s of one channel row of X in a step
  constexpr int kAQuads = BM * BK / 4 / kThreads;
  constexpr int kBQuads = BN * BK / 4 / kThreads;
  static_assert(kAQuads >= 1 && kBQuads >= 1, "each thread loads at least one float4 of A and of B");
  static_assert(kThreads % kAQuadsPerRow == 0 && kThreads % kBQuadsPerRow == 0, "fixed columns per thread");
  __shared__ __align__(16) float As[2][BK][kPadA];
  __shared__ __align__(16) float Bs[2][BK][kPadB];

  const int tid = threadIdx.x;
  const int tile = blockIdx.x % (m_tiles * n_tiles);
  const int split = blockIdx.x / (m_tiles * n_tiles);
  const int m0 = (tile % m_tiles) * BM;
  const int j0 = (tile / m_tiles) * BN;
  const int C = cp.c, K = cp.k;
  const int PQ = cp.p * cp.q, HW = cp.h * cp.w;
  const int pixels = cp.n * PQ;
  const bool vec_a = C % 4 == 0 && (reinterpret_cast<std::uintptr_t>(w) & 15) == 0;
  // This split's steps (channel chunks, tap-major); the planner makes every split non-empty.
  const int c_steps = (C + BK - 1) / BK;
  const int step_begin = split * steps_per_split;
  const int step_end = min(kTaps ? c_steps * cp.r * cp.s : c_steps, step_begin + steps_per_split);
  // Split-K: this split's partial output, laid out like y, in the workspace `y` points to.
  y += std::int64_t(split) * cp.n * K * PQ;

  // A loader: thread covers rows a_row + i * (kThreads / kAQuadsPerRow), channels a_col..a_col+3.
  const int a_col = (tid % kAQuadsPerRow) * 4;
  const float* w_rows[kAQuads];
  bool a_valid[kAQuads];
#pragma unroll
  for (int i = 0; i < kAQuads; ++i) {
    const int m = m0 + tid / kAQuadsPerRow + i * (kThreads / kAQuadsPerRow);
    a_valid[i] = m < K;
    w_rows[i] = w + (a_valid[i] ? m : 0) * C;
  }

  // B loader: thread covers channel rows b_row + i * (kThreads / kBQuadsPerRow), pixels b_col..b_col+3.
  const int b_lane = tid % kBQuadsPerRow;
  const int b_col = b_lane * 4;
  const int b_row = tid / kBQuadsPerRow;
  constexpr int kBOffsets = kVecB ? 1 : 4;
  // Offset of the thread's pixel(s) at channel 0 (kTaps: of the window's top-left corner, which
  // may lie in the padding); -1: past the last pixel (1x1 modes only).
  int b_off[kBOffsets];
  // kTaps: the window corner's row and column, each + 32768 in 16 bits; a pixel past the last one
  // gets a row that no tap brings inside the image.
  unsigned b_corner[kTaps ? 4 : 1];  // unsigned: a biased row >= 32768 sets the top bit
#pragma unroll
  for (int e = 0; e < kBOffsets; ++e) {
    const int j = j0 + (kVecB ? b_col : b_lane + e * kBQuadsPerRow);
    if (j < pixels) {
      const int nn = j / PQ, pq = j - nn * PQ;
      const int pp = pq / cp.q, qq = pq - pp * cp.q;
      const int ih0 = pp * cp.stride_h - (kTaps ? cp.pad_h : 0),
                iw0 = qq * cp.stride_w - (kTaps ? cp.pad_w : 0);
      b_off[e] = nn * C * HW + ih0 * cp.w + iw0;
      if (kTaps) b_corner[e] = (unsigned(ih0 + 32768) << 16) | unsigned(iw0 + 32768);
    } else {
      b_off[e] = kTaps ? 0 : -1;
      if (kTaps) b_corner[e] = 0;  // row -32768
    }
  }

  float4 a_reg[kAQuads], b_reg[kBQuads];
  auto load_global = [&](int step) {
    if constexpr (kTaps) {
      const int tap = step / c_steps;
      const int c0 = (step - tap * c_steps) * BK;
      const int w_tap = tap * K * C;  // this tap's K x C slab of the rearranged weights
      const int dh = (tap / cp.s) * cp.dil_h, dw = (tap % cp.s) * cp.dil_w;
#pragma unroll
      for (int i = 0; i < kAQuads; ++i) {
        const int c = c0 + a_col;
        const float* wr = w_rows[i] + w_tap;
        float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
        if (a_valid[i]) {
          if (vec_a) {
            if (c < C) v = __ldg(reinterpret_cast<const float4*>(wr + c));
          } else {
            if (c < C) v.x = __ldg(wr + c);
            if (c + 1 < C) v.y = __ldg(wr + c + 1);
            if (c + 2 < C) v.z = __ldg(wr + c + 2);
            if (c + 3 < C) v.w = __ldg(wr + c + 3);
          }
        }
        a_reg[i] = v;
      }
      int b_at[4];  // this tap's offsets of the thread's pixels at channel 0; -1: in the padding
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int ih = int(b_corner[e] >> 16) - 32768 + dh;
        const int iw = int(b_corner[e] & 0xffffu) - 32768 + dw;
        b_at[e] =
            unsigned(ih) < unsigned(cp.h) && unsigned(iw) < unsigned(cp.w) ? b_off[e] + dh * cp.w + dw : -1;
      }
#pragma unroll
      for (int i = 0; i < kBQuads; ++i) {
        const int c = c0 + b_row + i * (kThreads / kBQuadsPerRow);
        float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
        if (c < C) {
          const float* xc = x + c * HW;
          if (b_at[0] >= 0) v.x = __ldg(xc + b_at[0]);
          if (b_at[1] >= 0) v.y = __ldg(xc + b_at[1]);
          if (b_at[2] >= 0) v.z = __ldg(xc + b_at[2]);
          if (b_at[3] >= 0) v.w = __ldg(xc + b_at[3]);
        }
        b_reg[i] = v;
      }
    } else {
      const int c0 = step * BK;
#pragma unroll
      for (int i = 0; i < kAQuads; ++i) {
        const int c = c0 + a_col;
        float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
        if (a_valid[i]) {
          if (vec_a) {
            if (c < C) v = __ldg(reinterpret_cast<const float4*>(w_rows[i] + c));
          } else {
            if (c < C) v.x = __ldg(w_rows[i] + c);
            if (c + 1 < C) v.y = __ldg(w_rows[i] + c + 1);
            if (c + 2 < C) v.z = __ldg(w_rows[i] + c + 2);
            if (c + 3 < C) v.w = __ldg(w_rows[i] + c + 3);
          }
        }
        a_reg[i] = v;
      }
#pragma unroll
      for (int i = 0; i < kBQuads; ++i) {
        const int c = c0 + b_row + i * (kThreads / kBQuadsPerRow);
        float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
        if (c < C) {
          const float* xc = x + c * HW;
          if (kVecB) {
            if (b_off[0] >= 0) v = __ldg(reinterpret_cast<const float4*>(xc + b_off[0]));
          } else {
            if (b_off[0] >= 0) v.x = __ldg(xc + b_off[0]);
            if (b_off[kBOffsets > 1 ? 1 : 0] >= 0) v.y = __ldg(xc + b_off[kBOffsets > 1 ? 1 : 0]);
            if (b_off[kBOffsets > 2 ? 2 : 0] >= 0) v.z = __ldg(xc + b_off[kBOffsets > 2 ? 2 : 0]);
            if (b_off[kBOffsets > 3 ? 3 : 0] >= 0) v.w = __ldg(xc + b_off[kBOffsets > 3 ? 3 : 0]);
          }
        }
        b_reg[i] = v;
      }
    }
  };
  auto store_shared = [&](int buf) {
#pragma unroll
    for (int i = 0; i < kAQuads; ++i) {
      const int row = tid / kAQuadsPerRow + i * (kThreads / kAQuadsPerRow);
      As[buf][a_col + 0][row] = a_reg[i].x;
      As[buf][a_col + 1][row] = a_reg[i].y;
      As[buf][a_col + 2][row] = a_reg[i].z;
      As[buf][a_col + 3][row] = a_reg[i].w;
    }
#pragma unroll
    for (int i = 0; i < kBQuads; ++i) {
      float* row = Bs[buf][b_row + i * (kThreads / kBQuadsPerRow)];
      if (kVecB) {
        *reinterpret_cast<float4*>(row + b_col) = b_reg[i];
      } else {
        row[b_lane] = b_reg[i].x;
        row[b_lane + kBQuadsPerRow] = b_reg[i].y;
        row[b_lane + 2 * kBQuadsPerRow] = b_reg[i].z;
        row[b_lane + 3 * kBQuadsPerRow] = b_reg[i].w;
      }
    }
  };

  // Thread (ty, tx) owns rows {h * BM/2 + ty * 4 + 0..3} and columns {h * BN/2 + tx * 4 + 0..3}.
  const int tx = tid % 16, ty = tid / 16;
  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = 0.f;

  load_global(step_begin);
  store_shared(0);
  __syncthreads();
  for (int step = step_begin; step < step_end; ++step) {
    const int buf = (step - step_begin) & 1;
    const bool more = step + 1 < step_end;
    if (more) load_global(step + 1);
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
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

  // The fused epilogue, in the order of the separate pass (conv_epilogue.cu): + bias, + residual,
  // then relu as dnn::Relu (NaN passes). The flags are the same for every thread: no divergence.
  const float* const residual = epilogue.residual;
  const bool fused = epilogue.bias != nullptr || residual != nullptr || epilogue.relu;
  auto bias_of = [&](int m) { return epilogue.bias != nullptr ? __ldg(epilogue.bias + m) : 0.f; };
  auto finish = [&](float v, float bias, float res) {
    const float s = v + bias + res;
    return epilogue.relu && s < 0.f ? 0.f : s;
  };
  // Stores: y[n][m][pq]. With P*Q % 4 == 0 a thread's 4 adjacent columns are 4 adjacent pixels of
  // one image, 16-byte aligned: one float4 store (and residual load) per row.
  const bool vec_y = PQ % 4 == 0 && (reinterpret_cast<std::uintptr_t>(y) & 15) == 0 &&
                     (reinterpret_cast<std::uintptr_t>(residual) & 15) == 0;
#pragma unroll
  for (int h = 0; h < TN / 4; ++h) {
    const int jg = j0 + h * (BN / 2) + tx * 4;
    if (jg >= pixels) continue;
    if (vec_y) {
      const int nn = jg / PQ, pq = jg - nn * PQ;
      const std::int64_t col = std::int64_t(nn) * K * PQ + pq;
#pragma unroll
      for (int i = 0; i < TM; ++i) {
        const int m = m0 + (i / 4) * (BM / 2) + ty * 4 + (i % 4);
        if (m >= K) continue;
        const std::int64_t at = col + std::int64_t(m) * PQ;
        float4 v = make_float4(acc[i][h * 4 + 0], acc[i][h * 4 + 1], acc[i][h * 4 + 2], acc[i][h * 4 + 3]);
        if (fused) {
          const float b = bias_of(m);
          const float4 r = residual != nullptr ? __ldg(reinterpret_cast<const float4*>(residual + at))
                                               : make_float4(0.f, 0.f, 0.f, 0.f);
          v = make_float4(finish(v.x, b, r.x), finish(v.y, b, r.y), finish(v.z, b, r.z), finish(v.w, b, r.w));
        }
        *reinterpret_cast<float4*>(y + at) = v;
      }
    } else {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int j = jg + e;
        if (j >= pixels) break;
        const int nn = j / PQ, pq = j - nn * PQ;
        const std::int64_t col = std::int64_t(nn) * K * PQ + pq;
#pragma unroll
        for (int i = 0; i < TM; ++i) {
          const int m = m0 + (i / 4) * (BM / 2) + ty * 4 + (i % 4);
          if (m >= K) continue;
          const std::int64_t at = col + std::int64_t(m) * PQ;
          const float v = acc[i][h * 4 + e];
          y[at] = fused ? finish(v, bias_of(m), residual != nullptr ? __ldg(residual + at) : 0.f) : v;
        }
      }
    }
  }
}

/// Weights KCRS -> [tap][K][C] for the kTaps kernel, one thread per element, writes coalesced.
__global__ void __launch_bounds__(kThreads)
    rearrange_weights_kernel(ConvParams p, const float* __restrict__ w, float* __restrict__ out) {
  const int taps = p.r * p.s;
  const std::int64_t total = std::int64_t(p.k) * p.c * taps;
  for (std::int64_t i = std::int64_t(blockIdx.x) * kThreads + threadIdx.x; i < total;
       i += std::int64_t(gridDim.x) * kThreads) {
    const int c = int(i % p.c);
    const std::int64_t rest = i / p.c;
    const int m = int(rest % p.k), tap = int(rest / p.k);
    out[i] = __ldg(w + (std::int64_t(m) * p.c + c) * taps + tap);
  }
}

bool needs_taps(const ConvParams& p) { return p.r != 1 || p.s != 1 || p.pad_h != 0 || p.pad_w != 0; }

std::size_t align256(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

template <int BM, int BN, int BK>
void launch_tile(const ConvParams& p, int splits, const float* x, const float* w, float* y,
                 const Gemm1x1StoreEpilogue& epilogue, GpuStream stream) {
  const int m_tiles = ceil_div(p.k, BM), n_tiles = ceil_div(p.pixels(), BN);
  const bool taps = needs_taps(p);
  const int steps_per_split = ceil_div(std::int64_t(ceil_div(p.c, BK)) * (taps ? p.r * p.s : 1), splits);
  const std::int64_t blocks = std::int64_t(m_tiles) * n_tiles * splits;
  if (blocks > 0x7fffffff)
    throw Error(Status::unsupported,
                "gpu.conv.gemm_1x1: " + std::to_string(blocks) + " blocks exceed grid.x");
  const bool vec_b = p.stride_h == 1 && p.stride_w == 1 && (p.p * p.q) % 4 == 0 &&
                     (reinterpret_cast<std::uintptr_t>(x) & 15) == 0;
  if (taps)
    gemm_1x1_kernel<BM, BN, BK, false, true>
        <<<unsigned(blocks), kThreads, 0, stream>>>(p, x, w, y, m_tiles, n_tiles, steps_per_split, epilogue);
  else if (vec_b)
    gemm_1x1_kernel<BM, BN, BK, true, false>
        <<<unsigned(blocks), kThreads, 0, stream>>>(p, x, w, y, m_tiles, n_tiles, steps_per_split, epilogue);
  else
    gemm_1x1_kernel<BM, BN, BK, false, false>
        <<<unsigned(blocks), kThreads, 0, stream>>>(p, x, w, y, m_tiles, n_tiles, steps_per_split, epilogue);
}

}  // namespace

std::string gemm_1x1_refusal(const ConvParams& p) {
  if (p.r != 1 || p.s != 1)
    return "filter " + std::to_string(p.r) + "x" + std::to_string(p.s) + " (needs 1x1)";
  if (p.pad_h != 0 || p.pad_w != 0)
    return "padding " + std::to_string(p.pad_h) + "x" + std::to_string(p.pad_w) + " (needs none)";
  if (p.groups != 1) return "groups " + std::to_string(p.groups) + " (needs 1)";
  if (p.dtype != DType::f32) return std::string("dtype ") + to_string(p.dtype) + " (needs f32)";
  if (p.nhwc) return "nhwc layout (needs nchw)";
  // Dilation does not move a 1x1 filter's only tap, so any dilation is the same convolution.
  return too_large_for_int32(p);
}

std::string igemm_f32_nchw_refusal(const ConvParams& p) {
  if (!needs_taps(p)) return "1x1 without padding (gpu.conv.gemm_1x1 runs it)";
  if (p.groups != 1) return "groups " + std::to_string(p.groups) + " (needs 1)";
  if (p.dtype != DType::f32) return std::string("dtype ") + to_string(p.dtype) + " (needs f32)";
  if (p.nhwc) return "nhwc layout (needs nchw)";
  // A tap's step reads 16 channels: under 16 most of each step would be zeros (r50.conv1's C = 3).
  if (p.c < 16) return "c " + std::to_string(p.c) + " (needs 16 or more)";
  // The window corner is kept as two 16-bit fields.
  constexpr int kLimit = 16384;
  if (p.h > kLimit || p.w > kLimit || p.pad_h > kLimit || p.pad_w > kLimit ||
      std::int64_t(p.dil_h) * (p.r - 1) > kLimit || std::int64_t(p.dil_w) * (p.s - 1) > kLimit)
    return "image, padding or dilated filter over 16384";
  return too_large_for_int32(p);
}

std::string Gemm1x1Plan::describe() const {
  std::string d = "tile " + std::to_string(bm) + "x" + std::to_string(bn) + ", " + std::to_string(bk) +
                  " channels a step";
  if (splits > 1) d += ", split-k " + std::to_string(splits);
  return d;
}

int gemm_1x1_tile_count() { return kTileCount; }

Gemm1x1Plan gemm_1x1_plan_for(const ConvParams& p, int tile, int splits) {
  Gemm1x1Plan plan;
  plan.tile = std::clamp(tile, 0, kTileCount - 1);
  plan.bm = kTiles[plan.tile].bm;
  plan.bn = kTiles[plan.tile].bn;
  plan.bk = kTiles[plan.tile].bk;
  // Every split gets at least one step: 5 steps asked into 4 splits become 3 of 2+2+1.
  plan.taps = needs_taps(p);
  plan.steps = ceil_div(p.c, plan.bk) * (plan.taps ? p.r * p.s : 1);
  const int per_split = ceil_div(plan.steps, std::clamp(splits, 1, plan.steps));
  plan.splits = ceil_div(plan.steps, per_split);
  // Workspace: the rearranged weights (kTaps), then the split-K partials.
  plan.partial_offset = plan.taps ? align256(std::size_t(p.w_elems()) * sizeof(float)) : 0;
  plan.workspace_bytes =
      plan.partial_offset +
      (plan.splits > 1 ? std::size_t(plan.splits) * std::size_t(p.y_elems()) * sizeof(float) : 0);
  return plan;
}

Gemm1x1Plan plan_gemm_1x1(const ConvParams& p, int sm_count) {
  // Model: blocks run in waves of 2 per multiprocessor, each slot at kChipRate / slots; a block costs
  // its tile's multiply-adds over its channel steps, divided by the tile's relative throughput.
  // Split-K adds writing and reading the fp32 partials. kSplitBandwidth is fitted to the same sweeps
  // as the tile efficiencies, far under the chip's memory bandwidth: it also stands for the split
  // blocks' shorter loops and the reduce launch.
  constexpr double kChipRate = 45e12, kSplitBandwidth = 1.5e12;
  const std::int64_t slots = std::int64_t(std::max(1, sm_count)) * 2;
  Gemm1x1Plan best = gemm_1x1_plan_for(p, 1, 1);
  double best_time = INFINITY;
  for (int t = 1; t < kTileCount; ++t) {
    const Tile& tile = kTiles[t];
    const std::int64_t tiles = std::int64_t(ceil_div(p.k, tile.bm)) * ceil_div(p.pixels(), tile.bn);
    for (int want : {1, 2, 3, 4, 6, 8}) {
      const Gemm1x1Plan plan = gemm_1x1_plan_for(p, t, want);
      if (plan.splits != want) break;  // fewer steps than splits
      const std::int64_t waves = (tiles * plan.splits + slots - 1) / slots;
      const double channels = double(ceil_div(plan.steps, plan.splits)) * tile.bk;
      double time =
          double(waves) * 2.0 * tile.bm * tile.bn * channels / (tile.efficiency * kChipRate / slots);
      if (plan.splits > 1) time += double(plan.splits + 1) * double(p.y_elems()) * 4.0 / kSplitBandwidth;
      if (time < best_time * 0.97) {  // near ties go to the earlier: larger tile, fewer splits
        best_time = time;
        best = plan;
      }
    }
  }
  return best;
}

void launch_conv_gemm_1x1(const ConvParams& p, const Gemm1x1Plan& plan, const void* x, const void* w, void* y,
                          void* workspace, void* stream, const Gemm1x1StoreEpilogue& epilogue) {
  if (plan.splits > 1 && (epilogue.bias != nullptr || epilogue.residual != nullptr || epilogue.relu))
    throw Error(Status::invalid_argument, "gpu.conv.gemm_1x1: a split-K plan (" +
                                              std::to_string(plan.splits) +
                                              " splits) cannot apply an epilogue in its store");
  if (p.dtype != DType::f32)
    throw Error(Status::unsupported,
                std::string("gpu.conv.gemm_1x1: dtype ") + to_string(p.dtype) + " (needs f32)");
  if (plan.splits > 1 && workspace == nullptr)
    throw Error(Status::invalid_argument, "gpu.conv.gemm_1x1: split-K plan needs a workspace of " +
                                              std::to_string(plan.workspace_bytes) + " bytes, got none");
  if (plan.workspace_bytes > 0 && workspace == nullptr)
    throw Error(Status::invalid_argument, "gpu.conv.gemm_1x1: plan needs a workspace of " +
                                              std::to_string(plan.workspace_bytes) + " bytes, got none");
  const float* xf = static_cast<const float*>(x);
  const float* wf = static_cast<const float*>(w);
  float* partial = reinterpret_cast<float*>(static_cast<unsigned char*>(workspace) + plan.partial_offset);
  float* out = plan.splits > 1 ? partial : static_cast<float*>(y);
  const GpuStream s = as_stream(stream);
  if (plan.taps) {
    float* rearranged = static_cast<float*>(workspace);
    const int blocks = int(std::min<std::int64_t>((p.w_elems() + kThreads - 1) / kThreads, 4096));
    rearrange_weights_kernel<<<blocks, kThreads, 0, s>>>(p, wf, rearranged);
    check_launch("gpu.conv.igemm_f32_nchw weight rearrangement");
    wf = rearranged;
  }
  switch (plan.tile) {
    case 0:
      launch_tile<128, 128, 8>(p, plan.splits, xf, wf, out, epilogue, s);
      break;
    case 1:
      launch_tile<128, 128, 16>(p, plan.splits, xf, wf, out, epilogue, s);
      break;
    case 2:
      launch_tile<128, 64, 16>(p, plan.splits, xf, wf, out, epilogue, s);
      break;
    case 3:
      launch_tile<64, 128, 16>(p, plan.splits, xf, wf, out, epilogue, s);
      break;
    default:
      launch_tile<64, 64, 16>(p, plan.splits, xf, wf, out, epilogue, s);
      break;
  }
  check_launch("gpu.conv.gemm_1x1");
  if (plan.splits > 1) launch_splitk_reduce(p, plan.splits, partial, y, stream);
}

}  // namespace galley::backends::gpu
