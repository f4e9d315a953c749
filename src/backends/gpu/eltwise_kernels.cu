// The single-source eltwise kernels: a dense kernel for dst walked as one flat range (equal shapes,
// or an input that is a single value), a broadcast kernel for any merged geometry, and the backward
// reductions. Every kernel computes in f32 through one functor per direction and input, so forward
// and the backward maps share the loops.
//
// Vector width: 16 bytes per load and store (4 f32 or 8 f16/bf16) wherever the pointers are
// 16-byte aligned and rows are whole vectors; a broadcast input along the innermost dim is one
// scalar load per vector. The dense kernel gives each thread kUnroll vectors per step with every
// load issued before any arithmetic, so several loads are in flight per thread. Backward reads dy
// once where it can: both gradients of equal-shaped inputs come from one pass, and a bias-like
// gradient (a column sum) writes the other input's gradient as it goes. Reductions are
// deterministic: each block sums a fixed part in a fixed tree, partials are added in order by a
// second kernel; no atomics.
#include <algorithm>
#include <type_traits>

#include "column_sum_device.cuh"
#include "conv_device.cuh"
#include "eltwise_kernels.hpp"

namespace galley::backends::gpu {
namespace {

using dnn::EltwiseOp;

constexpr int kThreads = 256;
constexpr std::uint32_t kMaxBlocks = 4096;
// The dense vector kernel: blocks no smaller than this (its block 0 takes the last n % 8 elements),
// the tiles it wants before shrinking them, and its grid's cap.
constexpr unsigned kMinDenseThreads = 64;
constexpr std::uint64_t kMinDenseTiles = 512;
constexpr std::uint64_t kMaxDenseBlocks = 65535 * 16;

// The value dst, da or db takes at one element, from dy (backward), x = a and y = b there.
template <int kWhat, EltwiseOp kOp>
struct Fn {
  // kWhat: 0 forward, 1 gradient of a, 2 gradient of b.
  static constexpr bool kReadsDy = kWhat != 0;
  static constexpr bool kReadsA =
      kWhat == 0 || (kWhat == 2 && (kOp == EltwiseOp::mul || kOp == EltwiseOp::div));
  static constexpr bool kReadsB = kWhat == 0 ||
                                  (kWhat == 1 && (kOp == EltwiseOp::mul || kOp == EltwiseOp::div)) ||
                                  (kWhat == 2 && kOp == EltwiseOp::div);
  float alpha, beta;
  __device__ __forceinline__ float operator()(float dy, float x, float y) const {
    if constexpr (kWhat == 0) {
      const float u = alpha * x, v = beta * y;
      if constexpr (kOp == EltwiseOp::add) return u + v;
      if constexpr (kOp == EltwiseOp::sub) return u - v;
      if constexpr (kOp == EltwiseOp::mul) return u * v;
      return u / v;
    } else if constexpr (kWhat == 1) {
      if constexpr (kOp == EltwiseOp::add || kOp == EltwiseOp::sub) return dy * alpha;
      if constexpr (kOp == EltwiseOp::mul) return dy * (alpha * beta * y);
      return dy * (alpha / (beta * y));
    } else {
      if constexpr (kOp == EltwiseOp::add) return dy * beta;
      if constexpr (kOp == EltwiseOp::sub) return -(dy * beta);
      if constexpr (kOp == EltwiseOp::mul) return dy * (alpha * beta * x);
      return -dy * ((alpha * x) / (beta * y) / y);
    }
  }
};

template <typename T>
struct Vec {
  static constexpr int kWidth = 16 / int(sizeof(T));
};

template <typename T>
__device__ __forceinline__ void load_vec(const T* p, float* out) {
  const uint4 raw = *reinterpret_cast<const uint4*>(p);
  const T* v = reinterpret_cast<const T*>(&raw);
#pragma unroll
  for (int i = 0; i < Vec<T>::kWidth; ++i) out[i] = to_f32(v[i]);
}

template <typename T>
__device__ __forceinline__ void store_vec(T* p, const float* in) {
  uint4 raw;
  T* v = reinterpret_cast<T*>(&raw);
#pragma unroll
  for (int i = 0; i < Vec<T>::kWidth; ++i) v[i] = from_f32<T>(in[i]);
  *reinterpret_cast<uint4*>(p) = raw;
}

// kVec elements of an input at `offset`: a vector when it advances with dst, else one value.
template <typename T, int kVec>
__device__ __forceinline__ void load_input(const T* base, std::int64_t offset, std::int64_t inner_stride,
                                           float* out) {
  if (kVec > 1 && inner_stride != 0) {
    load_vec(base + offset, out);
  } else if (inner_stride != 0) {
#pragma unroll
    for (int i = 0; i < kVec; ++i) out[i] = to_f32(base[offset + i]);
  } else {
    const float v = to_f32(base[offset]);
#pragma unroll
    for (int i = 0; i < kVec; ++i) out[i] = v;
  }
}

// dst = fn(dy, a, b) over dst walked as one flat range; a and b advance with dst (stride 1) or
// stay put (stride 0). The vector part covers whole vectors, the tail is done one by one.
template <typename T, typename F, int kVec>
__global__ void dense_kernel(F fn, const T* dy, const T* a, const T* b, T* dst, std::uint32_t n,
                             std::int64_t sa, std::int64_t sb) {
  const std::uint32_t vectors = n / kVec;
  const std::uint32_t step = gridDim.x * blockDim.x;
  for (std::uint32_t v = blockIdx.x * blockDim.x + threadIdx.x; v < vectors; v += step) {
    const std::int64_t e = std::int64_t(v) * kVec;
    float g[kVec], x[kVec], y[kVec], out[kVec];
    if constexpr (F::kReadsDy) load_input<T, kVec>(dy, e, 1, g);
    if constexpr (F::kReadsA) load_input<T, kVec>(a, e * sa, sa, x);
    if constexpr (F::kReadsB) load_input<T, kVec>(b, e * sb, sb, y);
#pragma unroll
    for (int i = 0; i < kVec; ++i)
      out[i] = fn(F::kReadsDy ? g[i] : 0.f, F::kReadsA ? x[i] : 0.f, F::kReadsB ? y[i] : 0.f);
    if constexpr (kVec > 1) {
      store_vec(dst + e, out);
    } else {
      dst[e] = from_f32<T>(out[0]);
    }
  }
  for (std::uint32_t e = vectors * kVec + blockIdx.x * blockDim.x + threadIdx.x; e < n; e += step) {
    const float g = F::kReadsDy ? to_f32(dy[e]) : 0.f;
    const float x = F::kReadsA ? to_f32(a[e * sa]) : 0.f;
    const float y = F::kReadsB ? to_f32(b[e * sb]) : 0.f;
    dst[e] = from_f32<T>(fn(g, x, y));
  }
}

// No second output: the kernels below that can write two maps write one.
struct NoMap {
  static constexpr bool kReadsDy = false, kReadsA = false, kReadsB = false;
  __device__ __forceinline__ float operator()(float, float, float) const { return 0.f; }
};

// Vectors per thread per step in the vector kernels: 64 bytes of each tensor in flight per thread.
constexpr int kUnroll = 4;

// kU vectors of one input, each either 16 bytes at its offset (the input advances with dst) or one
// value there (broadcast along the inner dim). issue() only loads; the values are converted after
// every input's loads are issued, so they are all in flight together.
template <typename T, int kU>
struct InputVecs {
  uint4 raw[kU];
  float one[kU];

