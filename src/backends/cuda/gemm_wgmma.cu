// gpu.gemm.tc's Hopper kernels: the tiled GEMM of ../gpu/gemm_tc.cu with wgmma.mma_async instead of
// mma.sync. Built only for sm_90a.
//
// A block's BM / 64 consumer warpgroups compute BM x BN of out; warpgroup i owns rows 64i..64i+63 and
// all BN columns, one m64nBNk16 wgmma per k16 slice. A stage holds 64 k of each operand in the layout
// wgmma reads with the 128-byte swizzle, whichever way the operand is stored:
//   K-major (X stored m x k, Y stored n x k): one 128-byte row per m (n), its 16-byte chunks
//     XOR-ed by row % 8, 8-row groups 1024 bytes apart (conv_igemm_wgmma.cu's layout);
//   M-/N-major (X stored k x m, Y stored k x n): slabs of 64 m (n), each 64 k rows of 128 bytes,
//     chunks XOR-ed by k % 8, slabs 8192 bytes apart (conv_bwd_weights_wgmma.cu's layout).
// Either way warpgroup i's 64 rows of X begin 8192 bytes into the stage. Two ways to fill the stages:
//   cp.async: every consumer thread copies its share of 16-byte chunks, through L2 only (within a
//     block every element is read once); pipeline of wgmma_main_loop.cuh, a barrier per step;
//   TMA: one extra producer warp has the tensor memory accelerator copy whole boxes (its 128-byte
//     swizzle is exactly this layout, and it zero-fills outside the matrix), each stage with a
//     "full" mbarrier the copies complete and an "empty" one the consumers release it on, so the
//     consumers issue nothing but wgmma and no step waits for the whole block (as CUTLASS's
//     warp-specialized Hopper kernels do).
// Blocks are rastered in groups of 8 tile rows, as gemm_tc.cu's.
#include <cuda.h>
#include <cudaTypedefs.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

#include "backends/cuda/conv_igemm_wgmma.hpp"
#include "backends/cuda/conv_wgmma_ops.cuh"
#include "backends/cuda/gemm_wgmma.hpp"
#include "backends/cuda/mbarrier_tma.cuh"
#include "backends/cuda/tensor_map_encoder.hpp"
#include "backends/cuda/wgmma_main_loop.cuh"
#include "backends/gpu/conv_device.cuh"

