// CUDA side of backends/gpu/vendor.hpp: the real cuda* names plus the helpers whose code differs
// between vendors. Include backends/gpu/vendor.hpp, not this file.
#pragma once

#ifndef GALLEY_GPU_VENDOR_SWITCH
#error "include backends/gpu/vendor.hpp instead"
#endif

#include <cuda_runtime.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#define GALLEY_GPU_NS cuda

namespace galley::backends::vendor {

inline constexpr const char* kBackend = "cuda";
inline constexpr const char* kApi = "cuda";  // prefix of the runtime calls named in errors
inline constexpr const char* kVendor = "NVIDIA";
inline constexpr const char* kRuntimeName = "CUDA";

inline std::string arch_name(const cudaDeviceProp& prop) {
  return "sm_" + std::to_string(prop.major) + std::to_string(prop.minor);
}

/// Machine code (sm_XY) runs on devices of the same major version and an equal or higher minor
/// one; PTX (compute_XY) is compiled by the driver for any device at least that new.
inline bool arch_runs_on(const std::string& built, const std::string& device) {
  const auto digits = [](const std::string& s, std::size_t from) {
    return s.size() > from ? std::atoi(s.c_str() + from) : -1;
  };
  if (device.rfind("sm_", 0) != 0) return false;
  const int dev = digits(device, 3);
  if (built.rfind("sm_", 0) == 0) {
    const int b = digits(built, 3);
    return b / 10 == dev / 10 && b % 10 <= dev % 10;
  }
  if (built.rfind("compute_", 0) == 0) return digits(built, 8) <= dev;
  return false;
}

/// 13000 -> "13.0", 12040 -> "12.4" (cudaDriverGetVersion / cudaRuntimeGetVersion encoding).
inline std::string format_version(int version) {
  return std::to_string(version / 1000) + "." + std::to_string((version % 1000) / 10);
}
inline int version_major(int version) { return version / 1000; }

/// What `ptr` points at; for device memory `*device` gets its device (-1 for managed memory,
/// which every device reaches).
inline PointerKind pointer_kind(const void* ptr, int* device = nullptr) {
  if (device != nullptr) *device = -1;
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, ptr) != cudaSuccess) {
    // Older runtimes fail on pointers they never saw; clear the (non-sticky) error they leave.
    (void)cudaGetLastError();
    return PointerKind::pageable;
  }
  switch (attributes.type) {
    case cudaMemoryTypeHost:
      return PointerKind::pinned;
    case cudaMemoryTypeDevice:
      if (device != nullptr) *device = attributes.device;
      return PointerKind::device;
    case cudaMemoryTypeManaged:
      return PointerKind::device;
    default:
      return PointerKind::pageable;
  }
}

/// The kernel module's version ("580.159.04"), which nvidia-smi calls the driver version. The line
/// reads "NVRM version: NVIDIA UNIX [Open ]Kernel Module [for x86_64]  580.159.04  Release Build ...".
inline std::string driver_detail() {
  std::ifstream file("/proc/driver/nvidia/version");
  std::string line;
  if (!std::getline(file, line)) return "";
  const auto at = line.find("Kernel Module");
  if (at == std::string::npos) return "";
  std::istringstream words(line.substr(at));
  for (std::string word; words >> word;) {
    if (!word.empty() && std::isdigit(static_cast<unsigned char>(word[0])) &&
        word.find('.') != std::string::npos) {
      return "kernel module " + word;
    }
  }
  return "";
}

/// Runs Fn(data) on a host thread in stream order (captured as a host node in a graph).
template <void (*Fn)(void*)>
inline cudaError_t launch_host_func(cudaStream_t stream, void* data) {
  return cudaLaunchHostFunc(stream, Fn, data);
}

/// Why cudaGetDeviceCount found nothing, in words a user can act on.
inline std::string no_device_summary(cudaError_t error, int driver_version, int runtime_version) {
  if (error == cudaErrorInsufficientDriver) {
    if (driver_version == 0) return "no NVIDIA driver found (libcuda.so.1 could not be loaded)";
    return "NVIDIA driver too old: CUDA runtime " + format_version(runtime_version) +
           " needs driver >= " + std::to_string(version_major(runtime_version)) + ".0, driver " +
           format_version(driver_version);
  }
  if (error == cudaErrorNoDevice || error == cudaSuccess) return "no NVIDIA GPU found";
  return "CUDA unavailable";
}

}  // namespace galley::backends::vendor
