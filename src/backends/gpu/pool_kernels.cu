// The single-source pooling kernels. Window bounds follow dnn/pool_geometry.hpp exactly (PyTorch's
// formulas), and the max rule is the problem's: scanning a window row by row, an element takes
// over when it is greater or NaN. Backward is a gather (each input sums what the outputs whose
// windows hold it send it), so there are no atomics and the result is deterministic.
#include "conv_device.cuh"
#include "galley/dnn/pool.hpp"
#include "pool_kernels.hpp"

namespace galley::backends::gpu {
namespace {

using i64 = long long;

struct Span {
  i64 begin, end, padded_extent;
};

__device__ __forceinline__ Span window_of(i64 o, i64 in, i64 out, i64 k, i64 s, i64 pad, bool adaptive) {
  if (adaptive) {
    const i64 b = o * in / out;
    const i64 e = ((o + 1) * in + out - 1) / out;
    return {b, e, e - b};
  }
  const i64 start = o * s - pad;
  const i64 stop = min(start + k, in + pad);
  return {max(start, i64(0)), min(stop, in), stop - start};
}

__device__ __forceinline__ void covering(i64 i, i64 in, i64 out, i64 k, i64 s, i64 pad, bool adaptive, i64& first,
                                         i64& last) {
  if (adaptive) {
    first = i * out / in;
    last = min(out - 1, ((i + 1) * out - 1) / in);
    return;
  }
  const i64 hi = i + pad;
  const i64 lo = hi - k + 1;
  first = lo <= 0 ? 0 : (lo + s - 1) / s;
  last = min(out - 1, hi / s);
}

__device__ __forceinline__ float divisor(int mode, const Span& sh, const Span& sw) {
  return mode == 1 ? float(sh.padded_extent * sw.padded_extent) : float((sh.end - sh.begin) * (sw.end - sw.begin));
}

// V elements as floats: V == 8 is one 16-byte load for f16/bf16 (two for f32), V == 1 a scalar.
template <typename T, int V>
__device__ __forceinline__ void load_v(const T* p, float (&out)[V]) {
  if constexpr (V == 8) {
    load8<T>(p, out);
  } else {
#pragma unroll
    for (int l = 0; l < V; ++l) out[l] = ldg_f32(p + l);
  }
}
template <typename T, int V>
__device__ __forceinline__ void store_v(T* p, const float (&v)[V]) {
  if constexpr (V == 8) {
    store8<T>(p, v);
  } else {
#pragma unroll
    for (int l = 0; l < V; ++l) p[l] = from_f32<T>(v[l]);
  }
}

// Whether candidate (v, i) beats the current (best, at) under the sequential rule, in a form that
// does not depend on visiting order: a NaN beats any number and a later NaN, a larger value wins,
// and among equal values the first position does.
__device__ __forceinline__ bool beats(float v, int i, float best, int at) {
  if (v != v) return best == best || i > at;
  if (best != best) return false;
  return v > best || (v == best && i < at);
}

template <typename T, int V, bool kNhwc>
__global__ void pool_forward_kernel(PoolParams p, const T* __restrict__ x, T* __restrict__ y,
                                    std::int32_t* __restrict__ idx, i64 total) {
  const i64 cvecs = p.c / V;
  for (i64 t = i64(blockIdx.x) * blockDim.x + threadIdx.x; t < total; t += i64(gridDim.x) * blockDim.x) {
    i64 n, c, oh, ow, out, base, hs, ws;
    if (kNhwc) {
      c = (t % cvecs) * V;
      i64 r = t / cvecs;
      ow = r % p.ow;
      r /= p.ow;
      oh = r % p.oh;
      n = r / p.oh;
      out = ((n * p.oh + oh) * p.ow + ow) * p.c + c;
      base = n * p.h * p.w * p.c + c;
      hs = p.w * p.c;
      ws = p.c;
    } else {
      ow = t % p.ow;
      i64 r = t / p.ow;
      oh = r % p.oh;
      r /= p.oh;
      c = r % p.c;
      n = r / p.c;
      out = t;
      base = (n * p.c + c) * p.h * p.w;
      hs = p.w;
      ws = 1;
    }
    const Span sh = window_of(oh, p.h, p.oh, p.kh, p.sh, p.ph, p.adaptive);
    const Span sw = window_of(ow, p.w, p.ow, p.kw, p.sw, p.pw, p.adaptive);
    float acc[V];
    if (p.mode == 0) {
      int at[V];
      const int first = int(sh.begin * p.w + sw.begin);
#pragma unroll
      for (int l = 0; l < V; ++l) acc[l] = -INFINITY, at[l] = first;
      for (i64 ih = sh.begin; ih < sh.end; ++ih) {
        for (i64 iw = sw.begin; iw < sw.end; ++iw) {
          float v[V];
          load_v<T, V>(x + base + ih * hs + iw * ws, v);
          const int pos = int(ih * p.w + iw);
#pragma unroll
          for (int l = 0; l < V; ++l) {
            if (v[l] > acc[l] || v[l] != v[l]) acc[l] = v[l], at[l] = pos;
          }
        }
      }
      if (y != nullptr) store_v<T, V>(y + out, acc);
      if (idx != nullptr) {
#pragma unroll
        for (int l = 0; l < V; ++l) idx[out + l] = at[l];
      }
    } else {
#pragma unroll
      for (int l = 0; l < V; ++l) acc[l] = 0.f;
      for (i64 ih = sh.begin; ih < sh.end; ++ih) {
        for (i64 iw = sw.begin; iw < sw.end; ++iw) {
          float v[V];
          load_v<T, V>(x + base + ih * hs + iw * ws, v);
#pragma unroll
          for (int l = 0; l < V; ++l) acc[l] += v[l];
        }
      }
      const float d = divisor(p.mode, sh, sw);
#pragma unroll
      for (int l = 0; l < V; ++l) acc[l] /= d;
      store_v<T, V>(y + out, acc);
    }
  }
}

template <typename T, int V, bool kNhwc, bool kMax>
__global__ void pool_backward_kernel(PoolParams p, const T* __restrict__ dy, const std::int32_t* __restrict__ idx,
                                     T* __restrict__ dx, i64 total) {
  const i64 cvecs = p.c / V;
  for (i64 t = i64(blockIdx.x) * blockDim.x + threadIdx.x; t < total; t += i64(gridDim.x) * blockDim.x) {
    i64 n, c, ih, iw, in_off;
    if (kNhwc) {
      c = (t % cvecs) * V;
      i64 r = t / cvecs;
      iw = r % p.w;
      r /= p.w;
      ih = r % p.h;
      n = r / p.h;
      in_off = ((n * p.h + ih) * p.w + iw) * p.c + c;
    } else {
      iw = t % p.w;
      i64 r = t / p.w;
      ih = r % p.h;
      r /= p.h;
      c = r % p.c;
      n = r / p.c;
      in_off = t;
    }
    i64 oh0, oh1, ow0, ow1;
    covering(ih, p.h, p.oh, p.kh, p.sh, p.ph, p.adaptive, oh0, oh1);
    covering(iw, p.w, p.ow, p.kw, p.sw, p.pw, p.adaptive, ow0, ow1);
    const int pos = int(ih * p.w + iw);
    float acc[V];
#pragma unroll
    for (int l = 0; l < V; ++l) acc[l] = 0.f;
    for (i64 oh = oh0; oh <= oh1; ++oh) {
      const Span sh = window_of(oh, p.h, p.oh, p.kh, p.sh, p.ph, p.adaptive);
      for (i64 ow = ow0; ow <= ow1; ++ow) {
        const i64 o = kNhwc ? ((n * p.oh + oh) * p.ow + ow) * p.c + c : ((n * p.c + c) * p.oh + oh) * p.ow + ow;
        float g[V];
        load_v<T, V>(dy + o, g);
        if (kMax) {
#pragma unroll
          for (int l = 0; l < V; ++l) acc[l] += idx[o + l] == pos ? g[l] : 0.f;
        } else {
          const float d = divisor(p.mode, sh, window_of(ow, p.w, p.ow, p.kw, p.sw, p.pw, p.adaptive));
#pragma unroll
          for (int l = 0; l < V; ++l) acc[l] += g[l] / d;
        }
      }
    }
    store_v<T, V>(dx + in_off, acc);
  }
}

// Global nchw: one warp per plane, lanes striding over it (coalesced), then a shuffle tree.
template <typename T>
__global__ void pool_global_nchw_kernel(PoolParams p, const T* __restrict__ x, T* __restrict__ y,
                                        std::int32_t* __restrict__ idx) {
  const int lane = threadIdx.x & 31;
  const i64 plane = i64(blockIdx.x) * (blockDim.x / 32) + (threadIdx.x >> 5);
  if (plane >= p.n * p.c) return;
  const i64 hw = p.h * p.w;
  const T* xp = x + plane * hw;
  if (p.mode == 0) {
    float best = -INFINITY;
    int at = 0x7fffffff;
    for (i64 i = lane; i < hw; i += 32) {
      const float v = ldg_f32(xp + i);
      if (beats(v, int(i), best, at)) best = v, at = int(i);
    }
    for (int off = 16; off > 0; off >>= 1) {
#if GALLEY_GPU_HIP
      const float ob = __shfl_down(best, off);
      const int oa = __shfl_down(at, off);
#else
      const float ob = __shfl_down_sync(0xffffffffu, best, off);
      const int oa = __shfl_down_sync(0xffffffffu, at, off);
#endif
      if (beats(ob, oa, best, at)) best = ob, at = oa;
    }
    if (lane == 0) {
      if (y != nullptr) y[plane] = from_f32<T>(best);
      if (idx != nullptr) idx[plane] = at;
    }
  } else {
    float sum = 0.f;
    for (i64 i = lane; i < hw; i += 32) sum += ldg_f32(xp + i);
    for (int off = 16; off > 0; off >>= 1) {
#if GALLEY_GPU_HIP
      sum += __shfl_down(sum, off);
#else
      sum += __shfl_down_sync(0xffffffffu, sum, off);
#endif
    }
    if (lane == 0) y[plane] = from_f32<T>(sum / float(hw));
  }
}

// Global nhwc: a block holds 32 channels of one image (threadIdx.x, coalesced) and 8 pixel rows
// (threadIdx.y) striding over the plane; shared memory merges the rows.
constexpr int kGlobalRows = 8;
template <typename T>
__global__ void pool_global_nhwc_kernel(PoolParams p, const T* __restrict__ x, T* __restrict__ y,
                                        std::int32_t* __restrict__ idx) {
  __shared__ float vals[kGlobalRows][32];
  __shared__ int ats[kGlobalRows][32];
  const i64 n = blockIdx.y;
  const i64 c = i64(blockIdx.x) * 32 + threadIdx.x;
  const i64 hw = p.h * p.w;
  const bool live = c < p.c;
  const T* xp = x + n * hw * p.c + c;
  float best = p.mode == 0 ? -INFINITY : 0.f;
  int at = 0x7fffffff;
  if (live) {
    for (i64 i = threadIdx.y; i < hw; i += kGlobalRows) {
      const float v = ldg_f32(xp + i * p.c);
      if (p.mode != 0) {
        best += v;
      } else if (beats(v, int(i), best, at)) {
        best = v, at = int(i);
      }
    }
  }
  vals[threadIdx.y][threadIdx.x] = best;
  ats[threadIdx.y][threadIdx.x] = at;
  __syncthreads();
  if (threadIdx.y != 0 || !live) return;
  for (int r = 1; r < kGlobalRows; ++r) {
    const float v = vals[r][threadIdx.x];
    const int a = ats[r][threadIdx.x];
    if (p.mode != 0) {
      best += v;
    } else if (beats(v, a, best, at)) {
      best = v, at = a;
    }
  }
  const i64 o = n * p.c + c;
  if (p.mode != 0) best /= float(hw);
  if (y != nullptr) y[o] = from_f32<T>(best);
  if (p.mode == 0 && idx != nullptr) idx[o] = at;
}

unsigned grid_for(i64 total, int threads) {
  // Grid-stride loops: cap the grid so huge tensors still launch on both vendors.
  return unsigned(std::min<i64>((total + threads - 1) / threads, 65535LL * 32));
}

}  // namespace

PoolParams make_pool_params(const dnn::PoolProblem& problem) {
  problem.validate();
  PoolParams p;
  p.n = problem.n, p.c = problem.c, p.h = problem.h, p.w = problem.w;
  p.oh = problem.out_h(), p.ow = problem.out_w();
  p.adaptive = problem.window != dnn::PoolWindow::kernel;
  if (!p.adaptive) {
    p.kh = problem.kernel_h, p.kw = problem.kernel_w;
    p.sh = problem.stride_h, p.sw = problem.stride_w;
    p.ph = problem.pad_h, p.pw = problem.pad_w;
  }
  p.mode = problem.mode == dnn::PoolMode::max ? 0 : problem.mode == dnn::PoolMode::avg_include_pad ? 1 : 2;
  p.nhwc = problem.layout == dnn::Layout::nhwc;
  p.dtype = problem.dtype;
  return p;
}

int pool_vector_width(const PoolParams& p, const void* const* pointers, int count) {
  if (!p.nhwc || p.c % 8 != 0) return 1;
  for (int i = 0; i < count; ++i) {
    if (pointers[i] != nullptr && reinterpret_cast<std::uintptr_t>(pointers[i]) % 16 != 0) return 1;
  }
  return 8;
}

void launch_pool_forward(const PoolParams& p, const void* x, void* y, std::int32_t* idx, int vec, void* stream) {
  constexpr int kThreads = 256;
  const i64 total = p.out_elems() / vec;
  dispatch_dtype(p.dtype, "gpu.pool.direct", [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    auto kernel = !p.nhwc ? pool_forward_kernel<T, 1, false>
                  : vec == 8 ? pool_forward_kernel<T, 8, true>
                             : pool_forward_kernel<T, 1, true>;
    kernel<<<grid_for(total, kThreads), kThreads, 0, as_stream(stream)>>>(p, static_cast<const T*>(x),
                                                                         static_cast<T*>(y), idx, total);
  });
  check_launch("gpu.pool.direct (forward)");
}

void launch_pool_backward(const PoolParams& p, const void* dy, const std::int32_t* idx, void* dx, int vec,
                          void* stream) {
  constexpr int kThreads = 256;
  const i64 total = p.in_elems() / vec;
  const bool is_max = p.mode == 0;
  dispatch_dtype(p.dtype, "gpu.pool.direct", [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    auto kernel = is_max ? (!p.nhwc   ? pool_backward_kernel<T, 1, false, true>
                            : vec == 8 ? pool_backward_kernel<T, 8, true, true>
                                       : pool_backward_kernel<T, 1, true, true>)
                         : (!p.nhwc   ? pool_backward_kernel<T, 1, false, false>
                            : vec == 8 ? pool_backward_kernel<T, 8, true, false>
                                       : pool_backward_kernel<T, 1, true, false>);
    kernel<<<grid_for(total, kThreads), kThreads, 0, as_stream(stream)>>>(p, static_cast<const T*>(dy), idx,
                                                                         static_cast<T*>(dx), total);
  });
  check_launch("gpu.pool.direct (backward)");
}

void launch_pool_global_forward(const PoolParams& p, const void* x, void* y, std::int32_t* idx, void* stream) {
  dispatch_dtype(p.dtype, "gpu.pool.global", [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    if (p.nhwc) {
      const dim3 block(32, kGlobalRows);
      const dim3 grid(unsigned((p.c + 31) / 32), unsigned(p.n));
      pool_global_nhwc_kernel<T><<<grid, block, 0, as_stream(stream)>>>(p, static_cast<const T*>(x),
                                                                          static_cast<T*>(y), idx);
    } else {
      constexpr int kThreads = 256;
      const i64 planes = p.n * p.c;
      const unsigned blocks = unsigned((planes + kThreads / 32 - 1) / (kThreads / 32));
      pool_global_nchw_kernel<T><<<blocks, kThreads, 0, as_stream(stream)>>>(p, static_cast<const T*>(x),
                                                                             static_cast<T*>(y), idx);
    }
  });
  check_launch("gpu.pool.global");
}

}  // namespace galley::backends::gpu
