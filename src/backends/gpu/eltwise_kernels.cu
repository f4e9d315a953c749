// The single-source eltwise kernels: a dense kernel for dst walked as one flat range (equal shapes,
// or an input that is a single value), a broadcast kernel for any merged geometry, and the backward
// reductions. Every kernel computes in f32 through one functor per direction and input, so forward
// and the backward maps share the loops.
//
// Vector width: 16 bytes per load and store (4 f32 or 8 f16/bf16) wherever the pointers are
// 16-byte aligned and rows are whole vectors; a broadcast input along the innermost dim is one
// scalar load per vector. Reductions are deterministic: each block sums a fixed part in a fixed
// tree, partials are added in order by a second kernel; no atomics.
#include "conv_device.cuh"
#include "eltwise_kernels.hpp"

namespace galley::backends::gpu {
namespace {

using dnn::EltwiseOp;

constexpr int kThreads = 256;
constexpr std::uint32_t kMaxBlocks = 4096;

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

bool aligned16(const void* p) { return p == nullptr || (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0; }

// Calls body(Fn<kWhat, op>{alpha, beta}) for the problem's op.
template <int kWhat, typename Body>
void with_fn(EltwiseOp op, float alpha, float beta, Body body) {
  switch (op) {
    case EltwiseOp::add:
      return body(Fn<kWhat, EltwiseOp::add>{alpha, beta});
    case EltwiseOp::sub:
      return body(Fn<kWhat, EltwiseOp::sub>{alpha, beta});
    case EltwiseOp::mul:
      return body(Fn<kWhat, EltwiseOp::mul>{alpha, beta});
    case EltwiseOp::div:
      return body(Fn<kWhat, EltwiseOp::div>{alpha, beta});
  }
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
      const bool vec = aligned16(dy) && aligned16(dst) &&
                       (!F::kReadsA || g.a_stride[g.rank - 1] == 0 || aligned16(a)) &&
                       (!F::kReadsB || g.b_stride[g.rank - 1] == 0 || aligned16(b));
      const auto n = std::uint32_t(g.elements);
      if (dense) {
        const unsigned blocks = blocks_for(vec ? n / kV + 1 : n);
        if (vec) {
          dense_kernel<T, F, kV><<<blocks, kThreads, 0, as_stream(l.stream)>>>(fn, dy, a, b, dst, n,
                                                                               g.a_stride[0], g.b_stride[0]);
        } else {
          dense_kernel<T, F, 1><<<blocks, kThreads, 0, as_stream(l.stream)>>>(fn, dy, a, b, dst, n,
                                                                              g.a_stride[0], g.b_stride[0]);
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

}  // namespace

std::size_t eltwise_workspace_bytes(const dnn::EltwiseProblem& problem, const dnn::EltwiseGeometry& g) {
  if (problem.direction == dnn::EltwiseDirection::forward) return 0;
  std::size_t bytes = 0;
  for (int which = 0; which < 2; ++which) {
    const std::int64_t count = which == 0 ? g.a_elements : g.b_elements;
    if (count == g.elements) continue;
    const EltwiseReduceParams p = make_reduce_params(problem, g, which);
    // Both reductions share the workspace one after the other on one stream: the larger decides.
    bytes = std::max(bytes, std::size_t(p.segments) * p.kept.count * sizeof(float));
  }
  return bytes;
}

void launch_eltwise_forward(const EltwiseLaunch& l, bool dense) { launch_map<0>(l, l.dst, dense); }

void launch_eltwise_backward(const EltwiseLaunch& l) {
  const dnn::EltwiseGeometry& g = l.geometry;
  const bool dense = g.rank == 1;
  if (g.a_elements == g.elements) {
    launch_map<1>(l, l.da, dense);
  } else {
    launch_reduce<1>(l, l.da, static_cast<float*>(l.workspace));
  }
  if (g.b_elements == g.elements) {
    launch_map<2>(l, l.db, dense);
  } else {
    launch_reduce<2>(l, l.db, static_cast<float*>(l.workspace));
  }
}

}  // namespace galley::backends::gpu
