// HIP side of backends/gpu/vendor.hpp: maps the CUDA names the shared sources use onto HIP, as
// ggml-hip does, plus the helpers whose code differs between vendors. Include
// backends/gpu/vendor.hpp, not this file. A cuda* name missing here fails the hip build loudly
// (undeclared identifier), never silently: add it below when a shared source starts using it.
#pragma once

#ifndef GALLEY_GPU_VENDOR_SWITCH
#error "include backends/gpu/vendor.hpp instead"
#endif

#include <hip/hip_fp16.h>
#include <hip/hip_runtime.h>

#include <fstream>
#include <string>

#define GALLEY_GPU_NS hip

// ---- types ----
#define cudaError_t hipError_t
#define cudaStream_t hipStream_t
#define cudaEvent_t hipEvent_t
#define cudaGraph_t hipGraph_t
#define cudaGraphExec_t hipGraphExec_t
#define cudaGraphNode_t hipGraphNode_t
#define cudaDeviceProp hipDeviceProp_t
#define cudaDeviceAttr hipDeviceAttribute_t
#define cudaPointerAttributes hipPointerAttribute_t
#define cudaFuncAttributes hipFuncAttributes
#define cudaMemcpyKind hipMemcpyKind
#define cudaHostFn_t hipHostFn_t
#define CUDART_CB

// ---- error codes and names ----
#define cudaSuccess hipSuccess
#define cudaErrorNotReady hipErrorNotReady
#define cudaErrorMemoryAllocation hipErrorOutOfMemory
#define cudaErrorInvalidValue hipErrorInvalidValue
#define cudaErrorInsufficientDriver hipErrorInsufficientDriver
#define cudaErrorNoDevice hipErrorNoDevice
#define cudaErrorNoKernelImageForDevice hipErrorNoBinaryForGpu
#define cudaErrorIllegalAddress hipErrorIllegalAddress
#define cudaErrorCudartUnloading hipErrorDeinitialized
#define cudaGetErrorString hipGetErrorString
#define cudaGetErrorName hipGetErrorName
#define cudaGetLastError hipGetLastError
#define cudaPeekAtLastError hipPeekAtLastError

// ---- devices ----
#define cudaGetDeviceCount hipGetDeviceCount
#define cudaGetDevice hipGetDevice
#define cudaSetDevice hipSetDevice
#define cudaGetDeviceProperties hipGetDeviceProperties
#define cudaDeviceGetAttribute hipDeviceGetAttribute
#define cudaDevAttrClockRate hipDeviceAttributeClockRate
#define cudaDevAttrMemoryClockRate hipDeviceAttributeMemoryClockRate
#define cudaDevAttrMultiProcessorCount hipDeviceAttributeMultiprocessorCount
#define cudaDevAttrMaxSharedMemoryPerBlockOptin hipDeviceAttributeSharedMemPerBlockOptin
#define cudaDeviceSynchronize hipDeviceSynchronize
#define cudaDriverGetVersion hipDriverGetVersion
#define cudaRuntimeGetVersion hipRuntimeGetVersion
#define cudaMemGetInfo hipMemGetInfo

// ---- memory ----
#define cudaMalloc hipMalloc
#define cudaFree hipFree
#define cudaHostAlloc hipHostMalloc
#define cudaHostAllocPortable hipHostMallocPortable
#define cudaHostAllocDefault hipHostMallocDefault
#define cudaFreeHost hipHostFree
#define cudaPointerGetAttributes hipPointerGetAttributes
#define cudaMemcpy hipMemcpy
#define cudaMemcpyAsync hipMemcpyAsync
#define cudaMemsetAsync hipMemsetAsync
#define cudaMemcpyHostToDevice hipMemcpyHostToDevice
#define cudaMemcpyDeviceToHost hipMemcpyDeviceToHost
#define cudaMemcpyDeviceToDevice hipMemcpyDeviceToDevice
#define cudaMemcpyHostToHost hipMemcpyHostToHost
#define cudaMemcpyDefault hipMemcpyDefault

