// gpu.gemm.tc's kernel: a tiled f16/bf16 GEMM on tensor cores (mma.sync m16n8k16, f32
// accumulation); f32 as 3xTF32 (three m16n8k8 TF32 MMAs a product, fp32's accuracy) unless
// GALLEY_DEBUG_3XTF32=0; on Hopper, f16/bf16 also on the wgmma kernel (../cuda/gemm_wgmma.cu) for
// tiles marked wgmma. Each block computes a bm x bn tile of the output over k slices of 32: the slices
// stream through `stages` shared-memory buffers by cp.async (the next slices load while the
// current one is multiplied), fragments come out of shared memory by ldmatrix (.trans for operands
// stored with m or n contiguous, so all four transposes share one kernel), rows padded by 16 bytes
// so the eight rows an ldmatrix reads fall in distinct banks. alpha, beta and the bias are applied
// in the epilogue. A gradient summed over the batch streams every batch's slices through the same
// accumulators. Blocks are rastered in groups of 8 tile rows so neighbouring blocks share operand
// tiles in L2.
#include <cstdio>
#include <string>

#include "conv_mma.cuh"
#include "core/config.hpp"
#include "gemm_kernels.hpp"
#if GALLEY_CUDA_WGMMA
#include "backends/cuda/conv_igemm_wgmma.hpp"
#include "backends/cuda/gemm_wgmma.hpp"
#endif