  __device__ __forceinline__ void issue(const T* base, const std::int64_t (&offset)[kU], bool vector) {
    if (vector) {
#pragma unroll
      for (int u = 0; u < kU; ++u) raw[u] = *reinterpret_cast<const uint4*>(base + offset[u]);
    } else {
#pragma unroll
      for (int u = 0; u < kU; ++u) one[u] = to_f32(base[offset[u]]);
    }
  }
  __device__ __forceinline__ void get(int u, bool vector, float* out) const {
    if (vector) {
      const T* v = reinterpret_cast<const T*>(&raw[u]);
#pragma unroll
      for (int i = 0; i < Vec<T>::kWidth; ++i) out[i] = to_f32(v[i]);
    } else {
#pragma unroll
      for (int i = 0; i < Vec<T>::kWidth; ++i) out[i] = one[u];
    }
  }
};

// Vectors at dst element offsets e[0..kU) of the dense walk: loads of every input first, then
// dst = fn and (unless G is NoMap) dst2 = gn at each. a and b advance with dst (stride 1) or stay
// at their single value (stride 0).
template <int kU, typename T, typename F, typename G>
__device__ __forceinline__ void dense_vectors(const F& fn, const G& gn, const T* dy, const T* a, const T* b,
                                              T* dst, T* dst2, const std::int64_t (&e)[kU], std::int64_t sa,
                                              std::int64_t sb) {
  constexpr int kV = Vec<T>::kWidth;
  constexpr bool kDy = F::kReadsDy || G::kReadsDy, kA = F::kReadsA || G::kReadsA,
                 kB = F::kReadsB || G::kReadsB;
  InputVecs<T, kU> g, x, y;
  std::int64_t ea[kU], eb[kU];
#pragma unroll
  for (int u = 0; u < kU; ++u) ea[u] = e[u] * sa, eb[u] = e[u] * sb;
  if constexpr (kDy) g.issue(dy, e, true);
  if constexpr (kA) x.issue(a, ea, sa != 0);
  if constexpr (kB) y.issue(b, eb, sb != 0);
#pragma unroll
  for (int u = 0; u < kU; ++u) {
    float vg[kV] = {}, vx[kV] = {}, vy[kV] = {}, out[kV], out2[kV];
    if constexpr (kDy) g.get(u, true, vg);
    if constexpr (kA) x.get(u, sa != 0, vx);
    if constexpr (kB) y.get(u, sb != 0, vy);
#pragma unroll
    for (int i = 0; i < kV; ++i) {
      out[i] = fn(vg[i], vx[i], vy[i]);
      out2[i] = gn(vg[i], vx[i], vy[i]);
    }
    store_vec(dst + e[u], out);
    if constexpr (!std::is_same_v<G, NoMap>) store_vec(dst2 + e[u], out2);
  }
}

// dst = fn(dy, a, b) and, unless G is NoMap, dst2 = gn(dy, a, b) over dst walked as one flat range,
// with 16-byte vectors: tiles of kUnroll * blockDim vectors (consecutive threads on consecutive
// vectors, so each warp-wide access is contiguous), the partial last tile by the block next in
// turn, the last n % kWidth elements one by one.
template <typename T, typename F, typename G>
__global__ void dense_vec_kernel(F fn, G gn, const T* dy, const T* a, const T* b, T* dst, T* dst2,
                                 std::uint32_t n, std::int64_t sa, std::int64_t sb) {
  constexpr int kV = Vec<T>::kWidth;
  const std::uint32_t vectors = n / kV;
  const std::uint32_t tile = kUnroll * blockDim.x;
  const std::uint32_t full_tiles = vectors / tile;
  for (std::uint32_t t = blockIdx.x; t < full_tiles; t += gridDim.x) {
    std::int64_t e[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) e[u] = (std::int64_t(t) * tile + u * blockDim.x + threadIdx.x) * kV;
    dense_vectors<kUnroll>(fn, gn, dy, a, b, dst, dst2, e, sa, sb);
  }
  if (blockIdx.x == full_tiles % gridDim.x) {
    for (std::uint32_t v = full_tiles * tile + threadIdx.x; v < vectors; v += blockDim.x) {
      const std::int64_t e[1] = {std::int64_t(v) * kV};
      dense_vectors<1>(fn, gn, dy, a, b, dst, dst2, e, sa, sb);
    }
  }
  if (blockIdx.x == 0) {
    const std::uint32_t e = vectors * kV + threadIdx.x;
    if (e < n) {
      const float g = F::kReadsDy || G::kReadsDy ? to_f32(dy[e]) : 0.f;
      const float x = F::kReadsA || G::kReadsA ? to_f32(a[e * sa]) : 0.f;
      const float y = F::kReadsB || G::kReadsB ? to_f32(b[e * sb]) : 0.f;
      dst[e] = from_f32<T>(fn(g, x, y));
      if constexpr (!std::is_same_v<G, NoMap>) dst2[e] = from_f32<T>(gn(g, x, y));
    }
  }
}

// dst = fn(dy, a, b) over any merged broadcast geometry; each thread takes kVec consecutive
// elements of one row (rows are whole vectors when kVec > 1).
template <typename T, typename F, int kVec>
__global__ void broadcast_kernel(F fn, EltwiseMapParams p, const T* dy, const T* a, const T* b, T* dst) {
  const std::uint32_t vectors = p.elements / kVec;
  for (std::uint32_t v = blockIdx.x * blockDim.x + threadIdx.x; v < vectors; v += gridDim.x * blockDim.x) {
    const std::uint32_t e = v * kVec;
    const std::uint32_t row = p.inner.div(e);
    const std::uint32_t col = e - row * p.inner.d;
    std::int64_t oa, ob;
    row_offsets(p.outer, row, oa, ob);
    float g[kVec], x[kVec], y[kVec], out[kVec];
    if constexpr (F::kReadsDy) load_input<T, kVec>(dy, e, 1, g);
    if constexpr (F::kReadsA) load_input<T, kVec>(a, oa + col * p.a_inner, p.a_inner, x);
    if constexpr (F::kReadsB) load_input<T, kVec>(b, ob + col * p.b_inner, p.b_inner, y);
#pragma unroll
    for (int i = 0; i < kVec; ++i)
      out[i] = fn(F::kReadsDy ? g[i] : 0.f, F::kReadsA ? x[i] : 0.f, F::kReadsB ? y[i] : 0.f);
    if constexpr (kVec > 1) {
      store_vec(dst + e, out);
    } else {
      dst[e] = from_f32<T>(out[0]);
    }
  }
}

template <typename T, typename F>
__device__ __forceinline__ float gradient_at(const F& fn, const EltwiseReduceParams& p, const T* dy,
                                             const T* a, const T* b, std::uint32_t k, std::uint32_t r) {
  std::int64_t od, oa, ob;
  reduce_offsets(p, k, r, od, oa, ob);
  return fn(to_f32(dy[od]), F::kReadsA ? to_f32(a[oa]) : 0.f, F::kReadsB ? to_f32(b[ob]) : 0.f);
}

// The innermost dim is summed over: block (k, segment) sums its part of r, consecutive threads on
// consecutive r (adjacent in dst), then a shared-memory tree. partial[segment * K + k].
template <typename T, typename F>
__global__ void reduce_rows_kernel(F fn, EltwiseReduceParams p, const T* dy, const T* a, const T* b,
                                   float* partial) {
  __shared__ float sums[kThreads];
  const std::uint32_t k = blockIdx.x;
  const std::uint32_t begin = blockIdx.y * p.per_segment;
  const std::uint32_t end = min(p.reduced.count, begin + p.per_segment);
  float acc = 0.f;
  for (std::uint32_t r = begin + threadIdx.x; r < end; r += blockDim.x)
    acc += gradient_at(fn, p, dy, a, b, k, r);
  sums[threadIdx.x] = acc;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (int(threadIdx.x) < s) sums[threadIdx.x] += sums[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[std::size_t(blockIdx.y) * p.kept.count + k] = sums[0];
}

// The innermost dim is kept: a 32 x 8 block takes 32 consecutive k (adjacent in dst) and spreads
// its part of r over the 8 rows of threads, then sums the 8 in a fixed order.
template <typename T, typename F>
__global__ void reduce_columns_kernel(F fn, EltwiseReduceParams p, const T* dy, const T* a, const T* b,
                                      float* partial) {
  __shared__ float sums[8][33];
  const std::uint32_t k = blockIdx.x * 32 + threadIdx.x;
  const std::uint32_t begin = blockIdx.y * p.per_segment;
  const std::uint32_t end = min(p.reduced.count, begin + p.per_segment);
  float acc = 0.f;
  if (k < p.kept.count) {
    for (std::uint32_t r = begin + threadIdx.y; r < end; r += 8) acc += gradient_at(fn, p, dy, a, b, k, r);
  }
  sums[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && k < p.kept.count) {
    float total = 0.f;
#pragma unroll
    for (int i = 0; i < 8; ++i) total += sums[i][threadIdx.x];
    partial[std::size_t(blockIdx.y) * p.kept.count + k] = total;
  }
}

// Few terms per k: each thread sums all of one k's, in order. partial[k].
template <typename T, typename F>
__global__ void reduce_short_kernel(F fn, EltwiseReduceParams p, const T* dy, const T* a, const T* b,
                                    float* partial) {
  for (std::uint32_t k = blockIdx.x * blockDim.x + threadIdx.x; k < p.kept.count;
       k += gridDim.x * blockDim.x) {
    float acc = 0.f;
    for (std::uint32_t r = 0; r < p.reduced.count; ++r) acc += gradient_at(fn, p, dy, a, b, k, r);
    partial[k] = acc;
  }
}

// The column sum of EltwiseColumnParams: grad (or partial[segment * cols + col]) = the sum of fn over
// the rows, and, unless G is NoMap, map = gn at every element on the way (the other input's
// gradient when that input has dst's shape, so dy is read once for both). Lane (x, y) of block
// (column block, segment) takes the vector of columns x and the segment's rows y, y + block_rows, ...
// kUnroll rows at a time, in order; the lanes are added in a fixed tree.
template <typename T, typename F, typename G>
__global__ void column_sum_kernel(F fn, G gn, EltwiseColumnParams p, const T* dy, const T* a, const T* b,
                                  T* map, float* partial, T* grad) {
  constexpr int kV = Vec<T>::kWidth;
  constexpr bool kDy = F::kReadsDy || G::kReadsDy, kA = F::kReadsA || G::kReadsA,
                 kB = F::kReadsB || G::kReadsB;
  __shared__ float sums[kColumnThreads * 8];
  const std::uint32_t cv = blockIdx.x * p.block_cols + threadIdx.x;
  const std::uint32_t col = cv * kV;
  const std::uint32_t begin = blockIdx.y * p.rows_per_segment;
  const std::uint32_t end = min(p.rows, begin + p.rows_per_segment);
  float acc[kV] = {};
  // kU rows at offsets e (dst), ea, eb: loads first, then the sums and the map.
  const auto rows = [&](auto unroll, std::uint32_t r0) {
    constexpr int kU = decltype(unroll)::value;
    std::int64_t e[kU], ea[kU], eb[kU];
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const std::int64_t r = r0 + std::int64_t(u) * p.block_rows;
      e[u] = r * p.cols + col;
      ea[u] = r * p.a_row + col * p.a_col;
      eb[u] = r * p.b_row + col * p.b_col;
    }
    InputVecs<T, kU> g, x, y;
    if constexpr (kDy) g.issue(dy, e, true);
    if constexpr (kA) x.issue(a, ea, p.a_col != 0);
    if constexpr (kB) y.issue(b, eb, p.b_col != 0);
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      float vg[kV] = {}, vx[kV] = {}, vy[kV] = {}, out2[kV];
      if constexpr (kDy) g.get(u, true, vg);
      if constexpr (kA) x.get(u, p.a_col != 0, vx);
      if constexpr (kB) y.get(u, p.b_col != 0, vy);
#pragma unroll
      for (int i = 0; i < kV; ++i) {
        acc[i] += fn(vg[i], vx[i], vy[i]);
        out2[i] = gn(vg[i], vx[i], vy[i]);
      }
      if constexpr (!std::is_same_v<G, NoMap>) store_vec(map + e[u], out2);
    }
  };
  if (cv < p.col_vectors) {
    std::uint32_t r = begin + threadIdx.y;
    for (; r + (kUnroll - 1) * p.block_rows < end; r += kUnroll * p.block_rows) {
      rows(std::integral_constant<int, kUnroll>{}, r);
    }
    for (; r < end; r += p.block_rows) rows(std::integral_constant<int, 1>{}, r);
  }
  column_tree_sum(sums, acc, int(p.block_cols), int(p.block_rows));
  if (threadIdx.y == 0 && cv < p.col_vectors) {
    if (p.segments == 1) {
#pragma unroll
      for (int i = 0; i < kV; ++i) grad[col + i] = from_f32<T>(acc[i]);
    } else {
#pragma unroll
      for (int i = 0; i < kV; ++i) partial[std::size_t(blockIdx.y) * p.cols + col + i] = acc[i];
    }
  }
}

// grad[k] = the sum over segments of partial[s * count + k]: a 32 x 32 block takes 32 consecutive k,
// lane y adds segments y, y + 32, ... in order, then the 32 lanes are added in a fixed tree.
template <typename T>
__global__ void finish_columns_kernel(const float* partial, std::uint32_t segments, std::uint32_t count,
                                      T* grad) {
  __shared__ float sums[32][33];
  const std::uint32_t k = blockIdx.x * 32 + threadIdx.x;
  float acc = 0.f;
  if (k < count) {
#pragma unroll 8
    for (std::uint32_t s = threadIdx.y; s < segments; s += 32) acc += partial[std::size_t(s) * count + k];
  }
  sums[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  for (int s = 16; s > 0; s >>= 1) {
    if (int(threadIdx.y) < s) sums[threadIdx.y][threadIdx.x] += sums[threadIdx.y + s][threadIdx.x];
    __syncthreads();
  }
  if (threadIdx.y == 0 && k < count) grad[k] = from_f32<T>(sums[0][threadIdx.x]);
}

// grad[k] = the sum over segments of partial[s * K + k], in segment order.
template <typename T>
__global__ void finish_kernel(const float* partial, std::uint32_t segments, std::uint32_t count, T* grad) {
  for (std::uint32_t k = blockIdx.x * blockDim.x + threadIdx.x; k < count; k += gridDim.x * blockDim.x) {
    float total = 0.f;
    for (std::uint32_t s = 0; s < segments; ++s) total += partial[std::size_t(s) * count + k];
    grad[k] = from_f32<T>(total);
  }
}

unsigned blocks_for(std::uint64_t work) {
  return unsigned(
      std::max<std::uint64_t>(1, std::min<std::uint64_t>((work + kThreads - 1) / kThreads, kMaxBlocks)));
}

// A pointer the kernel does not use (null) never stops the vector path.
bool absent_or_aligned16(const void* p) { return p == nullptr || aligned16(p); }

struct DenseGrid {
  unsigned blocks, threads;
};

// Tiles of kUnroll * threads vectors, one per block up to a cap (then grid-stride); small
// problems take smaller blocks so that they still spread over many SMs.
DenseGrid dense_grid(std::uint32_t vectors) {
  unsigned threads = kThreads;
  while (threads > kMinDenseThreads && vectors < std::uint64_t(threads) * kUnroll * kMinDenseTiles)
    threads /= 2;
  const std::uint64_t tile = std::uint64_t(threads) * kUnroll;
  return {unsigned(std::clamp<std::uint64_t>((vectors + tile - 1) / tile, 1, kMaxDenseBlocks)), threads};
}

// Calls body(std::integral_constant<EltwiseOp, op>) for the problem's op.
template <typename Body>
void with_op(EltwiseOp op, Body body) {
  switch (op) {
    case EltwiseOp::add:
      return body(std::integral_constant<EltwiseOp, EltwiseOp::add>{});
    case EltwiseOp::sub:
      return body(std::integral_constant<EltwiseOp, EltwiseOp::sub>{});
    case EltwiseOp::mul:
      return body(std::integral_constant<EltwiseOp, EltwiseOp::mul>{});
    case EltwiseOp::div:
      return body(std::integral_constant<EltwiseOp, EltwiseOp::div>{});
  }
}

// Calls body(Fn<kWhat, op>{alpha, beta}) for the problem's op.
template <int kWhat, typename Body>
void with_fn(EltwiseOp op, float alpha, float beta, Body body) {
  with_op(op, [&](auto k) { body(Fn<kWhat, decltype(k)::value>{alpha, beta}); });
}

template <typename Body>
void with_type(DType dtype, Body body) {
  switch (dtype) {
    case DType::f32:
      return body(static_cast<float*>(nullptr));
    case DType::f16:
      return body(static_cast<__half*>(nullptr));
    case DType::bf16:
      return body(static_cast<bf16_t*>(nullptr));
    default:
      throw Error(Status::unsupported, std::string("eltwise kernels: dtype ") + to_string(dtype));
  }
}

// One dst-shaped map (forward, or the gradient of an input that is not broadcast) into `out`.
template <int kWhat>
void launch_map(const EltwiseLaunch& l, void* out, bool dense) {
  const dnn::EltwiseGeometry& g = l.geometry;
  with_type(l.problem.dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    constexpr int kV = Vec<T>::kWidth;
    const auto* dy = static_cast<const T*>(l.dy);
    const auto* a = static_cast<const T*>(l.a);
    const auto* b = static_cast<const T*>(l.b);
    auto* dst = static_cast<T*>(out);
    with_fn<kWhat>(l.problem.op, l.problem.alpha, l.problem.beta, [&](auto fn) {
      using F = decltype(fn);
      const bool vec = absent_or_aligned16(dy) && absent_or_aligned16(dst) &&
                       (!F::kReadsA || g.a_stride[g.rank - 1] == 0 || absent_or_aligned16(a)) &&
                       (!F::kReadsB || g.b_stride[g.rank - 1] == 0 || absent_or_aligned16(b));
      const auto n = std::uint32_t(g.elements);
      if (dense) {
        if (vec) {
          const DenseGrid grid = dense_grid(n / kV);
          dense_vec_kernel<T, F, NoMap><<<grid.blocks, grid.threads, 0, as_stream(l.stream)>>>(
              fn, NoMap{}, dy, a, b, dst, nullptr, n, g.a_stride[0], g.b_stride[0]);
        } else {
          dense_kernel<T, F, 1><<<blocks_for(n), kThreads, 0, as_stream(l.stream)>>>(
              fn, dy, a, b, dst, n, g.a_stride[0], g.b_stride[0]);
        }
      } else {
        const EltwiseMapParams p = make_map_params(l.problem, g);
        if (vec && g.dims[g.rank - 1] % kV == 0) {
          broadcast_kernel<T, F, kV>
              <<<blocks_for(n / kV), kThreads, 0, as_stream(l.stream)>>>(fn, p, dy, a, b, dst);
        } else {
          broadcast_kernel<T, F, 1>
              <<<blocks_for(n), kThreads, 0, as_stream(l.stream)>>>(fn, p, dy, a, b, dst);
        }
      }
    });
  });
  check_launch(l.name);
}

template <int kWhat>
void launch_reduce(const EltwiseLaunch& l, void* grad, float* partial) {
  const EltwiseReduceParams p = make_reduce_params(l.problem, l.geometry, kWhat - 1);
  with_type(l.problem.dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const auto* dy = static_cast<const T*>(l.dy);
    const auto* a = static_cast<const T*>(l.a);
    const auto* b = static_cast<const T*>(l.b);
    with_fn<kWhat>(l.problem.op, l.problem.alpha, l.problem.beta, [&](auto fn) {
      using F = decltype(fn);
      if (p.short_sums) {
        reduce_short_kernel<T, F>
            <<<blocks_for(p.kept.count), kThreads, 0, as_stream(l.stream)>>>(fn, p, dy, a, b, partial);
      } else if (p.inner_kept) {
        const dim3 grid((p.kept.count + 31) / 32, p.segments);
        reduce_columns_kernel<T, F><<<grid, dim3(32, 8), 0, as_stream(l.stream)>>>(fn, p, dy, a, b, partial);
      } else {
        const dim3 grid(p.kept.count, p.segments);
        reduce_rows_kernel<T, F><<<grid, kThreads, 0, as_stream(l.stream)>>>(fn, p, dy, a, b, partial);
      }
    });
    check_launch(l.name);
    finish_kernel<T><<<blocks_for(p.kept.count), kThreads, 0, as_stream(l.stream)>>>(
        partial, p.segments, p.kept.count, static_cast<T*>(grad));
  });
  check_launch(l.name);
}