namespace galley::backends::gpu {
namespace {

constexpr int kStep = 64;             // k per stage
constexpr int kSlabBytes = 8192;      // 64 rows of 128 bytes
constexpr int kRowGroupBytes = 1024;  // 8 rows of 128 bytes: the swizzle atom

struct WgmmaGemmParams {
  int m, n, k, batch;
  bool sum_batches;
  long long ldx, ldy, ldo, stride_x, stride_y, stride_o;
  float alpha, beta;
};

// Copies the stage's 64 k of one operand (ROWS m or n of it from mn0) into `dst`, zeros outside
// the matrix. Every chunk lies wholly inside or outside: the contiguous extent and the row pitch are
// multiples of 8 elements.
template <typename T, int ROWS, bool kKMajor, int kThreads>
__device__ __forceinline__ void load_operand(const T* base, long long ld, int mn0, int mn_extent, int k0,
                                             int k_extent, unsigned dst, int tid) {
  constexpr int kChunks = ROWS * kStep / 8, kRowChunks = ROWS / 8;
#pragma unroll
  for (int c = tid; c < kChunks; c += kThreads) {
    int mn, k;
    unsigned offset;
    if constexpr (kKMajor) {
      const int r = c >> 3, kc = c & 7;
      mn = mn0 + r, k = k0 + kc * 8;
      offset = unsigned(r * 128 + ((kc ^ (r & 7)) << 4));
    } else {
      const int kr = c / kRowChunks, mc = c % kRowChunks;
      mn = mn0 + mc * 8, k = k0 + kr;
      offset = unsigned((mc >> 3) * kSlabBytes + kr * 128 + (((mc & 7) ^ (kr & 7)) << 4));
    }
    const bool in = mn < mn_extent && k < k_extent;
    const T* src = kKMajor ? base + (long long)mn * ld + k : base + (long long)k * ld + mn;
    mma::cp_async16<false>(dst + offset, in ? src : base, in ? 16 : 0);
  }
}

// The descriptor of k16 slice ks of an operand tile at `tile` in the layout above.
template <bool kKMajor>
__device__ __forceinline__ std::uint64_t operand_desc(unsigned tile, int ks) {
  return kKMajor ? wgmma::smem_desc(tile + ks * 32, 16, kRowGroupBytes)
                 : wgmma::smem_desc(tile + ks * 16 * 128, kSlabBytes, kRowGroupBytes);
}

// The block's tile origin under the grouped raster: 8 tile rows at a time sweep the columns, so X and
// Y tiles are reused in L2.
template <int BM, int BN>
__device__ __forceinline__ void tile_origin(int& m0, int& n0) {
  const int tiles_n = gridDim.x, tiles_m = gridDim.y;
  const int id = blockIdx.y * tiles_n + blockIdx.x;
  constexpr int kGroup = 8;
  const int first_m = id / (kGroup * tiles_n) * kGroup;
  const int group_m = min(tiles_m - first_m, kGroup);
  const int in_group = id % (kGroup * tiles_n);
  m0 = (first_m + in_group % group_m) * BM;
  n0 = (in_group / group_m) * BN;
}

// out = alpha acc + beta out + bias for consumer thread `tid`'s accumulators. acc[i] is row
// 16 * warp_in_wg + lane / 4 + 8 * ((i / 2) % 2) of the warpgroup's 64 rows and column
// 8 * (i / 4) + 2 * (lane % 4) + i % 2 (conv_wgmma_ops.cuh).
template <typename T, int BN>
__device__ __forceinline__ void store_tile(const WgmmaGemmParams& p, const float (&acc)[BN / 2], T* out,
                                           const T* bias, long long out_batch, int m0, int n0, int tid) {
  const int lane = tid & 31, wg = tid >> 7, warp_in_wg = (tid >> 5) & 3;
  T* ob = out + out_batch * p.stride_o;
  const int row_base = m0 + wg * 64 + warp_in_wg * 16 + (lane >> 2);
  const int col_base = n0 + (lane & 3) * 2;
  // Pairs of columns go out as one 4-byte store where every row and batch starts 4-byte aligned.
  const bool paired = ((p.ldo | p.stride_o) & 1) == 0;
  const auto value = [&](float v, T* dst, int col) {
    v *= p.alpha;
    if (p.beta != 0.f) v += p.beta * to_f32(*dst);
    if (bias != nullptr) v += to_f32(bias[col]);
    return v;
  };
#pragma unroll
  for (int i = 0; i < BN / 2; i += 2) {
    const int row = row_base + 8 * ((i >> 1) & 1), col = col_base + 8 * (i >> 2);
    if (row >= p.m || col >= p.n) continue;
    T* dst = ob + (long long)row * p.ldo + col;
    if (paired && col + 1 < p.n) {
      *reinterpret_cast<std::uint32_t*>(dst) =
          pack2<T>(value(acc[i], dst, col), value(acc[i + 1], dst + 1, col + 1));
    } else {
      *dst = from_f32<T>(value(acc[i], dst, col));
      if (col + 1 < p.n) dst[1] = from_f32<T>(value(acc[i + 1], dst + 1, col + 1));
    }
  }
}

template <typename T, int BM, int BN, int STAGES, bool TX, bool TY>
__global__ void __launch_bounds__(2 * BM, 1)
    gemm_wgmma_kernel(WgmmaGemmParams p, const T* __restrict__ x, const T* __restrict__ y,
                      T* __restrict__ out, const T* __restrict__ bias) {
  constexpr int kThreads = 2 * BM;
  constexpr int kABytes = BM * kStep * 2, kStageBytes = (BM + BN) * kStep * 2;
  constexpr bool kXKMajor = !TX, kYKMajor = TY;
  static_assert(BM % 64 == 0 && BN % 64 == 0 && STAGES >= 3,
                "warpgroups own 64 rows; slabs are 64 wide; loads run STAGES - 2 ahead");
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  // The swizzle is applied to absolute address bits: stage buffers must start 1024-byte aligned.
  unsigned char* smem = smem_raw + ((1024 - (mma::smem_addr(smem_raw) & 1023)) & 1023);
  const unsigned smem_s = mma::smem_addr(smem);

  int m0, n0;
  tile_origin<BM, BN>(m0, n0);

  const int tid = threadIdx.x, wg = tid >> 7;
  const int k_steps = (p.k + kStep - 1) / kStep;
  const int nsteps = k_steps * (p.sum_batches ? p.batch : 1);
  const long long out_batch = p.sum_batches ? 0 : blockIdx.z;

  int next_step = 0;  // the step the next load() fills: batch next_step / k_steps when summing
  float acc[BN / 2];
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) acc[i] = 0.f;

