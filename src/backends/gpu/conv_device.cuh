// Device-side helpers shared by the single-source conv kernels: the vendor runtime header, the
// element types (f16/bf16 are storage, f32 is math), vector loads and launch-error checks.
// This is the one place in the conv kernels that knows whether it is compiled by nvcc or hipcc;
// the plugin's own alias header may also be force-included, which is harmless here because this
// file only calls vendor functions through the small wrappers below.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string>
#include <type_traits>

#if defined(__HIPCC__) || defined(GALLEY_HIP)
#define GALLEY_GPU_HIP 1
#include <hip/hip_fp16.h>
#include <hip/hip_runtime.h>
#else
#define GALLEY_GPU_HIP 0
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#endif

#include "conv_params.hpp"
#include "galley/core/error.hpp"

namespace galley::backends::gpu {

#if GALLEY_GPU_HIP
using GpuStream = hipStream_t;
#else
using GpuStream = cudaStream_t;
#endif

/// Throws Error(backend_error) naming `what` if the last launch failed.
inline void check_launch(const char* what) {
#if GALLEY_GPU_HIP
  hipError_t e = hipGetLastError();
  if (e != hipSuccess)
    throw Error(Status::backend_error, std::string(what) + ": kernel launch failed: " + hipGetErrorString(e));
#else
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    throw Error(Status::backend_error, std::string(what) + ": kernel launch failed: " + cudaGetErrorString(e));
#endif
}

/// Lets `kernel` use `bytes` of dynamic shared memory (above the 48 KiB default).
template <typename Kernel>
inline void allow_dynamic_smem(Kernel kernel, int bytes, const char* what) {
#if GALLEY_GPU_HIP
  (void)kernel;
  (void)bytes;
  (void)what;  // gfx90a has 64 KiB of LDS per block and no opt-in
#else
  cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (e != cudaSuccess)
    throw Error(Status::backend_error, std::string(what) + ": cudaFuncSetAttribute(" +
                                           std::to_string(bytes) + " bytes): " + cudaGetErrorString(e));
#endif
}

#if !GALLEY_GPU_HIP
/// Runs `set_attributes` the first time a launcher reaches it on the current device: kernel
/// attributes are driver calls, too slow for every launch. `done` holds one bit per device; the
/// caller keeps it static, one per kernel. The bit is set only after `set_attributes` returned, so
/// a call that threw is tried again by the next launch.
template <typename SetAttributes>
inline void once_per_device(std::atomic<std::uint64_t>& done, SetAttributes set_attributes) {
  int device = 0;
  (void)cudaGetDevice(&device);
  const std::uint64_t bit = std::uint64_t(1) << (device & 63);
  if ((done.load(std::memory_order_relaxed) & bit) != 0) return;
  set_attributes();
  done.fetch_or(bit, std::memory_order_relaxed);
}
#endif

inline GpuStream as_stream(void* stream) { return static_cast<GpuStream>(stream); }

/// Whether a 16-byte vector load or store may use `p`.
inline bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

/// Makes device `index` current while launching (kernels go to the current device, whatever the
/// stream's), restoring the caller's choice afterwards.
class ScopedDevice {
 public:
  explicit ScopedDevice(int index) {
#if GALLEY_GPU_HIP
    if (hipGetDevice(&previous_) == hipSuccess && previous_ != index && hipSetDevice(index) == hipSuccess) changed_ = true;
#else
    if (cudaGetDevice(&previous_) == cudaSuccess && previous_ != index && cudaSetDevice(index) == cudaSuccess)
      changed_ = true;
#endif
  }
  ~ScopedDevice() {
#if GALLEY_GPU_HIP
    if (changed_) (void)hipSetDevice(previous_);
#else
    if (changed_) (void)cudaSetDevice(previous_);
#endif
  }
  ScopedDevice(const ScopedDevice&) = delete;
  ScopedDevice& operator=(const ScopedDevice&) = delete;

