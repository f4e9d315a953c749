// The per-device cuDNN handle shared by every cuDNN solver (cuda.conv.cudnn, cuda.conv.cudnn_graph).
#pragma once

#include <cudnn.h>

#include <mutex>
#include <string_view>

#include "backends/cuda/stream_identity.hpp"
#include "galley/dnn/conv_solver.hpp"
#include "galley/runtime/device.hpp"

namespace galley::backends::cuda {

/// One cuDNN handle per device; callers hold `mutex` around set_stream() and the call that uses it.
struct CudnnHandle {
  std::mutex mutex;
  cudnnHandle_t handle = nullptr;
  StreamIdentity stream;  // what the handle was last set to

  /// cudnnSetStream, only when the stream differs from the last one set: a network's calls come on
  /// one stream, and a call that changes nothing is host time on every layer. `galley_id` is the
  /// Galley stream's id(), 0 for a private stream (always set). `mutex` held.
  cudnnStatus_t set_stream(cudaStream_t s, std::uint64_t galley_id = 0) {
    if (stream.same_as(s, galley_id)) return CUDNN_STATUS_SUCCESS;
    const cudnnStatus_t st = cudnnSetStream(handle, s);
    if (st != CUDNN_STATUS_SUCCESS) stream.forget();
    return st;
  }
};

/// The device's handle, created on first use. Never destroyed: at process exit the CUDA context may
/// already be gone and cudnnDestroy could fault (PyTorch leaks its handles for the same reason).
CudnnHandle& cudnn_handle(const runtime::Device& device);

/// What both cuDNN solvers require before asking cuDNN anything: a cuda device, a forward problem,
/// f32, f16 or bf16, and sizes within 32-bit indexing. A "no" carries the reason.
dnn::Applicability cudnn_can_take(const dnn::ConvProblem& problem, const runtime::Device& device);

/// Throws Error(backend_error) "<who>: <call>: <cuDNN message>" unless `status` is success.
void check_cudnn_status(cudnnStatus_t status, std::string_view who, std::string_view call);

}  // namespace galley::backends::cuda
