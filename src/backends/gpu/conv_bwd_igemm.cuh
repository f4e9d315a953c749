// The tiled GEMM main loops both backward implicit GEMMs share, and their tile table and planner.
// A 256-thread block computes a BM x BN tile of D = A * B, kBk reduction entries per step,
// double-buffered in shared memory with the next step's global loads in flight during the math;
// each thread owns TM x TN = (BM / 16) x (BN / 16) fp32 accumulators. Three main loops fill them:
//   Mainloop<T, BM, BN, false>      fp32 FMA on the SIMT cores, kBk 8 (igemm_f32's layout forward);
//   Mainloop<T, BM, BN, true>       f16/bf16 tensor cores (mma.sync m16n8k16, conv_mma.cuh), kBk 16:
//                                   8 warps as 2 x 4, each a (BM / 2) x (BN / 4) warp tile;
//   Mainloop<float, BM, BN, true>   f32 on tensor cores as 3xTF32, the same warp tiling, kBk 16:
//                                   each operand is split into a TF32 part and the TF32 of what it
//                                   leaves, and big*big + big*small + small*big (the small*small term
//                                   is below fp32's rounding) keep fp32's accuracy.
// kUseMma<T> picks for f16/bf16: tensor cores where the build has them (not on HIP). f32 takes the
// 3xTF32 loop where uses_mma(f32) says so (unless GALLEY_DEBUG_3XTF32=0), else the SIMT one.
//
// What the operands are, and how each thread gathers its share of them, is the Loader's business
// (conv_bwd_igemm_data.cu, conv_bwd_igemm_weights.cu). A Loader has
//   int a_row, a_k;   this thread's A entries: row a_row, reduction entries a_k .. a_k + EA - 1
//   int b_col, b_k;   this thread's B entries: column b_col, reduction entries b_k .. b_k + EB - 1
//                     (EA = BM * kBk / 256, EB = BN * kBk / 256; a_k and b_k multiples of them)
//   void load(int step, float (&a)[EA], float (&b)[EB]);   zeros outside the problem
// so it can map threads along whichever index is contiguous in memory for its layout.
#pragma once

#include <cmath>

#include "conv_bwd_kernels.hpp"
#include "conv_device.cuh"
#include "conv_mma.cuh"
#include "core/config.hpp"

namespace galley::backends::gpu::bwd_igemm {

constexpr int kThreads = 256;

struct TileShape {
  int bm, bn;
  int blocks_per_sm;
  double efficiency;  // relative per-block throughput, for the planner
};
inline constexpr TileShape kTiles[] = {{128, 128, 1, 1.0}, {64, 64, 2, 0.72}};
inline constexpr int kTileCount = 2;

template <typename T>
inline constexpr bool kUseMma = GALLEY_GPU_MMA && !std::is_same_v<T, float>;
/// Whether launches of `dtype` take a tensor-core main loop: kUseMma's, and for f32 the 3xTF32 one
/// unless GALLEY_DEBUG_3XTF32=0.
inline bool uses_mma(DType dtype) {
  return GALLEY_GPU_MMA && (dtype != DType::f32 || env::config().debug_3xtf32);
}
/// Runs launch(std::bool_constant<kMma>{}) with the main loop uses_mma(dtype) picks for T.
template <typename T, class Launch>
void with_mainloop(DType dtype, const Launch& launch) {
  if constexpr (std::is_same_v<T, float> && GALLEY_GPU_MMA) {
    if (uses_mma(dtype)) {
      launch(std::true_type{});
      return;
    }
    launch(std::false_type{});
  } else {
    launch(std::bool_constant<kUseMma<T>>{});
  }
}
/// Reduction entries per step of the main loop `dtype` takes.
inline int step_depth(DType dtype) { return uses_mma(dtype) ? 16 : 8; }
/// The planner's model of that main loop's multiply-add rate (flop/s) on a whole chip: 3xTF32 issues
/// three MMAs at half the 16-bit rate for each product.
inline double peak_rate(DType dtype) {
  if (!uses_mma(dtype)) return 60e12;
  return dtype == DType::f32 ? 400e12 / 6 : 400e12;
}

/// The double-buffered step loop of every main loop: step_begin's operands are loaded and stored to
/// buffer 0; then each step's math(buf) runs with the next step's global loads in flight, which land
/// in the other buffer after it, one barrier a step. store(buf, a, b) writes this thread's loaded
/// values to the shared tiles of buffer buf.
template <int EA, int EB, class Loader, class Store, class Math>
__device__ __forceinline__ void double_buffered_steps(Loader& ld, int step_begin, int step_end,
                                                      const Store& store, const Math& math) {
  float a_reg[EA], b_reg[EB];
  ld.load(step_begin, a_reg, b_reg);
  store(0, a_reg, b_reg);
  __syncthreads();
  for (int step = step_begin; step < step_end; ++step) {
    const int buf = (step - step_begin) & 1;
    const bool more = step + 1 < step_end;
    if (more) ld.load(step + 1, a_reg, b_reg);
    math(buf);
    if (more) store(buf ^ 1, a_reg, b_reg);
    __syncthreads();
  }
}

#if GALLEY_GPU_MMA
/// acc[i][j] of the tensor-core main loops: mma tile (i / 2, j / 2) of the warp, fragment element
/// (i % 2) * 2 + j % 2.
template <int MI, int NI>
__device__ __forceinline__ void fragments_to_acc(const float (&d)[MI][NI][4], float (&acc)[2 * MI][2 * NI]) {
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int ni = 0; ni < NI; ++ni)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mi * 2 + e / 2][ni * 2 + e % 2] = d[mi][ni][e];
}
#endif

