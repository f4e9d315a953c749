// gpu.conv.igemm_tc's kernel: implicit GEMM on tensor cores for f16/bf16 NHWC (fp32 accumulate).
//
// Per group: D[M = n*p*q pixels][N = kg] = A[M][kred] * B[N][kred]^T with kred = (r, s, c), c
// fastest, which is how both NHWC activations and KRSC weights are stored, so every 8-channel run
// is one 16-byte cp.async. A block of 4 or 8 warps computes BM x BN with a 2 x (2|4) warp grid,
// BK = 32 or 64 per step, a 3-4 stage cp.async pipeline in XOR-swizzled shared memory, ldmatrix and
// mma.sync m16n8k16; the next k16 slice's fragments load while this slice's mma run, and there is
// one barrier per step. The loader walks (r, s, c) by adding (no divisions in the main loop).
// "vec" mode needs cg % 8 == 0; otherwise each element is gathered with scalar loads (the
// first layer of a network, c = 3). Split-K writes fp32 partials to a workspace.
// kNchwOut (gpu.conv.igemm_tc_nchw) writes y as NCHW: the same GEMM, with the epilogue's tile
// transposed in shared memory so each channel's pixel run leaves as 16-byte stores.
// The plan (tile, split-K) is the tuner's choice among igemm_tc_candidates() (conv_igemm_tc_tuning.hpp);
// without one, the cost model's (model_plan() below).
//
// On HIP (no mma.sync) the launcher runs the SIMT implicit GEMM instead, see igemm_tc_has_mma().
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "channel_pad.cuh"
#include "conv_igemm_tc_epilogue.cuh"
#include "conv_igemm_tc_loader.cuh"
#include "conv_igemm_tc_tuning.hpp"
#include "conv_mma.cuh"
#include "core/config.hpp"
#if GALLEY_CUDA_WGMMA
#include "backends/cuda/conv_igemm_wgmma.hpp"
#endif

