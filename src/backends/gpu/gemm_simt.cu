// gpu.gemm.simt's kernel and the GEMM helpers every GPU gemm solver shares. The SIMT GEMM: each
// block computes a 128 x 128 output tile over k slices of 8 with 256 threads, each an 8 x 8
// register tile (two 4-wide strips in each direction, so shared-memory reads are float4 and
// conflict-free); the next slice is read from global memory into registers while the current one
// is multiplied from the other of two shared-memory buffers. f32 FMA, never TF32; f16/bf16 are
// converted as they are read. Any shape, transpose and alignment (element loads, mapped so
// neighbouring threads read neighbouring addresses). Also here: the bias gradient's column sums
// (split over rows when the columns alone leave the GPU idle), f32 -> dtype conversion and a bias
// add, for the cuBLAS solver's staging.
#include <string>

#include "conv_device.cuh"
#include "gemm_kernels.hpp"

namespace galley::backends::gpu {
namespace {

constexpr int kBm = 128, kBn = 128, kBk = 8, kThreads = 256;

struct SimtParams {
  long long m, n, k;
  int batch;
  bool sum_batches;
  long long ldx, ldy, ldo;
  long long stride_x, stride_y, stride_o;
  float alpha, beta;
};

template <typename T, bool TX, bool TY>
__global__ void __launch_bounds__(kThreads)
    gemm_simt_kernel(SimtParams p, const T* __restrict__ x, const T* __restrict__ y, T* __restrict__ out,
                     const T* __restrict__ bias) {
  __shared__ __align__(16) float xs[2][kBk][kBm];
  __shared__ __align__(16) float ys[2][kBk][kBn];
  const int tid = threadIdx.x;
  const int tx = tid % 16, ty = tid / 16;
  const long long m0 = (long long)blockIdx.y * kBm, n0 = (long long)blockIdx.x * kBn;
  const long long out_batch = p.sum_batches ? 0 : blockIdx.z;
  const long long k_tiles = (p.k + kBk - 1) / kBk;
  const long long total = k_tiles * (p.sum_batches ? p.batch : 1);
  constexpr int kPer = kBm * kBk / kThreads;  // elements of each operand a thread loads per slice

  float xr[kPer], yr[kPer];
  // Slice t into registers; element e of this thread is (row, kk) of the X tile, (kk, col) of Y's.
  const auto fetch = [&](long long t) {
    const long long b = p.sum_batches ? t / k_tiles : out_batch;
    const long long k0 = (t % k_tiles) * kBk;
    const T* xb = x + b * p.stride_x;
    const T* yb = y + b * p.stride_y;
#pragma unroll
    for (int e = 0; e < kPer; ++e) {
      const int idx = tid + e * kThreads;
      const int r = TX ? idx % kBm : idx / kBk, kk = TX ? idx / kBm : idx % kBk;
      const long long gm = m0 + r, gk = k0 + kk;
      xr[e] = (gm < p.m && gk < p.k) ? to_f32(xb[TX ? gk * p.ldx + gm : gm * p.ldx + gk]) : 0.f;
      const int c = TY ? idx / kBk : idx % kBn, kk2 = TY ? idx % kBk : idx / kBn;
      const long long gn = n0 + c, gk2 = k0 + kk2;
      yr[e] = (gn < p.n && gk2 < p.k) ? to_f32(yb[TY ? gn * p.ldy + gk2 : gk2 * p.ldy + gn]) : 0.f;
    }
  };
  const auto stash = [&](int s) {
#pragma unroll
    for (int e = 0; e < kPer; ++e) {
      const int idx = tid + e * kThreads;
      const int r = TX ? idx % kBm : idx / kBk, kk = TX ? idx / kBm : idx % kBk;
      xs[s][kk][r] = xr[e];
      const int c = TY ? idx / kBk : idx % kBn, kk2 = TY ? idx % kBk : idx / kBn;
      ys[s][kk2][c] = yr[e];
    }
  };

  float acc[8][8];
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[i][j] = 0.f;

  if (total > 0) {
    fetch(0);
    stash(0);
  }
  __syncthreads();
  for (long long t = 0; t < total; ++t) {
    const int s = int(t & 1);
    if (t + 1 < total) fetch(t + 1);
#pragma unroll
    for (int kk = 0; kk < kBk; ++kk) {
      float a[8], b[8];
      const float4 a0 = *reinterpret_cast<const float4*>(&xs[s][kk][ty * 4]);
      const float4 a1 = *reinterpret_cast<const float4*>(&xs[s][kk][64 + ty * 4]);
      const float4 b0 = *reinterpret_cast<const float4*>(&ys[s][kk][tx * 4]);
      const float4 b1 = *reinterpret_cast<const float4*>(&ys[s][kk][64 + tx * 4]);
      a[0] = a0.x, a[1] = a0.y, a[2] = a0.z, a[3] = a0.w, a[4] = a1.x, a[5] = a1.y, a[6] = a1.z, a[7] = a1.w;
      b[0] = b0.x, b[1] = b0.y, b[2] = b0.z, b[3] = b0.w, b[4] = b1.x, b[5] = b1.y, b[6] = b1.z, b[7] = b1.w;
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    if (t + 1 < total) stash(s ^ 1);
    __syncthreads();
  }

  T* ob = out + out_batch * p.stride_o;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const long long row = m0 + (i < 4 ? ty * 4 + i : 64 + ty * 4 + i - 4);
    if (row >= p.m) continue;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const long long col = n0 + (j < 4 ? tx * 4 + j : 64 + tx * 4 + j - 4);
      if (col >= p.n) continue;
      T* dst = ob + row * p.ldo + col;
      float v = p.alpha * acc[i][j];
      if (p.beta != 0.f) v += p.beta * to_f32(*dst);
      if (bias != nullptr) v += to_f32(bias[col]);
      *dst = from_f32<T>(v);
    }
  }
}

// Column sums: block (32, 8) sums rows [r0, r1) of 32 columns; with one split it writes dst in
// its dtype, else f32 partials that finish_column_sums adds up.
template <typename T>
__global__ void column_sums_kernel(const T* __restrict__ src, long long rows, long long cols, long long rows_per_split,
                                   float* __restrict__ partial, T* __restrict__ dst) {
  __shared__ float sums[8][33];
  const long long col = (long long)blockIdx.x * 32 + threadIdx.x;
  const long long r0 = (long long)blockIdx.y * rows_per_split;
  const long long r1 = min(rows, r0 + rows_per_split);
  float acc = 0.f;
  if (col < cols) {
    for (long long r = r0 + threadIdx.y; r < r1; r += 8) acc += to_f32(src[r * cols + col]);
  }
  sums[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && col < cols) {
    float total = 0.f;
#pragma unroll
    for (int i = 0; i < 8; ++i) total += sums[i][threadIdx.x];
    if (partial != nullptr) {
      partial[(long long)blockIdx.y * cols + col] = total;
    } else {
      dst[col] = from_f32<T>(total);
    }
  }
}

template <typename T>
__global__ void finish_column_sums(const float* __restrict__ partial, int splits, long long cols, T* __restrict__ dst) {
  for (long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x; c < cols; c += (long long)gridDim.x * blockDim.x) {
    float total = 0.f;
    for (int s = 0; s < splits; ++s) total += partial[s * cols + c];
    dst[c] = from_f32<T>(total);
  }
}

template <typename T>
__global__ void from_f32_kernel(const float* __restrict__ src, T* __restrict__ dst, long long count) {
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += (long long)gridDim.x * blockDim.x)
    dst[i] = from_f32<T>(src[i]);
}

