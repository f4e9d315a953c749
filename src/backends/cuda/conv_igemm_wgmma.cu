// gpu.conv.igemm_tc's Hopper kernels: the implicit GEMM of conv_igemm_tc.cu with wgmma.mma_async
// instead of mma.sync. Built only for sm_90a (see CMakeLists.txt: wgmma exists in no other target).
//
// A block's BM/64 (consumer) warpgroups compute BM x BN; warpgroup i owns rows 64i..64i+63 and all BN
// columns, one m64nBNk16 wgmma per k16 slice, reading A and B straight from the stage buffers. A stage
// holds BK = 64 of each operand as rows of 128 bytes, the 16-byte chunks XOR-swizzled by row % 8: the
// mma.sync loader's layout (conv_igemm_tc_loader.cuh, swz<64>) and Hopper's 128-byte swizzle, so
// wgmma reads the stages as they land. Two kinds of tile (WgmmaTile::specialized):
//   cp.async (igemm_wgmma_kernel): every thread copies its share of both operands with the mma.sync
//     loader and issues wgmma; pipeline of wgmma_main_loop.cuh, loads STAGES - 2 steps ahead, a
//     block barrier per step.
//   warp-specialized (igemm_wgmma_ws_kernel): one more warpgroup, the producer, fills the stages up
//     to STAGES steps ahead while the consumers issue nothing but wgmma. The weights (KRSC: per group
//     kg rows of kred = r*s*cg, K-major) are a plain 3-D tensor, so TMA copies each stage's BN x 64
//     box with the same 128-byte swizzle, zeros past kred, kg or the group; the activations are the
//     im2col gather (each 16-byte chunk 8 channels of one pixel's tap), which the producer issues as
//     cp.async with the loader's address walk. Each stage has a "full" mbarrier, completed by the
//     TMA bytes and by every producer thread's cp.async-tracking arrival, and an "empty" one the
//     consumer warps release it on once their wgmma reading it are done (one wgmma group stays in
//     flight); no step waits for the whole block.
#include <cuda.h>
#include <cudaTypedefs.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

#include "backends/cuda/conv_igemm_wgmma.hpp"
#include "backends/cuda/conv_wgmma_ops.cuh"
#include "backends/cuda/mbarrier_tma.cuh"
#include "backends/cuda/tensor_map_encoder.hpp"
#include "backends/cuda/wgmma_main_loop.cuh"
#include "backends/gpu/conv_igemm_tc_epilogue.cuh"
#include "backends/gpu/conv_igemm_tc_loader.cuh"

