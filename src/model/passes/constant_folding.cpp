// Constant folding: a node whose inputs are all constants computes the same thing at every run, so
// it runs once here, on the cpu with the reference solvers (the same op-layer code the executor
// runs, in its most careful form), and its outputs become constants. Ops that only relabel their
// input (Reshape, Flatten, Squeeze, Unsqueeze, Identity) copy the bytes under the new shape.
// infer_shapes() already folds shape computations on integers; this covers the rest: weight
// preprocessing (Mul/Add/Transpose on initializers), constant subgraphs of any op the cpu runs.
#include <set>

#include "galley/core/error.hpp"
#include "galley/model/executor.hpp"
#include "galley/model/passes.hpp"
#include "galley/runtime/device.hpp"
#include "galley/runtime/stream.hpp"
#include "model/lowering.hpp"
#include "model/passes/graph_edit.hpp"

namespace galley::model {
namespace {

bool relabels_only(const std::string& op) {
  static const std::set<std::string> ops{"Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze"};
  return ops.count(op) != 0;
}

// Whether `node` can be folded: at least one input, every input a constant, every output known,
// storable on the cpu and not larger than `max_elements`, and an op the executor lowers.
bool foldable(const Graph& graph, const Node& node, std::int64_t max_elements) {
  if (passes::is_folded(graph, node)) return false;
  bool any_input = false;
  for (const std::string& in : node.inputs) {
    if (in.empty()) continue;
    if (!graph.is_constant(in)) return false;
    any_input = true;
  }
  if (!any_input || node.outputs.empty()) return false;
  for (const std::string& out : node.outputs) {
    if (out.empty()) continue;
    const auto it = graph.values.find(out);
    if (it == graph.values.end() || !it->second.shape_known) return false;
    if (element_count(it->second.shape) > max_elements) return false;
    if (!relabels_only(node.op_type) && !detail::device_dtype(it->second.type)) return false;
  }
  if (relabels_only(node.op_type)) return node.outputs.size() == 1;
  return detail::find_lowering(node.op_type) != nullptr;
}

// The node's outputs computed on the cpu. Throws Error when the op cannot run there (then the
// node stays, and the executor reports the same error where the graph is meant to run).
std::vector<HostTensor> evaluate(const Graph& graph, const Node& node) {
  if (relabels_only(node.op_type)) {
    HostTensor t = graph.constants.at(node.inputs[0]);
    t.shape = graph.value(node.outputs[0]).shape;
    return {t};
  }
  Graph one;
  one.name = node.name;
  one.opset = graph.opset;
  for (const std::string& in : node.inputs) {
    if (in.empty()) continue;
    one.constants[in] = graph.constants.at(in);
    one.values[in] = graph.value(in);
  }
  for (const std::string& out : node.outputs) {
    if (out.empty()) continue;
    one.values[out] = graph.value(out);
    one.outputs.push_back(out);
  }
  one.nodes.push_back(node);
  const runtime::Device cpu = runtime::device("cpu");
  Executor exec(std::move(one), cpu, {.reference = true});
  runtime::Stream stream(cpu);
  const auto results = exec.run(stream, {});
  std::vector<HostTensor> out;
  for (const std::string& name : node.outputs) {
    if (name.empty()) {
      out.emplace_back();
      continue;
    }
    HostTensor t = to_host(stream, results.at(name));
    t.shape = graph.value(name).shape;  // a rank-0 value travels as [1]
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace

int fold_constants(Graph& graph, std::int64_t max_elements) {
  int folded = 0;
  std::vector<Node> kept;
  for (Node& node : graph.nodes) {
    if (!foldable(graph, node, max_elements)) {
      kept.push_back(std::move(node));
      continue;
    }
    std::vector<HostTensor> values;
    try {
      values = evaluate(graph, node);
    } catch (const Error&) {
      kept.push_back(std::move(node));
      continue;
    }
    for (std::size_t i = 0; i < node.outputs.size(); ++i) {
      if (!node.outputs[i].empty()) passes::set_constant(graph, node.outputs[i], std::move(values[i]));
    }
    ++folded;
  }
  graph.nodes = std::move(kept);
  if (folded > 0) passes::refresh(graph);
  return folded;
}

}  // namespace galley::model