namespace galley::backends::gpu {
namespace {

#if GALLEY_GPU_MMA

struct TcTile {
  int bm, bn, warps, bk, stages;
  double efficiency;
  bool planned;     // considered by the planner (others exist for measurement)
  int scalar_tile;  // the BK = 32 tile the scalar-gather path (cg % 8 != 0) runs instead
};
// BK = 32 tiles (0-4) read each 8-channel chunk of a row with one thread; BK = 64 tiles (5-8) give a
// thread two adjacent chunks, halving the barriers and the loader's address math per MAC.
// Tiles 3, 4 and 8 have 8 warps (warp tiles 64x32, 64x16): more warps to hide latency, more
// shared-memory reads per mma.
// 64x64's efficiency is set low so that for small grids the planner takes 128x128 with split-K,
// which keeps the tensor cores far busier than many small tiles do.
constexpr TcTile kTcTiles[] = {{128, 128, 4, 32, 4, 1.0, false, 0}, {128, 64, 4, 32, 4, 0.8, true, 1},
                               {64, 64, 4, 32, 4, 0.3, true, 2},    {128, 128, 8, 32, 4, 1.0, false, 3},
                               {128, 64, 8, 32, 4, 0.8, false, 4},  {128, 128, 4, 64, 3, 1.0, true, 0},
                               {128, 64, 4, 64, 4, 0.8, false, 1},  {64, 64, 4, 64, 4, 0.3, false, 2},
                               {128, 128, 8, 64, 3, 1.0, false, 3}};
constexpr int kTcTileCount = int(sizeof(kTcTiles) / sizeof(kTcTiles[0]));
constexpr int kPlanBk = 32;  // the planner's step count unit

// Plan tiles kTcTileCount.. are the Hopper wgmma tiles (../cuda/conv_igemm_wgmma.hpp), measured
// beside the mma.sync ones where the device runs them. Where a wgmma plan meets a path they do not
// have (NCHW output, the scalar gather) the mma.sync tile kWgmmaStandIn runs instead.
#if GALLEY_CUDA_WGMMA
constexpr int kPlanTileCount = kTcTileCount + kWgmmaTileCount;
bool wgmma_tile_usable() { return igemm_wgmma_available(); }
int tile_bm(int tile) {
  return tile < kTcTileCount ? kTcTiles[tile].bm : kWgmmaTiles[tile - kTcTileCount].bm;
}
int tile_bn(int tile) {
  return tile < kTcTileCount ? kTcTiles[tile].bn : kWgmmaTiles[tile - kTcTileCount].bn;
}
#else
constexpr int kPlanTileCount = kTcTileCount;
bool wgmma_tile_usable() { return false; }
int tile_bm(int tile) { return kTcTiles[tile].bm; }
int tile_bn(int tile) { return kTcTiles[tile].bn; }
#endif
constexpr int kWgmmaStandIn = 5;  // 128x128, BK = 64
// The wgmma tiles the tuner also times with split-K (kWgmmaTiles indices): the warp-specialized
// 128x128 and 128x64, the fastest shapes where one split leaves multiprocessors idle.
constexpr int kWgmmaSplitTiles[] = {4, 6};
#if GALLEY_CUDA_WGMMA
static_assert(kWgmmaTiles[kWgmmaSplitTiles[0]].specialized && kWgmmaTiles[kWgmmaSplitTiles[1]].specialized);
#endif

template <typename T, bool kVec, int BM, int BN, int WARPS_N, int BK, int STAGES, bool kNchwOut>
__global__ void __launch_bounds__(64 * WARPS_N)
    igemm_tc_kernel(ConvParams cp, const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y,
                    float* __restrict__ partial, int splits) {
  static_assert(BK == 32 || BK == 64, "BK is 32 or 64");
  static_assert(kVec || BK == 32, "the scalar gather runs BK = 32 only");
  constexpr int kThreads = 64 * WARPS_N;         // warp grid 2 x WARPS_N
  constexpr int kRowsPerPass = kThreads / 4;     // 4 loader threads per row
  constexpr int kChunksPerThread = BK / 32;      // 16-byte chunks of a row per loader thread
  constexpr int kKSlices = BK / 16;              // mma k16 slices per stage
  constexpr int WM = BM / 2, WN = BN / WARPS_N;  // warp tile
  constexpr int MT = WM / 16, NT = WN / 8;
  constexpr int A_ROWS = BM / kRowsPerPass, B_ROWS = BN / kRowsPerPass;  // rows per thread per stage
  constexpr int kStageBytes = (BM + BN) * BK * 2;
  extern __shared__ __align__(128) unsigned char smem[];

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int warp_m = warp / WARPS_N, warp_n = warp % WARPS_N;
  const int g = blockIdx.z % cp.groups;
  const int split = blockIdx.z / cp.groups;
  const int m0 = blockIdx.x * BM;
  const int n0 = blockIdx.y * BN;
  const int kred = cp.cg * cp.r * cp.s;
  const int PQ = cp.p * cp.q;
  const int pixels = cp.n * PQ;
  // Split-K: each split takes a run of whole BK steps (the last ones may get none and write zeros).
  const int total_steps = (kred + BK - 1) / BK;
  const int per_split = (total_steps + splits - 1) / splits;
  const int step_begin = split * per_split;
  const int nsteps = max(0, min(total_steps, step_begin + per_split) - step_begin);

  // The vec path's loader (conv_igemm_tc_loader.cuh); the scalar gather below reads its row state
  // (a_ih, a_iw, a_base, b_off) and decodes kred itself.
  IgemmTcVecLoader<T, BM, BN, BK, kThreads> loader(cp, tid, m0, n0, g, step_begin);
  const int ch0 = (tid & 3) * kChunksPerThread;
  const int row0 = tid >> 2;

  auto load_stage = [&](int stage, int step) {
    unsigned char* base = smem + stage * kStageBytes;
    const unsigned a_base_s = mma::smem_addr(base);
    if constexpr (kVec) {
      (void)step;
      loader.load(cp, x, w, a_base_s, a_base_s + BM * BK * 2);
    } else {
      // Scalar gather: decode each of the chunk's 8 kred entries once, reuse across rows.
      const int kc = step * BK + ch0 * 8;
      int e_dh[8], e_dw[8], e_c[8];
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        const int kk = kc + e;
        if (kk < kred) {
          const int rs = kk / cp.cg;
          e_c[e] = kk - rs * cp.cg;
          const int r = rs / cp.s;
          e_dh[e] = r * cp.dil_h;
          e_dw[e] = (rs - r * cp.s) * cp.dil_w;
        } else {
          e_c[e] = -1;
          e_dh[e] = e_dw[e] = 0;
        }
      }
#pragma unroll
      for (int i = 0; i < A_ROWS; ++i) {
        std::uint16_t v[8];
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          const int ih = loader.a_ih[i] + e_dh[e], iw = loader.a_iw[i] + e_dw[e];
          const bool ok = e_c[e] >= 0 && unsigned(ih) < unsigned(cp.h) && unsigned(iw) < unsigned(cp.w);
          v[e] = ok ? bits16(x[loader.a_base[i] + (e_dh[e] * cp.w + e_dw[e]) * cp.c + e_c[e]])
                    : std::uint16_t(0);
        }
        uint4 packed = make_uint4(v[0] | (unsigned(v[1]) << 16), v[2] | (unsigned(v[3]) << 16),
                                  v[4] | (unsigned(v[5]) << 16), v[6] | (unsigned(v[7]) << 16));
        *reinterpret_cast<uint4*>(base + swz<BK>(row0 + kRowsPerPass * i, ch0)) = packed;
      }
#pragma unroll
      for (int i = 0; i < B_ROWS; ++i) {
        std::uint16_t v[8];
#pragma unroll
        for (int e = 0; e < 8; ++e)
          v[e] = (loader.b_off[i] >= 0 && kc + e < kred) ? bits16(w[loader.b_off[i] + kc + e])
                                                         : std::uint16_t(0);
        uint4 packed = make_uint4(v[0] | (unsigned(v[1]) << 16), v[2] | (unsigned(v[3]) << 16),
                                  v[4] | (unsigned(v[5]) << 16), v[6] | (unsigned(v[7]) << 16));
        *reinterpret_cast<uint4*>(base + BM * BK * 2 + swz<BK>(row0 + kRowsPerPass * i, ch0)) = packed;
      }
    }
  };