namespace galley::backends::gpu {

std::string GemmTile::to_string() const {
  if (wgmma)
    return std::string(tma ? "wgmma-tma-" : "wgmma-") + std::to_string(bm) + "x" + std::to_string(bn) + "-s" +
           std::to_string(stages);
  return std::to_string(bm) + "x" + std::to_string(bn) + "-w" + std::to_string(wm) + "x" +
         std::to_string(wn) + "-s" + std::to_string(stages);
}

std::optional<GemmTile> GemmTile::parse(std::string_view text) {
  GemmTile t;
  char tail = 0;
  const std::string s(text);
  if (s.rfind("wgmma-", 0) == 0) {
    t.wgmma = true, t.wm = t.wn = 0;
    t.tma = s.rfind("wgmma-tma-", 0) == 0;
    if (std::sscanf(s.c_str() + (t.tma ? 10 : 6), "%dx%d-s%d%c", &t.bm, &t.bn, &t.stages, &tail) != 3)
      return std::nullopt;
  } else if (std::sscanf(s.c_str(), "%dx%d-w%dx%d-s%d%c", &t.bm, &t.bn, &t.wm, &t.wn, &t.stages, &tail) !=
             5) {
    return std::nullopt;
  }
  if (t.to_string() != s) return std::nullopt;  // one spelling per tile
  return t;
}

std::vector<GemmTile> gemm_tc_wgmma_tiles(DType dtype) {
  std::vector<GemmTile> tiles;
#if GALLEY_CUDA_WGMMA
  if ((dtype == DType::f16 || dtype == DType::bf16) && env::config().debug_gemm_wgmma &&
      igemm_wgmma_available())
    for (const GemmWgmmaTile& w : kGemmWgmmaTiles)
      tiles.push_back(GemmTile{w.bm, w.bn, 0, 0, w.stages, true, w.tma});
#else
  (void)dtype;
#endif
  return tiles;
}

namespace {

constexpr GemmTile kTiles[] = {
    {128, 128, 64, 32, 3},
    {128, 256, 64, 64, 3},
    {64, 128, 32, 64, 4},
    {64, 64, 32, 32, 4},
};

}  // namespace

GemmTilePace gemm_tc_tile_pace(const GemmTile& tile, DType dtype) {
  // Rates relative to the fastest tile, from the tuner's per-tile medians of 8192^3 products (NN,
  // f16 and f32; bench/RESULTS.md); blocks per multiprocessor from each tile's stage buffers and
  // registers. The wgmma tiles' 196 KiB of stages leave room for one block, the 64-row cp.async
  // one's 96 KiB for two.
  if (tile.wgmma) {
    if (tile.tma) return {tile.bn == 256 ? 1.0 : 0.76, 1};
    return {tile.bm == 128 ? 0.60 : 0.39, tile.bm == 128 ? 1 : 2};
  }
  const bool f32 = dtype == DType::f32;
  if (tile.bm == 128 && tile.bn == 256) return {f32 ? 1.0 : 0.31, 1};
  if (tile.bm == 128) return {f32 ? 1.0 : 0.34, f32 ? 1 : 2};
  if (tile.bn == 128) return {f32 ? 1.0 : 0.30, 2};
  return {f32 ? 0.86 : 0.23, 4};
}

const GemmTile* gemm_tc_tiles(std::size_t* count) {
  *count = std::size(kTiles);
  return kTiles;
}

bool gemm_tc_takes_f32() { return GALLEY_GPU_MMA && env::config().debug_3xtf32; }

std::string gemm_tc_unfit(const dnn::GemmCall& c, DType dtype) {
  if (dtype == DType::f32 && !gemm_tc_takes_f32())
    return "dtype f32 (tensor cores take f16 or bf16; f32 as 3xTF32 unless GALLEY_DEBUG_3XTF32=0)";
  if (dtype != DType::f16 && dtype != DType::bf16 && dtype != DType::f32)
    return std::string("dtype ") + to_string(dtype) + " (tensor cores take f16, bf16 or f32)";
  // 16-byte copies: each operand's contiguous extent (and so its row pitch) in whole chunks.
  const std::int64_t chunk = dtype == DType::f32 ? 4 : 8;
  const std::string multiple = " is not a multiple of " + std::to_string(chunk);
  const std::int64_t x_contig = c.trans_x ? c.m : c.k, y_contig = c.trans_y ? c.k : c.n;
  if (x_contig % chunk != 0 || c.ldx % chunk != 0) {
    return std::string("X's contiguous extent ") + (c.trans_x ? "m = " : "k = ") + std::to_string(x_contig) +
           " or row pitch " + std::to_string(c.ldx) + multiple;
  }
  if (y_contig % chunk != 0 || c.ldy % chunk != 0) {
    return std::string("Y's contiguous extent ") + (c.trans_y ? "k = " : "n = ") + std::to_string(y_contig) +
           " or row pitch " + std::to_string(c.ldy) + multiple;
  }
  constexpr std::int64_t kInt = (std::int64_t(1) << 31) - 1;
  if (c.m > kInt || c.n > kInt) return "m or n exceeds 2^31 - 1";
  if ((c.m + 63) / 64 > 65535)
    return "m = " + std::to_string(c.m) + " needs more than 65535 tile rows (grid.y)";
  if ((c.m + 63) / 64 * ((c.n + 63) / 64) > kInt) return "too many output tiles for the grid";
  if (!c.sum_batches && c.batch > 65535)
    return "batch " + std::to_string(c.batch) + " exceeds grid.z (65535)";
  if (c.k > (std::int64_t(1) << 31) / 2) return "k exceeds 2^30";
  return {};
}

#if GALLEY_GPU_MMA

bool gemm_tc_available() { return true; }

namespace {

constexpr int kBk = 32;  // k per slice
/// Elements a 16-byte copy moves.
template <typename T>
constexpr int kChunk = 16 / int(sizeof(T));
/// Padding per shared-memory row: 16 bytes for 16-bit values (the eight rows an ldmatrix reads in
/// distinct banks). f32 fragments are single 32-bit loads of 8 rows by 4 k (or 4 k by 8 columns):
/// 4 floats where the stored rows run along k, 8 where they run across it, so those 32 loads hit
/// 32 distinct banks.
template <typename T>
constexpr int pad_of(bool rows_along_k) {
  return sizeof(T) == 2 ? 8 : (rows_along_k ? 4 : 8);
}

struct TcParams {
  int m, n, k;
  int batch;
  bool sum_batches;
  long long ldx, ldy, ldo;
  long long stride_x, stride_y, stride_o;
  float alpha, beta;
};

// Shared-memory extents of one stage's X and Y tiles, in elements.
template <typename T, int BM, int BN, bool TX, bool TY>
struct TileShape {
  static constexpr int x_rows = TX ? kBk : BM, x_pitch = (TX ? BM : kBk) + pad_of<T>(!TX);
  static constexpr int y_rows = TY ? BN : kBk, y_pitch = (TY ? kBk : BN) + pad_of<T>(TY);
  static constexpr int x_elems = x_rows * x_pitch, y_elems = y_rows * y_pitch;
  static constexpr int stage_elems = x_elems + y_elems;
};

template <typename T, int BM, int BN, int WM, int WN, int STAGES, bool TX, bool TY>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32)
    gemm_tc_kernel(TcParams p, const T* __restrict__ x, const T* __restrict__ y, T* __restrict__ out,
                   const T* __restrict__ bias) {
  using Shape = TileShape<T, BM, BN, TX, TY>;
  constexpr int kWarpsN = BN / WN;
  constexpr int kThreads = (BM / WM) * kWarpsN * 32;
  constexpr int MT = WM / 16, NT = WN / 8;
  static_assert(NT % 2 == 0, "B fragments load two n8 tiles at a time");
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* smem = reinterpret_cast<T*>(smem_raw);

  // Grouped raster: 8 tile rows at a time sweep the columns, so X and Y tiles are reused in L2.
  const int tiles_n = gridDim.x, tiles_m = gridDim.y;
  const int id = blockIdx.y * tiles_n + blockIdx.x;
  constexpr int kGroup = 8;
  const int group = id / (kGroup * tiles_n);
  const int first_m = group * kGroup;
  const int group_m = min(tiles_m - first_m, kGroup);
  const int in_group = id % (kGroup * tiles_n);
  const int m0 = (first_m + in_group % group_m) * BM;
  const int n0 = (in_group / group_m) * BN;

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm0 = (warp / kWarpsN) * WM, wn0 = (warp % kWarpsN) * WN;

  const int k_tiles = (p.k + kBk - 1) / kBk;
  const int batches = p.sum_batches ? p.batch : 1;
  const int total = k_tiles * batches;
  const long long out_batch = p.sum_batches ? 0 : blockIdx.z;

  // Enqueues slice t (batch t / k_tiles, k slice t % k_tiles) into stage `s`.
  const auto load = [&](int t, int s) {
    const long long b = p.sum_batches ? t / k_tiles : out_batch;
    const int k0 = (t % k_tiles) * kBk;
    const T* xb = x + b * p.stride_x;
    const T* yb = y + b * p.stride_y;
    T* xs = smem + s * Shape::stage_elems;
    T* ys = xs + Shape::x_elems;
    constexpr int E = kChunk<T>;
    constexpr int x_chunks = BM * kBk / E, x_row_chunks = (TX ? BM : kBk) / E;
#pragma unroll
    for (int c = tid; c < x_chunks; c += kThreads) {
      const int r = c / x_row_chunks, col = (c % x_row_chunks) * E;
      // TX: rows are k, columns m; else rows m, columns k.
      const int gr = TX ? k0 + r : m0 + r, gc = TX ? m0 + col : k0 + col;
      const bool in = TX ? (gr < p.k && gc < p.m) : (gr < p.m && gc < p.k);
      const T* src = in ? xb + gr * p.ldx + gc : xb;
      mma::cp_async16<true>(mma::smem_addr(xs + r * Shape::x_pitch + col), src, in ? 16 : 0);
    }
    constexpr int y_chunks = BN * kBk / E, y_row_chunks = (TY ? kBk : BN) / E;
#pragma unroll
    for (int c = tid; c < y_chunks; c += kThreads) {
      const int r = c / y_row_chunks, col = (c % y_row_chunks) * E;
      // TY: rows are n, columns k; else rows k, columns n.
      const int gr = TY ? n0 + r : k0 + r, gc = TY ? k0 + col : n0 + col;
      const bool in = TY ? (gr < p.n && gc < p.k) : (gr < p.k && gc < p.n);
      const T* src = in ? yb + gr * p.ldy + gc : yb;
      mma::cp_async16<true>(mma::smem_addr(ys + r * Shape::y_pitch + col), src, in ? 16 : 0);
    }
  };

  float acc[MT][NT][4];
  mma::zero_fragments(acc);

#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < total) load(s, s);
    mma::cp_async_commit();
  }

