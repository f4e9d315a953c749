// gpu.conv.bwd_weights_igemm's NHWC tensor-core path: f16/bf16, channels per group (in and out) a
// multiple of 8, 16-byte aligned tensors.
//
// Per group and filter tap (r, s): dw[k][tap][c] = sum over output pixels of dy[pixel][k] *
// x[pixel's input under the tap][c]. Both operands are stored with the reduction (pixels) as rows
// and the channels contiguous, so each 8-channel run is one 16-byte cp.async into a stage row and
// ldmatrix.trans turns the [pixel][channel] rows into mma.sync m16n8k16 fragments (A: k x pixel
// row-major, B: pixel x c column-major). A block of 2 x WARPS_N warps computes a BM (k) x BN (c)
// tile of one tap, 32 pixels per step, in a 4-stage cp.async pipeline over XOR-swizzled rows; the
// pixel reduction (n * p * q, long next to the output) is split across blocks whose fp32 partials
// launch_bwd_splitk_sum adds in a fixed order. Each loader row walks its pixel's (n, p, q) by adding
// the step's 32 pixels, never dividing.
// Groups narrower than a tile (ResNeXt's 8 channels a group) are packed: a block takes
// `group_pack` adjacent groups, whose channels are adjacent in NHWC, multiplies them as one dense
// tile and keeps its diagonal blocks, group_pack times less waste than one group a tile. A layer
// of one narrow group packs taps instead (bwd_weights_tap_pack): a tile's columns run over several
// taps' channels, each 16-byte chunk gathered from its own tap's input pixel.
// On Hopper the planner also lists the wgmma tiles (../cuda/conv_bwd_weights_wgmma.hpp), plan tiles
// kNhwcTcTileCount.. of the same path.
#include <algorithm>
#include <atomic>
#include <optional>
#include <utility>
#include <vector>

#include "conv_bwd_igemm.cuh"
#include "conv_bwd_weights_nhwc_io.cuh"
#include "conv_bwd_weights_nhwc_tc.hpp"
#include "conv_mma.cuh"
#include "core/config.hpp"
#if GALLEY_CUDA_WGMMA
#include "backends/cuda/conv_bwd_weights_wgmma.hpp"
#include "backends/cuda/conv_igemm_wgmma.hpp"
#endif