  // Fragments of one k16 slice; two sets, so the next slice's ldmatrix is in flight while this
  // slice's mma run (ldmatrix and mma are volatile asm and keep their program order).
  unsigned af[2][MT][4];
  unsigned bfr[2][NT][2];
  auto load_frags = [&](int buf, int stage, int slice) {
    const unsigned a_base = mma::smem_addr(smem + stage * kStageBytes);
    const unsigned b_base = a_base + BM * BK * 2;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
      mma::ldmatrix_x4(af[buf][mt],
                       a_base + swz<BK>(warp_m * WM + mt * 16 + (lane & 15), slice * 2 + (lane >> 4)));
#pragma unroll
    for (int np = 0; np < NT / 2; ++np) {
      unsigned r4[4];
      mma::ldmatrix_x4(r4, b_base + swz<BK>(warp_n * WN + np * 16 + ((lane >> 4) << 3) + (lane & 7),
                                            slice * 2 + ((lane >> 3) & 1)));
      bfr[buf][2 * np][0] = r4[0];
      bfr[buf][2 * np][1] = r4[1];
      bfr[buf][2 * np + 1][0] = r4[2];
      bfr[buf][2 * np + 1][1] = r4[3];
    }
  };

  float acc[MT][NT][4];
  mma::zero_fragments(acc);

#pragma unroll
  for (int st = 0; st < STAGES - 1; ++st) {
    if (st < nsteps) load_stage(st, step_begin + st);
    mma::cp_async_commit();
  }
  mma::cp_async_wait<STAGES - 2>();
  __syncthreads();
  int read_stage = 0, write_stage = STAGES - 1;
  load_frags(0, 0, 0);
  // One barrier per step, before the last slice's prefetch of the next stage: after it no warp
  // reads the stage of step it - 1 any more, which the next iteration's first slice refills.
  for (int it = 0; it < nsteps; ++it) {
#pragma unroll
    for (int ks = 0; ks < kKSlices; ++ks) {
      if (ks == kKSlices - 1) {
        mma::cp_async_wait<STAGES - 2>();
        __syncthreads();
        read_stage = read_stage + 1 == STAGES ? 0 : read_stage + 1;
      }
      load_frags((ks + 1) & 1, read_stage, ks + 1 == kKSlices ? 0 : ks + 1);
      if (ks == 0) {
        const int nxt = it + STAGES - 1;
        if (nxt < nsteps) load_stage(write_stage, step_begin + nxt);
        mma::cp_async_commit();
        write_stage = write_stage + 1 == STAGES ? 0 : write_stage + 1;
      }
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
          mma::mma_16816<T>(acc[mt][nt], af[ks & 1][mt], bfr[ks & 1][nt][0], bfr[ks & 1][nt][1]);
    }
  }
  mma::cp_async_wait<0>();

  if constexpr (kNchwOut) {
    if (splits == 1) {
      // NCHW: the tile goes to shared memory transposed ([BN channels][BM pixels]); a channel's
      // pixels are contiguous in y, so 8 of them leave as one 16-byte store when p*q % 8 == 0
      // (then a run of 8 never crosses an image). kLdT keeps rows 16-byte aligned, and the
      // fragment writes (rows lane/4, columns 2*(lane%4)) land on 16 distinct banks.
      constexpr int kLdT = BM + 8;
      static_assert(BN * kLdT * 2 <= STAGES * kStageBytes, "epilogue tile must fit the pipeline buffers");
      __syncthreads();  // every warp is done reading the stages
      std::uint16_t* t16 = reinterpret_cast<std::uint16_t*>(smem);
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int row = warp_m * WM + mt * 16 + (lane >> 2) + half * 8;
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) {
            const int col = warp_n * WN + nt * 8 + (lane & 3) * 2;
            t16[col * kLdT + row] = bits16(from_f32<T>(acc[mt][nt][half * 2]));
            t16[(col + 1) * kLdT + row] = bits16(from_f32<T>(acc[mt][nt][half * 2 + 1]));
          }
        }
      __syncthreads();
      std::uint16_t* y16 = reinterpret_cast<std::uint16_t*>(y);
      if (PQ % 8 == 0) {
        constexpr int kChunksPerCol = BM / 8;
        for (int idx = tid; idx < BN * kChunksPerCol; idx += kThreads) {
          const int col = idx / kChunksPerCol, rc = idx - col * kChunksPerCol;
          const int pix = m0 + rc * 8, kk = n0 + col;
          if (pix < pixels && kk < cp.kg) {
            const int nn = pix / PQ, pq = pix - nn * PQ;
            *reinterpret_cast<uint4*>(y16 + (std::int64_t(nn) * cp.k + g * cp.kg + kk) * PQ + pq) =
                *reinterpret_cast<const uint4*>(t16 + col * kLdT + rc * 8);
          }
        }
      } else {
        for (int idx = tid; idx < BN * BM; idx += kThreads) {
          const int col = idx / BM, row = idx - col * BM;
          const int pix = m0 + row, kk = n0 + col;
          if (pix < pixels && kk < cp.kg) {
            const int nn = pix / PQ, pq = pix - nn * PQ;
            y16[(std::int64_t(nn) * cp.k + g * cp.kg + kk) * PQ + pq] = t16[col * kLdT + row];
          }
        }
      }
      return;
    }
  }

  // acc[mt][nt] holds rows lane/4 (+8) and columns 2*(lane%4) (+1) of its 16x8 tile.
  if constexpr (!kNchwOut) {
    store_nhwc_tile<T, BM, BN, kThreads, STAGES * kStageBytes>(
        cp, y, partial, splits, split, m0, n0, g, smem, [&](auto&& store_pair) {
#pragma unroll
          for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int half = 0; half < 2; ++half)
#pragma unroll
              for (int nt = 0; nt < NT; ++nt)
                store_pair(warp_m * WM + mt * 16 + (lane >> 2) + half * 8,
                           warp_n * WN + nt * 8 + (lane & 3) * 2, acc[mt][nt][half * 2],
                           acc[mt][nt][half * 2 + 1]);
        });
    return;
  }

  // NCHW output with split-K (splits == 1 returned above): fp32 partials in y's NCHW layout, where
  // the next channel is p*q elements on.
  const std::int64_t y_elems = std::int64_t(pixels) * cp.k;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int pix = m0 + warp_m * WM + mt * 16 + (lane >> 2) + half * 8;
      if (pix >= pixels) continue;
      const int nn = pix / PQ, pq = pix - nn * PQ;
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const int col = n0 + warp_n * WN + nt * 8 + (lane & 3) * 2;
        if (col >= cp.kg) continue;
        float* dst = partial + split * y_elems + (std::int64_t(nn) * cp.k + g * cp.kg + col) * PQ + pq;
        dst[0] = acc[mt][nt][half * 2];
        if (col + 1 < cp.kg) dst[PQ] = acc[mt][nt][half * 2 + 1];
      }
    }
  }
}