  const int lr = lane & 7, lq = lane >> 3;  // row within an 8x8 matrix, which of the four matrices
  for (int t = 0; t < total; ++t) {
    mma::cp_async_wait<STAGES - 2>();
    __syncthreads();
    // Refill the stage computed in the previous iteration (every thread is past it now).
    if (t + STAGES - 1 < total) load(t + STAGES - 1, (t + STAGES - 1) % STAGES);
    mma::cp_async_commit();

    const T* xs = smem + (t % STAGES) * Shape::stage_elems;
    const T* ys = xs + Shape::x_elems;
    if constexpr (std::is_same_v<T, float>) {
      // 3xTF32, k8 at a time: A (m g | g + 8, k q | q + 4), B (k q | q + 4, n g), g = lane / 4,
      // q = lane % 4, each value split once into its big and small TF32 parts. An operand stored
      // with k along its rows comes by ldmatrix: an 8x8 b16 matrix is 8 rows of 4 floats, and lane i
      // receives float i % 4 of row i / 4, which is exactly the (g, q) a TF32 fragment wants; the
      // other storage order needs the transpose ldmatrix has only for 16-bit elements, so it is read
      // float by float. The slice's products go into a fresh partial added to acc once per slice,
      // where the registers hold a second accumulator set; the widest warp tile adds once per k8.
      const int g = lane >> 2, q = lane & 3;
      constexpr bool kSlicePartial = MT * NT <= 16;
      float part[kSlicePartial ? MT : 1][kSlicePartial ? NT : 1][4];
#pragma unroll
      for (int kk = 0; kk < kBk; kk += 8) {
        unsigned a_big[MT][4], a_small[MT][4], b_big[NT][2], b_small[NT][2];
#pragma unroll
        for (int i = 0; i < MT; ++i) {
          float a[4];
          if constexpr (!TX) {
            // matrices: (m 0-7, k 0-3), (m 8-15, k 0-3), (m 0-7, k 4-7), (m 8-15, k 4-7)
            unsigned r[4];
            const float* ptr = xs + (wm0 + i * 16 + lr + (lq & 1) * 8) * Shape::x_pitch + kk + (lq >> 1) * 4;
            mma::ldmatrix_x4(r, mma::smem_addr(ptr));
#pragma unroll
            for (int e = 0; e < 4; ++e) a[e] = __uint_as_float(r[e]);
          } else {
#pragma unroll
            for (int e = 0; e < 4; ++e)
              a[e] = xs[(kk + q + (e >> 1) * 4) * Shape::x_pitch + wm0 + i * 16 + g + (e & 1) * 8];
          }
#pragma unroll
          for (int e = 0; e < 4; ++e) mma::split_tf32(a[e], a_big[i][e], a_small[i][e]);
        }
#pragma unroll
        for (int j = 0; j < NT; j += 2) {
          float b[2][2];
          if constexpr (TY) {
            // matrices: (n 0-7, k 0-3), (n 0-7, k 4-7), (n 8-15, k 0-3), (n 8-15, k 4-7)
            unsigned r[4];
            const float* ptr = ys + (wn0 + j * 8 + lr + (lq >> 1) * 8) * Shape::y_pitch + kk + (lq & 1) * 4;
            mma::ldmatrix_x4(r, mma::smem_addr(ptr));
            b[0][0] = __uint_as_float(r[0]), b[0][1] = __uint_as_float(r[1]);
            b[1][0] = __uint_as_float(r[2]), b[1][1] = __uint_as_float(r[3]);
          } else {
#pragma unroll
            for (int jj = 0; jj < 2; ++jj)
#pragma unroll
              for (int e = 0; e < 2; ++e)
                b[jj][e] = ys[(kk + q + e * 4) * Shape::y_pitch + wn0 + (j + jj) * 8 + g];
          }
#pragma unroll
          for (int jj = 0; jj < 2; ++jj)
#pragma unroll
            for (int e = 0; e < 2; ++e) mma::split_tf32(b[jj][e], b_big[j + jj][e], b_small[j + jj][e]);
        }
#pragma unroll
        for (int i = 0; i < MT; ++i)
#pragma unroll
          for (int j = 0; j < NT; ++j) {
            if constexpr (!kSlicePartial)
              mma::mma_1688_3xtf32(acc[i][j], a_big[i], a_small[i], b_big[j], b_small[j]);
            else if (kk == 0)
              mma::mma_1688_3xtf32_fresh(part[i][j], a_big[i], a_small[i], b_big[j], b_small[j]);
            else
              mma::mma_1688_3xtf32_into(part[i][j], a_big[i], a_small[i], b_big[j], b_small[j]);
          }
      }
      if constexpr (kSlicePartial) {
#pragma unroll
        for (int i = 0; i < MT; ++i)
#pragma unroll
          for (int j = 0; j < NT; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] += part[i][j][e];
      }
    } else {
      // Fragments of one k16 step into set `buf`: two sets, so the second step's ldmatrix is issued
      // before the first step's mma (volatile asm keeps program order; this order lets them overlap).
      unsigned a[2][MT][4];
      unsigned bf[2][NT][2];
      const auto fragments = [&](int buf, int kk) {
#pragma unroll
        for (int i = 0; i < MT; ++i) {
          const int mr = wm0 + i * 16;
          if constexpr (!TX) {
            // matrices: (m 0-7, k 0-7), (m 8-15, k 0-7), (m 0-7, k 8-15), (m 8-15, k 8-15)
            const T* ptr = xs + (mr + lr + (lq & 1) * 8) * Shape::x_pitch + kk + (lq >> 1) * 8;
            mma::ldmatrix_x4(a[buf][i], mma::smem_addr(ptr));
          } else {
            const T* ptr = xs + (kk + lr + (lq >> 1) * 8) * Shape::x_pitch + mr + (lq & 1) * 8;
            mma::ldmatrix_x4_trans(a[buf][i], mma::smem_addr(ptr));
          }
        }
#pragma unroll
        for (int j = 0; j < NT; j += 2) {
          const int nc = wn0 + j * 8;
          unsigned r[4];
          if constexpr (TY) {
            // matrices: (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7), (n 8-15, k 8-15)
            const T* ptr = ys + (nc + lr + (lq >> 1) * 8) * Shape::y_pitch + kk + (lq & 1) * 8;
            mma::ldmatrix_x4(r, mma::smem_addr(ptr));
          } else {
            const T* ptr = ys + (kk + lr + (lq & 1) * 8) * Shape::y_pitch + nc + (lq >> 1) * 8;
            mma::ldmatrix_x4_trans(r, mma::smem_addr(ptr));
          }
          bf[buf][j][0] = r[0], bf[buf][j][1] = r[1], bf[buf][j + 1][0] = r[2], bf[buf][j + 1][1] = r[3];
        }
      };
      fragments(0, 0);
#pragma unroll
      for (int step = 0; step < kBk / 16; ++step) {
        if (step + 1 < kBk / 16) fragments((step + 1) & 1, (step + 1) * 16);
#pragma unroll
        for (int i = 0; i < MT; ++i)
#pragma unroll
          for (int j = 0; j < NT; ++j)
            mma::mma_16816<T>(acc[i][j], a[step & 1][i], bf[step & 1][j][0], bf[step & 1][j][1]);
      }
    }
  }
  mma::cp_async_wait<0>();