template <typename T>
__global__ void add_bias_kernel(T* __restrict__ out, const T* __restrict__ bias, long long rows, long long cols,
                                long long ld) {
  const long long total = rows * cols;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (long long)gridDim.x * blockDim.x) {
    const long long r = i / cols, c = i % cols;
    T* p = out + r * ld + c;
    *p = from_f32<T>(to_f32(*p) + to_f32(bias[c]));
  }
}

constexpr int kColumnBlocksWanted = 512;  // enough blocks to fill a large GPU several times
constexpr int kMaxSplits = 64;

int column_splits(long long rows, long long cols) {
  const long long col_blocks = (cols + 31) / 32;
  long long splits = (kColumnBlocksWanted + col_blocks - 1) / col_blocks;
  splits = std::min<long long>(splits, std::max<long long>(1, rows / 256));
  return int(std::clamp<long long>(splits, 1, kMaxSplits));
}

unsigned grid_for(long long count, int threads) {
  return unsigned(std::clamp<long long>((count + threads - 1) / threads, 1, 65535LL * 32));
}

template <typename T, bool TX, bool TY>
void launch_simt(const SimtParams& p, const void* x, const void* y, void* out, const void* bias, GpuStream s) {
  const dim3 grid(unsigned((p.n + kBn - 1) / kBn), unsigned((p.m + kBm - 1) / kBm), unsigned(p.sum_batches ? 1 : p.batch));
  gemm_simt_kernel<T, TX, TY><<<grid, kThreads, 0, s>>>(p, static_cast<const T*>(x), static_cast<const T*>(y),
                                                        static_cast<T*>(out), static_cast<const T*>(bias));
}

}  // namespace