namespace galley::backends::gpu {
namespace {

struct NhwcTcTile {
  int bm, bn, warps_n;  // block tile k x c, warp grid 2 x warps_n
  int blocks_per_sm;
  double efficiency;  // relative per-block throughput, for the planner
};
// The efficiencies are fitted to the tuner's timings of every tile on the benchmark list's layers
// (bench/RESULTS.md), so that the untuned plan is the tuner's pick there. 8 warps of 64x32 each
// lead: 4 warps of 64x64 need 255 registers a thread and hide less latency.
constexpr NhwcTcTile kNhwcTcTiles[] = {{128, 128, 4, 1, 1.0},
                                       {128, 64, 2, 2, 0.8},
                                       {128, 128, 2, 2, 0.7},
                                       {64, 128, 2, 2, 0.8},
                                       {64, 64, 2, 3, 0.7}};
constexpr int kNhwcTcTileCount = int(sizeof(kNhwcTcTiles) / sizeof(kNhwcTcTiles[0]));
constexpr int kStepPixels = 32;

/// A tile as the planner sees it: one of the mma.sync table above, or past it one of the wgmma table.
struct PlanTile {
  int bm, bn, step_pixels, blocks_per_sm;
  double efficiency;
};
// The wgmma tiles are listed where the device runs them, unless GALLEY_DEBUG_BWD_WEIGHTS_WGMMA=0
// (the mma.sync tiles alone, for comparison).
int plan_tile_count() {
#if GALLEY_CUDA_WGMMA
  if (env::config().debug_bwd_weights_wgmma && igemm_wgmma_available())
    return kNhwcTcTileCount + kBwdWeightsWgmmaTileCount;
#endif
  return kNhwcTcTileCount;
}
PlanTile plan_tile(int t) {
#if GALLEY_CUDA_WGMMA
  if (t >= kNhwcTcTileCount) {
    const BwdWeightsWgmmaTile& w = kBwdWeightsWgmmaTiles[t - kNhwcTcTileCount];
    return {w.bm, w.bn, kBwdWeightsWgmmaStep, w.blocks_per_sm, w.efficiency};
  }
#endif
  const NhwcTcTile& m = kNhwcTcTiles[t];
  return {m.bm, m.bn, kStepPixels, m.blocks_per_sm, m.efficiency};
}

#if GALLEY_GPU_MMA

constexpr int kStages = 4;  // cp.async pipeline depth

/// Byte offset of 16-byte chunk `chunk` of row `row` in a buffer of `kChunks`-chunk rows: the XOR
/// puts the same chunk of 8 consecutive rows (one ldmatrix phase) in 8 distinct bank groups.
template <int kChunks>
__device__ __forceinline__ unsigned swizzled(int row, int chunk) {
  return unsigned(row * kChunks * 16 + ((chunk ^ (row & 7)) << 4));
}

template <typename T, int BM, int BN, int WARPS_N, int MIN_BLOCKS>
__global__ void __launch_bounds__(64 * WARPS_N, MIN_BLOCKS)
    bwd_weights_nhwc_tc_kernel(ConvParams cp, const T* __restrict__ x, const T* __restrict__ dy,
                               float* __restrict__ partial, T* __restrict__ dw, int splits, int c_tiles,
                               int group_pack) {
  constexpr int kThreads = 64 * WARPS_N;
  constexpr int kAChunks = BM / 8, kBChunks = BN / 8;  // 16-byte chunks per stage row
  constexpr int kABytes = kStepPixels * BM * 2, kStageBytes = kStepPixels * (BM + BN) * 2;
  constexpr int WM = BM / 2, WN = BN / WARPS_N;  // warp tile
  constexpr int MT = WM / 16, NT = WN / 8;
  static_assert(NT % 2 == 0, "B fragments are loaded two n8 tiles at a time");
  extern __shared__ __align__(128) unsigned char smem[];

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int warp_m = warp / WARPS_N, warp_n = warp % WARPS_N;
  const BwdWeightsNhwcBlock blk(cp, BM, BN, c_tiles, group_pack, splits, kStepPixels);
  const int g = blk.g, split = blk.split, k_end = blk.k_end, c_end = blk.c_end, tap = blk.tap;
  const int m0 = blk.m0, c0 = blk.c0, nsteps = blk.steps;
  BwdWeightsNhwcLoader<T, BM, BN, kThreads, kStepPixels> loader(cp, x, dy, tid, blk);
  const auto a_offset = [](int row, int chunk) { return swizzled<kAChunks>(row, chunk); };
  const auto b_offset = [](int row, int chunk) { return swizzled<kBChunks>(row, chunk); };
  // Each call loads the step after the previous one's, from blk.first_step on.
  auto load_stage = [&](int stage) {
    const unsigned a_s = mma::smem_addr(smem + stage * kStageBytes);
    loader.load(cp, x, dy, a_s, a_s + kABytes, a_offset, b_offset);
  };

  // Fragments of one k16 slice (16 pixels); two sets, so the next slice's ldmatrix is in flight
  // while this slice's mma run.
  unsigned af[2][MT][4];
  unsigned bfr[2][NT][2];
  const int q = lane >> 3, lrow = lane & 7;
  auto load_frags = [&](int buf, int stage, int slice) {
    const unsigned a_s = mma::smem_addr(smem + stage * kStageBytes), b_s = a_s + kABytes;
    // A: matrices (k 0-7 | 8-15) x (pixels 0-7 | 8-15), k first: a0..a3 of the m16n8k16 fragment.
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
      mma::ldmatrix_x4_trans(af[buf][mt],
                             a_s + swizzled<kAChunks>(slice * 16 + (q >> 1) * 8 + lrow,
                                                      (warp_m * WM + mt * 16 + (q & 1) * 8) / 8));
      // B: matrices (pixels 0-7 | 8-15) x (c 0-7 | 8-15), pixels first: b0, b1 of two n8 tiles.
#pragma unroll
    for (int np = 0; np < NT / 2; ++np) {
      unsigned r4[4];
      mma::ldmatrix_x4_trans(r4, b_s + swizzled<kBChunks>(slice * 16 + (q & 1) * 8 + lrow,
                                                          (warp_n * WN + np * 16 + (q >> 1) * 8) / 8));
      bfr[buf][2 * np][0] = r4[0];
      bfr[buf][2 * np][1] = r4[1];
      bfr[buf][2 * np + 1][0] = r4[2];
      bfr[buf][2 * np + 1][1] = r4[3];
    }
  };

  float acc[MT][NT][4];
  mma::zero_fragments(acc);

#pragma unroll
  for (int st = 0; st < kStages - 1; ++st) {
    if (st < nsteps) load_stage(st);
    mma::cp_async_commit();
  }
  mma::cp_async_wait<kStages - 2>();
  __syncthreads();
  int read_stage = 0, write_stage = kStages - 1;
  load_frags(0, 0, 0);
  // One barrier per step, before the second slice's prefetch of the next stage: after it no warp
  // reads the stage of the previous step, which this step's load refills.
  for (int it = 0; it < nsteps; ++it) {
#pragma unroll
    for (int ks = 0; ks < 2; ++ks) {
      if (ks == 1) {
        mma::cp_async_wait<kStages - 2>();
        __syncthreads();
        read_stage = read_stage + 1 == kStages ? 0 : read_stage + 1;
      }
      load_frags((ks + 1) & 1, read_stage, ks == 1 ? 0 : 1);
      if (ks == 0) {
        const int nxt = it + kStages - 1;
        if (nxt < nsteps) load_stage(write_stage);
        mma::cp_async_commit();
        write_stage = write_stage + 1 == kStages ? 0 : write_stage + 1;
      }
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
          mma::mma_16816<T>(acc[mt][nt], af[ks][mt], bfr[ks][nt][0], bfr[ks][nt][1]);
    }
  }
  mma::cp_async_wait<0>();

  // acc[mt][nt] holds rows (k) lane/4 (+8) and columns (c) 2*(lane%4) (+1) of its 16x8 tile.
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int m = m0 + warp_m * WM + mt * 16 + (lane >> 2) + half * 8;
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
        store_dw_pair(cp, g, group_pack, k_end, c_end, tap, blk.tap_pack, m,
                      c0 + warp_n * WN + nt * 8 + (lane & 3) * 2, acc[mt][nt][half * 2],
                      acc[mt][nt][half * 2 + 1], split, splits, partial, dw);
    }
}

template <typename T>
void launch_tile(const ConvParams& p, const BwdIgemmPlan& plan, const T* x, const T* dy, T* dw,
                 float* partial, GpuStream stream) {
#if GALLEY_CUDA_WGMMA
  if (plan.tile >= kNhwcTcTileCount) {
    launch_bwd_weights_wgmma(p, plan.tile - kNhwcTcTileCount, plan.splits, plan.group_pack, x, dy, dw,
                             partial, stream);
    return;
  }
#endif
  const NhwcTcTile& t = kNhwcTcTiles[plan.tile];
  const int c_tiles = ceil_div(p.cg * plan.group_pack, t.bn);
  const int k_tiles = ceil_div(p.kg * plan.group_pack, t.bm);
  const dim3 grid(bwd_weights_column_blocks(p, t.bn, plan.group_pack), k_tiles,
                  ceil_div(p.groups, plan.group_pack) * plan.splits);
  auto run = [&](auto kernel) {
    const int smem = kStages * kStepPixels * (t.bm + t.bn) * 2;
    static std::atomic<std::uint64_t> raised[kNhwcTcTileCount];
    once_per_device(raised[plan.tile], [&] {
      allow_dynamic_smem(kernel, smem, "gpu.conv.bwd_weights_igemm (nhwc tc)");
      (void)cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                 int(cudaSharedmemCarveoutMaxShared));
    });
    kernel<<<grid, 64 * t.warps_n, smem, stream>>>(p, x, dy, partial, dw, plan.splits, c_tiles,
                                                   plan.group_pack);
  };
  switch (plan.tile) {
    case 0:
      run(bwd_weights_nhwc_tc_kernel<T, 128, 128, 4, 1>);
      break;
    case 1:
      run(bwd_weights_nhwc_tc_kernel<T, 128, 64, 2, 2>);
      break;
    case 2:
      run(bwd_weights_nhwc_tc_kernel<T, 128, 128, 2, 2>);
      break;
    case 3:
      run(bwd_weights_nhwc_tc_kernel<T, 64, 128, 2, 2>);
      break;
    default:
      run(bwd_weights_nhwc_tc_kernel<T, 64, 64, 2, 3>);
      break;
  }
}