// Both gradients in one pass when both inputs have dst's shape (the geometry is then one dim):
// dy (and a, b where the op needs them) read once. False, launching nothing, when a pointer is not
// 16-byte aligned.
bool launch_both_maps(const EltwiseLaunch& l) {
  const dnn::EltwiseGeometry& g = l.geometry;
  if (!(absent_or_aligned16(l.dy) && absent_or_aligned16(l.a) && absent_or_aligned16(l.b) &&
        absent_or_aligned16(l.da) && absent_or_aligned16(l.db)))
    return false;
  with_type(l.problem.dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const auto n = std::uint32_t(g.elements);
    with_op(l.problem.op, [&](auto k) {
      constexpr EltwiseOp kOp = decltype(k)::value;
      const DenseGrid grid = dense_grid(n / Vec<T>::kWidth);
      dense_vec_kernel<T><<<grid.blocks, grid.threads, 0, as_stream(l.stream)>>>(
          Fn<1, kOp>{l.problem.alpha, l.problem.beta}, Fn<2, kOp>{l.problem.alpha, l.problem.beta},
          static_cast<const T*>(l.dy), static_cast<const T*>(l.a), static_cast<const T*>(l.b),
          static_cast<T*>(l.da), static_cast<T*>(l.db), n, g.a_stride[0], g.b_stride[0]);
    });
  });
  check_launch(l.name);
  return true;
}

