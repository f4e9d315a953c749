// Device helpers shared by the data-movement kernels: element casts (raw words for pure moves,
// f32 in between for dtype changes), aligned vectors and type dispatch over a plan's dtypes.
#pragma once

#include <cstdint>
#include <type_traits>

#include "conv_device.cuh"

namespace galley::backends::gpu::datamove {

template <class S, class D>
__device__ __forceinline__ D cast(S v) {
  if constexpr (std::is_same_v<S, D>) {
    return v;
  } else {
    return from_f32<D>(to_f32(v));
  }
}

/// N elements moved as one aligned load or store.
template <class T, int N>
struct alignas(sizeof(T) * N) Vec {
  T v[N];
};

/// The vector width (elements) for S -> D: 16 bytes on the wider side.
template <class S, class D>
constexpr int vec_width() {
  return 16 / (sizeof(S) > sizeof(D) ? sizeof(S) : sizeof(D));
}

inline bool aligned(const void* p, std::size_t bytes) {
  return reinterpret_cast<std::uintptr_t>(p) % bytes == 0;
}

/// Calls f(S*, D*) with a plan's element types: unsigned words of the element's size when the
/// dtypes agree (any dtype moves as bits), the float types when they differ.
template <class F>
void dispatch_types(DType src, DType dst, const char* what, F&& f) {
  if (src == dst) {
    switch (size_of(src)) {
      case 1:
        return f(static_cast<std::uint8_t*>(nullptr), static_cast<std::uint8_t*>(nullptr));
      case 2:
        return f(static_cast<std::uint16_t*>(nullptr), static_cast<std::uint16_t*>(nullptr));
      case 4:
        return f(static_cast<std::uint32_t*>(nullptr), static_cast<std::uint32_t*>(nullptr));
      default:
        break;
    }
  }
  dispatch_dtype(src, what, [&](auto* s) { dispatch_dtype(dst, what, [&](auto* d) { f(s, d); }); });
}

/// Blocks for a grid-stride loop over `units`: enough to fill the device, no more than needed.
inline unsigned grid_for(std::int64_t units, int threads) {
  const std::int64_t want = (units + threads - 1) / threads;
  return static_cast<unsigned>(want < 1 ? 1 : (want > 65535LL * 16 ? 65535LL * 16 : want));
}

}  // namespace galley::backends::gpu::datamove
