// Runs a Graph on one device: every node lowered once to an op-layer call (solvers picked by the
// tuner and remembered in the find-db), constants uploaded once, each intermediate value freed back
// to the caching allocator after its last reader, so the peak holds only the live values.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "galley/model/graph.hpp"
#include "galley/runtime/device.hpp"
#include "galley/runtime/stream.hpp"
#include "galley/tensor.hpp"

namespace galley::model {

/// What one node did in the last run (when timing was asked for).
struct LayerTiming {
  std::string node;
  std::string op_type;
  std::string solver;  ///< the op-layer solver that ran, "" for views and copies
  double ms = 0;       ///< device time of the node's calls (events around them)
};

struct RunReport {
  std::vector<LayerTiming> layers;        ///< in node order, when RunOptions::time_layers
  std::size_t peak_bytes = 0;             ///< the caching allocator's peak allocated bytes during the run
};

struct RunOptions {
  bool time_layers = false;  ///< events around each node (slower; for --verbose)
};

class Executor {
 public:
  /// Lowers every node for `device`; throws Error naming the node and op when one cannot run there
  /// (an op the op layer lacks, an attribute it does not implement, a dtype it does not take).
  Executor(Graph graph, const runtime::Device& device);
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
