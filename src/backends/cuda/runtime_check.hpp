// Return-code checking and device selection shared by the cuda and hip runtime glue. Every vendor
// call goes through check(), which turns a failure into galley::Error naming the call (with the
// vendor's prefix: cudaMemcpyAsync / hipMemcpyAsync), the device and the vendor's message.
#pragma once

#include <string>
#include <string_view>

#include "backends/gpu/vendor.hpp"
#include "galley/core/error.hpp"

namespace galley::backends::GALLEY_GPU_NS {

/// "an illegal memory access was encountered (cudaErrorIllegalAddress)".
std::string error_text(cudaError_t error);

/// Throws Error: out_of_memory for allocation failures, backend_error otherwise. `call` is the
/// vendor call without its prefix ("MemcpyAsync"); `where` names the device and what was asked.
[[noreturn]] void throw_error(cudaError_t error, std::string_view call, std::string_view where);

inline void check(cudaError_t error, std::string_view call, std::string_view where) {
  if (error != cudaSuccess) throw_error(error, call, where);
}

/// "cuda:0" / "hip:0".
std::string device_name(int index);

/// Makes `index` the calling thread's current device for its lifetime and restores the previous
/// one, so a caller's own device choice survives a call into Galley.
class DeviceGuard {
 public:
  explicit DeviceGuard(int index);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
  bool changed_ = false;
};

}  // namespace galley::backends::GALLEY_GPU_NS
