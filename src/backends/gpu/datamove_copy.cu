// The gather kernels behind transpose, reorder and pad's crop (launch_copy_plan): contiguous
// copies and contiguous rows in 16-byte vectors, a shared-memory tiled transpose when the plan
// moves the unit-stride dim away from the innermost position (16-byte vectors on both sides when
// the dtype stays and both swapped dims and the strides allow; else 32x32 tiles of 4-byte elements,
// wider for narrower ones), a strided gather otherwise. And the register transpose
// (launch_register_transpose), the tiles' alternative for same-dtype moves of whole 16-byte vectors.
#include <string>

#include "datamove_device.cuh"
#include "datamove_kernels.hpp"

namespace galley::backends::gpu {
namespace {

using dnn::CopyPlan;
using namespace datamove;

// The plan as a kernel argument.
struct Gather {
  int rank;
  std::int64_t dims[dnn::kMaxRank];
  std::int64_t strides[dnn::kMaxRank];
  std::int64_t offset;
};

Gather gather_of(const CopyPlan& p) {
  Gather g{};
  g.rank = p.rank;
  for (int k = 0; k < dnn::kMaxRank; ++k) {
    g.dims[k] = p.dims[k];
    g.strides[k] = p.src_strides[k];
  }
  g.offset = p.src_offset;
  return g;
}

// The plan's entry k, with k known only at run time: a select over every entry, so the plan stays in
// the kernel's parameter space (indexing it with a run-time k makes the compiler copy it to local
// memory in every thread, traffic as large as a thread's own share of the move).
__device__ __forceinline__ std::int64_t entry(const std::int64_t (&v)[dnn::kMaxRank], int k) {
  std::int64_t out = 0;
#pragma unroll
  for (int i = 0; i < dnn::kMaxRank; ++i) out = i == k ? v[i] : out;
  return out;
}

// Src offset of the `row`-th index over dims[0..count), last of them fastest.
template <class I>
__device__ __forceinline__ std::int64_t outer_offset(const Gather& g, I row, int count) {
  std::int64_t off = g.offset;
#pragma unroll
  for (int k = dnn::kMaxRank - 1; k >= 0; --k) {
    if (k >= count) continue;
    const I d = static_cast<I>(g.dims[k]);
    off += static_cast<std::int64_t>(row % d) * g.strides[k];
    row /= d;
  }
  return off;
}

template <class S, class D, int N, class I>
__global__ void copy_kernel(const S* __restrict__ src, D* __restrict__ dst, I n) {
  const I vectors = n / N;
  const I step = static_cast<I>(gridDim.x) * blockDim.x;
  for (I u = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; u < vectors; u += step) {
    const Vec<S, N> in = reinterpret_cast<const Vec<S, N>*>(src)[u];
    Vec<D, N> out;
#pragma unroll
    for (int j = 0; j < N; ++j) out.v[j] = cast<S, D>(in.v[j]);
    reinterpret_cast<Vec<D, N>*>(dst)[u] = out;
  }
  // The last n % N elements.
  const I tail = vectors * N + static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (tail < n) dst[tail] = cast<S, D>(src[tail]);
}

// Rows of len (a multiple of N) contiguous in src; each thread moves N elements of one row.
template <class S, class D, int N, class I>
__global__ void rows_kernel(Gather g, const S* __restrict__ src, D* __restrict__ dst, I units) {
  const int last = g.rank - 1;
  const I per_row = static_cast<I>(entry(g.dims, last) / N);
  const I step = static_cast<I>(gridDim.x) * blockDim.x;
  for (I u = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; u < units; u += step) {
    const I row = u / per_row, col = u - row * per_row;
    const std::int64_t s = outer_offset(g, row, last) + static_cast<std::int64_t>(col) * N;
    const Vec<S, N> in = *reinterpret_cast<const Vec<S, N>*>(src + s);
    Vec<D, N> out;
#pragma unroll
    for (int j = 0; j < N; ++j) out.v[j] = cast<S, D>(in.v[j]);
    reinterpret_cast<Vec<D, N>*>(dst)[u] = out;
  }
}

template <class S, class D, class I>
__global__ void strided_kernel(Gather g, const S* __restrict__ src, D* __restrict__ dst, I n) {
  const I step = static_cast<I>(gridDim.x) * blockDim.x;
  for (I u = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; u < n; u += step) {
    dst[u] = cast<S, D>(src[outer_offset(g, u, g.rank)]);
  }
}

// Offsets in src and in the packed dst of entry `batch` of a tiled transpose's batch: every dim
// but a (src stride 1) and the last, outermost first. I: the type of the batch index math (32-bit
// where the batch and its dims fit).
template <class I>
__device__ __forceinline__ void batch_offsets(const Gather& g, int a, I batch, std::int64_t& soff,
                                              std::int64_t& doff) {
  const int last = g.rank - 1;
  I t = batch;
  std::int64_t dstride = entry(g.dims, last);
  soff = g.offset;
  doff = 0;
#pragma unroll
  for (int k = dnn::kMaxRank - 1; k >= 0; --k) {
    if (k >= last) continue;
    if (k == a) {
      dstride *= g.dims[k];
      continue;
    }
    const I d = static_cast<I>(g.dims[k]);
    const I idx = t % d;
    t /= d;
    soff += static_cast<std::int64_t>(idx) * g.strides[k];
    doff += static_cast<std::int64_t>(idx) * dstride;
    dstride *= g.dims[k];
  }
}

constexpr int kTileRows = 8;

// The tile's side: 32 for 4-byte elements, wider for narrower ones so every block keeps as many
// bytes in flight (a 32-element row of 2-byte elements is only 64 bytes).
template <class D>
inline constexpr int kTileOf = sizeof(D) >= 4 ? 32 : 32 * static_cast<int>(4 / sizeof(D));

// Batched 2-D transpose: dim a (src stride 1) and the last dim (dst stride 1) swap through a tile
// in shared memory, padded by one column against bank conflicts on the transposed reads. Reads run
// along a in src, writes along the last dim in dst, both coalesced. blockIdx.x walks the tiles of
// one batch entry, blockIdx.y (grid-stride) the batch: every dim but a and the last.
template <class S, class D>
__global__ void tiled_kernel(Gather g, int a, std::int64_t dst_stride_a, std::int64_t tiles_b,
                             std::int64_t batches, const S* __restrict__ src, D* __restrict__ dst) {
  constexpr int kTile = kTileOf<D>;
  __shared__ D tile[kTile][kTile + 1];
  const int last = g.rank - 1;
  const std::int64_t la = entry(g.dims, a), lb = entry(g.dims, last), sb = entry(g.strides, last);
  const std::int64_t a0 = (static_cast<std::int64_t>(blockIdx.x) / tiles_b) * kTile;
  const std::int64_t b0 = (static_cast<std::int64_t>(blockIdx.x) % tiles_b) * kTile;
  for (std::int64_t batch = blockIdx.y; batch < batches; batch += gridDim.y) {
    std::int64_t soff, doff;
    batch_offsets(g, a, batch, soff, doff);
    for (int r = threadIdx.y; r < kTile; r += kTileRows) {
      for (int c = threadIdx.x; c < kTile; c += 32) {
        const std::int64_t x = a0 + c, y = b0 + r;
        if (x < la && y < lb) tile[r][c] = cast<S, D>(src[soff + x + y * sb]);
      }
    }
    __syncthreads();
    for (int r = threadIdx.y; r < kTile; r += kTileRows) {
      for (int c = threadIdx.x; c < kTile; c += 32) {
        const std::int64_t x = a0 + r, y = b0 + c;
        if (x < la && y < lb) dst[doff + x * dst_stride_a + y] = tile[c][r];
      }
    }
    __syncthreads();
  }
}

// The tiled transpose for a pure move (same dtype) whose rows along a and along the last dim are
// whole 16-byte vectors: both sides move 16 bytes a thread. The tile holds kVecsB * N rows (along
// the last dim) of kVecsA vectors (along a), so src is read in runs of kVecsA * 16 bytes and dst
// written in runs of kVecsB * 16 bytes. Vector v of row b sits at slot v ^ (b / N) % 8, so the 8
// lanes that store one row, and the 8 lanes that read one element from each of 8 rows b (one dst
// vector each, w fastest), fall in 8 different 16-byte slots: no two lanes of a quarter-warp share
// a bank on either side. kVecsA and kVecsB are multiples of 8.
template <class T, int kVecsA, int kVecsB>
__global__ void __launch_bounds__(256)
    tiled_vec_kernel(Gather g, int a, std::int64_t dst_stride_a, std::int64_t tiles_b, std::int64_t batches,
                     const T* __restrict__ src, T* __restrict__ dst) {
  constexpr int kN = 16 / int(sizeof(T)), kTileA = kN * kVecsA, kTileB = kN * kVecsB;
  static_assert(kVecsA % 8 == 0 && kVecsB % 8 == 0, "the swizzle permutes groups of 8 slots");
  __shared__ Vec<T, kN> tile[kTileB][kVecsA];
  const int last = g.rank - 1;
  const std::int64_t la = entry(g.dims, a), lb = entry(g.dims, last), sb = entry(g.strides, last);
  const std::int64_t a0 = (static_cast<std::int64_t>(blockIdx.x) / tiles_b) * kTileA;
  const std::int64_t b0 = (static_cast<std::int64_t>(blockIdx.x) % tiles_b) * kTileB;
  for (std::int64_t batch = blockIdx.y; batch < batches; batch += gridDim.y) {
    std::int64_t soff, doff;
    batch_offsets(g, a, batch, soff, doff);
#pragma unroll 4
    for (int u = threadIdx.x; u < kTileB * kVecsA; u += blockDim.x) {
      const int b = u / kVecsA, v = u % kVecsA;
      const std::int64_t x = a0 + v * kN, y = b0 + b;
      if (x < la && y < lb)
        tile[b][v ^ ((b / kN) % 8)] = *reinterpret_cast<const Vec<T, kN>*>(src + soff + x + y * sb);
    }
    __syncthreads();
#pragma unroll 4
    for (int u = threadIdx.x; u < kTileA * kVecsB; u += blockDim.x) {
      const int lo = u % 8, r = (u / 8) % kTileA, w = (u / (8 * kTileA)) * 8 + lo;
      const std::int64_t x = a0 + r, y = b0 + w * kN;
      if (x < la && y < lb) {
        Vec<T, kN> out;
#pragma unroll
        for (int j = 0; j < kN; ++j) out.v[j] = tile[w * kN + j][(r / kN) ^ lo].v[r % kN];
        *reinterpret_cast<Vec<T, kN>*>(dst + doff + x * dst_stride_a + y) = out;
      }
    }
    __syncthreads();
  }
}

// The transpose for a pure move of 2- or 4-byte elements whose rows along a and along the last dim
// are whole 16-byte vectors of N elements, without shared memory: each thread loads N vectors (N
// consecutive rows b, the same N elements along a), transposes the N x N block in registers
// (byte permutes for halves, moves for words) and stores N vectors (N consecutive rows along a,
// the same N elements along b). A warp's lanes are kRegLanesA along a by kRegLanesB along b, so each
// load instruction reads kRegLanesB runs of kRegLanesA * 16 bytes of src and each store writes
// kRegLanesA runs of kRegLanesB * 16 bytes of dst. A warp takes one tile of kRegLanesA * N by
// kRegLanesB * N elements; tiles run along b fastest, then a, then the batch, and there is nothing
// to synchronise, so blocks are short and the last wave is small.
constexpr int kRegLanesA = 8, kRegLanesB = 4;

__device__ __forceinline__ unsigned word_of(const uint4& v, int k) {
  return k == 0 ? v.x : k == 1 ? v.y : k == 2 ? v.z : v.w;
}

// in[i] holds row i of an N x N block (N = 16 / bytes): returns column j as a row.
template <int kBytes>
__device__ __forceinline__ uint4 block_column(const uint4 (&in)[16 / kBytes], int j) {
  if constexpr (kBytes == 4) {
    return make_uint4(word_of(in[0], j), word_of(in[1], j), word_of(in[2], j), word_of(in[3], j));
  } else {
    // Word k of the column pairs element j of rows 2k and 2k + 1: the low or high halves of their
    // word j / 2.
    const unsigned select = (j % 2) != 0 ? 0x7632u : 0x5410u;
    unsigned w[4];
#pragma unroll
    for (int k = 0; k < 4; ++k)
      w[k] = __byte_perm(word_of(in[2 * k], j / 2), word_of(in[2 * k + 1], j / 2), select);
    return make_uint4(w[0], w[1], w[2], w[3]);
  }
}

// la, lb: the lengths of dims a and last; sb: the last dim's src stride. tiles < 2^31, so the
// batch and every batch dim fit 32-bit index math.
template <class T>
__global__ void __launch_bounds__(256)
    transpose_regs_kernel(Gather g, int a, std::int64_t la, std::int64_t lb, std::int64_t sb,
                          std::int64_t dst_stride_a, std::uint32_t tiles_a, std::uint32_t tiles_b,
                          std::uint32_t tiles, const T* __restrict__ src, T* __restrict__ dst) {
  static_assert(sizeof(T) == 2 || sizeof(T) == 4, "register blocks of halves or words");
  constexpr int kN = 16 / int(sizeof(T));
  const std::uint32_t tile = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  if (tile >= tiles) return;
  const int lane = int(threadIdx.x % 32);
  const std::uint32_t tb = tile % tiles_b, rest = tile / tiles_b;
  const std::uint32_t ta = rest % tiles_a, batch = rest / tiles_a;
  const std::int64_t x = std::int64_t(ta) * (kRegLanesA * kN) + (lane % kRegLanesA) * kN;  // along a
  const std::int64_t y = std::int64_t(tb) * (kRegLanesB * kN) + (lane / kRegLanesA) * kN;  // along b
  // la and lb are multiples of kN, so a thread's block is wholly inside or wholly outside.
  if (x >= la || y >= lb) return;
  std::int64_t soff, doff;
  batch_offsets<std::uint32_t>(g, a, batch, soff, doff);
  uint4 in[kN];
#pragma unroll
  for (int i = 0; i < kN; ++i) in[i] = __ldg(reinterpret_cast<const uint4*>(src + soff + x + (y + i) * sb));
#pragma unroll
  for (int j = 0; j < kN; ++j) {
    *reinterpret_cast<uint4*>(dst + doff + (x + j) * dst_stride_a + y) = block_column<int(sizeof(T))>(in, j);
  }
}

// The wide tile's vectors per side: 16 (256-byte runs, a 32 KiB tile of halves) for elements of 2
// bytes or more; bytes keep 8, as 16 would need 64 KiB of static shared memory.
template <class T>
inline constexpr int kWideVecs = sizeof(T) >= 2 ? 16 : 8;
// Blocks the wide tile needs before it is taken over the 8-vector one: enough to fill a large
// GPU, since a small problem cut into wide tiles leaves most SMs idle.
constexpr std::int64_t kWideTileMinBlocks = 1024;

bool fits_int32(std::int64_t n) { return n < (std::int64_t(1) << 31); }

template <class S, class D>
void launch_typed(const CopyPlan& p, const S* src, D* dst, GpuStream stream) {
  constexpr int kThreads = 256;
  constexpr int N = vec_width<S, D>();
  const Gather g = gather_of(p);
  const std::int64_t n = p.elements();
  const int last = p.rank - 1;
  const bool aligned_ptrs = aligned(src + p.src_offset, sizeof(S) * N) && aligned(dst, sizeof(D) * N);
  if (p.rank == 1 && p.src_strides[0] == 1) {
    const S* s = src + p.src_offset;
    const unsigned blocks = grid_for(aligned_ptrs ? n / N + 1 : n, kThreads);
    if (aligned_ptrs) {
      if (fits_int32(n)) {
        copy_kernel<S, D, N, std::uint32_t>
            <<<blocks, kThreads, 0, stream>>>(s, dst, static_cast<std::uint32_t>(n));
      } else {
        copy_kernel<S, D, N, std::int64_t><<<blocks, kThreads, 0, stream>>>(s, dst, n);
      }
    } else {
      copy_kernel<S, D, 1, std::int64_t><<<blocks, kThreads, 0, stream>>>(s, dst, n);
    }
    return;
  }
  if (p.src_strides[last] == 1) {
    // Vector rows need every row start aligned: the row length and outer strides multiples of N.
    bool vec = aligned_ptrs && p.dims[last] % N == 0;
    for (int k = 0; k < last; ++k) vec = vec && p.src_strides[k] % N == 0;
    if (vec) {
      const std::int64_t units = n / N;
      if (fits_int32(n)) {
        rows_kernel<S, D, N, std::uint32_t><<<grid_for(units, kThreads), kThreads, 0, stream>>>(
            g, src, dst, static_cast<std::uint32_t>(units));
      } else {
        rows_kernel<S, D, N, std::int64_t>
            <<<grid_for(units, kThreads), kThreads, 0, stream>>>(g, src, dst, units);
      }
    } else {
      rows_kernel<S, D, 1, std::int64_t><<<grid_for(n, kThreads), kThreads, 0, stream>>>(g, src, dst, n);
    }
    return;
  }
  const int a = p.unit_stride_dim();
  if (a >= 0) {
    constexpr int kTile = kTileOf<D>;
    const std::int64_t tiles_a = (p.dims[a] + kTile - 1) / kTile,
                       tiles_b = (p.dims[last] + kTile - 1) / kTile;
    std::int64_t dst_stride_a = 1;
    for (int k = a + 1; k < p.rank; ++k) dst_stride_a *= p.dims[k];
    const std::int64_t batches = n / (p.dims[a] * p.dims[last]);
    if constexpr (std::is_same_v<S, D>) {
      constexpr int kN = 16 / int(sizeof(S)), kVecTile = kN * 8;
      // Whole vectors on both sides: every src row start (all strides but a's) and both dims along
      // which vectors run are multiples of kN (dst strides are products of the dims, so they follow).
      bool vec = aligned(src + p.src_offset, 16) && aligned(dst, 16) && p.dims[a] % kN == 0 &&
                 p.dims[last] % kN == 0;
      for (int k = 0; k < p.rank; ++k) vec = vec && (k == a || p.src_strides[k] % kN == 0);
      const std::int64_t vec_tiles =
          ((p.dims[a] + kVecTile - 1) / kVecTile) * ((p.dims[last] + kVecTile - 1) / kVecTile);
      constexpr int kWideTile = kN * kWideVecs<S>;
      const std::int64_t wide_tiles_b = (p.dims[last] + kWideTile - 1) / kWideTile;
      const std::int64_t wide_tiles = ((p.dims[a] + kWideTile - 1) / kWideTile) * wide_tiles_b;
      if (vec && kWideTile > kVecTile && wide_tiles <= 0x7fffffff &&
          wide_tiles * std::min<std::int64_t>(batches, 65535) >= kWideTileMinBlocks) {
        const dim3 grid(static_cast<unsigned>(wide_tiles),
                        static_cast<unsigned>(std::min<std::int64_t>(batches, 65535)));
        tiled_vec_kernel<S, kWideVecs<S>, kWideVecs<S>>
            <<<grid, 256, 0, stream>>>(g, a, dst_stride_a, wide_tiles_b, batches, src, dst);
        return;
      }
      if (vec && vec_tiles <= 0x7fffffff) {
        const dim3 grid(static_cast<unsigned>(vec_tiles),
                        static_cast<unsigned>(std::min<std::int64_t>(batches, 65535)));
        tiled_vec_kernel<S, 8, 8><<<grid, 256, 0, stream>>>(
            g, a, dst_stride_a, (p.dims[last] + kVecTile - 1) / kVecTile, batches, src, dst);
        return;
      }
    }
    if (tiles_a * tiles_b <= 0x7fffffff) {
      const dim3 grid(static_cast<unsigned>(tiles_a * tiles_b),
                      static_cast<unsigned>(std::min<std::int64_t>(batches, 65535)));
      tiled_kernel<S, D>
          <<<grid, dim3(32, kTileRows), 0, stream>>>(g, a, dst_stride_a, tiles_b, batches, src, dst);
      return;
    }
  }
  if (fits_int32(n)) {
    strided_kernel<S, D, std::uint32_t>
        <<<grid_for(n, kThreads), kThreads, 0, stream>>>(g, src, dst, static_cast<std::uint32_t>(n));
  } else {
    strided_kernel<S, D, std::int64_t><<<grid_for(n, kThreads), kThreads, 0, stream>>>(g, src, dst, n);
  }
}

}  // namespace

const char* copy_plan_path(const CopyPlan& p) {
  if (p.rank == 1 && p.src_strides[0] == 1) return "copy";
  if (p.src_strides[p.rank - 1] == 1) return "rows";
  return p.unit_stride_dim() >= 0 ? "tiled" : "strided";
}

void launch_copy_plan(const CopyPlan& plan, const void* src, void* dst, void* stream) {
  dispatch_types(plan.src_dtype, plan.dst_dtype, "gpu data movement", [&](auto* s, auto* d) {
    using S = std::remove_pointer_t<decltype(s)>;
    using D = std::remove_pointer_t<decltype(d)>;
    launch_typed(plan, static_cast<const S*>(src), static_cast<D*>(dst), as_stream(stream));
  });
  check_launch("gpu data movement (gather)");
}

namespace {

// The register transpose's tiles (warps) and its dims a and last, when it takes the plan.
struct RegisterTiles {
  int a = -1;
  std::int64_t tiles_a = 0, tiles_b = 0, tiles = 0, dst_stride_a = 1;
};

std::string register_tiles(const CopyPlan& p, RegisterTiles& t) {
  const std::size_t bytes = size_of(p.src_dtype);
  if (p.src_dtype != p.dst_dtype) return "converts dtypes (moves bits only)";
  if (bytes != 2 && bytes != 4) return "elements of " + std::to_string(bytes) + " bytes (needs 2 or 4)";
  const int last = p.rank - 1;
  t.a = p.unit_stride_dim();
  if (p.rank < 2 || p.src_strides[last] == 1 || t.a < 0) return "does not move the unit-stride dim";
  const auto n = static_cast<std::int64_t>(16 / bytes);
  if (p.dims[t.a] % n != 0 || p.dims[last] % n != 0) {
    return "swapped dims " + std::to_string(p.dims[t.a]) + " and " + std::to_string(p.dims[last]) +
           " not both multiples of " + std::to_string(n);
  }
  for (int k = 0; k < p.rank; ++k) {
    if (k != t.a && p.src_strides[k] % n != 0)
      return "src stride " + std::to_string(p.src_strides[k]) + " not a multiple of " + std::to_string(n);
  }
  if (p.src_offset % n != 0)
    return "src offset " + std::to_string(p.src_offset) + " not a multiple of " + std::to_string(n);
  for (int k = t.a + 1; k < p.rank; ++k) t.dst_stride_a *= p.dims[k];
  t.tiles_a = (p.dims[t.a] + kRegLanesA * n - 1) / (kRegLanesA * n);
  t.tiles_b = (p.dims[last] + kRegLanesB * n - 1) / (kRegLanesB * n);
  t.tiles = t.tiles_a * t.tiles_b * (p.elements() / (p.dims[t.a] * p.dims[last]));
  if (t.tiles > (std::int64_t(1) << 31) / 32) return "more than 2^26 tiles";
  return {};
}

}  // namespace

bool register_transpose_applies(const CopyPlan& plan, std::string* why) {
  RegisterTiles t;
  std::string no = register_tiles(plan, t);
  if (no.empty()) return true;
  if (why != nullptr) *why = std::move(no);
  return false;
}

void launch_register_transpose(const CopyPlan& p, const void* src, void* dst, void* stream) {
  RegisterTiles t;
  const std::size_t bytes = size_of(p.src_dtype);
  if (!register_tiles(p, t).empty() || !aligned(static_cast<const char*>(src) + p.src_offset * bytes, 16) ||
      !aligned(dst, 16)) {
    launch_copy_plan(p, src, dst, stream);
    return;
  }
  const Gather g = gather_of(p);
  const int last = p.rank - 1;
  const auto go = [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    constexpr int kWarps = 256 / 32;
    transpose_regs_kernel<T>
        <<<static_cast<unsigned>((t.tiles + kWarps - 1) / kWarps), 256, 0, as_stream(stream)>>>(
            g, t.a, p.dims[t.a], p.dims[last], p.src_strides[last], t.dst_stride_a,
            static_cast<std::uint32_t>(t.tiles_a), static_cast<std::uint32_t>(t.tiles_b),
            static_cast<std::uint32_t>(t.tiles), static_cast<const T*>(src), static_cast<T*>(dst));
  };
  if (bytes == 2) {
    go(static_cast<std::uint16_t*>(nullptr));
  } else {
    go(static_cast<std::uint32_t*>(nullptr));
  }
  check_launch("gpu data movement (register transpose)");
}

}  // namespace galley::backends::gpu