template <typename T, int BM, int BN, bool kMma>
struct Mainloop;

template <typename T, int BM, int BN>
struct Mainloop<T, BM, BN, false> {
  static constexpr int kBk = 8;
  /// Row (i < BM / 16) and column (j < BN / 16) within the block tile of this thread's acc[i][j].
  __device__ static __forceinline__ int row(int i) {
    return (i / 4) * (BM / 2) + int(threadIdx.x / 16) * 4 + (i % 4);
  }
  __device__ static __forceinline__ int col(int j) {
    return (j / 4) * (BN / 2) + int(threadIdx.x % 16) * 4 + (j % 4);
  }

  template <class Loader>
  __device__ static __forceinline__ void run(Loader& ld, int step_begin, int step_end,
                                             float (&acc)[BM / 16][BN / 16]) {
    constexpr int EA = BM * kBk / kThreads, EB = BN * kBk / kThreads;
    constexpr int TM = BM / 16, TN = BN / 16;
    constexpr int kPadA = BM + 4, kPadB = BN + 4;  // +4 floats: fewer bank conflicts, float4 alignment kept
    __shared__ __align__(16) float As[2][kBk][kPadA];
    __shared__ __align__(16) float Bs[2][kBk][kPadB];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
      for (int j = 0; j < TN; ++j) acc[i][j] = 0.f;
    if (step_begin >= step_end) return;

    const auto store_shared = [&](int buf, const float(&a_reg)[EA], const float(&b_reg)[EB]) {
#pragma unroll
      for (int i = 0; i < EA; ++i) As[buf][ld.a_k + i][ld.a_row] = a_reg[i];
#pragma unroll
      for (int i = 0; i < EB; ++i) Bs[buf][ld.b_k + i][ld.b_col] = b_reg[i];
    };
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    double_buffered_steps<EA, EB>(ld, step_begin, step_end, store_shared, [&](int buf) {
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
    });
  }
};

#if GALLEY_GPU_MMA
// Tiles are stored [row][k] as 16-bit values, k contiguous, so each fragment register of
// mma.m16n8k16 (two neighbouring k of one row) is one 32-bit shared load. Rows are 24 values
// (48 bytes) apart: the eight rows a fragment load touches then fall in distinct banks.
template <typename T, int BM, int BN>
struct Mainloop<T, BM, BN, true> {
  static constexpr int kBk = 16;
  static constexpr int kWm = BM / 2, kWn = BN / 4;     // warp tile
  static constexpr int kMi = kWm / 16, kNi = kWn / 8;  // mma tiles per warp
  static_assert(2 * kMi == BM / 16 && 2 * kNi == BN / 16, "acc[i][j] holds the mma fragments");
  static constexpr int kRow = kBk + 8;  // 16-bit values per stored row