// Channels not a multiple of 8 (a network's first layer, c = 3): the NHWC solver copies x and w into
// the workspace with channels zero-padded to the next multiple of 8, so the GEMM takes the 16-byte
// cp.async path (c = 3 -> 8: 2.7x the MACs, on tensor cores that the scalar gather leaves idle).
// Groups of such channels keep the scalar gather, and so does the NCHW solver (its own workspace).
bool pads_channels(const ConvParams& p) { return p.cg % 8 != 0 && p.groups == 1; }

// Up to 4 channels, stride 2 along w, no dilation along w (ResNet's first layer, 7x7 stride 2 over
// c = 3): padding to 8 channels would make 8/3 of the MACs zeros. Instead x is padded to 4 channels
// and two neighbouring columns are read as one column of 8 channels: output column q reads input
// columns 2q - pad_w + s, so with s' = s + (pad_w odd) it reads column pair q - pad' + s'/2, half
// s' % 2. The problem becomes a stride-1 convolution along w over ceil(w / 2) pairs of 8 channels with
// ceil((s + pad_w % 2) / 2) taps (7x7 -> 7x4: 224 MACs a pixel instead of 392), and the weights are
// rearranged to match (the taps outside the filter are zeros).
bool folds_columns(const ConvParams& p) {
  return pads_channels(p) && p.cg <= 4 && p.stride_w == 2 && p.dil_w == 1;
}

ConvParams padded_view(const ConvParams& p) {
  ConvParams v = p;
  v.c = v.cg = (p.cg + 7) / 8 * 8;
  if (folds_columns(p)) {
    const int shift = p.pad_w % 2;
    v.w = (p.w + 1) / 2;
    v.s = (p.s + shift + 1) / 2;
    v.pad_w = (p.pad_w + shift) / 2;
    v.stride_w = 1;  // v.q stays p.q: the kernels compute p.q columns whatever the view's padding implies
  }
  return v;
}

std::size_t align256(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

/// Workspace of a padded problem: [split-K partials][x padded][w padded], each 256-byte aligned.
struct PadLayout {
  std::size_t x_offset = 0, w_offset = 0, total = 0;
};
PadLayout pad_layout(const ConvParams& p, int splits) {
  const ConvParams v = padded_view(p);
  PadLayout layout;
  layout.x_offset = splits > 1 ? align256(std::size_t(splits) * std::size_t(p.y_elems()) * sizeof(float)) : 0;
  layout.w_offset = layout.x_offset + align256(std::size_t(v.x_elems()) * 2);
  layout.total = layout.w_offset + align256(std::size_t(v.w_elems()) * 2);
  return layout;
}

/// x and w folded for folds_columns(), in one launch: a first layer's call is short enough for
/// each launch's host cost to show. Items [0, x_pairs) are x's column pairs, one 16-byte chunk each,
///   x_out[n][h][pair][half * 4 + ch] = x[n][h][2 * pair + half][ch] (0 past w or for ch >= c);
/// the rest are w's (k x r x s x c) elements, rearranged to match,
///   w_out[k][r][t][half * 4 + ch] = w[k][r][2t + half - shift][ch] (0 outside the filter or for ch >= c).
__global__ void __launch_bounds__(256)
    fold_columns_kernel(const std::uint16_t* __restrict__ x, const std::uint16_t* __restrict__ w,
                        std::uint16_t* __restrict__ x_out, std::uint16_t* __restrict__ w_out,
                        std::int64_t x_pairs, std::int64_t w_total, int width, int pairs, int s, int taps,
                        int shift, int c) {
  for (std::int64_t idx = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; idx < x_pairs + w_total;
       idx += std::int64_t(gridDim.x) * blockDim.x) {
    if (idx < x_pairs) {
      const std::int64_t row = idx / pairs;
      const int pair = int(idx - row * pairs);
      std::uint16_t v[8];
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        const int col = 2 * pair + e / 4, ch = e % 4;
        v[e] = col < width && ch < c ? x[(row * width + col) * c + ch] : std::uint16_t(0);
      }
      store_u16x8(x_out + idx * 8, v);
    } else {
      const std::int64_t i = idx - x_pairs;
      const int e = int(i % 8), t = int(i / 8 % taps);
      const std::int64_t row = i / 8 / taps;
      const int tap = 2 * t + e / 4 - shift, ch = e % 4;
      w_out[i] = tap >= 0 && tap < s && ch < c ? w[(row * s + tap) * c + ch] : std::uint16_t(0);
    }
  }
}

