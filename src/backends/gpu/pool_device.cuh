// Device helpers shared by the single-source pooling kernels (pool_kernels.cu, pool_strips.cu):
// window bounds in the index type of a kernel (PyTorch's formulas, as dnn/pool_geometry.hpp), the
// order-free max rule, and 8-channel vector and index accesses.
#pragma once

#include <cstdint>

#include "conv_device.cuh"
#include "pool_kernels.hpp"

namespace galley::backends::gpu::pool_device {
using i64 = long long;

// Index math in I: int when every index and window bound fits (fits_int32), so the divisions that
// split a thread's index into coordinates are 32-bit; long long otherwise.
template <typename I>
struct Span {
  I begin, end, padded_extent;
};

// One axis of the windows, in I.
template <typename I>
struct Axis {
  I in, out, k, s, pad;
  bool adaptive;

  __device__ __forceinline__ Span<I> window(I o) const {
    if (adaptive) {
      const I b = o * in / out;
      const I e = ((o + 1) * in + out - 1) / out;
      return {b, e, e - b};
    }
    const I start = o * s - pad;
    const I stop = min(start + k, in + pad);
    return {max(start, I(0)), min(stop, in), stop - start};
  }
  // The outputs whose windows hold input i: [first, last].
  __device__ __forceinline__ void covering(I i, I& first, I& last) const {
    if (adaptive) {
      first = i * out / in;
      last = min(out - 1, ((i + 1) * out - 1) / in);
      return;
    }
    const I hi = i + pad;
    const I lo = hi - k + 1;
    first = lo <= 0 ? 0 : (lo + s - 1) / s;
    last = min(out - 1, hi / s);
  }
};

template <typename I>
__device__ __forceinline__ Axis<I> axis_h(const PoolParams& p) {
  return {I(p.h), I(p.oh), I(p.kh), I(p.sh), I(p.ph), p.adaptive};
}
template <typename I>
__device__ __forceinline__ Axis<I> axis_w(const PoolParams& p) {
  return {I(p.w), I(p.ow), I(p.kw), I(p.sw), I(p.pw), p.adaptive};
}

template <typename I>
__device__ __forceinline__ float divisor(int mode, const Span<I>& sh, const Span<I>& sw) {
  return mode == 1 ? float(sh.padded_extent) * float(sw.padded_extent)
                   : float(sh.end - sh.begin) * float(sw.end - sw.begin);
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

// V indices: two 16-byte accesses for V == 8 (pool_vector_width checked the alignment).
template <int V>
__device__ __forceinline__ void load_idx(const std::int32_t* p, int (&out)[V]) {
  if constexpr (V == 8) {
    const int4 a = reinterpret_cast<const int4*>(p)[0], b = reinterpret_cast<const int4*>(p)[1];
    const int words[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
    for (int l = 0; l < 8; ++l) out[l] = words[l];
  } else {
#pragma unroll
    for (int l = 0; l < V; ++l) out[l] = p[l];
  }
}
template <int V>
__device__ __forceinline__ void store_idx(std::int32_t* p, const int (&v)[V]) {
  if constexpr (V == 8) {
    reinterpret_cast<int4*>(p)[0] = make_int4(v[0], v[1], v[2], v[3]);
    reinterpret_cast<int4*>(p)[1] = make_int4(v[4], v[5], v[6], v[7]);
  } else {
#pragma unroll
    for (int l = 0; l < V; ++l) p[l] = v[l];
  }
}

// V window tap numbers of one byte each: one 8-byte access for V == 8 (the same alignment check).
template <int V>
__device__ __forceinline__ void load_idx(const std::uint8_t* p, int (&out)[V]) {
  if constexpr (V == 8) {
    const uint2 w = *reinterpret_cast<const uint2*>(p);
#pragma unroll
    for (int l = 0; l < 4; ++l)
      out[l] = int((w.x >> (8 * l)) & 0xffu), out[l + 4] = int((w.y >> (8 * l)) & 0xffu);
  } else {
#pragma unroll
    for (int l = 0; l < V; ++l) out[l] = p[l];
  }
}
template <int V>
__device__ __forceinline__ void store_idx(std::uint8_t* p, const int (&v)[V]) {
  if constexpr (V == 8) {
    uint2 w = make_uint2(0u, 0u);
#pragma unroll
    for (int l = 0; l < 4; ++l) w.x |= unsigned(v[l]) << (8 * l), w.y |= unsigned(v[l + 4]) << (8 * l);
    *reinterpret_cast<uint2*>(p) = w;
  } else {
#pragma unroll
    for (int l = 0; l < V; ++l) p[l] = std::uint8_t(v[l]);
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

}  // namespace galley::backends::gpu::pool_device
