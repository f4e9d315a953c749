// gpu.conv.igemm_tc's kernel: implicit GEMM on tensor cores for f16/bf16 NHWC (fp32 accumulate).
//
// Per group: D[M = n*p*q pixels][N = kg] = A[M][kred] * B[N][kred]^T with kred = (r, s, c), c
// fastest, which is how both NHWC activations and KRSC weights are stored, so every 8-channel run
// is one 16-byte cp.async. A block of 4 warps computes BM x BN with a 2x2 warp grid, BK = 32 per
// step, a 4-stage cp.async pipeline in XOR-swizzled shared memory, ldmatrix and mma.sync m16n8k16.
// "vec" mode needs cg % 8 == 0; otherwise each element is gathered with scalar loads (the
// first layer of a network, c = 3). Split-K writes fp32 partials to a workspace.
// kNchwOut (gpu.conv.igemm_tc_nchw) writes y as NCHW: the same GEMM, with the epilogue's tile
// transposed in shared memory so each channel's pixel run leaves as 16-byte stores.
//
// On HIP (no mma.sync) the launcher runs the SIMT implicit GEMM instead, see igemm_tc_has_mma().
#include <atomic>
#include <cmath>

#include "conv_mma.cuh"

namespace galley::backends::gpu {
namespace {

constexpr int kBk = 32;
constexpr int kStages = 4;

struct TcTile {
  int bm, bn, warps;
  double efficiency;
  bool planned;  // considered by the planner (others exist for measurement)
};
// Tiles 3 and 4 are tiles 0 and 1 with 8 warps (warp tiles 64x32, 64x16): more warps to hide
// latency, more shared-memory reads per mma.
// 64x64's efficiency is set from the H200: at 0.55 the planner chose it for r50.l4.c1b, which ran at
// 56 TFLOP/s where 128x128 with split-K runs near 120.
constexpr TcTile kTcTiles[] = {{128, 128, 4, 1.0, true},  {128, 64, 4, 0.8, true}, {64, 64, 4, 0.3, true},
                               {128, 128, 8, 1.0, false}, {128, 64, 8, 0.8, false}};
constexpr int kTcTileCount = 5;

#if GALLEY_GPU_MMA

// Byte offset of 16-byte chunk `chunk` (0..3) of row `row` in a stage buffer of 64-byte rows. The
// XOR spreads the 8 rows an ldmatrix phase reads over all 32 banks.
__device__ __forceinline__ unsigned swz(int row, int chunk) {
  return unsigned(row * 64 + ((chunk ^ ((row >> 1) & 3)) << 4));
}

template <typename T, bool kVec, int BM, int BN, int WARPS_N, bool kNchwOut>
__global__ void __launch_bounds__(64 * WARPS_N)
    igemm_tc_kernel(ConvParams cp, const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y,
                    float* __restrict__ partial, int splits) {
  constexpr int kThreads = 64 * WARPS_N;      // warp grid 2 x WARPS_N
  constexpr int kRowsPerPass = kThreads / 4;  // loader rows covered by one pass of the block
  constexpr int WM = BM / 2, WN = BN / WARPS_N;  // warp tile
  constexpr int MT = WM / 16, NT = WN / 8;
  constexpr int A_ROWS = BM / kRowsPerPass, B_ROWS = BN / kRowsPerPass;  // 16-byte chunks per thread per stage
  constexpr int kStageBytes = (BM + BN) * kBk * 2;
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
  const int total_steps = (kred + kBk - 1) / kBk;
  const int per_split = (total_steps + splits - 1) / splits;
  const int step_begin = split * per_split;
  const int nsteps = max(0, min(total_steps, step_begin + per_split) - step_begin);

  // Loader roles: chunk column `ch` (8 channels) of rows tid/4 + 32*i.
  const int ch = tid & 3;
  const int row0 = tid >> 2;
  int a_off[A_ROWS], a_ih[A_ROWS], a_iw[A_ROWS];
#pragma unroll
  for (int i = 0; i < A_ROWS; ++i) {
    const int pix = m0 + row0 + kRowsPerPass * i;
    if (pix < pixels) {
      const int nn = pix / PQ, pq = pix - nn * PQ;
      const int op = pq / cp.q, oq = pq - op * cp.q;
      a_off[i] = nn * cp.h * cp.w * cp.c + g * cp.cg;
      a_ih[i] = op * cp.stride_h - cp.pad_h;
      a_iw[i] = oq * cp.stride_w - cp.pad_w;
    } else {
      a_off[i] = 0;
      a_ih[i] = -(1 << 28);  // never in bounds
      a_iw[i] = 0;
    }
  }
  const T* b_row[B_ROWS];
  bool b_ok[B_ROWS];
#pragma unroll
  for (int i = 0; i < B_ROWS; ++i) {
    const int kk = n0 + row0 + kRowsPerPass * i;
    b_ok[i] = kk < cp.kg;
    b_row[i] = w + std::int64_t(g * cp.kg + (b_ok[i] ? kk : 0)) * kred;
  }

  auto load_stage = [&](int stage, int step) {
    unsigned char* base = smem + stage * kStageBytes;
    const unsigned a_base = mma::smem_addr(base);
    const unsigned b_base = a_base + BM * kBk * 2;
    const int kc = step * kBk + ch * 8;
    if (kVec) {
      const bool k_ok = kc < kred;
      const int rs = k_ok ? kc / cp.cg : 0;
      const int c = kc - rs * cp.cg;
      const int r = rs / cp.s, s = rs - r * cp.s;
#pragma unroll
      for (int i = 0; i < A_ROWS; ++i) {
        const int ih = a_ih[i] + r * cp.dil_h, iw = a_iw[i] + s * cp.dil_w;
        const bool ok = k_ok && unsigned(ih) < unsigned(cp.h) && unsigned(iw) < unsigned(cp.w);
        const T* src = ok ? x + a_off[i] + (ih * cp.w + iw) * cp.c + c : x;
        mma::cp_async16(a_base + swz(row0 + kRowsPerPass * i, ch), src, ok ? 16 : 0);
      }
#pragma unroll
      for (int i = 0; i < B_ROWS; ++i) {
        const bool ok = k_ok && b_ok[i];
        mma::cp_async16(b_base + swz(row0 + kRowsPerPass * i, ch), ok ? b_row[i] + kc : w, ok ? 16 : 0);
      }
    } else {
      // Scalar gather: decode each of the chunk's 8 kred entries once, reuse across rows.
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
          const int ih = a_ih[i] + e_dh[e], iw = a_iw[i] + e_dw[e];
          const bool ok = e_c[e] >= 0 && unsigned(ih) < unsigned(cp.h) && unsigned(iw) < unsigned(cp.w);
          v[e] = ok ? bits16(x[a_off[i] + (ih * cp.w + iw) * cp.c + e_c[e]]) : std::uint16_t(0);
        }
        uint4 packed = make_uint4(v[0] | (unsigned(v[1]) << 16), v[2] | (unsigned(v[3]) << 16),
                                  v[4] | (unsigned(v[5]) << 16), v[6] | (unsigned(v[7]) << 16));
        *reinterpret_cast<uint4*>(base + swz(row0 + kRowsPerPass * i, ch)) = packed;
      }
#pragma unroll
      for (int i = 0; i < B_ROWS; ++i) {
        std::uint16_t v[8];
#pragma unroll
        for (int e = 0; e < 8; ++e) v[e] = (b_ok[i] && kc + e < kred) ? bits16(b_row[i][kc + e]) : std::uint16_t(0);
        uint4 packed = make_uint4(v[0] | (unsigned(v[1]) << 16), v[2] | (unsigned(v[3]) << 16),
                                  v[4] | (unsigned(v[5]) << 16), v[6] | (unsigned(v[7]) << 16));
        *reinterpret_cast<uint4*>(base + BM * kBk * 2 + swz(row0 + kRowsPerPass * i, ch)) = packed;
      }
    }
  };