// The column sum into a (kWhat 1) or b (kWhat 2), writing the other input's gradient on the way
// when `with_map` (that input has dst's shape). False, launching nothing, when the geometry is no
// column sum or a pointer it would access by vectors is not 16-byte aligned.
template <int kWhat>
bool launch_column(const EltwiseLaunch& l, bool with_map) {
  const EltwiseColumnParams p =
      make_column_params(l.geometry, kWhat - 1, std::uint32_t(16 / size_of(l.problem.dtype)));
  if (!p.applies) return false;
  void* grad = kWhat == 1 ? l.da : l.db;
  void* map = with_map ? (kWhat == 1 ? l.db : l.da) : nullptr;
  if (!absent_or_aligned16(l.dy) || !absent_or_aligned16(map) ||
      (p.a_col != 0 && !absent_or_aligned16(l.a)) || (p.b_col != 0 && !absent_or_aligned16(l.b))) {
    return false;
  }
  float* partial = static_cast<float*>(l.workspace);
  with_type(l.problem.dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const auto* dy = static_cast<const T*>(l.dy);
    const auto* a = static_cast<const T*>(l.a);
    const auto* b = static_cast<const T*>(l.b);
    with_op(l.problem.op, [&](auto k) {
      constexpr EltwiseOp kOp = decltype(k)::value;
      const Fn<kWhat, kOp> fn{l.problem.alpha, l.problem.beta};
      const dim3 grid(p.col_blocks, p.segments), block(p.block_cols, p.block_rows);
      if (with_map) {
        column_sum_kernel<T><<<grid, block, 0, as_stream(l.stream)>>>(
            fn, Fn<3 - kWhat, kOp>{l.problem.alpha, l.problem.beta}, p, dy, a, b, static_cast<T*>(map),
            partial, static_cast<T*>(grad));
      } else {
        column_sum_kernel<T><<<grid, block, 0, as_stream(l.stream)>>>(fn, NoMap{}, p, dy, a, b, nullptr,
                                                                      partial, static_cast<T*>(grad));
      }
    });
    check_launch(l.name);
    if (p.segments > 1) {
      finish_columns_kernel<T><<<(p.cols + 31) / 32, dim3(32, 32), 0, as_stream(l.stream)>>>(
          partial, p.segments, p.cols, static_cast<T*>(grad));
    }
  });
  check_launch(l.name);
  return true;
}

}  // namespace