#endif  // GALLEY_GPU_MMA

}  // namespace

bool bwd_weights_nhwc_tc_applies(const ConvParams& p) {
  return GALLEY_GPU_MMA && p.nhwc && (p.dtype == DType::f16 || p.dtype == DType::bf16) && p.cg % 8 == 0 &&
         p.kg % 8 == 0 && std::int64_t(p.r) * p.s * ceil_div(p.cg, 64) <= 0x7fffffff &&
         ceil_div(p.kg, 64) <= 65535;
}

namespace {
/// The plan of tile `t` with `splits` and its modelled time; nullopt where the grid or the
/// workspace cap forbids it.
std::optional<std::pair<BwdIgemmPlan, double>> nhwc_tc_plan(const ConvParams& p, int sm_count, int t,
                                                            int splits) {
  constexpr double kPeak = 400e12, kBandwidth = 3.0e12;
  constexpr std::size_t kWorkspaceCap = std::size_t(512) << 20;
  const PlanTile shape = plan_tile(t);
  const std::int64_t steps =
      std::max<std::int64_t>(1, (p.pixels() + shape.step_pixels - 1) / shape.step_pixels);
  const int pack = p.kg <= shape.bm / 2 && p.cg <= shape.bn / 2
                       ? std::min(p.groups, std::min(shape.bm / p.kg, shape.bn / p.cg))
                       : 1;
  const int group_tiles = ceil_div(p.groups, pack);
  const std::size_t workspace =
      splits > 1 ? std::size_t(splits) * std::size_t(p.w_elems()) * sizeof(float) : 0;
  if (ceil_div(p.kg * pack, shape.bm) > 65535 || std::int64_t(group_tiles) * splits > 65535 ||
      workspace > kWorkspaceCap || (splits > 1 && steps / splits < 8))
    return std::nullopt;
  const int sms = std::max(1, sm_count);
  const std::int64_t tiles = std::int64_t(bwd_weights_column_blocks(p, shape.bn, pack)) *
                             ceil_div(p.kg * pack, shape.bm) * group_tiles;
  const std::int64_t per = (steps + splits - 1) / splits;
  // The busiest multiprocessor runs per_sm blocks, up to blocks_per_sm at a time; one that holds
  // fewer than that at once reaches only part of its peak.
  const std::int64_t per_sm = (tiles * splits + sms - 1) / sms;
  const double sm_share = per_sm >= shape.blocks_per_sm ? 1.0 : 0.9;
  double time = double(per_sm) * 2.0 * shape.bm * shape.bn * shape.step_pixels * double(per) /
                (shape.efficiency * sm_share * kPeak / sms);
  if (splits > 1) time += double(splits + 1) * double(p.w_elems()) * 4.0 / kBandwidth + 3e-6;
  BwdIgemmPlan plan;
  plan.nhwc_tc = true;
  plan.wgmma = t >= kNhwcTcTileCount;
  plan.tile = t;
  plan.bm = shape.bm;
  plan.bn = shape.bn;
  plan.splits = splits;
  plan.group_pack = pack;
  plan.tap_pack = std::min(bwd_weights_tap_pack(p, shape.bn), p.r * p.s);
  plan.workspace_bytes = workspace;
  return std::make_pair(plan, time);
}
constexpr int kSplitChoices[] = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128};
}  // namespace