namespace galley::backends::gpu {
namespace {

/// A block's part of the implicit GEMM: its group, its split of the reduction, its tile's origin
/// and its split's steps of BK reduction entries (blockIdx.z is split * groups + group).
struct BlockSpan {
  int g, split, m0, n0, step_begin, nsteps;
};
template <int BM, int BN, int BK>
__device__ __forceinline__ BlockSpan block_span(const ConvParams& cp, int splits) {
  BlockSpan b;
  b.g = blockIdx.z % cp.groups, b.split = blockIdx.z / cp.groups;
  b.m0 = blockIdx.x * BM, b.n0 = blockIdx.y * BN;
  const int total_steps = (cp.cg * cp.r * cp.s + BK - 1) / BK;
  const int per_split = (total_steps + splits - 1) / splits;
  b.step_begin = b.split * per_split;
  b.nsteps = max(0, min(total_steps, b.step_begin + per_split) - b.step_begin);
  return b;
}

// K-major operand tiles: rows of 64 halves (128 bytes), 8-row groups 1024 bytes apart (the stride
// byte offset); advancing the start address by 32 bytes selects the next k16 slice.
__device__ __forceinline__ std::uint64_t smem_desc(unsigned addr) { return wgmma::smem_desc(addr, 16, 1024); }

template <typename T, int BM, int BN, int STAGES>
__global__ void __launch_bounds__(2 * BM, 1)
    igemm_wgmma_kernel(ConvParams cp, const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y,
                       float* __restrict__ partial, int splits) {
  constexpr int BK = 64, kThreads = 2 * BM;  // BM / 64 warpgroups of 128 threads
  constexpr int kABytes = BM * BK * 2, kStageBytes = (BM + BN) * BK * 2;
  static_assert(BM % 64 == 0 && STAGES >= 3, "warpgroups own 64 rows; loads run STAGES - 2 ahead");
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  // The swizzle is applied to absolute address bits: stage buffers must start 1024-byte aligned.
  unsigned char* smem = smem_raw + ((1024 - (mma::smem_addr(smem_raw) & 1023)) & 1023);
  const unsigned smem_s = mma::smem_addr(smem);

  const int tid = threadIdx.x, lane = tid & 31;
  const int wg = tid >> 7, warp_in_wg = (tid >> 5) & 3;
  const BlockSpan span = block_span<BM, BN, BK>(cp, splits);
  const int g = span.g, split = span.split, m0 = span.m0, n0 = span.n0;
  const int step_begin = span.step_begin, nsteps = span.nsteps;

  // Weights bypass L1 (kWeightsL2Only): L1 then keeps the activations, which neighbouring taps read
  // again, instead of weights each block reads once; the 3x3 layers gain most.
  IgemmTcVecLoader<T, BM, BN, BK, kThreads, true> loader(cp, tid, m0, n0, g, step_begin);
  float acc[BN / 2];
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) acc[i] = 0.f;

  wgmma::main_loop<STAGES, kStageBytes>(
      smem_s, nsteps, acc, [&](unsigned stage) { loader.load(cp, x, w, stage, stage + kABytes); },
      [&](unsigned stage) {
        const std::uint64_t a_desc = smem_desc(stage + wg * 64 * BK * 2), b_desc = smem_desc(stage + kABytes);
#pragma unroll
        for (int ks = 0; ks < BK / 16; ++ks) wgmma::mma_async<T, BN>(acc, a_desc + 2 * ks, b_desc + 2 * ks);
      });

  // acc[i] is row 16 * warp_in_wg + lane / 4 + 8 * ((i / 2) % 2) of the warpgroup's 64 rows and
  // column 8 * (i / 4) + 2 * (lane % 4) + i % 2 (conv_wgmma_ops.cuh).
  const int row_base = wg * 64 + warp_in_wg * 16 + (lane >> 2);
  const int col_base = (lane & 3) * 2;

  store_nhwc_tile<T, BM, BN, kThreads, STAGES * kStageBytes>(
      cp, y, partial, splits, split, m0, n0, g, smem, [&](auto&& store_pair) {
#pragma unroll
        for (int i = 0; i < BN / 2; i += 2)
          store_pair(row_base + 8 * ((i >> 1) & 1), 8 * (i >> 2) + col_base, acc[i], acc[i + 1]);
      });
}

constexpr int kProducers = 128;  // the producer warpgroup of the specialized tiles

// Two blocks of a specialized tile share a multiprocessor where their stages fit twice.
constexpr int ws_min_blocks(int bm, int bn, int stages) {
  return stages * (bm + bn) * 128 <= 110 * 1024 ? 2 : 1;
}

template <typename T, int BM, int BN, int STAGES>
__global__ void __launch_bounds__(2 * BM + kProducers, ws_min_blocks(BM, BN, STAGES))
    igemm_wgmma_ws_kernel(ConvParams cp, const __grid_constant__ CUtensorMap w_map, const T* __restrict__ x,
                          T* __restrict__ y, float* __restrict__ partial, int splits) {
  constexpr int BK = 64, kConsumers = 2 * BM, kThreads = kConsumers + kProducers;
  constexpr int kABytes = BM * BK * 2, kBBytes = BN * BK * 2, kStageBytes = kABytes + kBBytes;
  static_assert(BM % 64 == 0 && BN % 64 == 0 && BN <= 256 && STAGES >= 2,
                "warpgroups own 64 rows; a TMA box has at most 256 rows");
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  // The swizzle is applied to absolute address bits: stage buffers must start 1024-byte aligned.
  unsigned char* smem = smem_raw + ((1024 - (mma::smem_addr(smem_raw) & 1023)) & 1023);
  const unsigned smem_s = mma::smem_addr(smem);
  const unsigned full = smem_s + STAGES * kStageBytes, empty = full + 8 * STAGES;  // mbarriers, 8 bytes each

  const int tid = threadIdx.x;
  const BlockSpan span = block_span<BM, BN, BK>(cp, splits);
  const int g = span.g, split = span.split, m0 = span.m0, n0 = span.n0;
  const int step_begin = span.step_begin, nsteps = span.nsteps;

  if (tid == 0) {
    for (int st = 0; st < STAGES; ++st) {
      // Full: every producer thread's cp.async arrival, and the TMA thread's expect_tx arrival.
      mbar::init(full + 8 * st, kProducers + 1);
      mbar::init(empty + 8 * st, kConsumers / 32);  // one release per consumer warp
    }
    mbar::fence_init();
  }
  __syncthreads();

  float acc[BN / 2];
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) acc[i] = 0.f;