  // acc[i][j]: mma tile (i / 2, j / 2) of the warp, fragment element (i % 2) * 2 + j % 2.
  __device__ static __forceinline__ int row(int i) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    return (warp / 4) * kWm + (i / 2) * 16 + (i % 2) * 8 + lane / 4;
  }
  __device__ static __forceinline__ int col(int j) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    return (warp % 4) * kWn + (j / 2) * 8 + (lane % 4) * 2 + (j % 2);
  }

  template <class Loader>
  __device__ static __forceinline__ void run(Loader& ld, int step_begin, int step_end,
                                             float (&acc)[BM / 16][BN / 16]) {
    constexpr int EA = BM * kBk / kThreads, EB = BN * kBk / kThreads;
    static_assert(EA % 2 == 0 && EB % 2 == 0, "values are stored in pairs");
    __shared__ __align__(16) std::uint16_t As[2][BM][kRow];
    __shared__ __align__(16) std::uint16_t Bs[2][BN][kRow];
#pragma unroll
    for (int i = 0; i < BM / 16; ++i)
#pragma unroll
      for (int j = 0; j < BN / 16; ++j) acc[i][j] = 0.f;
    if (step_begin >= step_end) return;

    const auto store_shared = [&](int buf, const float(&a_reg)[EA], const float(&b_reg)[EB]) {
#pragma unroll
      for (int i = 0; i < EA; i += 2)
        *reinterpret_cast<std::uint32_t*>(&As[buf][ld.a_row][ld.a_k + i]) = pack2<T>(a_reg[i], a_reg[i + 1]);
#pragma unroll
      for (int i = 0; i < EB; i += 2)
        *reinterpret_cast<std::uint32_t*>(&Bs[buf][ld.b_col][ld.b_k + i]) = pack2<T>(b_reg[i], b_reg[i + 1]);
    };
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int wm = (warp / 4) * kWm, wn = (warp % 4) * kWn;
    const int g = lane / 4, kc = (lane % 4) * 2;
    float d[kMi][kNi][4];
    mma::zero_fragments(d);
    double_buffered_steps<EA, EB>(ld, step_begin, step_end, store_shared, [&](int buf) {
      unsigned a[kMi][4], b[kNi][2];
#pragma unroll
      for (int mi = 0; mi < kMi; ++mi) {
        const int r = wm + mi * 16 + g;
        a[mi][0] = *reinterpret_cast<const std::uint32_t*>(&As[buf][r][kc]);
        a[mi][1] = *reinterpret_cast<const std::uint32_t*>(&As[buf][r + 8][kc]);
        a[mi][2] = *reinterpret_cast<const std::uint32_t*>(&As[buf][r][kc + 8]);
        a[mi][3] = *reinterpret_cast<const std::uint32_t*>(&As[buf][r + 8][kc + 8]);
      }
#pragma unroll
      for (int ni = 0; ni < kNi; ++ni) {
        const int n = wn + ni * 8 + g;
        b[ni][0] = *reinterpret_cast<const std::uint32_t*>(&Bs[buf][n][kc]);
        b[ni][1] = *reinterpret_cast<const std::uint32_t*>(&Bs[buf][n][kc + 8]);
      }
#pragma unroll
      for (int mi = 0; mi < kMi; ++mi)
#pragma unroll
        for (int ni = 0; ni < kNi; ++ni) mma::mma_16816<T>(d[mi][ni], a[mi], b[ni][0], b[ni][1]);
    });
    fragments_to_acc(d, acc);
  }
};

