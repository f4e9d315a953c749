#include "backends/cuda/cudnn_handle.hpp"

#include <map>
#include <memory>
#include <string>

#include "backends/cuda/runtime_check.hpp"
#include "galley/core/error.hpp"

namespace galley::backends::cuda {

void check_cudnn_status(cudnnStatus_t status, std::string_view who, std::string_view call) {
  if (status != CUDNN_STATUS_SUCCESS) {
    throw Error(Status::backend_error,
                std::string(who) + ": " + std::string(call) + ": " + cudnnGetErrorString(status));
  }
}

CudnnHandle& cudnn_handle(const runtime::Device& device) {
  static std::mutex mutex;
  // Freeing these structs at exit is harmless: CudnnHandle has no destructor that calls cuDNN.
  static std::map<int, std::unique_ptr<CudnnHandle>> handles;
  std::lock_guard lock(mutex);
  auto& slot = handles[device.index()];
  if (!slot) {
    auto created = std::make_unique<CudnnHandle>();
    DeviceGuard guard(device.index());
    check_cudnn_status(cudnnCreate(&created->handle), "cudnn", "cudnnCreate");
    slot = std::move(created);
  }
  return *slot;
}

}  // namespace galley::backends::cuda