std::string gemm_simt_unfit(const dnn::GemmCall& c) {
  if ((c.m + kBm - 1) / kBm > 65535) return "m = " + std::to_string(c.m) + " needs more than 65535 tile rows (grid.y)";
  if ((c.n + kBn - 1) / kBn > (std::int64_t(1) << 31) - 1) return "n = " + std::to_string(c.n) + " is too wide for grid.x";
  if (!c.sum_batches && c.batch > 65535) return "batch " + std::to_string(c.batch) + " exceeds grid.z (65535)";
  if (c.sum_batches && c.batch > (std::int64_t(1) << 31) - 1) return "batch exceeds 2^31 - 1";
  return {};
}

void launch_gemm_simt(const dnn::GemmCall& c, DType dtype, const void* x, const void* y, void* out, const void* bias,
                      void* stream) {
  if (const std::string why = gemm_simt_unfit(c); !why.empty()) throw Error(Status::invalid_argument, "gpu.gemm.simt: " + why);
  const SimtParams p{c.m, c.n, c.k, int(c.batch), c.sum_batches, c.ldx, c.ldy, c.ldo,
                     c.stride_x, c.stride_y, c.stride_o, c.alpha, c.beta};
  const GpuStream s = as_stream(stream);
  dispatch_dtype(dtype, "gpu.gemm.simt", [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    if (!c.trans_x && !c.trans_y) launch_simt<T, false, false>(p, x, y, out, bias, s);
    if (!c.trans_x && c.trans_y) launch_simt<T, false, true>(p, x, y, out, bias, s);
    if (c.trans_x && !c.trans_y) launch_simt<T, true, false>(p, x, y, out, bias, s);
    if (c.trans_x && c.trans_y) launch_simt<T, true, true>(p, x, y, out, bias, s);
  });
  check_launch("gpu.gemm.simt");
}

std::size_t column_sums_workspace(std::int64_t rows, std::int64_t cols) {
  const int splits = column_splits(rows, cols);
  return splits > 1 ? std::size_t(splits) * std::size_t(cols) * sizeof(float) : 0;
}

void launch_column_sums(DType dtype, const void* src, std::int64_t rows, std::int64_t cols, void* dst, void* workspace,
                        void* stream) {
  const int splits = column_splits(rows, cols);
  const long long per_split = (rows + splits - 1) / splits;
  const GpuStream s = as_stream(stream);
  dispatch_dtype(dtype, "gemm column sums", [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const dim3 grid(unsigned((cols + 31) / 32), unsigned(splits));
    float* partial = splits > 1 ? static_cast<float*>(workspace) : nullptr;
    column_sums_kernel<T><<<grid, dim3(32, 8), 0, s>>>(static_cast<const T*>(src), rows, cols, per_split, partial,
                                                       static_cast<T*>(dst));
    if (splits > 1) {
      finish_column_sums<T><<<grid_for(cols, 256), 256, 0, s>>>(partial, splits, cols, static_cast<T*>(dst));
    }
  });
  check_launch("gemm column sums");
}

void launch_from_f32(DType dtype, const float* src, void* dst, std::int64_t count, void* stream) {
  dispatch_dtype(dtype, "gemm f32 conversion", [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    from_f32_kernel<T><<<grid_for(count, 256), 256, 0, as_stream(stream)>>>(src, static_cast<T*>(dst), count);
  });
  check_launch("gemm f32 conversion");
}

void launch_add_bias(DType dtype, void* out, const void* bias, std::int64_t rows, std::int64_t cols, std::int64_t ld,
                     void* stream) {
  dispatch_dtype(dtype, "gemm bias add", [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    add_bias_kernel<T><<<grid_for(rows * cols, 256), 256, 0, as_stream(stream)>>>(
        static_cast<T*>(out), static_cast<const T*>(bias), rows, cols, ld);
  });
  check_launch("gemm bias add");
}

}  // namespace galley::backends::gpu