template <int BM, int BN>
struct Mainloop<float, BM, BN, true> {
  static constexpr int kBk = 16;
  static constexpr int kWm = BM / 2, kWn = BN / 4;     // warp tile
  static constexpr int kMi = kWm / 16, kNi = kWn / 8;  // mma tiles per warp
  static_assert(2 * kMi == BM / 16 && 2 * kNi == BN / 16, "acc[i][j] holds the mma fragments");
  static_assert(kNi % 2 == 0, "B fragments load two n8 tiles at a time");
  // Floats per stored row: a fragment load (8 rows, 4 neighbouring k) then touches 32 distinct banks.
  static constexpr int kRow = kBk + 4;

  // The m16n8k8 accumulators sit as m16n8k16's do: the same acc[i][j] placement.
  __device__ static __forceinline__ int row(int i) { return Mainloop<__half, BM, BN, true>::row(i); }
  __device__ static __forceinline__ int col(int j) { return Mainloop<__half, BM, BN, true>::col(j); }

  template <class Loader>
  __device__ static __forceinline__ void run(Loader& ld, int step_begin, int step_end,
                                             float (&acc)[BM / 16][BN / 16]) {
    constexpr int EA = BM * kBk / kThreads, EB = BN * kBk / kThreads;
    __shared__ __align__(16) float As[2][BM][kRow];
    __shared__ __align__(16) float Bs[2][BN][kRow];
#pragma unroll
    for (int i = 0; i < BM / 16; ++i)
#pragma unroll
      for (int j = 0; j < BN / 16; ++j) acc[i][j] = 0.f;
    if (step_begin >= step_end) return;

    const auto store_shared = [&](int buf, const float(&a_reg)[EA], const float(&b_reg)[EB]) {
#pragma unroll
      for (int i = 0; i < EA; ++i) As[buf][ld.a_row][ld.a_k + i] = a_reg[i];
#pragma unroll
      for (int i = 0; i < EB; ++i) Bs[buf][ld.b_col][ld.b_k + i] = b_reg[i];
    };
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int wm = (warp / 4) * kWm, wn = (warp % 4) * kWn;
    const int lr = lane % 8, lq = lane / 8;  // row within an 8x8 b16 matrix, which of the four
    float d[kMi][kNi][4];
    mma::zero_fragments(d);
    double_buffered_steps<EA, EB>(ld, step_begin, step_end, store_shared, [&](int buf) {
      // The step's products go into a fresh partial added to d once per step (one rounded add per
      // k16 instead of per k8; mma_1688_3xtf32_fresh says why the add is rounded).
      float part[kMi][kNi][4];
#pragma unroll
      for (int ks = 0; ks < kBk; ks += 8) {
        // m16n8k8 TF32 fragments: A (row g | g + 8, k t | t + 4), B (k t | t + 4, column g), g =
        // lane / 4, t = lane % 4. Both tiles store k along their rows, so each comes by ldmatrix: an
        // 8x8 b16 matrix is 8 rows of 4 floats, lane i receiving float i % 4 of row i / 4.
        unsigned a_big[kMi][4], a_small[kMi][4], b_big[kNi][2], b_small[kNi][2];
#pragma unroll
        for (int mi = 0; mi < kMi; ++mi) {
          // matrices: (rows 0-7, k 0-3), (rows 8-15, k 0-3), (rows 0-7, k 4-7), (rows 8-15, k 4-7)
          unsigned r[4];
          mma::ldmatrix_x4(r, mma::smem_addr(&As[buf][wm + mi * 16 + lr + (lq & 1) * 8][ks + (lq >> 1) * 4]));
#pragma unroll
          for (int e = 0; e < 4; ++e) mma::split_tf32(__uint_as_float(r[e]), a_big[mi][e], a_small[mi][e]);
        }
#pragma unroll
        for (int ni = 0; ni < kNi; ni += 2) {
          // matrices: (columns 0-7, k 0-3), (columns 0-7, k 4-7), (columns 8-15, k 0-3), (8-15, k 4-7)
          unsigned r[4];
          mma::ldmatrix_x4(r, mma::smem_addr(&Bs[buf][wn + ni * 8 + lr + (lq >> 1) * 8][ks + (lq & 1) * 4]));
          mma::split_tf32(__uint_as_float(r[0]), b_big[ni][0], b_small[ni][0]);
          mma::split_tf32(__uint_as_float(r[1]), b_big[ni][1], b_small[ni][1]);
          mma::split_tf32(__uint_as_float(r[2]), b_big[ni + 1][0], b_small[ni + 1][0]);
          mma::split_tf32(__uint_as_float(r[3]), b_big[ni + 1][1], b_small[ni + 1][1]);
        }
#pragma unroll
        for (int mi = 0; mi < kMi; ++mi)
#pragma unroll
          for (int ni = 0; ni < kNi; ++ni) {
            if (ks == 0)
              mma::mma_1688_3xtf32_fresh(part[mi][ni], a_big[mi], a_small[mi], b_big[ni], b_small[ni]);
            else
              mma::mma_1688_3xtf32_into(part[mi][ni], a_big[mi], a_small[mi], b_big[ni], b_small[ni]);
          }
      }
#pragma unroll
      for (int mi = 0; mi < kMi; ++mi)
#pragma unroll
        for (int ni = 0; ni < kNi; ++ni)
#pragma unroll
          for (int e = 0; e < 4; ++e) d[mi][ni][e] += part[mi][ni][e];
    });
    fragments_to_acc(d, acc);
  }
};
#endif