  if (tid >= kConsumers) {
    const int ptid = tid - kConsumers;
    if (ptid == 0) mbar::prefetch_map(w_map);
    IgemmTcVecLoader<T, BM, 0, BK, kProducers> loader(cp, ptid, m0, n0, g, step_begin);
    int st = 0;
    unsigned phase = 0;  // parity of the stage's current round
    for (int it = 0; it < nsteps; ++it) {
      // The consumers released this stage's previous round (step it - STAGES).
      if (it >= STAGES) mbar::wait(empty + 8 * st, phase ^ 1);
      const unsigned stage = smem_s + st * kStageBytes, bar = full + 8 * st;
      if (ptid == 0) {
        mbar::arrive_expect_bytes(bar, kBBytes);  // the whole box counts, zero-filled parts too
        mbar::tma_load_3d(stage + kABytes, w_map, (step_begin + it) * BK, n0, g, bar);
      }
      loader.load(cp, x, x, stage, 0);
      mbar::arrive_on_cp_async(bar);
      if (++st == STAGES) st = 0, phase ^= 1;
    }
    mbar::cp_async_wait_all();
  } else {
    const int wg = tid >> 7;
    int st = 0;
    unsigned phase = 0;
    int prev_st = 0;
    for (int it = 0; it < nsteps; ++it) {
      mbar::wait(full + 8 * st, phase);
      // The A rows were written by cp.async, through the generic proxy; wgmma reads through the
      // async proxy. The completed phase makes the writes visible to this thread, the fence orders
      // them before its wgmma's reads (TMA's B already is async-proxy data).
      wgmma::fence_proxy_async();
      const unsigned stage = smem_s + st * kStageBytes;
      const std::uint64_t a_desc = smem_desc(stage + wg * 64 * BK * 2), b_desc = smem_desc(stage + kABytes);
      wgmma::fence();
#pragma unroll
      for (int ks = 0; ks < BK / 16; ++ks) wgmma::mma_async<T, BN>(acc, a_desc + 2 * ks, b_desc + 2 * ks);
      wgmma::commit();
      // One group stays in flight: once the previous step's wgmma are done its stage goes back.
      wgmma::wait<1>();
      wgmma::fence_operands(acc);
      if (it > 0 && (tid & 31) == 0) mbar::arrive(empty + 8 * prev_st);
      prev_st = st;
      if (++st == STAGES) st = 0, phase ^= 1;
    }
    wgmma::wait<0>();
    wgmma::fence_operands(acc);
  }

