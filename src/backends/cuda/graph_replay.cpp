#include "backends/cuda/graph_replay.hpp"

#include <string>
#include <utility>

#include "backends/cuda/runtime_check.hpp"
#include "core/config.hpp"
#include "galley/core/log.hpp"

namespace galley::backends::cuda {

bool graph_replay_enabled() {
  // A malformed value throws from the first call that asks, naming the variable.
  static const bool enabled = env::config().cuda_graphs;
  return enabled;
}

GraphReplay::~GraphReplay() {
  // An executable graph still in flight is freed by CUDA once it completes.
  if (exec_ != nullptr) (void)cudaGraphExecDestroy(exec_);
}

GraphReplay::GraphReplay(GraphReplay&& other) noexcept
    : direct_calls_(other.direct_calls_), refused_(other.refused_), exec_(std::exchange(other.exec_, nullptr)) {}

GraphReplay& GraphReplay::operator=(GraphReplay&& other) noexcept {
  if (this != &other) {
    if (exec_ != nullptr) (void)cudaGraphExecDestroy(exec_);
    direct_calls_ = other.direct_calls_;
    refused_ = other.refused_;
    exec_ = std::exchange(other.exec_, nullptr);
  }
  return *this;
}

namespace {

/// Whether work enqueued on `stream` now may be captured into a graph of our own.
bool capturable(cudaStream_t stream) {
  if (stream == nullptr || stream == cudaStreamLegacy) return false;
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &status) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return status == cudaStreamCaptureStatusNone;
}

}  // namespace

cudaGraphExec_t capture_graph(cudaStream_t stream, const std::function<void()>& enqueue, std::string& failure) {
  // Thread-local mode: only this thread's unsafe calls (a cudaMalloc) would break the capture;
  // other threads' work on other streams goes on as usual.
  cudaGraph_t graph = nullptr;
  if (const cudaError_t begun = cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal); begun != cudaSuccess) {
    failure = "cudaStreamBeginCapture: " + error_text(begun);
  } else {
    try {
      enqueue();
    } catch (const std::exception& e) {
      failure = e.what();
    }
    const cudaError_t ended = cudaStreamEndCapture(stream, &graph);
    if (failure.empty() && ended != cudaSuccess) failure = "cudaStreamEndCapture: " + error_text(ended);
  }
  cudaGraphExec_t exec = nullptr;
  if (failure.empty()) {
    if (const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0); made != cudaSuccess) {
      failure = "cudaGraphInstantiate: " + error_text(made);
      exec = nullptr;
    }
  }
  if (graph != nullptr) (void)cudaGraphDestroy(graph);
  if (exec == nullptr) (void)cudaGetLastError();  // a failed capture leaves an error behind
  return exec;
}

void GraphReplay::run(cudaStream_t stream, std::string_view what, const std::function<void()>& call) {
  if (!graph_replay_enabled() || !capturable(stream)) {
    call();
    return;
  }
  if (exec_ != nullptr) {
    check(cudaGraphLaunch(exec_, stream), "GraphLaunch", what);
    return;
  }
  if (refused_ || direct_calls_ < kDirectCalls) {
    ++direct_calls_;
    call();
    return;
  }
  std::string failure;
  cudaGraphExec_t exec = capture_graph(stream, call, failure);
  if (exec == nullptr) {
    // Nothing of the failed capture ran; the call runs directly now and on every later call.
    refused_ = true;
    if (log::enabled(log::Level::debug))
      log::debug(std::string(what) + ": not replayed as a CUDA graph, its capture failed: " + failure);
    call();
    return;
  }
  exec_ = exec;
  check(cudaGraphLaunch(exec_, stream), "GraphLaunch", what);
}

}  // namespace galley::backends::cuda
