#include "backends/cuda/runtime_check.hpp"

namespace galley::backends::GALLEY_GPU_NS {

std::string error_text(cudaError_t error) {
  const std::string text = cudaGetErrorString(error);
  const std::string name = cudaGetErrorName(error);
  // HIP 5 returns the name as the string; say it once.
  return text == name ? name : text + " (" + name + ")";
}

void throw_error(cudaError_t error, std::string_view call, std::string_view where) {
  const bool oom = error == cudaErrorMemoryAllocation;
  if (oom) {
    // Allocation failures are not sticky: clear them so the next call does not report them again.
    (void)cudaGetLastError();
  }
  std::string message = std::string(vendor::kApi) + std::string(call);
  if (!where.empty()) message += " (" + std::string(where) + ")";
  message += ": " + error_text(error);
  throw Error(oom ? Status::out_of_memory : Status::backend_error, message);
}

std::string device_name(int index) { return std::string(vendor::kBackend) + ":" + std::to_string(index); }

DeviceGuard::DeviceGuard(int index) {
  check(cudaGetDevice(&previous_), "GetDevice", device_name(index));
  if (previous_ != index) {
    check(cudaSetDevice(index), "SetDevice", device_name(index));
    changed_ = true;
  }
}

DeviceGuard::~DeviceGuard() {
  if (changed_) (void)cudaSetDevice(previous_);
}

}  // namespace galley::backends::GALLEY_GPU_NS