void launch_fold_columns(const ConvParams& p, const void* x, const void* w, void* x_out, void* w_out,
                         GpuStream stream) {
  const ConvParams v = padded_view(p);
  const std::int64_t x_pairs = std::int64_t(p.n) * p.h * v.w, w_total = std::int64_t(p.k) * p.r * v.s * 8;
  fold_columns_kernel<<<int(std::min<std::int64_t>((x_pairs + w_total + 255) / 256, 65535)), 256, 0,
                        stream>>>(static_cast<const std::uint16_t*>(x), static_cast<const std::uint16_t*>(w),
                                  static_cast<std::uint16_t*>(x_out), static_cast<std::uint16_t*>(w_out),
                                  x_pairs, w_total, p.w, v.w, p.s, v.s, p.pad_w % 2, p.cg);
  check_launch("gpu.conv.igemm_tc: column folding");
}

template <typename T, bool kVec, bool kNchwOut>
void launch_tc(const ConvParams& p, const IgemmPlan& plan, const T* x, const T* w, T* y, float* partial,
               GpuStream stream) {
  int tile = plan.tile;
  if (tile >= kTcTileCount) {  // a wgmma tile
#if GALLEY_CUDA_WGMMA
    if constexpr (kVec && !kNchwOut) {
      launch_igemm_wgmma(p, tile - kTcTileCount, plan.splits, x, w, y, partial, stream);
      return;
    }
#endif
    tile = kWgmmaStandIn;
  }
  if (!kVec) tile = kTcTiles[tile].scalar_tile;  // same bm x bn
  const TcTile& t = kTcTiles[tile];
  const dim3 grid(ceil_div(p.pixels(), t.bm), ceil_div(p.kg, t.bn), p.groups * plan.splits);
  auto run = [&](auto kernel) {
    const int smem = t.stages * (t.bm + t.bn) * t.bk * 2;
    // One flag word per tile: the kernels of all tiles share one pointer type.
    static std::atomic<std::uint64_t> raised[kTcTileCount];
    once_per_device(raised[tile], [&] {
      allow_dynamic_smem(kernel, smem, "gpu.conv.igemm_tc");
      // All of the unified L1/shared array as shared memory, so that two blocks of up to ~110 KiB
      // fit one multiprocessor; a hint, so a refusal costs only occupancy.
      (void)cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                 int(cudaSharedmemCarveoutMaxShared));
    });
    kernel<<<grid, 32 * t.warps, smem, stream>>>(p, x, w, y, partial, plan.splits);
  };
  switch (tile) {
    case 0:
      run(igemm_tc_kernel<T, kVec, 128, 128, 2, 32, 4, kNchwOut>);
      break;
    case 1:
      run(igemm_tc_kernel<T, kVec, 128, 64, 2, 32, 4, kNchwOut>);
      break;
    case 2:
      run(igemm_tc_kernel<T, kVec, 64, 64, 2, 32, 4, kNchwOut>);
      break;
    case 3:
      run(igemm_tc_kernel<T, kVec, 128, 128, 4, 32, 4, kNchwOut>);
      break;
    case 4:
      run(igemm_tc_kernel<T, kVec, 128, 64, 4, 32, 4, kNchwOut>);
      break;
    default:
      if constexpr (kVec) {
        switch (tile) {
          case 5:
            run(igemm_tc_kernel<T, true, 128, 128, 2, 64, 3, kNchwOut>);
            break;
          case 6:
            run(igemm_tc_kernel<T, true, 128, 64, 2, 64, 4, kNchwOut>);
            break;
          case 7:
            run(igemm_tc_kernel<T, true, 64, 64, 2, 64, 4, kNchwOut>);
            break;
          default:
            run(igemm_tc_kernel<T, true, 128, 128, 4, 64, 3, kNchwOut>);
            break;
        }
      }
      break;
  }
}

#endif  // GALLEY_GPU_MMA

}  // namespace

bool igemm_tc_has_mma() { return GALLEY_GPU_MMA != 0; }

