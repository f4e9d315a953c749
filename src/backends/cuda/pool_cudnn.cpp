// cuda.pool.cudnn: cuDNN's legacy pooling API, the vendor baseline for pooling. It claims what
// cuDNN computes with the problem's own semantics: kernel windows without ceil mode (cuDNN sizes
// outputs by floor), global pooling, adaptive pooling whose windows tile the input evenly; no
// kept indices (cuDNN has none). Max backward needs the forward output too, which the solver
// recomputes into its workspace; it is claimed for f32 only, because where values tie (common in
// f16/bf16) cuDNN may send the gradient to another of the tied maxima than the first, which is
// this library's rule.
#include <cudnn.h>

#include <climits>
#include <memory>
#include <string>

#include "backends/cuda/cudnn_handle.hpp"
#include "backends/cuda/runtime_check.hpp"
#include "backends/cuda/vendor_dtypes.hpp"
#include "backends/cuda/vendor_pool_solvers.hpp"
#include "galley/dnn/pool.hpp"
#include "galley/runtime/device.hpp"
#include "galley/runtime/stream.hpp"

namespace galley::backends::cuda {
namespace {

using dnn::Applicability;
using dnn::PoolProblem;

constexpr const char* kName = "cuda.pool.cudnn";

void check_cudnn(cudnnStatus_t status, const char* call) { check_cudnn_status(status, kName, call); }

// The problem's windows as cuDNN's one kernel / pad / stride, when they are one.
struct Window {
  int kh = 1, kw = 1, ph = 0, pw = 0, sh = 1, sw = 1;
};

std::string window_no(const PoolProblem& p, Window& out) {
  switch (p.window) {
    case dnn::PoolWindow::kernel: {
      PoolProblem floor = p;
      floor.ceil_mode = false;
      if (p.ceil_mode && (floor.out_h() != p.out_h() || floor.out_w() != p.out_w())) {
        return "ceil mode adds a partial window (cuDNN sizes outputs by floor)";
      }
      out = {int(p.kernel_h), int(p.kernel_w), int(p.pad_h), int(p.pad_w), int(p.stride_h), int(p.stride_w)};
      return {};
    }
    case dnn::PoolWindow::global:
      out = {int(p.h), int(p.w), 0, 0, 1, 1};
      return {};
    case dnn::PoolWindow::adaptive:
      if (p.h % p.adaptive_h != 0 || p.w % p.adaptive_w != 0) {
        return "adaptive windows of unequal size (input " + std::to_string(p.h) + "x" + std::to_string(p.w) +
               " is not a multiple of the output " + std::to_string(p.adaptive_h) + "x" +
               std::to_string(p.adaptive_w) + ")";
      }
      out = {int(p.h / p.adaptive_h), int(p.w / p.adaptive_w), 0, 0,
             int(p.h / p.adaptive_h), int(p.w / p.adaptive_w)};
      return {};
  }
  return "unknown window";
}

struct TensorDescriptor {
  cudnnTensorDescriptor_t d = nullptr;
  TensorDescriptor() { check_cudnn(cudnnCreateTensorDescriptor(&d), "cudnnCreateTensorDescriptor"); }
  ~TensorDescriptor() { cudnnDestroyTensorDescriptor(d); }
  TensorDescriptor(const TensorDescriptor&) = delete;
  TensorDescriptor& operator=(const TensorDescriptor&) = delete;
  void set(const PoolProblem& p, std::int64_t h, std::int64_t w) {
    check_cudnn(
        cudnnSetTensor4dDescriptor(d, p.layout == dnn::Layout::nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW,
                                   cudnn_data_type(p.dtype, kName), int(p.n), int(p.c), int(h), int(w)),
        "cudnnSetTensor4dDescriptor");
  }
};

struct PoolingDescriptor {
  cudnnPoolingDescriptor_t d = nullptr;
  PoolingDescriptor() { check_cudnn(cudnnCreatePoolingDescriptor(&d), "cudnnCreatePoolingDescriptor"); }
  ~PoolingDescriptor() { cudnnDestroyPoolingDescriptor(d); }
  PoolingDescriptor(const PoolingDescriptor&) = delete;
  PoolingDescriptor& operator=(const PoolingDescriptor&) = delete;
};

class CudnnPool final : public dnn::PoolSolver {
 public:
  std::string_view name() const override { return kName; }

