// How a graph node becomes op-layer calls: each ONNX op has a lowering, registered from its own
// lower_<family>.cpp, that reads the node's attributes and static shapes once (at Executor
// construction) and returns what runs at each Executor::run(). Internal to the model layer.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "galley/dnn/activation.hpp"
#include "galley/dnn/solver.hpp"
#include "galley/dnn/tensor.hpp"
#include "galley/model/graph.hpp"
#include "galley/runtime/device.hpp"
#include "galley/runtime/stream.hpp"
#include "galley/tensor.hpp"

namespace galley::model::detail {

/// A node's tensors during one run: its inputs (constants included, on the device) and its
/// outputs, allocated by the executor before the call from the descriptors the lowering gave.
struct RunContext {
  runtime::Stream& stream;
  std::vector<const Tensor*> inputs;  ///< null for an omitted optional input
  std::vector<Tensor*> outputs;
  /// What the op-layer call did (solver, tuner hit or tuned): the lowering passes it to the entry
  /// point, the executor reports it per layer.
  dnn::CallReport report;
};

struct LoweredNode {
  std::function<void(RunContext&)> run;
  /// The descriptor of each output; the executor allocates them (empty for an alias).
  std::vector<dnn::TensorDesc> output_descs;
  /// >= 0: output 0 is input `alias_input` with output_descs[0] as a view of the same storage
  /// (Reshape, Flatten, Identity, Dropout): nothing runs.
  int alias_input = -1;
  /// Inputs whose storage output 0 may take over (in place) when the executor finds that input
  /// dead after this node with output 0's exact descriptor: the op reads each element of it before
  /// writing the same element of the output, and its entry point allows that aliasing.
  std::vector<int> inplace_inputs;
};

/// What a lowering reads: the node and the graph's static facts.
struct LoweringContext {
  const Graph& graph;
  const Node& node;
  const runtime::Device& device;

  [[noreturn]] void fail(const std::string& why) const;
  bool has_input(std::size_t i) const { return i < node.inputs.size() && !node.inputs[i].empty(); }
  const ValueInfo& input(std::size_t i) const;
  const ValueInfo& output(std::size_t i) const;
  /// The constant behind input i, or null when it is computed at run time.
  const HostTensor* constant(std::size_t i) const;
  /// The row-major descriptor of a value (rank 0 becomes [1]); fails naming the value for a dtype
  /// the op layer has no storage for (i64, f64, bool on the device).
  dnn::TensorDesc desc(const ValueInfo& value, const std::string& name) const;
  dnn::TensorDesc input_desc(std::size_t i) const { return desc(input(i), node.inputs[i]); }
  dnn::TensorDesc output_desc(std::size_t i) const { return desc(output(i), node.outputs[i]); }
};

using Lowering = std::function<LoweredNode(const LoweringContext&)>;

/// Called once per op type from a static initialiser of a lower_*.cpp; returns true.
bool register_lowering(const std::string& op_type, Lowering lowering);
/// The lowering of `op_type`, or null.
const Lowering* find_lowering(const std::string& op_type);

/// The DType of a graph element type, or nothing for types without device storage.
std::optional<DType> device_dtype(ElemType type);

/// The memory order of a node's rank-4 inputs and outputs: NHWC when the layout pass marked the
/// node with "galley.layout" = "NHWC" (passes.hpp), else NCHW (row-major, as ONNX gives them).
inline dnn::Layout node_layout(const Node& node) {
  return node.string_attr("galley.layout", "NCHW") == "NHWC" ? dnn::Layout::nhwc : dnn::Layout::nchw;
}

/// ActivProblem::of(activation, desc, alpha, beta), except that a rank-4 desc of a node running
/// NHWC gets an NHWC problem even where the two layouts coincide (H = W = 1), so the problem's
/// descriptor is the one its NHWC producer made.
inline dnn::ActivProblem activation_problem(const Node& node, dnn::Activation activation, const dnn::TensorDesc& desc,
                                            double alpha, double beta) {
  dnn::ActivProblem p = dnn::ActivProblem::of(activation, desc, alpha, beta);
  if (node_layout(node) == dnn::Layout::nhwc && desc.rank == 4) p.layout = dnn::Layout::nhwc;
  return p;
}

/// A row-major descriptor as the node stores it: packed NHWC when the node runs NHWC and it has
/// rank 4, else unchanged.
inline dnn::TensorDesc in_node_layout(const Node& node, const dnn::TensorDesc& desc) {
  if (node_layout(node) != dnn::Layout::nhwc || desc.rank != 4) return desc;
  return dnn::TensorDesc::packed(desc.dtype, dnn::Layout::nhwc, desc.dims[0], desc.dims[1], desc.dims[2], desc.dims[3]);
}

}  // namespace galley::model::detail