  T* ob = out + out_batch * p.stride_o;
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int row = m0 + wm0 + i * 16 + (lane >> 2) + (e >= 2 ? 8 : 0);
        const int col = n0 + wn0 + j * 8 + (lane & 3) * 2 + (e & 1);
        if (row < p.m && col < p.n) {
          T* dst = ob + row * p.ldo + col;
          float v = p.alpha * acc[i][j][e];
          if (p.beta != 0.f) v += p.beta * to_f32(*dst);
          if (bias != nullptr) v += to_f32(bias[col]);
          *dst = from_f32<T>(v);
        }
      }
}

template <typename T, int BM, int BN, int WM, int WN, int STAGES, bool TX, bool TY>
void launch_tiled(const TcParams& p, const void* x, const void* y, void* out, const void* bias, GpuStream s) {
  auto kernel = gemm_tc_kernel<T, BM, BN, WM, WN, STAGES, TX, TY>;
  const int smem = STAGES * TileShape<T, BM, BN, TX, TY>::stage_elems * int(sizeof(T));
  static std::atomic<std::uint64_t> attributes_set{0};
  once_per_device(attributes_set, [&] { allow_dynamic_smem(kernel, smem, "gpu.gemm.tc"); });
  const dim3 grid(unsigned(ceil_div(p.n, BN)), unsigned(ceil_div(p.m, BM)),
                  unsigned(p.sum_batches ? 1 : p.batch));
  kernel<<<grid, (BM / WM) * (BN / WN) * 32, smem, s>>>(p, static_cast<const T*>(x), static_cast<const T*>(y),
                                                        static_cast<T*>(out), static_cast<const T*>(bias));
}