#if GALLEY_GPU_MMA
namespace {
/// A plan tile as the cost model sees it: its shape, its pace per multiprocessor against the
/// mma.sync 128x128 tile's (1.0), and how many of its blocks share a multiprocessor.
struct ModelTile {
  int bm, bn;
  double efficiency;
  int blocks_per_sm;
};

// The wgmma tiles' pace where the device runs them (kWgmmaTiles' order), fitted by
// bench/igemm_plan_fit.py to the tuner's per-config times over the f16 NHWC problem list, forward and
// backward data through the forward view (scripts/gpu-new-paths' fitfwd step): with these the
// untuned plan runs within 4% of the fastest timed config (geomean). The warp-specialized tiles
// (4-7) gain least where the activations' gather, still cp.async address math in the producer,
// bounds the pace.
// Stage buffers of 96 KiB or less leave room for two blocks per multiprocessor, larger ones for one.
#if GALLEY_CUDA_WGMMA
constexpr double kWgmmaEfficiency[] = {1.3, 1.3, 1.6, 0.95, 1.7, 1.8, 1.6, 1.8};
static_assert(std::size(kWgmmaEfficiency) == std::size(kWgmmaTiles));

int wgmma_blocks_per_sm(const WgmmaTile& t) {
  constexpr int kSharedPerSm = 227 * 1024;
  return std::clamp(kSharedPerSm / wgmma_stage_bytes(t), 1, 2);
}
#endif

/// The tiles the model weighs for `p`: the planned mma.sync tiles, and the wgmma tiles where the
/// device runs them and the problem takes their path (NHWC, 8-channel rows or padded to them).
std::vector<std::pair<int, ModelTile>> model_tiles(const ConvParams& p, bool wgmma) {
  std::vector<std::pair<int, ModelTile>> out;
  for (int t = 0; t < kTcTileCount; ++t)
    if (kTcTiles[t].planned) out.push_back({t, {kTcTiles[t].bm, kTcTiles[t].bn, kTcTiles[t].efficiency, 2}});
#if GALLEY_CUDA_WGMMA
  if (wgmma && wgmma_tile_usable() && p.nhwc && (p.cg % 8 == 0 || pads_channels(p)))
    for (int t = 0; t < kWgmmaTileCount; ++t)
      out.push_back(
          {kTcTileCount + t,
           {kWgmmaTiles[t].bm, kWgmmaTiles[t].bn, kWgmmaEfficiency[t], wgmma_blocks_per_sm(kWgmmaTiles[t])}});
#else
  (void)p, (void)wgmma;
#endif
  return out;
}

/// The cost model's plan: waves of blocks times each block's steps, plus split-K's traffic. What a
/// call without a tuned choice runs, and the first of the tuner's candidates.
IgemmPlan model_plan(const ConvParams& p, int sm_count, bool wgmma = true) {
  constexpr double kPeak = 500e12, kBandwidth = 3.0e12;
  const std::int64_t steps = (p.kred() + kPlanBk - 1) / kPlanBk;
  IgemmPlan best;
  double best_time = INFINITY;
  for (const auto& [t, shape] : model_tiles(p, wgmma)) {
    const int slots = std::max(1, sm_count) * shape.blocks_per_sm;
    const std::int64_t tiles =
        std::int64_t(ceil_div(p.pixels(), shape.bm)) * ceil_div(p.kg, shape.bn) * p.groups;
    for (int splits : {1, 2, 3, 4, 6, 8}) {
      if (splits > 1 && steps / splits < 4) break;
      const std::int64_t per = (steps + splits - 1) / splits;
      const std::int64_t blocks = tiles * splits;
      const std::int64_t waves = (blocks + slots - 1) / slots;
      // Each block also pays a pipeline fill of ~3 steps.
      double time = double(waves) * 2.0 * shape.bm * shape.bn * kPlanBk * (per + 3) /
                    (shape.efficiency * kPeak / slots);
      if (splits > 1) time += double(splits + 1) * p.y_elems() * 4.0 / kBandwidth + 3e-6;
      if (time < best_time * 0.97) {
        best_time = time;
        best.tile = t;
        best.bm = shape.bm;
        best.bn = shape.bn;
        best.splits = splits;
      }
    }
  }
  return igemm_tc_plan_for(p, best.tile, best.splits);
}
}  // namespace
#endif

IgemmPlan plan_igemm_tc(const ConvParams& p, int sm_count, bool wgmma) {
#if GALLEY_GPU_MMA
  // Development only: GALLEY_DEBUG_IGEMM_TC_PLAN="tile:splits" forces a plan (tile sweeps on the GPU).
  if (const auto& forced = env::config().debug_igemm_tc_plan) {
    const auto [tile, splits] = *forced;  // syntax and splits validated with the configuration
    const std::string text = std::to_string(tile) + ":" + std::to_string(splits);
    if (tile >= kPlanTileCount)
      throw Error(Status::invalid_argument, "GALLEY_DEBUG_IGEMM_TC_PLAN='" + text + "': tile must be 0.." +
                                                std::to_string(kPlanTileCount - 1));
    if (tile >= kTcTileCount && !wgmma_tile_usable())
      throw Error(Status::invalid_argument, "GALLEY_DEBUG_IGEMM_TC_PLAN='" + text + "': tile " +
                                                std::to_string(tile) +
                                                " is a wgmma tile, which this device does not run");
    return igemm_tc_plan_for(p, tile, splits);
  }
  return model_plan(p, sm_count, wgmma);
#else
  (void)wgmma;
  return plan_igemm_f32(p, sm_count);
#endif
}

