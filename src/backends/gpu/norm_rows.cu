// Layer norm kernels (gpu.lnorm.rows). Rows of a multiple of 8 up to 32 * kMaxLaneVectors * 8
// elements take the register path of norm_rows_lanes.cu; the rest take the generic kernels here:
// a group of threads per row (32 to 256, so short rows share a block). Forward: a Welford pass over
// the row, then y from the row again (an L1/L2 hit for rows of typical size). Backward: a group per
// row for dx (the row's sums of g = dy*scale and g*xhat, then dx), and the column sums
// dscale/dshift as partials over ranges of rows. Both paths' column partials are merged in a fixed
// order by column_finalize (no atomics).
#include "norm_device.cuh"
#include "norm_kernels.hpp"

namespace galley::backends::gpu {
namespace {

constexpr std::int64_t kTargetBlocks = 1024;
// The register path's backward runs at most this many blocks (its column partials); more than a
// device holds at once is no use to a persistent kernel.
constexpr std::int64_t kMaxLaneBlocks = 1024;
// column_finalize: a block is kFinalizeCols columns by kFinalizeSplits threads over the partials,
// so each thread adds a few dozen partials at most, not all of them.
constexpr int kFinalizeCols = 32;
constexpr int kFinalizeSplits = 32;

template <typename T, int kVec>
__global__ void row_forward(RowGeometry g, int group, const T* __restrict__ x,
                            const float* __restrict__ scale, const float* __restrict__ shift,
                            T* __restrict__ y, float* __restrict__ saved_mean,
                            float* __restrict__ saved_invstd, float epsilon) {
  __shared__ Welford<float> shared[kNormThreads];
  const int lane = int(threadIdx.x) % group;
  const std::int64_t row = std::int64_t(blockIdx.x) * (kNormThreads / group) + int(threadIdx.x) / group;
  const bool active = row < g.rows;
  const std::int64_t len = active ? g.len : 0;
  const T* xr = x + (active ? row : 0) * g.len;
  // Welford over x - center (the row's first value): small running means keep the bits a mean of
  // 1e4 would round away in f32; y is then ((x - center) - shifted mean) * invstd.
  const float center = ldg_f32(xr);
  Welford<float> w{};
  for (std::int64_t i = std::int64_t(lane) * kVec; i < len; i += std::int64_t(group) * kVec) {
    if constexpr (kVec == 8) {
      float v[8];
      load8(xr + i, v);
#pragma unroll
      for (int j = 0; j < 8; ++j) v[j] -= center;
      welford_add8(w, v);
    } else {
      w.add(ldg_f32(xr + i) - center);
    }
  }
  shared[threadIdx.x] = w;
  const Welford<float> t = group_merge(shared, group);
  if (!active) return;
  const float mean = t.mean;
  const float invstd = 1.0f / sqrtf(t.m2 / float(g.len) + epsilon);
  if (lane == 0) {
    saved_mean[row] = center + mean;
    saved_invstd[row] = invstd;
  }
  T* yr = y + row * g.len;
  for (std::int64_t i = std::int64_t(lane) * kVec; i < g.len; i += std::int64_t(group) * kVec) {
    if constexpr (kVec == 8) {
      float v[8], o[8];
      load8(xr + i, v);
#pragma unroll
      for (int j = 0; j < 8; ++j) o[j] = fmaf(((v[j] - center) - mean) * invstd, scale[i + j], shift[i + j]);
      store8(yr + i, o);
    } else {
      yr[i] = from_f32<T>(fmaf(((ldg_f32(xr + i) - center) - mean) * invstd, scale[i], shift[i]));
    }
  }
}

template <typename T, int kVec>
__global__ void row_backward_dx(RowGeometry g, int group, const T* __restrict__ x, const T* __restrict__ dy,
                                const float* __restrict__ scale, const float* __restrict__ saved_mean,
                                const float* __restrict__ saved_invstd, T* __restrict__ dx) {
  __shared__ Sum2<float> shared[kNormThreads];
  const int lane = int(threadIdx.x) % group;
  const std::int64_t row = std::int64_t(blockIdx.x) * (kNormThreads / group) + int(threadIdx.x) / group;
  const bool active = row < g.rows;
  const std::int64_t len = active ? g.len : 0, at = active ? row : 0;
  const T* xr = x + at * g.len;
  const T* dyr = dy + at * g.len;
  const float mean = saved_mean[at], r = saved_invstd[at];
  Sum2<float> acc{};
  for (std::int64_t i = std::int64_t(lane) * kVec; i < len; i += std::int64_t(group) * kVec) {
    float v[kVec], d[kVec];
    if constexpr (kVec == 8) {
      load8(xr + i, v);
      load8(dyr + i, d);
    } else {
      v[0] = ldg_f32(xr + i);
      d[0] = ldg_f32(dyr + i);
    }
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      const float gj = d[j] * scale[i + j];
      acc.a += gj;
      acc.b += gj * (v[j] - mean) * r;
    }
  }
  shared[threadIdx.x] = acc;
  const Sum2<float> total = group_merge(shared, group);
  if (!active) return;
  const float mg = total.a / float(g.len), mgx = total.b / float(g.len);
  T* dxr = dx + row * g.len;
  for (std::int64_t i = std::int64_t(lane) * kVec; i < g.len; i += std::int64_t(group) * kVec) {
    float v[kVec], d[kVec], o[kVec];
    if constexpr (kVec == 8) {
      load8(xr + i, v);
      load8(dyr + i, d);
    } else {
      v[0] = ldg_f32(xr + i);
      d[0] = ldg_f32(dyr + i);
    }
#pragma unroll
    for (int j = 0; j < kVec; ++j) o[j] = r * (d[j] * scale[i + j] - mg - (v[j] - mean) * r * mgx);
    if constexpr (kVec == 8) {
      store8(dxr + i, o);
    } else {
      dxr[i] = from_f32<T>(o[0]);
    }
  }
}

/// Column partials: thread = column, blockIdx.y = a range of rows; partial[(split * len + col) * 2].
template <typename T>
__global__ void column_partial(RowGeometry g, std::int64_t rows_per_split, const T* __restrict__ x,
                               const T* __restrict__ dy, const float* __restrict__ saved_mean,
                               const float* __restrict__ saved_invstd, float* __restrict__ partial) {
  const std::int64_t col = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (col >= g.len) return;
  const std::int64_t r0 = std::int64_t(blockIdx.y) * rows_per_split, r1 = min64(g.rows, r0 + rows_per_split);
  float ds = 0, db = 0;
  for (std::int64_t row = r0; row < r1; ++row) {
    const float d = ldg_f32(dy + row * g.len + col);
    ds += d * (ldg_f32(x + row * g.len + col) - saved_mean[row]) * saved_invstd[row];
    db += d;
  }
  float* out = partial + (std::int64_t(blockIdx.y) * g.len + col) * 2;
  out[0] = ds;
  out[1] = db;
}

/// dscale, dshift from `splits` partials per column (partial[(split * len + col) * 2 + {0, 1}]),
/// added in double in a fixed order: threadIdx.y strides over the partials, then a tree over y.
__global__ void __launch_bounds__(kFinalizeCols* kFinalizeSplits)
    column_finalize(std::int64_t len, std::int64_t splits, const float* __restrict__ partial,
                    float* __restrict__ dscale, float* __restrict__ dshift) {
  __shared__ Sum2<double> shared[kFinalizeSplits][kFinalizeCols];
  const int tx = int(threadIdx.x), ty = int(threadIdx.y);
  const std::int64_t col = std::int64_t(blockIdx.x) * kFinalizeCols + tx;
  Sum2<double> acc{};
  if (col < len) {
#pragma unroll 4
    for (std::int64_t s = ty; s < splits; s += kFinalizeSplits) {
      const float2 p = *reinterpret_cast<const float2*>(partial + (s * len + col) * 2);
      acc.a += p.x;
      acc.b += p.y;
    }
  }
  shared[ty][tx] = acc;
  __syncthreads();
  for (int stride = kFinalizeSplits / 2; stride > 0; stride /= 2) {
    if (ty < stride) shared[ty][tx].merge(shared[ty + stride][tx]);
    __syncthreads();
  }
  if (ty == 0 && col < len) {
    dscale[col] = float(shared[0][tx].a);
    dshift[col] = float(shared[0][tx].b);
  }
}

void launch_column_finalize(const RowGeometry& g, std::int64_t splits, const float* partial,
                            const dnn::NormArgs& a, GpuStream s) {
  const dim3 block(kFinalizeCols, kFinalizeSplits);
  column_finalize<<<unsigned((g.len + kFinalizeCols - 1) / kFinalizeCols), block, 0, s>>>(
      g.len, splits, partial, static_cast<float*>(a.dscale), static_cast<float*>(a.dshift));
}

/// The register path's vector loads of scale and shift need them 16-byte aligned (x, y, dy and dx
/// are, as for the generic path's own vector loads); other pointers take the generic path.
bool use_lanes(const RowGeometry& g, const dnn::NormArgs& a, bool backward) {
  if (g.lanes == 0 || !aligned16(a.scale)) return false;
  return backward ? g.lane_vectors <= kMaxBackwardLaneVectors : aligned16(a.shift);
}

std::int64_t rows_per_split(const RowGeometry& g) { return (g.rows + g.col_splits - 1) / g.col_splits; }

int row_threads(const RowGeometry& g) { return threads_for(g.len % 8 == 0 ? g.len / 8 : g.len); }
unsigned row_blocks(const RowGeometry& g, int group) {
  const std::int64_t per_block = kNormThreads / group;
  return unsigned((g.rows + per_block - 1) / per_block);
}

}  // namespace

