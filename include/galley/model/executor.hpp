// Runs a Graph on one device: every node lowered once to an op-layer call (solvers picked by the
// tuner and remembered in the find-db), constants uploaded once, each intermediate value freed back
// to the caching allocator after its last reader, so the peak holds only the live values.
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

struct RunReport {
  std::vector<LayerReport> layers;  ///< in node order, views and folded nodes left out
  std::size_t peak_bytes = 0;       ///< the caching allocator's peak allocated bytes during the run
  int tuned = 0;                    ///< layers whose problem was tuned in this run
  int hits = 0;                     ///< layers whose solver came from stored tuning
};

struct RunOptions {
  bool time_layers = false;  ///< events around each node (slower; for --verbose)
  /// Called after each node with (nodes done, nodes that run): a progress bar while tuning.
  std::function<void(std::size_t, std::size_t, const Node&)> on_node;
};

struct ExecutorOptions {
  /// Every op runs the device's reference solver instead of the tuner's pick: the plain loops a
  /// network's result is checked against (cpu only).
  bool reference = false;
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
  /// Returns after the outputs are computed (they are device tensors on stream.device()).
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
