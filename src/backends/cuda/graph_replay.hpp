// A vendor call replayed as a CUDA graph once its pointers have repeated.
//
// A cuDNN backend execution or a cuBLAS GEMM spends about as long on the host per call as the
// kernels of small layers (1x1 convolutions at moderate batch) take on the GPU, and that host rate
// drifts over tens of milliseconds: in a stream of such calls the host, not the GPU, sets the pace,
// and tuning and later runs can disagree on which solver is fastest. Launching a captured graph
// costs a few microseconds whatever the library does on the host.
//
// A graph holds the call's pointers, so one GraphReplay belongs to one pointer set of one plan or
// problem (cudnn_graph keeps it beside the variant pack of that set). The first kDirectCalls calls run directly:
// a network's first passes and the tuner's warm-up pay no capture; the next call is captured and
// instantiated, and every later one launches the graph. Direct, for good, when a capture fails (an
// engine that cannot be captured); direct for one call when the stream is already capturing (the
// user's own graph takes the call in as it is) or is the legacy default stream (which cannot be
// captured). GALLEY_CUDA_GRAPHS=0 turns replay off.
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace galley::backends::cuda {

/// Pointer sets whose replay state a solver keeps per plan or problem: layers of one shape share a
/// plan with tensors of their own (ResNet-50 repeats a stage's block 2-5 times).
inline constexpr std::size_t kPointerSetsKept = 16;

/// A call's pointers (x, w, y, workspace): what a graph captured from it holds.
using CallPointers = std::array<const void*, 4>;

class GraphReplay {
 public:
  /// Calls run directly before a pointer set is captured.
  static constexpr int kDirectCalls = 2;

  GraphReplay() = default;
  ~GraphReplay();
  GraphReplay(GraphReplay&& other) noexcept;
  GraphReplay& operator=(GraphReplay&& other) noexcept;
  GraphReplay(const GraphReplay&) = delete;
  GraphReplay& operator=(const GraphReplay&) = delete;

  /// Enqueues `call`'s work on `stream`: `call` itself (which enqueues on `stream`), or the graph
  /// captured from it. `what` names the call in the debug log when a capture fails. The caller
  /// serialises calls on one GraphReplay.
  void run(cudaStream_t stream, std::string_view what, const std::function<void()>& call);

  /// Gives up the graph without destroying it (at process exit, when the context may be gone).
  void release() { exec_ = nullptr; }

 private:
  int direct_calls_ = 0;
  bool refused_ = false;  // a capture failed: always direct
  cudaGraphExec_t exec_ = nullptr;
};

/// `enqueue`'s work on `stream` (not capturing already) captured and instantiated; nullptr with
/// `failure` set when the capture or the instantiation failed (then nothing was enqueued).
cudaGraphExec_t capture_graph(cudaStream_t stream, const std::function<void()>& enqueue, std::string& failure);

/// False when GALLEY_CUDA_GRAPHS is set to 0 (read once per process).
bool graph_replay_enabled();

}  // namespace galley::backends::cuda