IgemmPlan igemm_tc_plan_for(const ConvParams& p, int tile, int splits) {
#if GALLEY_GPU_MMA
  IgemmPlan plan;
  plan.tile = std::clamp(tile, 0, kPlanTileCount - 1);
  plan.bm = tile_bm(plan.tile);
  plan.bn = tile_bn(plan.tile);
  plan.wgmma = plan.tile >= kTcTileCount;
  plan.splits = std::max(1, splits);
  plan.workspace_bytes = pads_channels(p) ? pad_layout(p, plan.splits).total
                         : plan.splits > 1
                             ? std::size_t(plan.splits) * std::size_t(p.y_elems()) * sizeof(float)
                             : 0;
  return plan;
#else
  return igemm_f32_plan_for(p, tile, splits);
#endif
}

#if GALLEY_GPU_MMA
namespace {

template <bool kNchwOut>
void launch_tc_any(const ConvParams& p, const IgemmPlan& plan, const void* x, const void* w, void* y,
                   void* workspace, void* stream) {
  if (plan.splits > 1 && workspace == nullptr)
    throw Error(Status::invalid_argument, "gpu.conv.igemm_tc: split-K plan needs a workspace of " +
                                              std::to_string(plan.workspace_bytes) + " bytes, got none");
  if (!p.nhwc || (p.dtype != DType::f16 && p.dtype != DType::bf16))
    throw Error(Status::unsupported, "gpu.conv.igemm_tc: needs f16/bf16 NHWC");
  float* partial = static_cast<float*>(workspace);
  const bool vec = p.cg % 8 == 0;
  const GpuStream s = as_stream(stream);
  if (p.dtype == DType::f16) {
    auto xt = static_cast<const __half*>(x);
    auto wt = static_cast<const __half*>(w);
    auto yt = static_cast<__half*>(y);
    vec ? launch_tc<__half, true, kNchwOut>(p, plan, xt, wt, yt, partial, s)
        : launch_tc<__half, false, kNchwOut>(p, plan, xt, wt, yt, partial, s);
  } else {
    auto xt = static_cast<const bf16_t*>(x);
    auto wt = static_cast<const bf16_t*>(w);
    auto yt = static_cast<bf16_t*>(y);
    vec ? launch_tc<bf16_t, true, kNchwOut>(p, plan, xt, wt, yt, partial, s)
        : launch_tc<bf16_t, false, kNchwOut>(p, plan, xt, wt, yt, partial, s);
  }
  check_launch("gpu.conv.igemm_tc");
  // Partials are in y's layout (NHWC, or NCHW with kNchwOut), so the reduction is elementwise.
  if (plan.splits > 1) launch_splitk_reduce(p, plan.splits, partial, y, stream);
}

// The tuner's candidates beyond the model's plan: the tiles that have won some problem when measured (the
// 128x64 one on N = 64 layers, 128x128 with BK 64 on large-M 1x1 layers, the 8-warp one where
// 128x128 leaves multiprocessors idle), split-K where one split leaves multiprocessors idle, and the
// Hopper wgmma tiles where the device has them, split-K on the warp-specialized 128x128 and 128x64
// ones: up to 15 plans, 29 with the wgmma tiles.
std::vector<IgemmTcConfig> candidate_plans(const ConvParams& p, int sm_count) {
  const IgemmPlan model = model_plan(p, sm_count);
  std::vector<IgemmTcConfig> out{{model.tile, model.splits}};
  auto add = [&](int tile, int splits) {
    const int bk = tile < kTcTileCount ? kTcTiles[tile].bk : 64;
    const std::int64_t steps = (p.kred() + bk - 1) / bk;
    if (splits > 1 && steps < 2 * splits) return;  // each split gets at least 2 steps
    for (const IgemmTcConfig& c : out)
      if (c.tile == tile && c.splits == splits) return;
    out.push_back({tile, splits});
  };
  for (int tile : {5, 1, 8, 2, 0}) add(tile, 1);
  // Split-K only pays where one split leaves SMs idle.
  const std::int64_t big_tiles = std::int64_t(ceil_div(p.pixels(), 128)) * ceil_div(p.kg, 128) * p.groups;
  if (big_tiles < 2 * std::int64_t(sm_count)) {
    for (int splits : {2, 3, 4}) {
      add(5, splits);
      add(8, splits);
    }
    add(1, 2);
    add(1, 4);
    add(2, 2);
  }
  // Hopper: the wgmma tiles (vec path only: channels per group a multiple of 8, or padded to it), the
  // warp-specialized ones first, the likelier winners where a time box cuts the list short.
  if (wgmma_tile_usable() && (p.cg % 8 == 0 || pads_channels(p))) {
#if GALLEY_CUDA_WGMMA
    for (int pass = 0; pass < 2; ++pass)
      for (int wt = 0; wt < kWgmmaTileCount; ++wt)
        if (kWgmmaTiles[wt].specialized == (pass == 0)) add(kTcTileCount + wt, 1);
#endif
    if (big_tiles < 2 * std::int64_t(sm_count))
      for (int splits : {2, 3, 4})
        for (int wt : kWgmmaSplitTiles) add(kTcTileCount + wt, splits);
  }
  return out;
}

}  // namespace
#endif  // GALLEY_GPU_MMA