  // Every thread takes part in the epilogue (its barriers and copy-out); only consumers hold
  // accumulators. acc[i] is row 16 * warp_in_wg + lane / 4 + 8 * ((i / 2) % 2) of the warpgroup's 64
  // rows and column 8 * (i / 4) + 2 * (lane % 4) + i % 2 (conv_wgmma_ops.cuh).
  const int lane = tid & 31, wg = tid >> 7, warp_in_wg = (tid >> 5) & 3;
  const int row_base = wg * 64 + warp_in_wg * 16 + (lane >> 2);
  const int col_base = (lane & 3) * 2;
  store_nhwc_tile<T, BM, BN, kThreads, STAGES * kStageBytes>(
      cp, y, partial, splits, split, m0, n0, g, smem, [&](auto&& store_pair) {
        if (tid >= kConsumers) return;
#pragma unroll
        for (int i = 0; i < BN / 2; i += 2)
          store_pair(row_base + 8 * ((i >> 1) & 1), 8 * (i >> 2) + col_base, acc[i], acc[i + 1]);
      });
}

// The weights as TMA sees them: per group kg rows of kred elements (row pitch kred, groups kg * kred
// apart), read in boxes of 64 x box_rows with the 128-byte swizzle. A box reaching past kred, kg or the
// last group reads zeros there, so a group's box never picks up the next group's rows.
template <typename T>
CUtensorMap weights_map(const ConvParams& p, const T* w, int box_rows) {
  const long long kred = (long long)p.cg * p.r * p.s;
  // TMA needs 16-byte row pitches and base: kred % 8 == 0 follows from cg % 8 == 0 (checked by the
  // caller), the base is the caller's (cp.async's 16-byte copies need it as well).
  const cuuint64_t dims[3] = {cuuint64_t(kred), cuuint64_t(p.kg), cuuint64_t(p.groups)};
  const cuuint64_t strides[2] = {cuuint64_t(kred) * sizeof(T), cuuint64_t(kred) * p.kg * sizeof(T)};
  return swizzled_box_map(std::is_same_v<T, __half>, w, dims, strides, box_rows, "gpu.conv.igemm_tc",
                          "weights of " + std::to_string(p.groups) + " groups x " + std::to_string(p.kg) +
                              " rows x " + std::to_string(kred));
}

template <typename T, int BM, int BN, int STAGES>
void launch_tile(const ConvParams& p, int splits, const T* x, const T* w, T* y, float* partial,
                 cudaStream_t s) {
  auto kernel = igemm_wgmma_kernel<T, BM, BN, STAGES>;
  constexpr int kSmem = STAGES * (BM + BN) * 64 * 2 + 1024;  // + room to align the buffers to 1024
  static std::atomic<std::uint64_t> raised{0};               // one per instantiation
  once_per_device(raised, [&] { allow_dynamic_smem(kernel, kSmem, "gpu.conv.igemm_tc (wgmma)"); });
  const dim3 grid(ceil_div(p.pixels(), BM), ceil_div(p.kg, BN), p.groups * splits);
  kernel<<<grid, 2 * BM, kSmem, s>>>(p, x, w, y, partial, splits);
}

template <typename T, int BM, int BN, int STAGES>
void launch_ws_tile(const ConvParams& p, int splits, const T* x, const T* w, T* y, float* partial,
                    cudaStream_t s) {
  auto kernel = igemm_wgmma_ws_kernel<T, BM, BN, STAGES>;
  // + room to align the buffers to 1024, and the stages' two mbarriers
  constexpr int kSmem = STAGES * (BM + BN) * 64 * 2 + 1024 + 16 * STAGES;
  static std::atomic<std::uint64_t> raised{0};  // one per instantiation
  once_per_device(raised, [&] {
    allow_dynamic_smem(kernel, kSmem, "gpu.conv.igemm_tc (wgmma, specialized)");
    // All of the unified L1/shared array as shared memory, so that two 128x64 blocks fit one
    // multiprocessor; a hint, so a refusal costs only occupancy.
    (void)cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                               int(cudaSharedmemCarveoutMaxShared));
  });
  const CUtensorMap w_map = weights_map(p, w, BN);
  const dim3 grid(ceil_div(p.pixels(), BM), ceil_div(p.kg, BN), p.groups * splits);
  kernel<<<grid, 2 * BM + kProducers, kSmem, s>>>(p, w_map, x, y, partial, splits);
}