template <typename T, int BM, int BN, int WM, int WN, int STAGES>
void launch_transposes(const dnn::GemmCall& c, const TcParams& p, const void* x, const void* y, void* out,
                       const void* bias, GpuStream s) {
  if (!c.trans_x && !c.trans_y) launch_tiled<T, BM, BN, WM, WN, STAGES, false, false>(p, x, y, out, bias, s);
  if (!c.trans_x && c.trans_y) launch_tiled<T, BM, BN, WM, WN, STAGES, false, true>(p, x, y, out, bias, s);
  if (c.trans_x && !c.trans_y) launch_tiled<T, BM, BN, WM, WN, STAGES, true, false>(p, x, y, out, bias, s);
  if (c.trans_x && c.trans_y) launch_tiled<T, BM, BN, WM, WN, STAGES, true, true>(p, x, y, out, bias, s);
}

template <typename T>
void launch_typed(const dnn::GemmCall& c, const GemmTile& tile, const TcParams& p, const void* x,
                  const void* y, void* out, const void* bias, GpuStream s) {
  if (tile == kTiles[0]) return launch_transposes<T, 128, 128, 64, 32, 3>(c, p, x, y, out, bias, s);
  if (tile == kTiles[1]) return launch_transposes<T, 128, 256, 64, 64, 3>(c, p, x, y, out, bias, s);
  if (tile == kTiles[2]) return launch_transposes<T, 64, 128, 32, 64, 4>(c, p, x, y, out, bias, s);
  if (tile == kTiles[3]) return launch_transposes<T, 64, 64, 32, 32, 4>(c, p, x, y, out, bias, s);
  throw Error(Status::invalid_argument, "gpu.gemm.tc: no kernel for tile " + tile.to_string());
}

}  // namespace