std::string igemm_tc_channel_note(const ConvParams& p) {
#if GALLEY_GPU_MMA
  if (p.cg % 8 == 0) return "";
  if (p.groups != 1) return "scalar gather";
  if (folds_columns(p))
    return "column pairs folded into 8 channels in the workspace (" + std::to_string(p.r) + "x" +
           std::to_string(padded_view(p).s) + " taps)";
  return "channels padded to 8 in the workspace";
#else
  (void)p;
  return "";
#endif
}

IgemmPlan igemm_tc_without_wgmma(const ConvParams& p, const IgemmPlan& plan) {
#if GALLEY_GPU_MMA
  if (plan.tile >= kTcTileCount) return igemm_tc_plan_for(p, kWgmmaStandIn, plan.splits);
#endif
  (void)p;
  return plan;
}

void launch_conv_igemm_tc(const ConvParams& p, const IgemmPlan& plan, const void* x, const void* w, void* y,
                          void* workspace, void* stream) {
#if GALLEY_GPU_MMA
  if (pads_channels(p) && p.nhwc && (p.dtype == DType::f16 || p.dtype == DType::bf16)) {
    const PadLayout layout = pad_layout(p, plan.splits);
    if (workspace == nullptr)
      throw Error(Status::invalid_argument, "gpu.conv.igemm_tc: c = " + std::to_string(p.c) +
                                                " needs a workspace of " + std::to_string(layout.total) +
                                                " bytes for the channel-padded copies, got none");
    const ConvParams v = padded_view(p);
    unsigned char* base = static_cast<unsigned char*>(workspace);
    if (folds_columns(p)) {
      launch_fold_columns(p, x, w, base + layout.x_offset, base + layout.w_offset, as_stream(stream));
    } else {
      launch_pad_channels(x, base + layout.x_offset, std::int64_t(p.n) * p.h * p.w, p.c, v.c,
                          as_stream(stream));
      launch_pad_channels(w, base + layout.w_offset, std::int64_t(p.k) * p.r * p.s, p.cg, v.c,
                          as_stream(stream));
    }
    launch_tc_any<false>(v, plan, base + layout.x_offset, base + layout.w_offset, y,
                         plan.splits > 1 ? base : nullptr, stream);
    return;
  }
  launch_tc_any<false>(p, plan, x, w, y, workspace, stream);
#else
  launch_conv_igemm_f32(p, plan, x, w, y, workspace, stream);
#endif
}

void launch_conv_igemm_tc_nchw_out(const ConvParams& p, const IgemmPlan& plan, const void* x, const void* w,
                                   void* y, void* workspace, void* stream) {
#if GALLEY_GPU_MMA
  launch_tc_any<true>(p, plan, x, w, y, workspace, stream);
#else
  (void)p, (void)plan, (void)x, (void)w, (void)y, (void)workspace, (void)stream;
  throw Error(Status::unsupported, "gpu.conv.igemm_tc: the NCHW-output kernel needs mma.sync (CUDA)");
#endif
}

std::string IgemmTcConfig::to_string() const {
  return "tile=" + std::to_string(tile) + ",splits=" + std::to_string(splits);
}

std::optional<IgemmTcConfig> IgemmTcConfig::parse(std::string_view text) {
  int tile = -1, splits = 0;
  char tail = 0;
  const std::string copy(text);
  if (std::sscanf(copy.c_str(), "tile=%d,splits=%d%c", &tile, &splits, &tail) != 2) return std::nullopt;
  IgemmTcConfig out{tile, splits};
  if (out.to_string() != text) return std::nullopt;  // "tile=05", "tile=+5", spaces: not the stored form
  return out;
}

std::vector<IgemmTcConfig> igemm_tc_candidates(const ConvParams& p, int sm_count) {
#if GALLEY_GPU_MMA
  if (env::config().debug_igemm_tc_plan || !env::config().debug_igemm_tc_tune) {
    const IgemmPlan only = plan_igemm_tc(p, sm_count);
    return {{only.tile, only.splits}};
  }
  return candidate_plans(p, sm_count);
#else
  const IgemmPlan only = plan_igemm_f32(p, sm_count);
  return {{only.tile, only.splits}};
#endif
}

bool igemm_tc_config_usable(const ConvParams& p, int sm_count, const IgemmTcConfig& config) {
#if GALLEY_GPU_MMA
  (void)p, (void)sm_count;
  if (config.tile < 0 || config.tile >= kPlanTileCount || config.splits < 1 || config.splits > 64)
    return false;
  return config.tile < kTcTileCount || wgmma_tile_usable();
#else
  return config == igemm_tc_candidates(p, sm_count).front();
#endif
}

}  // namespace galley::backends::gpu