std::size_t eltwise_workspace_bytes(const dnn::EltwiseProblem& problem, const dnn::EltwiseGeometry& g) {
  if (problem.direction == dnn::EltwiseDirection::forward) return 0;
  std::size_t bytes = 0;
  for (int which = 0; which < 2; ++which) {
    const std::int64_t count = which == 0 ? g.a_elements : g.b_elements;
    if (count == g.elements) continue;
    // Both reductions share the workspace one after the other on one stream: the larger decides.
    // A column sum falls back to the general reduction when a pointer is misaligned: room for both.
    const EltwiseReduceParams p = make_reduce_params(problem, g, which);
    bytes = std::max(bytes, std::size_t(p.segments) * p.kept.count * sizeof(float));
    const EltwiseColumnParams c = make_column_params(g, which, std::uint32_t(16 / size_of(problem.dtype)));
    if (c.applies && c.segments > 1)
      bytes = std::max(bytes, std::size_t(c.segments) * c.cols * sizeof(float));
  }
  return bytes;
}

void launch_eltwise_forward(const EltwiseLaunch& l, bool dense) { launch_map<0>(l, l.dst, dense); }

void launch_eltwise_backward(const EltwiseLaunch& l) {
  const dnn::EltwiseGeometry& g = l.geometry;
  const bool dense = g.rank == 1;
  // One pass for both gradients where a kernel can: both maps together, or a column sum that
  // writes the other input's map as it reads dy.
  bool a_done = false, b_done = false;
  if (g.a_full() && g.b_full()) {
    a_done = b_done = dense && launch_both_maps(l);
  } else if (!g.a_full() && launch_column<1>(l, g.b_full())) {
    a_done = true;
    b_done = g.b_full();
  } else if (!g.b_full() && launch_column<2>(l, g.a_full())) {
    b_done = true;
    a_done = g.a_full();
  }
  if (!a_done) {
    if (g.a_full()) {
      launch_map<1>(l, l.da, dense);
    } else {
      launch_reduce<1>(l, l.da, static_cast<float*>(l.workspace));
    }
  }
  if (!b_done) {
    if (g.b_full()) {
      launch_map<2>(l, l.db, dense);
    } else {
      launch_reduce<2>(l, l.db, static_cast<float*>(l.workspace));
    }
  }
}

}  // namespace galley::backends::gpu
