// The implicit-GEMM operand loader of the tensor-core kernels for NHWC activations and KRSC weights
// whose channels per group are a multiple of 8 (igemm_tc's mma.sync kernel and the Hopper wgmma
// kernel in ../cuda/conv_igemm_wgmma.cu). Per group the GEMM is D[pixels][kg] = A[pixels][kred] *
// B[kg][kred]^T with kred = (r, s, c), c fastest, which is how both tensors are stored, so every
// 8-channel run is one 16-byte cp.async into a stage buffer of BK-element rows.
//
// Four threads share a row; thread t takes the BK/32 adjacent 16-byte chunks starting at chunk
// (t % 4) * BK/32 of rows t/4, t/4 + kThreads/4, ... Each chunk walks kred in order, one BK step per
// load() call (the calls come for consecutive steps), so its (r, s, c) position advances by adding,
// never dividing. Out-of-range rows, taps in the padding and kred past its end are zero-filled.
// BN = 0 makes it an activations-only loader (the Hopper producer warpgroup, whose weights come by TMA).
#pragma once

#include "conv_mma.cuh"

#if GALLEY_GPU_MMA
namespace galley::backends::gpu {

/// Byte offset of 16-byte chunk `chunk` of row `row` in a stage buffer of BK-half rows. The XOR
/// spreads the 8 rows an ldmatrix phase reads over all 32 banks: 64-byte rows (BK = 32) pair up in a
/// 128-byte bank line, so rows 2i, 2i+1 share an XOR key; 128-byte rows (BK = 64) each fill a line.
/// For BK = 64 this is exactly Hopper's 128-byte swizzle (address bits 4-6 ^= bits 7-9) when the
/// buffer is 1024-byte aligned, which is what lets wgmma read the same buffers.
template <int BK>
__device__ __forceinline__ unsigned swz(int row, int chunk) {
  if constexpr (BK == 32) return unsigned(row * 64 + ((chunk ^ ((row >> 1) & 3)) << 4));
  else return unsigned(row * 128 + ((chunk ^ (row & 7)) << 4));
}

/// kWeightsL2Only: weights bypass L1 (cp.async.cg), leaving L1 to the activations' reuse.
template <typename T, int BM, int BN, int BK, int kThreads, bool kWeightsL2Only = false>
struct IgemmTcVecLoader {
  static_assert(BK == 32 || BK == 64, "BK is 32 or 64");
  static constexpr int kRowsPerPass = kThreads / 4;
  static constexpr int kChunksPerThread = BK / 32;
  static constexpr int kARows = BM / kRowsPerPass, kBRows = BN / kRowsPerPass;  // rows per thread
  static_assert(kARows * kRowsPerPass == BM && kBRows * kRowsPerPass == BN, "tile rows must fill the passes");

  struct ChunkPos {
    int c, s, dh, dw, delta, kc;
    bool k_ok;
  };
  int ch0, row0;
  int a_ih[kARows], a_iw[kARows];
  int a_base[kARows];  // a row's element offset at (ih, iw), channel 0 of its group; 0 when out of range
  // A weight row's element offset, -1 past kg (32-bit: check() keeps tensors < 2^31); one unused entry
  // where BN = 0.
  int b_off[kBRows > 0 ? kBRows : 1];
  ChunkPos pos[kChunksPerThread];
  int row_wrap, tap_step, dh_limit;

