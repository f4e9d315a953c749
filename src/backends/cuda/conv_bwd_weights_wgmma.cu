// gpu.conv.bwd_weights_igemm's Hopper kernel: the NHWC tensor-core path of
// ../gpu/conv_bwd_weights_nhwc_tc.cu with wgmma.mma_async instead of mma.sync. Built only for sm_90a.
//
// Per group pack and filter tap the GEMM is dw[k][c] = sum over pixels of dy[pixel][k] * x[pixel under
// the tap][c]: A (k x pixels) and B (pixels x c) are both stored pixel rows by channel, i.e. M- and
// N-major, which wgmma reads directly for 16-bit types (the transposed descriptors). A stage holds
// kBwdWeightsWgmmaStep pixel rows of each operand in 64-channel slabs: a slab is step rows of 128
// bytes, chunks XOR-swizzled by row % 8, which is the 128-byte swizzle layout of an MN-major operand
// with 8-row groups 1024 bytes apart (stride byte offset) and slabs one slab apart (leading byte
// offset). A block of BM / 64 warpgroups computes BM x BN; warpgroup i owns rows 64i..64i+63 and all
// BN columns, one m64nBNk16 wgmma per 16 pixels.
//
// Pipeline: wgmma_main_loop.cuh.
#include <atomic>
#include <cstdint>
#include <string>

#include "backends/cuda/conv_bwd_weights_wgmma.hpp"
#include "backends/cuda/conv_igemm_wgmma.hpp"
#include "backends/cuda/conv_wgmma_ops.cuh"
#include "backends/cuda/wgmma_main_loop.cuh"
#include "backends/gpu/conv_bwd_igemm.cuh"
#include "backends/gpu/conv_bwd_weights_nhwc_io.cuh"

namespace galley::backends::gpu {
namespace {

template <typename T, int BM, int BN, int STAGES>
__global__ void __launch_bounds__(2 * BM, 1)
    bwd_weights_wgmma_kernel(ConvParams cp, const T* __restrict__ x, const T* __restrict__ dy,
                             float* __restrict__ partial, T* __restrict__ dw, int splits, int c_tiles,
                             int group_pack) {
  constexpr int kThreads = 2 * BM, kStep = kBwdWeightsWgmmaStep;
  constexpr int kSlabBytes = kStep * 128;  // 64 channels of kStep pixel rows
  constexpr int kABytes = BM / 64 * kSlabBytes, kStageBytes = (BM + BN) / 64 * kSlabBytes;
  static_assert(BM % 64 == 0 && BN % 64 == 0 && kStep % 16 == 0 && STAGES >= 3,
                "warpgroups own 64 rows; slabs are 64 channels; loads run STAGES - 2 ahead");
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  // The swizzle is applied to absolute address bits: slabs must start 1024-byte aligned.
  unsigned char* smem = smem_raw + ((1024 - (mma::smem_addr(smem_raw) & 1023)) & 1023);
  const unsigned smem_s = mma::smem_addr(smem);

  const int tid = threadIdx.x, lane = tid & 31;
  const int wg = tid >> 7, warp_in_wg = (tid >> 5) & 3;
  const BwdWeightsNhwcBlock blk(cp, BM, BN, c_tiles, group_pack, splits, kStep);
  const int nsteps = blk.steps;

  BwdWeightsNhwcLoader<T, BM, BN, kThreads, kStep> loader(cp, x, dy, tid, blk);
  const auto slab_offset = [](int row, int chunk) {
    return unsigned((chunk >> 3) * kSlabBytes + row * 128 + (((chunk & 7) ^ (row & 7)) << 4));
  };
  float acc[BN / 2];
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) acc[i] = 0.f;

  wgmma::main_loop<STAGES, kStageBytes>(
      smem_s, nsteps, acc,
      [&](unsigned stage) { loader.load(cp, x, dy, stage, stage + kABytes, slab_offset, slab_offset); },
      [&](unsigned stage) {
        const unsigned a_tile = stage + wg * kSlabBytes, b_tile = stage + kABytes;
#pragma unroll
        for (int ks = 0; ks < kStep / 16; ++ks)  // 16 pixel rows (2 groups of 8) a slice
          wgmma::mma_async<T, BN, true>(acc, wgmma::smem_desc(a_tile + ks * 2048, kSlabBytes, 1024),
                                        wgmma::smem_desc(b_tile + ks * 2048, kSlabBytes, 1024));
      });