template <typename T, int... I>
void launch_typed(const ConvParams& p, int tile, int splits, const T* x, const T* w, T* y, float* partial,
                  cudaStream_t s, std::integer_sequence<int, I...>) {
  // One instantiation per kWgmmaTiles entry; the fold runs the one whose index is `tile`.
  const auto one = [&](auto index) {
    constexpr WgmmaTile t = kWgmmaTiles[decltype(index)::value];
    if constexpr (t.specialized)
      launch_ws_tile<T, t.bm, t.bn, t.stages>(p, splits, x, w, y, partial, s);
    else
      launch_tile<T, t.bm, t.bn, t.stages>(p, splits, x, w, y, partial, s);
  };
  ((tile == I ? one(std::integral_constant<int, I>{}) : void()), ...);
}

}  // namespace

bool igemm_wgmma_available() {
  // Per device: 0 unknown, 1 yes, 2 no. The kernel image exists only for sm_90a, which runs on
  // compute capability 9.0 exactly; asking the runtime for the kernel's attributes checks both.
  static std::atomic<int> state[64];
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return false;
  std::atomic<int>& known = state[device & 63];
  int s = known.load(std::memory_order_relaxed);
  if (s == 0) {
    int major = 0, minor = 0;
    cudaFuncAttributes attr{};
    const bool ok =
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess &&
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) == cudaSuccess &&
        major == 9 && minor == 0 &&
        cudaFuncGetAttributes(&attr, igemm_wgmma_kernel<__half, 128, 128, 4>) == cudaSuccess;
    (void)cudaGetLastError();  // a missing image is an answer here, not a sticky error
    s = ok ? 1 : 2;
    known.store(s, std::memory_order_relaxed);
  }
  return s == 1;
}

void launch_igemm_wgmma(const ConvParams& p, int tile, int splits, const void* x, const void* w, void* y,
                        float* partial, void* stream) {
  if (!igemm_wgmma_available())
    throw Error(Status::unsupported,
                "gpu.conv.igemm_tc: the wgmma tiles need an sm_90 device (compute capability 9.0)");
  if (tile < 0 || tile >= kWgmmaTileCount)
    throw Error(Status::invalid_argument, "gpu.conv.igemm_tc: wgmma tile " + std::to_string(tile) +
                                              " does not exist (0.." + std::to_string(kWgmmaTileCount - 1) +
                                              ")");
  if (!p.nhwc || p.cg % 8 != 0 || (p.dtype != DType::f16 && p.dtype != DType::bf16))
    throw Error(Status::unsupported,
                "gpu.conv.igemm_tc: the wgmma tiles need f16/bf16 NHWC with channels per group "
                "a multiple of 8, got cg = " +
                    std::to_string(p.cg));
  if ((reinterpret_cast<std::uintptr_t>(x) | reinterpret_cast<std::uintptr_t>(w)) % 16 != 0)
    throw Error(Status::invalid_argument,
                "gpu.conv.igemm_tc: the wgmma tiles copy 16-byte chunks, x and w must be 16-byte aligned");
  const cudaStream_t s = as_stream(stream);
  if (p.dtype == DType::f16)
    launch_typed<__half>(p, tile, splits, static_cast<const __half*>(x), static_cast<const __half*>(w),
                         static_cast<__half*>(y), partial, s,
                         std::make_integer_sequence<int, kWgmmaTileCount>{});
  else
    launch_typed<bf16_t>(p, tile, splits, static_cast<const bf16_t*>(x), static_cast<const bf16_t*>(w),
                         static_cast<bf16_t*>(y), partial, s,
                         std::make_integer_sequence<int, kWgmmaTileCount>{});
  check_launch("gpu.conv.igemm_tc (wgmma)");
}

}  // namespace galley::backends::gpu