// ---- streams, events, host callbacks ----
#define cudaStreamCreateWithFlags hipStreamCreateWithFlags
#define cudaStreamNonBlocking hipStreamNonBlocking
#define cudaStreamDestroy hipStreamDestroy
#define cudaStreamSynchronize hipStreamSynchronize
#define cudaStreamQuery hipStreamQuery
#define cudaStreamWaitEvent hipStreamWaitEvent
// No cudaLaunchHostFunc: Debian's libamdhip64 5.2 declares hipLaunchHostFunc but does not
// export it; use vendor::launch_host_func.
#define cudaEventCreateWithFlags hipEventCreateWithFlags
#define cudaEventDefault hipEventDefault
#define cudaEventDisableTiming hipEventDisableTiming
#define cudaEventDestroy hipEventDestroy
#define cudaEventRecord hipEventRecord
#define cudaEventQuery hipEventQuery
#define cudaEventSynchronize hipEventSynchronize
#define cudaEventElapsedTime hipEventElapsedTime

// ---- graphs ----
#define cudaStreamBeginCapture hipStreamBeginCapture
#define cudaStreamEndCapture hipStreamEndCapture
#define cudaStreamCaptureModeRelaxed hipStreamCaptureModeRelaxed
#define cudaGraphGetNodes hipGraphGetNodes
#define cudaGraphInstantiate hipGraphInstantiateWithFlags  // CUDA 12's (exec, graph, flags) form
#define cudaGraphLaunch hipGraphLaunch
#define cudaGraphExecDestroy hipGraphExecDestroy
#define cudaGraphDestroy hipGraphDestroy

// ---- kernels ----
#define cudaFuncGetAttributes hipFuncGetAttributes
#define cudaFuncSetAttribute hipFuncSetAttribute
#define cudaFuncAttributeMaxDynamicSharedMemorySize hipFuncAttributeMaxDynamicSharedMemorySize
#define cudaLaunchKernel hipLaunchKernel

namespace galley::backends::vendor {

inline constexpr const char* kBackend = "hip";
inline constexpr const char* kApi = "hip";
inline constexpr const char* kVendor = "AMD";
inline constexpr const char* kRuntimeName = "HIP";

/// "gfx90a:sramecc+:xnack-" -> "gfx90a": the feature suffix does not change which code runs.
inline std::string arch_name(const hipDeviceProp_t& prop) {
  std::string arch = prop.gcnArchName;
  return arch.substr(0, arch.find(':'));
}

/// AMD code objects run only on the exact gfx target they were built for.
inline bool arch_runs_on(const std::string& built, const std::string& device) { return built == device; }

/// HIP_VERSION encoding: major * 10000000 + minor * 100000 + patch.
inline std::string format_version(int version) {
  return std::to_string(version / 10000000) + "." + std::to_string(version / 100000 % 100);
}
inline int version_major(int version) { return version / 10000000; }

inline PointerKind pointer_kind(const void* ptr, int* device = nullptr) {
  if (device != nullptr) *device = -1;
  hipPointerAttribute_t attributes{};
  if (hipPointerGetAttributes(&attributes, ptr) != hipSuccess) {
    // HIP 5 fails on memory it never allocated or registered: that is pageable host memory.
    (void)hipGetLastError();
    return PointerKind::pageable;
  }
  if (attributes.isManaged) return PointerKind::device;
  if (attributes.memoryType == hipMemoryTypeHost) return PointerKind::pinned;
  if (device != nullptr) *device = attributes.device;
  return PointerKind::device;
}

/// The amdgpu kernel module's version when it is loaded and says one.
inline std::string driver_detail() {
  std::ifstream file("/sys/module/amdgpu/version");
  std::string version;
  if (!std::getline(file, version) || version.empty()) return "";
  return "amdgpu " + version;
}

/// Runs Fn(data) on a host thread in stream order. hipStreamAddCallback is the HIP 5.2 call
/// that exists in the library (see the note on cudaLaunchHostFunc above).
template <void (*Fn)(void*)>
inline hipError_t launch_host_func(hipStream_t stream, void* data) {
  return hipStreamAddCallback(
      stream, [](hipStream_t, hipError_t, void* user) { Fn(user); }, data, 0);
}

inline std::string no_device_summary(hipError_t error, int /*driver_version*/, int /*runtime_version*/) {
  if (error == hipErrorInsufficientDriver) return "no AMD GPU driver (amdgpu/kfd) usable by HIP";
  return "no AMD GPU found";
}

}  // namespace galley::backends::vendor