  // acc[i] is row 16 * warp_in_wg + lane / 4 + 8 * ((i / 2) % 2) of the warpgroup's 64 rows and
  // column 8 * (i / 4) + 2 * (lane % 4) + i % 2 (conv_wgmma_ops.cuh).
  const int m_base = blk.m0 + wg * 64 + warp_in_wg * 16 + (lane >> 2);
  const int c_base = blk.c0 + (lane & 3) * 2;
#pragma unroll
  for (int i = 0; i < BN / 2; i += 2)
    store_dw_pair(cp, blk.g, group_pack, blk.k_end, blk.c_end, blk.tap, blk.tap_pack,
                  m_base + 8 * ((i >> 1) & 1), c_base + 8 * (i >> 2), acc[i], acc[i + 1], blk.split, splits,
                  partial, dw);
}

template <typename T, int BM, int BN, int STAGES>
void launch_tile(const ConvParams& p, int splits, int group_pack, const T* x, const T* dy, T* dw,
                 float* partial, cudaStream_t s) {
  auto kernel = bwd_weights_wgmma_kernel<T, BM, BN, STAGES>;
  constexpr int kSmem = STAGES * (BM + BN) * kBwdWeightsWgmmaStep * 2 + 1024;  // + room to align to 1024
  static std::atomic<std::uint64_t> raised{0};                                 // one per instantiation
  once_per_device(raised, [&] { allow_dynamic_smem(kernel, kSmem, "gpu.conv.bwd_weights_igemm (wgmma)"); });
  const int c_tiles = ceil_div(p.cg * group_pack, BN);
  const dim3 grid(bwd_weights_column_blocks(p, BN, group_pack), ceil_div(p.kg * group_pack, BM),
                  ceil_div(p.groups, group_pack) * splits);
  kernel<<<grid, 2 * BM, kSmem, s>>>(p, x, dy, partial, dw, splits, c_tiles, group_pack);
}

template <typename T, int... I>
void launch_typed(const ConvParams& p, int tile, int splits, int group_pack, const T* x, const T* dy, T* dw,
                  float* partial, cudaStream_t s, std::integer_sequence<int, I...>) {
  // One instantiation per kBwdWeightsWgmmaTiles entry; the fold runs the one whose index is `tile`.
  ((tile == I ? launch_tile<T, kBwdWeightsWgmmaTiles[I].bm, kBwdWeightsWgmmaTiles[I].bn,
                            kBwdWeightsWgmmaTiles[I].stages>(p, splits, group_pack, x, dy, dw, partial, s)
              : void()),
   ...);
}

}  // namespace

void launch_bwd_weights_wgmma(const ConvParams& p, int tile, int splits, int group_pack, const void* x,
                              const void* dy, void* dw, float* partial, void* stream) {
  if (!igemm_wgmma_available())
    throw Error(Status::unsupported,
                "gpu.conv.bwd_weights_igemm: the wgmma tiles need an sm_90 device (compute capability 9.0)");
  if (tile < 0 || tile >= kBwdWeightsWgmmaTileCount)
    throw Error(Status::invalid_argument, "gpu.conv.bwd_weights_igemm: wgmma tile " + std::to_string(tile) +
                                              " does not exist (0.." +
                                              std::to_string(kBwdWeightsWgmmaTileCount - 1) + ")");
  if (!p.nhwc || p.cg % 8 != 0 || p.kg % 8 != 0 || (p.dtype != DType::f16 && p.dtype != DType::bf16))
    throw Error(Status::unsupported,
                "gpu.conv.bwd_weights_igemm: the wgmma tiles need f16/bf16 NHWC with channels per group a "
                "multiple of 8, got cg = " +
                    std::to_string(p.cg) + ", kg = " + std::to_string(p.kg));
  const cudaStream_t s = as_stream(stream);
  constexpr auto tiles = std::make_integer_sequence<int, kBwdWeightsWgmmaTileCount>{};
  if (p.dtype == DType::f16)
    launch_typed<__half>(p, tile, splits, group_pack, static_cast<const __half*>(x),
                         static_cast<const __half*>(dy), static_cast<__half*>(dw), partial, s, tiles);
  else
    launch_typed<bf16_t>(p, tile, splits, group_pack, static_cast<const bf16_t*>(x),
                         static_cast<const bf16_t*>(dy), static_cast<bf16_t*>(dw), partial, s, tiles);
  check_launch("gpu.conv.bwd_weights_igemm (wgmma)");
}

}  // namespace galley::backends::gpu