  wgmma::main_loop<STAGES, kStageBytes>(
      smem_s, nsteps, acc,
      [&](unsigned stage) {
        const long long b = p.sum_batches ? next_step / k_steps : out_batch;
        const int k0 = (next_step % k_steps) * kStep;
        ++next_step;
        load_operand<T, BM, kXKMajor, kThreads>(x + b * p.stride_x, p.ldx, m0, p.m, k0, p.k, stage, tid);
        load_operand<T, BN, kYKMajor, kThreads>(y + b * p.stride_y, p.ldy, n0, p.n, k0, p.k, stage + kABytes,
                                                tid);
      },
      [&](unsigned stage) {
        const unsigned a_tile = stage + wg * kSlabBytes, b_tile = stage + kABytes;
#pragma unroll
        for (int ks = 0; ks < kStep / 16; ++ks)
          wgmma::mma_async<T, BN, !kXKMajor, !kYKMajor>(acc, operand_desc<kXKMajor>(a_tile, ks),
                                                        operand_desc<kYKMajor>(b_tile, ks));
      });

  store_tile<T, BN>(p, acc, out, bias, out_batch, m0, n0, tid);
}

// The stage's 64 k from k0 of one operand's ROWS m (n) from mn0, batch b, in the layout above: one
// box of ROWS rows of 64 k for a K-major operand, ROWS / 64 slabs of 64 k rows otherwise.
template <int ROWS, bool kKMajor>
__device__ __forceinline__ void tma_load_operand(unsigned dst, const CUtensorMap& map, int mn0, int k0, int b,
                                                 unsigned bar) {
  if constexpr (kKMajor) {
    mbar::tma_load_3d(dst, map, k0, mn0, b, bar);
  } else {
#pragma unroll
    for (int j = 0; j < ROWS / 64; ++j)
      mbar::tma_load_3d(dst + j * kSlabBytes, map, mn0 + 64 * j, k0, b, bar);
  }
}

template <typename T, int BM, int BN, int STAGES, bool TX, bool TY>
__global__ void __launch_bounds__(2 * BM + 32, 1)
    gemm_wgmma_tma_kernel(WgmmaGemmParams p, const __grid_constant__ CUtensorMap x_map,
                          const __grid_constant__ CUtensorMap y_map, T* __restrict__ out,
                          const T* __restrict__ bias) {
  constexpr int kConsumers = 2 * BM;  // BM / 64 warpgroups; one producer warp after them
  constexpr int kABytes = BM * kStep * 2, kStageBytes = (BM + BN) * kStep * 2;
  constexpr bool kXKMajor = !TX, kYKMajor = TY;
  static_assert(BM % 64 == 0 && BN % 64 == 0 && BN <= 256 && STAGES >= 2, "box rows at most 256");
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  // TMA's 128-byte swizzle is applied to absolute address bits: stages must start 1024-byte aligned.
  unsigned char* smem = smem_raw + ((1024 - (mma::smem_addr(smem_raw) & 1023)) & 1023);
  const unsigned smem_s = mma::smem_addr(smem);
  const unsigned full = smem_s + STAGES * kStageBytes, empty = full + 8 * STAGES;  // mbarriers, 8 bytes each

  int m0, n0;
  tile_origin<BM, BN>(m0, n0);
  const int tid = threadIdx.x;
  const int k_steps = (p.k + kStep - 1) / kStep;
  const int nsteps = k_steps * (p.sum_batches ? p.batch : 1);
  const int out_batch = p.sum_batches ? 0 : int(blockIdx.z);

  if (tid == 0) {
    for (int st = 0; st < STAGES; ++st) {
      mbar::init(full + 8 * st, 1);            // the producer's arrival, and the copies' bytes
      mbar::init(empty + 8 * st, kConsumers);  // every consumer thread's release
    }
    mbar::fence_init();
  }
  __syncthreads();

  if (tid >= kConsumers) {
    if (tid == kConsumers) {
      // The producer: stage it % STAGES once the consumers released its previous fill.
      for (int it = 0; it < nsteps; ++it) {
        const int st = it % STAGES;
        if (it >= STAGES) mbar::wait(empty + 8 * st, ((it / STAGES) - 1) & 1);
        mbar::arrive_expect_bytes(full + 8 * st, kStageBytes);
        const int b = p.sum_batches ? it / k_steps : out_batch, k0 = (it % k_steps) * kStep;
        const unsigned stage = smem_s + st * kStageBytes;
        // An operand shared by every batch is one matrix in its map (operand_map()).
        tma_load_operand<BM, kXKMajor>(stage, x_map, m0, k0, p.stride_x == 0 ? 0 : b, full + 8 * st);
        tma_load_operand<BN, kYKMajor>(stage + kABytes, y_map, n0, k0, p.stride_y == 0 ? 0 : b,
                                       full + 8 * st);
      }
    }
    return;
  }

  const int wg = tid >> 7;
  float acc[BN / 2];
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) acc[i] = 0.f;
  for (int it = 0; it < nsteps; ++it) {
    const int st = it % STAGES;
    mbar::wait(full + 8 * st, (it / STAGES) & 1);
    const unsigned a_tile = smem_s + st * kStageBytes + wg * kSlabBytes,
                   b_tile = smem_s + st * kStageBytes + kABytes;
    wgmma::fence();
#pragma unroll
    for (int ks = 0; ks < kStep / 16; ++ks)
      wgmma::mma_async<T, BN, !kXKMajor, !kYKMajor>(acc, operand_desc<kXKMajor>(a_tile, ks),
                                                    operand_desc<kYKMajor>(b_tile, ks));
    wgmma::commit();
    // One group stays in flight: once the previous step's wgmma is done its stage goes back.
    wgmma::wait<1>();
    wgmma::fence_operands(acc);
    if (it > 0) mbar::arrive(empty + 8 * ((it - 1) % STAGES));
  }
  wgmma::wait<0>();
  wgmma::fence_operands(acc);
  store_tile<T, BN>(p, acc, out, bias, out_batch, m0, n0, tid);
}