std::vector<BwdIgemmPlan> bwd_weights_nhwc_tc_plans(const ConvParams& p, int sm_count) {
  // First the model's pick: every (tile, splits) in table order, a later one taking over only when
  // more than 3% faster, so near ties go to the earlier (larger) tile and the fewer splits. Then each
  // tile's two fastest split counts by the model, fastest first.
  using Timed = std::pair<BwdIgemmPlan, double>;
  const auto faster = [](const Timed& a, const Timed& b) { return a.second < b.second; };
  std::optional<Timed> pick;
  std::vector<Timed> picked;
  for (int t = 0; t < plan_tile_count(); ++t) {
    std::vector<Timed> of_tile;
    for (int splits : kSplitChoices) {
      const std::optional<Timed> plan = nhwc_tc_plan(p, sm_count, t, splits);
      if (!plan) continue;
      if (!pick || plan->second < pick->second * 0.97) pick = plan;
      of_tile.push_back(*plan);
    }
    std::stable_sort(of_tile.begin(), of_tile.end(), faster);
    for (std::size_t i = 0; i < std::min<std::size_t>(2, of_tile.size()); ++i) picked.push_back(of_tile[i]);
  }
  std::stable_sort(picked.begin(), picked.end(), faster);
  std::vector<BwdIgemmPlan> out;
  if (pick) out.push_back(pick->first);
  for (const auto& [plan, time] : picked)
    if (!pick || plan.tile != pick->first.tile || plan.splits != pick->first.splits) out.push_back(plan);
  return out;
}