  Applicability check(const PoolProblem& p, const runtime::Device& device) const override {
    if (device.backend() != "cuda") return Applicability::no("runs on cuda devices, not " + device.name());
    if (p.dtype != DType::f32 && p.dtype != DType::f16 && p.dtype != DType::bf16)
      return Applicability::no(std::string("dtype ") + to_string(p.dtype) + " (needs f32, f16 or bf16)");
    if (p.keep_indices) return Applicability::no("cuDNN keeps no max-pooling indices");
    Window win;
    if (auto why = window_no(p, win); !why.empty()) return Applicability::no(why);
    if (p.src_desc().elements() > INT_MAX || p.dst_desc().elements() > INT_MAX) {
      return Applicability::no("tensors of 2^31 elements or more (cuDNN's int sizes)");
    }
    if (p.direction == dnn::PoolDirection::backward && p.mode == dnn::PoolMode::max &&
        p.dtype != DType::f32) {
      return Applicability::no("max backward in " + std::string(to_string(p.dtype)) +
                               ": cuDNN may route a tie's gradient to another maximum than the first");
    }
    return Applicability::yes();
  }

  std::size_t workspace_bytes(const PoolProblem& p, const runtime::Device&) const override {
    if (p.direction != dnn::PoolDirection::backward || p.mode != dnn::PoolMode::max) return 0;
    return p.dst_desc().bytes();
  }

  void run(runtime::Stream& stream, const PoolProblem& p, const dnn::PoolArgs& a) const override {
    const std::size_t need = workspace_bytes(p, stream.device());
    if (a.workspace_bytes < need) {
      throw Error(Status::invalid_argument, std::string(kName) + ": workspace of " +
                                                std::to_string(a.workspace_bytes) + " bytes, needs " +
                                                std::to_string(need));
    }
    Window win;
    if (auto why = window_no(p, win); !why.empty())
      throw Error(Status::unsupported, std::string(kName) + ": " + why);
    CudnnHandle& h = cudnn_handle(stream.device());
    stream.launch(kName, [&] {
      DeviceGuard guard(stream.device().index());
      PoolingDescriptor pool;
      const cudnnPoolingMode_t mode = p.mode == dnn::PoolMode::max ? CUDNN_POOLING_MAX_DETERMINISTIC
                                      : p.mode == dnn::PoolMode::avg_include_pad
                                          ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
                                          : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
      check_cudnn(cudnnSetPooling2dDescriptor(pool.d, mode, CUDNN_PROPAGATE_NAN, win.kh, win.kw, win.ph,
                                              win.pw, win.sh, win.sw),
                  "cudnnSetPooling2dDescriptor");
      TensorDescriptor x, y;
      x.set(p, p.h, p.w);
      y.set(p, p.out_h(), p.out_w());
      std::lock_guard lock(h.mutex);
      check_cudnn(h.set_stream(static_cast<cudaStream_t>(stream.native_handle()), stream.id()),
                  "cudnnSetStream");
      const float one = 1.f, zero = 0.f;
      if (p.direction == dnn::PoolDirection::forward) {
        check_cudnn(cudnnPoolingForward(h.handle, pool.d, &one, x.d, a.src, &zero, y.d, a.dst),
                    "cudnnPoolingForward");
        return;
      }
      if (p.mode == dnn::PoolMode::max) {
        // cuDNN finds each maximum by comparing x with y, so it needs the forward output.
        check_cudnn(cudnnPoolingForward(h.handle, pool.d, &one, x.d, a.src, &zero, y.d, a.workspace),
                    "cudnnPoolingForward");
        check_cudnn(cudnnPoolingBackward(h.handle, pool.d, &one, y.d, a.workspace, y.d, a.diff_dst, x.d,
                                         a.src, &zero, x.d, a.diff_src),
                    "cudnnPoolingBackward");
      } else {
        // Average backward reads neither x nor y; cuDNN still takes pointers of their shapes.
        check_cudnn(cudnnPoolingBackward(h.handle, pool.d, &one, y.d, a.diff_dst, y.d, a.diff_dst, x.d,
                                         a.diff_src, &zero, x.d, a.diff_src),
                    "cudnnPoolingBackward");
      }
    });
  }
};

}  // namespace

std::unique_ptr<dnn::PoolSolver> make_cudnn_pool_solver() { return std::make_unique<CudnnPool>(); }

}  // namespace galley::backends::cuda