template <typename T, int BM, int BN, int STAGES, bool TX, bool TY>
void launch_tile(const WgmmaGemmParams& p, const T* x, const T* y, T* out, const T* bias, cudaStream_t s) {
  auto kernel = gemm_wgmma_kernel<T, BM, BN, STAGES, TX, TY>;
  constexpr int kSmem = STAGES * (BM + BN) * kStep * 2 + 1024;  // + room to align the buffers to 1024
  static std::atomic<std::uint64_t> raised{0};                  // one per instantiation
  once_per_device(raised, [&] { allow_dynamic_smem(kernel, kSmem, "gpu.gemm.tc (wgmma)"); });
  const dim3 grid(unsigned(ceil_div(p.n, BN)), unsigned(ceil_div(p.m, BM)),
                  unsigned(p.sum_batches ? 1 : p.batch));
  kernel<<<grid, 2 * BM, kSmem, s>>>(p, x, y, out, bias);
}

// The tensor map of an operand stored `outer` rows of `inner` elements (row pitch ld) over `batches`
// batches `batch_stride` apart (0: one matrix for every batch), read in boxes of 64 x box_outer.
template <typename T>
CUtensorMap operand_map(const T* base, long long inner, long long outer, long long ld, long long batches,
                        long long batch_stride, int box_outer) {
  const bool one = batch_stride == 0 || batches == 1;
  const cuuint64_t dims[3] = {cuuint64_t(inner), cuuint64_t(outer), cuuint64_t(one ? 1 : batches)};
  const cuuint64_t strides[2] = {cuuint64_t(ld) * sizeof(T),
                                 cuuint64_t(one ? outer * ld : batch_stride) * sizeof(T)};
  return swizzled_box_map(std::is_same_v<T, __half>, base, dims, strides, box_outer, "gpu.gemm.tc",
                          "a " + std::to_string(outer) + " x " + std::to_string(inner) +
                              " operand of row pitch " + std::to_string(ld));
}

template <typename T, int BM, int BN, int STAGES, bool TX, bool TY>
void launch_tma_tile(const dnn::GemmCall& c, const WgmmaGemmParams& p, const T* x, const T* y, T* out,
                     const T* bias, cudaStream_t s) {
  auto kernel = gemm_wgmma_tma_kernel<T, BM, BN, STAGES, TX, TY>;
  constexpr int kSmem = STAGES * (BM + BN) * kStep * 2 + 1024 + 16 * STAGES;  // + alignment, mbarriers
  static std::atomic<std::uint64_t> raised{0};                                // one per instantiation
  once_per_device(raised, [&] { allow_dynamic_smem(kernel, kSmem, "gpu.gemm.tc (wgmma, TMA)"); });
  // X: K-major rows of k per m, or rows of m per k; Y: rows of k per n (TY), or rows of n per k.
  const CUtensorMap x_map = TX ? operand_map(x, c.m, c.k, c.ldx, c.batch, c.stride_x, 64)
                               : operand_map(x, c.k, c.m, c.ldx, c.batch, c.stride_x, BM);
  const CUtensorMap y_map = TY ? operand_map(y, c.k, c.n, c.ldy, c.batch, c.stride_y, BN)
                               : operand_map(y, c.n, c.k, c.ldy, c.batch, c.stride_y, 64);
  const dim3 grid(unsigned(ceil_div(p.n, BN)), unsigned(ceil_div(p.m, BM)),
                  unsigned(p.sum_batches ? 1 : p.batch));
  kernel<<<grid, 2 * BM + 32, kSmem, s>>>(p, x_map, y_map, out, bias);
}