  __device__ __forceinline__ IgemmTcVecLoader(const ConvParams& cp, int tid, int m0, int n0, int g,
                                              int step_begin) {
    ch0 = (tid & 3) * kChunksPerThread;
    row0 = tid >> 2;
    const int PQ = cp.p * cp.q;
    const int pixels = cp.n * PQ;
    const int kred = cp.cg * cp.r * cp.s;
#pragma unroll
    for (int i = 0; i < kARows; ++i) {
      const int pix = m0 + row0 + kRowsPerPass * i;
      if (pix < pixels) {
        const int nn = pix / PQ, pq = pix - nn * PQ;
        const int op = pq / cp.q, oq = pq - op * cp.q;
        a_ih[i] = op * cp.stride_h - cp.pad_h;
        a_iw[i] = oq * cp.stride_w - cp.pad_w;
        a_base[i] = nn * cp.h * cp.w * cp.c + g * cp.cg + (a_ih[i] * cp.w + a_iw[i]) * cp.c;
      } else {
        a_ih[i] = -(1 << 28);  // never in bounds
        a_iw[i] = 0;
        a_base[i] = 0;
      }
    }
#pragma unroll
    for (int i = 0; i < kBRows; ++i) {
      const int kk = n0 + row0 + kRowsPerPass * i;
      b_off[i] = kk < cp.kg ? (g * cp.kg + kk) * kred : -1;
    }
#pragma unroll
    for (int j = 0; j < kChunksPerThread; ++j) {
      const int kc = step_begin * BK + (ch0 + j) * 8;
      const int rs = kc / cp.cg, c = kc - rs * cp.cg;
      const int r = rs / cp.s, sx = rs - r * cp.s;
      pos[j].c = c;
      pos[j].s = sx;
      pos[j].dh = r * cp.dil_h;
      pos[j].dw = sx * cp.dil_w;
      pos[j].delta = (pos[j].dh * cp.w + pos[j].dw) * cp.c + c;
      pos[j].kc = kc;
      pos[j].k_ok = kc < kred;
    }
    tap_step = cp.dil_w * cp.c;                                // delta for s + 1
    row_wrap = cp.dil_h * cp.w * cp.c - (cp.s - 1) * tap_step;  // delta for r + 1, s from S - 1 back to 0
    dh_limit = cp.r * cp.dil_h;                                // dh at r == R: past the filter
  }

  /// Issues this thread's cp.async for the next BK step into stage buffers at shared addresses
  /// a_smem (BM rows) and b_smem (BN rows; unused where BN = 0); the caller commits the group or
  /// has an mbarrier track the copies.
  __device__ __forceinline__ void load(const ConvParams& cp, const T* __restrict__ x, const T* __restrict__ w,
                                       unsigned a_smem, unsigned b_smem) {
#pragma unroll
    for (int j = 0; j < kChunksPerThread; ++j) {
      const int ch = ch0 + j;
      ChunkPos& q = pos[j];
#pragma unroll
      for (int i = 0; i < kARows; ++i) {
        const int ih = a_ih[i] + q.dh, iw = a_iw[i] + q.dw;
        const bool ok = q.k_ok && unsigned(ih) < unsigned(cp.h) && unsigned(iw) < unsigned(cp.w);
        const T* src = ok ? x + (a_base[i] + q.delta) : x;
        mma::cp_async16(a_smem + swz<BK>(row0 + kRowsPerPass * i, ch), src, ok ? 16 : 0);
      }
#pragma unroll
      for (int i = 0; i < kBRows; ++i) {
        const bool ok = q.k_ok && b_off[i] >= 0;
        mma::cp_async16<!kWeightsL2Only>(b_smem + swz<BK>(row0 + kRowsPerPass * i, ch),
                                         ok ? w + (b_off[i] + q.kc) : w, ok ? 16 : 0);
      }
      // Next step: BK further along (c fastest, then s, then r).
      q.kc += BK;
      q.c += BK;
      q.delta += BK;
      while (q.c >= cp.cg) {
        q.c -= cp.cg;
        q.delta -= cp.cg;
        if (++q.s == cp.s) {
          q.s = 0;
          q.dw = 0;
          q.dh += cp.dil_h;
          q.delta += row_wrap;
        } else {
          q.dw += cp.dil_w;
          q.delta += tap_step;
        }
      }
      q.k_ok = q.dh < dh_limit;
    }
  }
};

}  // namespace galley::backends::gpu
#endif  // GALLEY_GPU_MMA