void launch_gemm_tc(const dnn::GemmCall& c, DType dtype, const GemmTile& tile, const void* x, const void* y,
                    void* out, const void* bias, void* stream) {
  if (const std::string why = gemm_tc_unfit(c, dtype); !why.empty()) {
    throw Error(Status::invalid_argument, "gpu.gemm.tc: " + why);
  }
  if (tile.wgmma) {
#if GALLEY_CUDA_WGMMA
    for (int i = 0; i < kGemmWgmmaTileCount; ++i)
      if (kGemmWgmmaTiles[i].bm == tile.bm && kGemmWgmmaTiles[i].bn == tile.bn &&
          kGemmWgmmaTiles[i].stages == tile.stages && kGemmWgmmaTiles[i].tma == tile.tma)
        return launch_gemm_wgmma(c, dtype, i, x, y, out, bias, stream);
#endif
    throw Error(Status::invalid_argument, "gpu.gemm.tc: no wgmma kernel for tile " + tile.to_string());
  }
  TcParams p{int(c.m), int(c.n),   int(c.k),   int(c.batch), c.sum_batches, c.ldx, c.ldy,
             c.ldo,    c.stride_x, c.stride_y, c.stride_o,   c.alpha,       c.beta};
  if (dtype == DType::f16) {
    launch_typed<__half>(c, tile, p, x, y, out, bias, as_stream(stream));
  } else if (dtype == DType::bf16) {
    launch_typed<bf16_t>(c, tile, p, x, y, out, bias, as_stream(stream));
  } else {
    launch_typed<float>(c, tile, p, x, y, out, bias, as_stream(stream));
  }
  check_launch("gpu.gemm.tc");
}

#else  // no mma.sync on this vendor

bool gemm_tc_available() { return false; }

void launch_gemm_tc(const dnn::GemmCall&, DType, const GemmTile&, const void*, const void*, void*,
                    const void*, void*) {
  throw Error(Status::unsupported, "gpu.gemm.tc: this build has no tensor-core GEMM (mma.sync is NVIDIA's)");
}

#endif  // GALLEY_GPU_MMA

}  // namespace galley::backends::gpu
