// dtype conversion: the graph computes in f16 or bf16 storage (the ops accumulate in f32), while
// its interface stays f32: each f32 graph input goes through a Cast to the dtype before its
// readers, and each graph output is computed under a new name and Cast back to f32. So ONNX test
// data (f32) checks a converted graph as it is, with the dtype's tolerance. BatchNormalization's
// scale, bias, mean and variance stay f32, as the op layer takes them.
#include <set>

#include "galley/core/error.hpp"
#include "galley/model/passes.hpp"
#include "model/passes/graph_edit.hpp"

namespace galley::model {
namespace {

constexpr std::int64_t kOnnxFloat = 1, kOnnxFloat16 = 10, kOnnxBfloat16 = 16;

// Inputs the op layer takes in f32 whatever the data's dtype.
bool stays_f32(const Node& node, std::size_t input) {
  return node.op_type == "BatchNormalization" && input >= 1 && input <= 4;
}

Node cast(const std::string& name, const std::string& from, const std::string& to, std::int64_t onnx_type) {
  Node n;
  n.name = name;
  n.op_type = "Cast";
  n.inputs = {from};
  n.outputs = {to};
  n.attributes["to"] = onnx_type;
  return n;
}

}  // namespace

int convert_dtype(Graph& graph, ElemType dtype) {
  if (dtype != ElemType::f16 && dtype != ElemType::bf16) {
    throw Error(Status::invalid_argument,
                std::string("dtype conversion to ") + to_string(dtype) + ": valid dtypes are f16 and bf16");
  }
  const std::string suffix = std::string("/") + to_string(dtype);
  const std::int64_t onnx_type = dtype == ElemType::f16 ? kOnnxFloat16 : kOnnxBfloat16;
  int changes = 0;

  // Constants: converted where they are read as data; a constant also read as f32 statistics
  // gets a converted copy for its data readers.
  std::set<std::string> read_as_f32, read_as_data;
  for (const Node& n : graph.nodes) {
    for (std::size_t i = 0; i < n.inputs.size(); ++i) {
      const auto c = graph.constants.find(n.inputs[i]);
      if (n.inputs[i].empty() || c == graph.constants.end() || c->second.type != ElemType::f32) continue;
      (stays_f32(n, i) ? read_as_f32 : read_as_data).insert(n.inputs[i]);
    }
  }
  std::map<std::string, std::string> renamed;  // constant read as data -> its converted copy
  for (const std::string& name : read_as_data) {
    HostTensor value = passes::converted(graph.constants.at(name), dtype);
    if (read_as_f32.count(name) != 0 || passes::is_graph_output(graph, name)) {
      const std::string copy = passes::fresh_name(graph, name + suffix);
      passes::set_constant(graph, copy, std::move(value));
      renamed[name] = copy;
    } else {
      passes::set_constant(graph, name, std::move(value));
    }
    ++changes;
  }
  for (Node& n : graph.nodes) {
    for (std::size_t i = 0; i < n.inputs.size(); ++i) {
      const auto r = renamed.find(n.inputs[i]);
      if (r != renamed.end() && !stays_f32(n, i)) n.inputs[i] = r->second;
    }
    // A Cast to f32 inside the graph now casts to the dtype (the outputs get theirs below).
    if (n.op_type == "Cast" && n.int_attr("to", 0) == kOnnxFloat) {
      n.attributes["to"] = onnx_type;
      ++changes;
    }
  }

  std::vector<Node> head, tail;
  // Graph inputs: one Cast each, its readers read the cast value.
  for (const std::string& input : graph.inputs) {
    if (graph.value(input).type != ElemType::f32) continue;
    const std::string cast_value = passes::fresh_name(graph, input + suffix);
    graph.values[cast_value] = ValueInfo{dtype, graph.value(input).shape, graph.value(input).shape_known};
    head.push_back(
        cast(passes::fresh_name(graph, "Cast" + suffix + "_" + input), input, cast_value, onnx_type));
    for (Node& n : graph.nodes) {
      for (std::string& in : n.inputs) {
        if (in == input) in = cast_value;
      }
    }
    ++changes;
  }
  // Graph outputs computed in the graph: written under a new name, Cast back to f32.
  const auto producers = passes::producers(graph);
  std::set<std::string> cast_back;
  for (const std::string& output : graph.outputs) {
    const auto p = producers.find(output);
    if (p == producers.end() || graph.value(output).type != ElemType::f32 || !cast_back.insert(output).second) continue;
    const std::string inner = passes::fresh_name(graph, output + suffix);
    graph.values[inner] = graph.value(output);
    for (Node& n : graph.nodes) {
      for (std::string& o : n.outputs) {
        if (o == output) o = inner;
      }
      for (std::string& in : n.inputs) {
        if (in == output) in = inner;
      }
    }
    tail.push_back(cast(passes::fresh_name(graph, "Cast_f32_" + output), inner, output, kOnnxFloat));
    ++changes;
  }
  graph.nodes.insert(graph.nodes.begin(), head.begin(), head.end());
  graph.nodes.insert(graph.nodes.end(), tail.begin(), tail.end());
  passes::refresh(graph);
  return changes;
}

}  // namespace galley::model
