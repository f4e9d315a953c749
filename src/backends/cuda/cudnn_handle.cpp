#include "backends/cuda/cudnn_handle.hpp"
#include "backends/cuda/vendor_exit.hpp"

#include <map>
#include <memory>
#include <string>

#include "backends/cuda/runtime_check.hpp"
#include "backends/gpu/conv_params.hpp"
#include "galley/core/error.hpp"

namespace galley::backends::cuda {

dnn::Applicability cudnn_can_take(const dnn::ConvProblem& p, const runtime::Device& device) {
  using dnn::Applicability;
  if (device.backend() != "cuda") return Applicability::no("runs on cuda devices, not " + device.name());
  if (p.direction != dnn::ConvDirection::forward) return Applicability::no("forward only");
  if (p.dtype != DType::f32 && p.dtype != DType::f16 && p.dtype != DType::bf16)
    return Applicability::no(std::string("dtype ") + to_string(p.dtype) + " (needs f32, f16 or bf16)");
  try {
    const gpu::ConvParams cp = gpu::make_params(p);
    if (auto why = gpu::too_large_for_int32(cp); !why.empty()) return Applicability::no(why);
  } catch (const Error& e) {
    return Applicability::no(e.what());
  }
  return Applicability::yes();
}

void check_cudnn_status(cudnnStatus_t status, std::string_view who, std::string_view call) {
  if (status != CUDNN_STATUS_SUCCESS) {
    throw Error(Status::backend_error,
                std::string(who) + ": " + std::string(call) + ": " + cudnnGetErrorString(status));
  }
}

CudnnHandle& cudnn_handle(const runtime::Device& device) {
  static std::mutex mutex;
  // Freeing these structs at exit is harmless: CudnnHandle has no destructor that calls cuDNN; the
  // handles themselves are destroyed by release_at_exit before the CUDA runtime goes.
  static std::map<int, std::unique_ptr<CudnnHandle>> handles;
  std::lock_guard lock(mutex);
  auto& slot = handles[device.index()];
  if (!slot) {
    auto created = std::make_unique<CudnnHandle>();
    DeviceGuard guard(device.index());
    check_cudnn_status(cudnnCreate(&created->handle), "cudnn", "cudnnCreate");
    release_at_exit([h = created->handle] { cudnnDestroy(h); });
    slot = std::move(created);
  }
  return *slot;
}

}  // namespace galley::backends::cuda