  float acc[MT][NT][4];
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

#pragma unroll
  for (int st = 0; st < kStages - 1; ++st) {
    if (st < nsteps) load_stage(st, step_begin + st);
    mma::cp_async_commit();
  }
  for (int it = 0; it < nsteps; ++it) {
    mma::cp_async_wait<kStages - 2>();
    __syncthreads();
    const int nxt = it + kStages - 1;
    if (nxt < nsteps) load_stage(nxt % kStages, step_begin + nxt);
    mma::cp_async_commit();

    const unsigned a_base = mma::smem_addr(smem + (it % kStages) * kStageBytes);
    const unsigned b_base = a_base + BM * kBk * 2;
#pragma unroll
    for (int kh = 0; kh < 2; ++kh) {  // two k16 halves of BK = 32
      unsigned af[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
        mma::ldmatrix_x4(af[mt], a_base + swz(warp_m * WM + mt * 16 + (lane & 15), kh * 2 + (lane >> 4)));
      unsigned bfr[NT][2];
#pragma unroll
      for (int np = 0; np < NT / 2; ++np) {
        unsigned r4[4];
        mma::ldmatrix_x4(r4, b_base + swz(warp_n * WN + np * 16 + ((lane >> 4) << 3) + (lane & 7),
                                          kh * 2 + ((lane >> 3) & 1)));
        bfr[2 * np][0] = r4[0];
        bfr[2 * np][1] = r4[1];
        bfr[2 * np + 1][0] = r4[2];
        bfr[2 * np + 1][1] = r4[3];
      }
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) mma::mma_16816<T>(acc[mt][nt], af[mt], bfr[nt][0], bfr[nt][1]);
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
      static_assert(BN * kLdT * 2 <= kStages * kStageBytes, "epilogue tile must fit the pipeline buffers");
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

  // Epilogue through shared memory when the output tile can leave as 16-byte rows: each lane's
  // fragments are scattered 4-byte pieces, which would half-fill 32-byte sectors.
  if (!kNchwOut && splits == 1 && cp.kg % 8 == 0) {
    constexpr int kLd = BN + 8;  // halves; +16 bytes per row keeps the fragment writes conflict-free
    static_assert(BM * kLd * 2 <= kStages * kStageBytes, "epilogue tile must fit the pipeline buffers");
    __syncthreads();  // every warp is done reading the stages
    std::uint32_t* tile32 = reinterpret_cast<std::uint32_t*>(smem);
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int row = warp_m * WM + mt * 16 + (lane >> 2) + half * 8;
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          const int col = warp_n * WN + nt * 8 + (lane & 3) * 2;
          tile32[(row * kLd + col) / 2] = pack2<T>(acc[mt][nt][half * 2], acc[mt][nt][half * 2 + 1]);
        }
      }
    __syncthreads();
    constexpr int kChunksPerRow = BN / 8;
    for (int idx = tid; idx < BM * kChunksPerRow; idx += kThreads) {
      const int row = idx / kChunksPerRow, cc = idx - row * kChunksPerRow;
      const int pix = m0 + row, col = n0 + cc * 8;
      if (pix < pixels && col < cp.kg)
        *reinterpret_cast<uint4*>(y + std::int64_t(pix) * cp.k + g * cp.kg + col) =
            *reinterpret_cast<const uint4*>(smem + (row * kLd + cc * 8) * 2);
    }
    return;
  }