 private:
  int previous_ = -1;
  bool changed_ = false;
};

/// bfloat16 storage: the raw 16 bits, converted with integer ops so both vendors' code agrees.
struct bf16_t {
  std::uint16_t bits;
};

__device__ __forceinline__ float to_f32(float v) { return v; }
__device__ __forceinline__ float to_f32(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_f32(bf16_t v) { return __uint_as_float(std::uint32_t(v.bits) << 16); }

template <typename T>
__device__ __forceinline__ T from_f32(float v);
template <>
__device__ __forceinline__ float from_f32<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __half from_f32<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __forceinline__ bf16_t from_f32<bf16_t>(float v) {
  std::uint32_t u = __float_as_uint(v);
  if ((u & 0x7fffffffu) > 0x7f800000u) return bf16_t{std::uint16_t((u >> 16) | 0x40u)};  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);                                                  // round to nearest even
  return bf16_t{std::uint16_t(u >> 16)};
}

/// Unpacks a 32-bit word holding two 16-bit values of type T into floats.
__device__ __forceinline__ float2 unpack2(std::uint32_t v, __half*) {
  return make_float2(__half2float(__ushort_as_half(std::uint16_t(v & 0xffffu))),
                     __half2float(__ushort_as_half(std::uint16_t(v >> 16))));
}
__device__ __forceinline__ float2 unpack2(std::uint32_t v, bf16_t*) {
  return make_float2(__uint_as_float(v << 16), __uint_as_float(v & 0xffff0000u));
}
__device__ __forceinline__ std::uint16_t bits16(__half v) { return __half_as_ushort(v); }
__device__ __forceinline__ std::uint16_t bits16(bf16_t v) { return v.bits; }
template <typename T>
__device__ __forceinline__ std::uint32_t pack2(float a, float b) {
  return std::uint32_t(bits16(from_f32<T>(a))) | (std::uint32_t(bits16(from_f32<T>(b))) << 16);
}

/// 8 consecutive elements of T as floats, from a 16-byte (f16/bf16) or 32-byte (f32) aligned address.
template <typename T>
__device__ __forceinline__ void load8(const T* ptr, float (&out)[8]) {
  const uint4 v = __ldg(reinterpret_cast<const uint4*>(ptr));
  const std::uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float2 f = unpack2(words[i], static_cast<T*>(nullptr));
    out[2 * i] = f.x;
    out[2 * i + 1] = f.y;
  }
}
template <>
__device__ __forceinline__ void load8<float>(const float* ptr, float (&out)[8]) {
  const float4 a = __ldg(reinterpret_cast<const float4*>(ptr));
  const float4 b = __ldg(reinterpret_cast<const float4*>(ptr) + 1);
  out[0] = a.x, out[1] = a.y, out[2] = a.z, out[3] = a.w;
  out[4] = b.x, out[5] = b.y, out[6] = b.z, out[7] = b.w;
}

/// Stores 8 floats as T at a 16-byte (f16/bf16) or 32-byte (f32) aligned address.
template <typename T>
__device__ __forceinline__ void store8(T* ptr, const float (&v)[8]) {
  uint4 o;
  o.x = pack2<T>(v[0], v[1]);
  o.y = pack2<T>(v[2], v[3]);
  o.z = pack2<T>(v[4], v[5]);
  o.w = pack2<T>(v[6], v[7]);
  *reinterpret_cast<uint4*>(ptr) = o;
}
template <>
__device__ __forceinline__ void store8<float>(float* ptr, const float (&v)[8]) {
  reinterpret_cast<float4*>(ptr)[0] = make_float4(v[0], v[1], v[2], v[3]);
  reinterpret_cast<float4*>(ptr)[1] = make_float4(v[4], v[5], v[6], v[7]);
}

template <typename T>
__device__ __forceinline__ float ldg_f32(const T* ptr) {
  return to_f32(*ptr);
}
template <>
__device__ __forceinline__ float ldg_f32<float>(const float* ptr) {
  return __ldg(ptr);
}

/// Calls f.template operator()<T>() with the element type of `dtype` (f32, f16 or bf16).
template <typename F>
inline void dispatch_dtype(DType dtype, const char* what, F&& f) {
  switch (dtype) {
    case DType::f32: f(static_cast<float*>(nullptr)); return;
    case DType::f16: f(static_cast<__half*>(nullptr)); return;
    case DType::bf16: f(static_cast<bf16_t*>(nullptr)); return;
    default: break;
  }
  throw Error(Status::unsupported, std::string(what) + ": dtype " + to_string(dtype) + " is not supported");
}

inline int ceil_div(std::int64_t a, std::int64_t b) { return int((a + b - 1) / b); }

}  // namespace galley::backends::gpu