std::optional<BwdIgemmPlan> bwd_weights_nhwc_tc_plan_for(const ConvParams& p, int sm_count, int tile,
                                                         int splits) {
  if (tile < 0 || tile >= plan_tile_count()) return std::nullopt;
  if (auto plan = nhwc_tc_plan(p, sm_count, tile, splits)) return plan->first;
  return std::nullopt;
}

bool launch_bwd_weights_nhwc_tc(const ConvParams& p, const BwdIgemmPlan& plan, const void* x, const void* dy,
                                void* dw, void* workspace, void* stream) {
  if (!aligned16(x) || !aligned16(dy) || !aligned16(dw) || (plan.splits > 1 && !aligned16(workspace)))
    return false;
#if GALLEY_GPU_MMA
  float* partial = plan.splits > 1 ? static_cast<float*>(workspace) : nullptr;
  const GpuStream s = as_stream(stream);
  if (p.dtype == DType::f16)
    launch_tile<__half>(p, plan, static_cast<const __half*>(x), static_cast<const __half*>(dy),
                        static_cast<__half*>(dw), partial, s);
  else
    launch_tile<bf16_t>(p, plan, static_cast<const bf16_t*>(x), static_cast<const bf16_t*>(dy),
                        static_cast<bf16_t*>(dw), partial, s);
  check_launch("gpu.conv.bwd_weights_igemm (nhwc tc)");
  if (plan.splits > 1) launch_bwd_splitk_sum(p.dtype, p.w_elems(), plan.splits, partial, dw, stream);
  return true;
#else
  (void)p, (void)plan, (void)workspace, (void)stream;
  return false;
#endif
}

}  // namespace galley::backends::gpu