  // General epilogue: acc[mt][nt] holds rows lane/4 (+8) and columns 2*(lane%4) (+1) of its 16x8 tile.
  // With kNchwOut (split-K partials here) the next channel is p*q elements on, not 1.
  const std::int64_t y_elems = std::int64_t(pixels) * cp.k;
  const bool pairs = !kNchwOut && (cp.k % 2 == 0) && (cp.kg % 2 == 0);
  const std::int64_t col_step = kNchwOut ? PQ : 1;
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
        const std::int64_t idx = kNchwOut ? (std::int64_t(nn) * cp.k + g * cp.kg + col) * PQ + pq
                                          : std::int64_t(pix) * cp.k + g * cp.kg + col;
        const float v0 = acc[mt][nt][half * 2], v1 = acc[mt][nt][half * 2 + 1];
        const bool both = col + 1 < cp.kg;
        if (splits > 1) {
          float* dst = partial + split * y_elems + idx;
          dst[0] = v0;
          if (both) dst[col_step] = v1;
        } else if (pairs && both) {
          *reinterpret_cast<std::uint32_t*>(y + idx) = pack2<T>(v0, v1);
        } else {
          y[idx] = from_f32<T>(v0);
          if (both) y[idx + col_step] = from_f32<T>(v1);
        }
      }
    }
  }
}