template <typename T, int BM, int BN, int STAGES, bool kTma, bool TX, bool TY>
void launch_kind(const dnn::GemmCall& c, const WgmmaGemmParams& p, const T* x, const T* y, T* out,
                 const T* bias, cudaStream_t s) {
  if constexpr (kTma)
    launch_tma_tile<T, BM, BN, STAGES, TX, TY>(c, p, x, y, out, bias, s);
  else
    launch_tile<T, BM, BN, STAGES, TX, TY>(p, x, y, out, bias, s);
}

template <typename T, int BM, int BN, int STAGES, bool kTma>
void launch_transposes(const dnn::GemmCall& c, const WgmmaGemmParams& p, const T* x, const T* y, T* out,
                       const T* bias, cudaStream_t s) {
  if (!c.trans_x && !c.trans_y) launch_kind<T, BM, BN, STAGES, kTma, false, false>(c, p, x, y, out, bias, s);
  if (!c.trans_x && c.trans_y) launch_kind<T, BM, BN, STAGES, kTma, false, true>(c, p, x, y, out, bias, s);
  if (c.trans_x && !c.trans_y) launch_kind<T, BM, BN, STAGES, kTma, true, false>(c, p, x, y, out, bias, s);
  if (c.trans_x && c.trans_y) launch_kind<T, BM, BN, STAGES, kTma, true, true>(c, p, x, y, out, bias, s);
}

template <typename T, int... I>
void launch_typed(const dnn::GemmCall& c, int tile, const WgmmaGemmParams& p, const void* x, const void* y,
                  void* out, const void* bias, cudaStream_t s, std::integer_sequence<int, I...>) {
  // One instantiation per kGemmWgmmaTiles entry; the fold runs the one whose index is `tile`.
  ((tile == I
        ? launch_transposes<T, kGemmWgmmaTiles[I].bm, kGemmWgmmaTiles[I].bn, kGemmWgmmaTiles[I].stages,
                            kGemmWgmmaTiles[I].tma>(c, p, static_cast<const T*>(x), static_cast<const T*>(y),
                                                    static_cast<T*>(out), static_cast<const T*>(bias), s)
        : void()),
   ...);
}

}  // namespace

void launch_gemm_wgmma(const dnn::GemmCall& c, DType dtype, int tile, const void* x, const void* y, void* out,
                       const void* bias, void* stream) {
  if (!igemm_wgmma_available())
    throw Error(Status::unsupported,
                "gpu.gemm.tc: the wgmma tiles need an sm_90 device (compute capability 9.0)");
  if (tile < 0 || tile >= kGemmWgmmaTileCount)
    throw Error(Status::invalid_argument, "gpu.gemm.tc: wgmma tile " + std::to_string(tile) +
                                              " does not exist (0.." +
                                              std::to_string(kGemmWgmmaTileCount - 1) + ")");
  if (dtype != DType::f16 && dtype != DType::bf16)
    throw Error(Status::unsupported,
                std::string("gpu.gemm.tc: the wgmma tiles take f16 or bf16, not ") + to_string(dtype));
  const WgmmaGemmParams p{int(c.m), int(c.n),   int(c.k),   int(c.batch), c.sum_batches, c.ldx, c.ldy,
                          c.ldo,    c.stride_x, c.stride_y, c.stride_o,   c.alpha,       c.beta};
  const cudaStream_t s = as_stream(stream);
  constexpr auto tiles = std::make_integer_sequence<int, kGemmWgmmaTileCount>{};
  if (dtype == DType::f16)
    launch_typed<__half>(c, tile, p, x, y, out, bias, s, tiles);
  else
    launch_typed<bf16_t>(c, tile, p, x, y, out, bias, s, tiles);
  check_launch("gpu.gemm.tc (wgmma)");
}

}  // namespace galley::backends::gpu