RowGeometry row_geometry(std::int64_t rows, std::int64_t len, DType dtype) {
  RowGeometry g{rows, len, dtype, 1};
  if (len % 8 == 0 && len / 8 <= 32 * kMaxLaneVectors) {
    const std::int64_t vectors = len / 8;
    g.lanes = 1;
    while (g.lanes < 32 && g.lanes < vectors) g.lanes *= 2;
    g.lane_vectors = int((vectors + g.lanes - 1) / g.lanes);
  }
  const std::int64_t base = (len + kNormThreads - 1) / kNormThreads;
  g.col_splits =
      std::clamp<std::int64_t>((kTargetBlocks + base - 1) / base, 1, std::min<std::int64_t>(rows, 65535));
  g.col_splits = (rows + rows_per_split(g) - 1) / rows_per_split(g);
  return g;
}

const char* row_geometry_limit(const RowGeometry& g) {
  if (g.rows > 0x7fffffffLL) return "more than 2^31 - 1 rows";
  if ((g.len + kNormThreads - 1) / kNormThreads > 0x7fffffffLL) return "rows too long for the grid";
  return nullptr;
}

/// The register path's backward blocks at most: one per group of rows a block takes at once.
std::int64_t lane_blocks(const RowGeometry& g) {
  if (g.lanes == 0 || g.lane_vectors > kMaxBackwardLaneVectors) return 0;
  const std::int64_t per_block = std::int64_t(kNormThreads / g.lanes) * g.rows_per_group();
  return std::clamp<std::int64_t>((g.rows + per_block - 1) / per_block, 1, kMaxLaneBlocks);
}