template <typename T, bool kVec, bool kNchwOut>
void launch_tc(const ConvParams& p, const IgemmPlan& plan, const T* x, const T* w, T* y, float* partial,
               GpuStream stream) {
  const dim3 grid(ceil_div(p.pixels(), plan.bm), ceil_div(p.kg, plan.bn), p.groups * plan.splits);
  auto run = [&](auto kernel, int tile) {
    const TcTile& t = kTcTiles[tile];
    const int smem = kStages * (t.bm + t.bn) * kBk * 2;
    // Raising the limit is a driver call; do it once per device and instantiation, not per launch.
    // (one flag word per tile: the kernels of all tiles share one pointer type).
    static std::atomic<std::uint64_t> raised[kTcTileCount];
    int device = 0;
    (void)cudaGetDevice(&device);
    const std::uint64_t bit = std::uint64_t(1) << (device & 63);
    if ((raised[tile].load(std::memory_order_relaxed) & bit) == 0) {
      allow_dynamic_smem(kernel, smem, "gpu.conv.igemm_tc");
      raised[tile].fetch_or(bit, std::memory_order_relaxed);
    }
    kernel<<<grid, 32 * t.warps, smem, stream>>>(p, x, w, y, partial, plan.splits);
  };
  switch (plan.tile) {
    case 0: run(igemm_tc_kernel<T, kVec, 128, 128, 2, kNchwOut>, 0); break;
    case 1: run(igemm_tc_kernel<T, kVec, 128, 64, 2, kNchwOut>, 1); break;
    case 2: run(igemm_tc_kernel<T, kVec, 64, 64, 2, kNchwOut>, 2); break;
    case 3: run(igemm_tc_kernel<T, kVec, 128, 128, 4, kNchwOut>, 3); break;
    default: run(igemm_tc_kernel<T, kVec, 128, 64, 4, kNchwOut>, 4); break;
  }
}

#endif  // GALLEY_GPU_MMA

}  // namespace

bool igemm_tc_has_mma() { return GALLEY_GPU_MMA != 0; }

IgemmPlan plan_igemm_tc(const ConvParams& p, int sm_count) {
#if GALLEY_GPU_MMA
  constexpr double kPeak = 500e12, kBandwidth = 3.0e12;
  const int slots = std::max(1, sm_count) * 2;
  const std::int64_t steps = (p.kred() + kBk - 1) / kBk;
  IgemmPlan best;
  double best_time = INFINITY;
  for (int t = 0; t < kTcTileCount; ++t) {
    const TcTile& shape = kTcTiles[t];
    if (!shape.planned) continue;
    const std::int64_t tiles = std::int64_t(ceil_div(p.pixels(), shape.bm)) * ceil_div(p.kg, shape.bn) * p.groups;
    for (int splits : {1, 2, 3, 4, 6, 8}) {
      if (splits > 1 && steps / splits < 4) break;
      const std::int64_t per = (steps + splits - 1) / splits;
      const std::int64_t blocks = tiles * splits;
      const std::int64_t waves = (blocks + slots - 1) / slots;
      // Each block also pays a pipeline fill of ~3 steps.
      double time = double(waves) * 2.0 * shape.bm * shape.bn * kBk * (per + 3) / (shape.efficiency * kPeak / slots);
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
  best.workspace_bytes = best.splits > 1 ? std::size_t(best.splits) * std::size_t(p.y_elems()) * sizeof(float) : 0;
  return best;
#else
  return plan_igemm_f32(p, sm_count);
#endif
}

IgemmPlan igemm_tc_plan_for(const ConvParams& p, int tile, int splits) {
#if GALLEY_GPU_MMA
  IgemmPlan plan;
  plan.tile = std::clamp(tile, 0, kTcTileCount - 1);
  plan.bm = kTcTiles[plan.tile].bm;
  plan.bn = kTcTiles[plan.tile].bn;
  plan.splits = std::max(1, splits);
  plan.workspace_bytes = plan.splits > 1 ? std::size_t(plan.splits) * std::size_t(p.y_elems()) * sizeof(float) : 0;
  return plan;
#else
  return igemm_f32_plan_for(p, tile, splits);
#endif
}

#if GALLEY_GPU_MMA
namespace {

template <bool kNchwOut>
void launch_tc_any(const ConvParams& p, const IgemmPlan& plan, const void* x, const void* w, void* y, void* workspace,
                   void* stream) {
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

}  // namespace
#endif  // GALLEY_GPU_MMA

void launch_conv_igemm_tc(const ConvParams& p, const IgemmPlan& plan, const void* x, const void* w, void* y,
                          void* workspace, void* stream) {
#if GALLEY_GPU_MMA
  launch_tc_any<false>(p, plan, x, w, y, workspace, stream);
#else
  launch_conv_igemm_f32(p, plan, x, w, y, workspace, stream);
#endif
}

void launch_conv_igemm_tc_nchw_out(const ConvParams& p, const IgemmPlan& plan, const void* x, const void* w, void* y,
                                   void* workspace, void* stream) {
#if GALLEY_GPU_MMA
  launch_tc_any<true>(p, plan, x, w, y, workspace, stream);
#else
  (void)p, (void)plan, (void)x, (void)w, (void)y, (void)workspace, (void)stream;
  throw Error(Status::unsupported, "gpu.conv.igemm_tc: the NCHW-output kernel needs mma.sync (CUDA)");
#endif
}

}  // namespace galley::backends::gpu