/// The steps of split `split` of `splits`.
struct StepRange {
  int begin, end;
};
__device__ __forceinline__ StepRange split_steps(int total_steps, int split, int splits) {
  const int per_split = (total_steps + splits - 1) / splits;
  const int begin = split * per_split;
  return {begin, min(total_steps, begin + per_split)};
}

/// Picks a tile and a split-K count for a GEMM of `tiles_of(bm, bn)` output tiles (over every group
/// and batch) with `steps` reduction steps of `bk` entries, writing `out_elems` outputs. Model: a
/// block takes bm * bn * steps * bk multiply-adds at 1 / slots of `peak`, scaled by the tile's efficiency;
/// blocks run in waves; a split adds a pass over the fp32 partials. Deterministic in its inputs
/// alone, so workspace_bytes() and run() always agree.
template <class TilesOf>
BwdIgemmPlan plan_bwd_igemm(TilesOf tiles_of, std::int64_t steps, int bk, double peak, std::int64_t out_elems,
                            int grid_z_per_split, int sm_count) {
  constexpr double kBandwidth = 3.0e12;
  constexpr std::size_t kWorkspaceCap = std::size_t(512) << 20;
  BwdIgemmPlan best;
  double best_time = INFINITY;
  for (int t = 0; t < kTileCount; ++t) {
    const TileShape& shape = kTiles[t];
    const int slots = std::max(1, sm_count) * shape.blocks_per_sm;
    const std::int64_t tiles = tiles_of(shape.bm, shape.bn);
    for (int splits : {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64}) {
      if (splits > 1 && steps / splits < 8) break;
      if (std::int64_t(grid_z_per_split) * splits > 65535) break;
      if (splits > 1 && std::size_t(splits) * std::size_t(out_elems) * sizeof(float) > kWorkspaceCap) break;
      const std::int64_t per = (steps + splits - 1) / splits;
      const std::int64_t waves = (tiles * splits + slots - 1) / slots;
      double time =
          double(waves) * 2.0 * shape.bm * shape.bn * bk * double(per) / (shape.efficiency * peak / slots);
      if (splits > 1) time += double(splits + 1) * double(out_elems) * 4.0 / kBandwidth + 3e-6;
      if (time < best_time * 0.97) {  // prefer the earlier (larger, unsplit) choice on near ties
        best_time = time;
        best.tile = t;
        best.bm = shape.bm;
        best.bn = shape.bn;
        best.splits = splits;
      }
    }
  }
  best.workspace_bytes =
      best.splits > 1 ? std::size_t(best.splits) * std::size_t(out_elems) * sizeof(float) : 0;
  return best;
}

}  // namespace galley::backends::gpu::bwd_igemm
