// Runs a Graph on one device: every node lowered once to an op-layer call (solvers picked by the
// tuner and remembered in the find-db), constants uploaded once, each intermediate value freed back
// to the caching allocator after its last reader, so the peak holds only the live values; an
// activation or elementwise node whose input dies there writes its output over that input
// (ExecutorOptions::in_place). Outputs are the caller's own: never a graph input's memory.
//
// Graph mode (ExecutorOptions::capture): shapes are static, so after one eager run (which tunes,
// picks every solver and warms every vendor handle) the executor captures one whole run into a
// runtime::Graph (a CUDA/HIP graph on a GPU, the recorded task list on the cpu) with its memory
// from a private pool of the caching allocator, reading fixed input buffers and writing fixed
// output buffers that the executor owns. Every later run copies the inputs in, replays the graph
// and copies the outputs out (the caller owns its outputs, as in eager mode), so a replay costs one
// launch instead of the host work of every node. What cannot be captured is an Error, not a silent
// eager run: an op whose work cannot be recorded (a synchronisation or a host read inside its
// lowering) names the node; an input of another shape, dtype or layout than the graph's names the
// input. The pool lives with the executor: the graph's memory is not shared with anyone while it
// may replay.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "galley/model/graph.hpp"
#include "galley/runtime/device.hpp"
#include "galley/runtime/stream.hpp"
#include "galley/tensor.hpp"

namespace galley::model {

/// What one node did in a run.
struct LayerReport {
  std::string node;
  std::string op_type;
  std::string solver;  ///< the op-layer solver that ran, "" for views
  std::string source;  ///< how it was chosen: "user find-db", "cache", "tuned", "reference", ...
  bool tuner_hit = false;
  double ms = 0;  ///< device time of the node's calls when RunOptions::time_layers, else 0
};

/// How a run executed.
enum class RunMode {
  eager,         ///< node by node
  graph_replay,  ///< the captured graph replayed (its first replay follows the capture in the same run)
};

struct RunReport {
  std::vector<LayerReport> layers;  ///< in node order, views and folded nodes left out; a replay
                                    ///< reports the layers of the captured run (ms 0)
  /// The caching allocator's peak allocated bytes during the run; for a replay the peak of the
  /// captured run (the memory the graph holds), or the replay's own if higher.
  std::size_t peak_bytes = 0;
  int tuned = 0;                    ///< layers whose problem was tuned in this run
  int hits = 0;                     ///< layers whose solver came from stored tuning
  RunMode mode = RunMode::eager;
  std::size_t graph_nodes = 0;      ///< nodes of the replayed graph (device operations), 0 when eager
  std::size_t graph_pool_bytes = 0; ///< memory reserved by the graph's private pool, 0 when eager
  /// Why a run of an executor in graph mode ran eagerly ("the first run tunes eagerly", ...).
  std::string note;
};

/// "eager" or "graph replay".
const char* to_string(RunMode mode);

struct RunOptions {
  /// Events around each node (slower; for --verbose). Per-node times need an eager run, so in
  /// graph mode such a run is eager (RunReport::note says so).
  bool time_layers = false;
  /// Called after each node with (nodes done, nodes that run): a progress bar while tuning.
  std::function<void(std::size_t, std::size_t, const Node&)> on_node;
};

struct ExecutorOptions {
  /// Every op runs the device's reference solver instead of the tuner's pick: the plain loops a
  /// network's result is checked against (cpu only).
  bool reference = false;
  /// Graph mode (see the top of this file): run 1 eager, run 2 captures and replays, every later
  /// run replays.
  bool capture = false;
  /// An activation or elementwise node writes its output into the memory of an input that dies
  /// there (same descriptor; never a graph input's, a graph output's or a constant's memory), which
  /// lowers the peak. False gives every node output its own memory, to compare.
  bool in_place = true;
};

class Executor {
 public:
  /// Lowers every node for `device`; throws Error naming the node and op when one cannot run there
  /// (an op the op layer lacks, an attribute it does not implement, a dtype it does not take).
  Executor(Graph graph, const runtime::Device& device, ExecutorOptions options = {});
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  const Graph& graph() const;
  const runtime::Device& device() const;

  /// Runs the graph on `stream` with the graph inputs by name (each of the input's dtype and shape;
  /// a missing, extra or mismatched input is an Error naming it) and returns the outputs by name.
  /// Returns after the outputs are computed (they are device tensors on stream.device()). In graph
  /// mode the inputs must also have the graph's row-major layout, and a failed capture is an Error
  /// naming the node (the next run tries to capture again).
  std::map<std::string, Tensor> run(runtime::Stream& stream, const std::map<std::string, Tensor>& inputs,
                                    const RunOptions& options = {}, RunReport* report = nullptr);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// A host tensor as a device tensor on stream.device() (f32, f16, bf16, i32 and i8 element types).
Tensor to_device(runtime::Stream& stream, const HostTensor& host);
/// A device tensor back on the host; waits for the copy.
HostTensor to_host(runtime::Stream& stream, const Tensor& tensor);

}  // namespace galley::model
