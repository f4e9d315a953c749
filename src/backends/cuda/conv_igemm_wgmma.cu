// gpu.conv.igemm_tc's Hopper kernel: the implicit GEMM of conv_igemm_tc.cu with wgmma.mma_async
// instead of mma.sync. Built only for sm_90a (see CMakeLists.txt: wgmma exists in no other target).
//
// A block of BM/64 warpgroups computes BM x BN; warpgroup i owns rows 64i..64i+63 and all BN columns,
// one m64nBNk16 wgmma per k16 slice, reading A and B straight from the stage buffers. The stages are
// filled by the same cp.async loader as the mma.sync kernel (conv_igemm_tc_loader.cuh): its BK = 64
// rows of 128 bytes with the 16-byte chunks XOR-swizzled by row % 8 are Hopper's 128-byte swizzle
// layout, so a stage needs no re-layout for wgmma.
//
// Pipeline: wgmma_main_loop.cuh.
#include <atomic>
#include <cstdint>
#include <string>
#include <utility>

#include "backends/cuda/conv_igemm_wgmma.hpp"
#include "backends/cuda/conv_wgmma_ops.cuh"
#include "backends/cuda/wgmma_main_loop.cuh"
#include "backends/gpu/conv_igemm_tc_epilogue.cuh"
#include "backends/gpu/conv_igemm_tc_loader.cuh"

namespace galley::backends::gpu {
namespace {

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
  const int g = blockIdx.z % cp.groups;
  const int split = blockIdx.z / cp.groups;
  const int m0 = blockIdx.x * BM;
  const int n0 = blockIdx.y * BN;
  const int kred = cp.cg * cp.r * cp.s;
  const int total_steps = (kred + BK - 1) / BK;
  const int per_split = (total_steps + splits - 1) / splits;
  const int step_begin = split * per_split;
  const int nsteps = max(0, min(total_steps, step_begin + per_split) - step_begin);

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

template <typename T, int... I>
void launch_typed(const ConvParams& p, int tile, int splits, const T* x, const T* w, T* y, float* partial,
                  cudaStream_t s, std::integer_sequence<int, I...>) {
  // One instantiation per kWgmmaTiles entry; the fold runs the one whose index is `tile`.
  ((tile == I ? launch_tile<T, kWgmmaTiles[I].bm, kWgmmaTiles[I].bn, kWgmmaTiles[I].stages>(p, splits, x, w,
                                                                                            y, partial, s)
              : void()),
   ...);
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