std::size_t row_workspace_bytes(const RowGeometry& g, bool backward) {
  // Room for either path's partials: unaligned scale or shift send a register-path shape to the
  // generic kernels.
  const std::int64_t splits = std::max(g.col_splits, lane_blocks(g));
  return backward ? std::size_t(splits * g.len * 2) * sizeof(float) : 0;
}

void launch_row_forward(const RowGeometry& g, const dnn::NormArgs& a, double epsilon, void* stream,
                        const char* what) {
  if (use_lanes(g, a, false)) {
    launch_row_forward_lanes(g, a, epsilon, stream, what);
    check_launch(what);
    return;
  }
  const GpuStream s = as_stream(stream);
  dispatch_dtype(g.dtype, what, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    auto kernel = g.len % 8 == 0 ? row_forward<T, 8> : row_forward<T, 1>;
    const int group = row_threads(g);
    kernel<<<row_blocks(g, group), kNormThreads, 0, s>>>(
        g, group, static_cast<const T*>(a.x), static_cast<const float*>(a.scale),
        static_cast<const float*>(a.shift), static_cast<T*>(a.y), static_cast<float*>(a.saved_mean),
        static_cast<float*>(a.saved_invstd), float(epsilon));
  });
  check_launch(what);
}

void launch_row_backward(const RowGeometry& g, const dnn::NormArgs& a, void* stream, const char* what) {
  const GpuStream s = as_stream(stream);
  const auto* mean = static_cast<const float*>(a.saved_mean);
  const auto* invstd = static_cast<const float*>(a.saved_invstd);
  auto* partial = static_cast<float*>(a.workspace);
  if (use_lanes(g, a, true)) {
    const std::int64_t blocks = launch_row_backward_lanes(g, a, lane_blocks(g), partial, stream, what);
    launch_column_finalize(g, blocks, partial, a, s);
    check_launch(what);
    return;
  }
  dispatch_dtype(g.dtype, what, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const auto* x = static_cast<const T*>(a.x);
    const auto* dy = static_cast<const T*>(a.dy);
    auto kernel = g.len % 8 == 0 ? row_backward_dx<T, 8> : row_backward_dx<T, 1>;
    const int group = row_threads(g);
    kernel<<<row_blocks(g, group), kNormThreads, 0, s>>>(g, group, x, dy, static_cast<const float*>(a.scale),
                                                         mean, invstd, static_cast<T*>(a.dx));
    const dim3 grid(unsigned((g.len + kNormThreads - 1) / kNormThreads), unsigned(g.col_splits));
    column_partial<T><<<grid, kNormThreads, 0, s>>>(g, rows_per_split(g), x, dy, mean, invstd, partial);
    launch_column_finalize(g, g.col_splits, partial, a, s);
  });
  check_launch(what);
}

}  // namespace galley::backends::gpu
