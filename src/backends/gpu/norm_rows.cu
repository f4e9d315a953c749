// Layer norm kernels (gpu.lnorm.rows): a group of threads per row (32 to 256, so short rows share a
// block). Forward: a Welford pass over the row, then y from the row again (an L1/L2 hit for rows of
// typical size). Backward: a group per row for
// dx (the row's sums of g = dy*scale and g*xhat, then dx), and the column sums dscale/dshift as
// partials over ranges of rows merged in a fixed order (no atomics).
#include "norm_device.cuh"
#include "norm_kernels.hpp"

namespace galley::backends::gpu {
namespace {

constexpr std::int64_t kTargetBlocks = 1024;

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

__global__ void column_finalize(RowGeometry g, const float* __restrict__ partial, float* __restrict__ dscale,
                                float* __restrict__ dshift) {
  for (std::int64_t col = grid_stride_start(); col < g.len; col += grid_stride_step()) {
    double ds = 0, db = 0;
    for (std::int64_t s = 0; s < g.col_splits; ++s) {
      ds += partial[(s * g.len + col) * 2];
      db += partial[(s * g.len + col) * 2 + 1];
    }
    dscale[col] = float(ds);
    dshift[col] = float(db);
  }
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

std::size_t row_workspace_bytes(const RowGeometry& g, bool backward) {
  return backward ? std::size_t(g.col_splits * g.len * 2) * sizeof(float) : 0;
}

void launch_row_forward(const RowGeometry& g, const dnn::NormArgs& a, double epsilon, void* stream,
                        const char* what) {
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
    column_finalize<<<grid_for(g.len, kNormThreads), kNormThreads, 0, s>>>(
        g, partial, static_cast<float*>(a.dscale), static_cast<float*>(a.dshift));
  });
  check_launch(what);
}

}  // namespace galley::backends::gpu
