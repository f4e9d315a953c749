// Layout choice: which nodes run channels-last. Convolutions, pools and batch norms run NHWC when
// they can (rank-4 data, constant conv weights); activations and elementwise ops follow when one
// of their inputs comes NHWC, so a chain stays in one layout. Where an NHWC value meets a reader
// that needs NCHW (a Flatten, a Gemm, a graph output), a galley.Reorder back is inserted after the
// producer; where an NCHW value (a graph input) meets an NHWC reader, a reorder to NHWC is
// inserted before the first such reader and shared by the rest. Constant rank-4 operands (conv
// weights, eltwise constants) are re-laid on the host: the value keeps its logical shape, its bytes
// are in N, H, W, C order (K, Y, X, C for weights), as "galley.layout" = "NHWC" tells the lowering.
#include <algorithm>
#include <cstring>
#include <set>

#include "galley/model/passes.hpp"
#include "model/passes/graph_edit.hpp"

namespace galley::model {
namespace {

const std::set<std::string>& leading_ops() {
  static const std::set<std::string> ops{
      "Conv",          "galley.FusedConv",  "MaxPool", "AveragePool", "GlobalAveragePool",
      "GlobalMaxPool", "BatchNormalization"};
  return ops;
}

const std::set<std::string>& following_ops() {
  static const std::set<std::string> ops{"Relu",      "LeakyRelu",   "Elu",  "Sigmoid", "Tanh",
                                         "HardSwish", "HardSigmoid", "Gelu", "Clip",    "Add",
                                         "Sub",       "Mul",         "Div",  "galley.Silu"};
  return ops;
}

bool binary(const std::string& op) { return op == "Add" || op == "Sub" || op == "Mul" || op == "Div"; }

// Input positions holding rank-4 data that follows the node's layout.
std::vector<std::size_t> laid_out_inputs(const Node& node) {
  if (node.op_type == "galley.FusedConv") return {0, 3};
  if (binary(node.op_type)) return {0, 1};
  return {0};
}

bool rank4(const Graph& graph, const std::string& value) {
  const auto it = graph.values.find(value);
  return it != graph.values.end() && it->second.shape_known && it->second.shape.size() == 4;
}

bool can_run_nhwc(const Graph& graph, const Node& node) {
  if (node.has("galley.layout") || node.outputs.size() != 1 || node.inputs.empty()) return false;
  if (!rank4(graph, node.outputs[0]) || !passes::is_float(graph.value(node.outputs[0]).type)) return false;
  for (const std::size_t i : laid_out_inputs(node)) {
    if (i < node.inputs.size() && !node.inputs[i].empty() && !rank4(graph, node.inputs[i])) return false;
  }
  if (node.op_type == "Conv" || node.op_type == "galley.FusedConv") {
    return node.inputs.size() > 1 && graph.is_constant(node.inputs[1]) && rank4(graph, node.inputs[1]);
  }
  return true;
}

// A rank-4 constant's bytes from N, C, H, W order to N, H, W, C order (same logical shape).
HostTensor channels_last(const HostTensor& t) {
  const std::int64_t n = t.shape[0], c = t.shape[1], h = t.shape[2], w = t.shape[3];
  const std::size_t size = size_of(t.type);
  HostTensor out = t;
  for (std::int64_t a = 0; a < n; ++a) {
    for (std::int64_t ch = 0; ch < c; ++ch) {
      for (std::int64_t y = 0; y < h; ++y) {
        for (std::int64_t x = 0; x < w; ++x) {
          const auto from = static_cast<std::size_t>(((a * c + ch) * h + y) * w + x);
          const auto to = static_cast<std::size_t>(((a * h + y) * w + x) * c + ch);
          std::memcpy(out.data.data() + to * size, t.data.data() + from * size, size);
        }
      }
    }
  }
  return out;
}

Node reorder(const std::string& name, const std::string& from, const std::string& to, const char* layout) {
  Node n;
  n.name = name;
  n.op_type = "galley.Reorder";
  n.inputs = {from};
  n.outputs = {to};
  n.attributes["layout"] = std::string(layout);
  return n;
}

}  // namespace

int use_nhwc(Graph& graph) {
  // Which nodes run NHWC, in topological order (a follower needs an NHWC producer before it).
  std::vector<bool> nhwc(graph.nodes.size(), false);
  std::set<std::string> nhwc_values;
  int marked = 0;
  for (std::size_t i = 0; i < graph.nodes.size(); ++i) {
    const Node& node = graph.nodes[i];
    const bool leads = leading_ops().count(node.op_type) != 0,
               follows = following_ops().count(node.op_type) != 0;
    if ((!leads && !follows) || !can_run_nhwc(graph, node)) continue;
    bool fed_nhwc = false;
    for (const std::size_t p : laid_out_inputs(node))
      fed_nhwc = fed_nhwc || (p < node.inputs.size() && nhwc_values.count(node.inputs[p]) != 0);
    if (!leads && !fed_nhwc) continue;
    nhwc[i] = true;
    nhwc_values.insert(node.outputs[0]);
    ++marked;
  }
  if (marked == 0) return 0;

  // NHWC outputs that something still reads in NCHW (an NCHW node, another input position, a
  // graph output) get a reorder back under their own name.
  std::set<std::string> needed_nchw(graph.outputs.begin(), graph.outputs.end());
  for (std::size_t i = 0; i < graph.nodes.size(); ++i) {
    const Node& node = graph.nodes[i];
    const auto positions = laid_out_inputs(node);
    for (std::size_t p = 0; p < node.inputs.size(); ++p) {
      const bool laid_out = nhwc[i] && std::find(positions.begin(), positions.end(), p) != positions.end();
      if (!laid_out) needed_nchw.insert(node.inputs[p]);
    }
  }

  std::map<std::string, std::string> as_nhwc;  // value -> the name of its NHWC form
  std::set<std::string> replaced_constants;
  std::vector<Node> out;
  int reorders = 0;
  for (std::size_t i = 0; i < graph.nodes.size(); ++i) {
    Node node = std::move(graph.nodes[i]);
    if (!nhwc[i]) {
      out.push_back(std::move(node));
      continue;
    }
    std::vector<std::size_t> relaid = laid_out_inputs(node);
    if (node.op_type == "Conv" || node.op_type == "galley.FusedConv") relaid.push_back(1);
    for (const std::size_t p : relaid) {
      if (p >= node.inputs.size() || node.inputs[p].empty()) continue;
      const std::string v = node.inputs[p];
      if (const auto it = as_nhwc.find(v); it != as_nhwc.end()) {
        node.inputs[p] = it->second;
        continue;
      }
      const std::string name = passes::fresh_name(graph, v + "/nhwc");
      if (graph.is_constant(v)) {
        passes::set_constant(graph, name, channels_last(graph.constants.at(v)));
        replaced_constants.insert(v);
      } else {
        graph.values[name] = graph.value(v);
        out.push_back(reorder(passes::fresh_name(graph, "Reorder_nhwc_" + v), v, name, "NHWC"));
        ++reorders;
      }
      as_nhwc[v] = name;
      node.inputs[p] = name;
    }
    const std::string y = node.outputs[0];
    const std::string y_nhwc = passes::fresh_name(graph, y + "/nhwc");
    graph.values[y_nhwc] = graph.value(y);
    as_nhwc[y] = y_nhwc;
    node.outputs[0] = y_nhwc;
    node.attributes["galley.layout"] = std::string("NHWC");
    const std::string node_name = node.name;
    out.push_back(std::move(node));
    if (needed_nchw.count(y) != 0) {
      out.push_back(reorder(passes::fresh_name(graph, "Reorder_nchw_" + y), y_nhwc, y, "NCHW"));
      ++reorders;
    }
  }
  graph.nodes = std::move(out);
  // Constants only the re-laid copies replaced are read by nothing now.
  std::set<std::string> read;
  for (const Node& n : graph.nodes) read.insert(n.inputs.begin(), n.inputs.end());
  for (const std::string& c : replaced_constants) {
    if (read.count(c) == 0 && !passes::is_graph_output(graph, c)) {
      graph.constants.erase(c);
      graph.values.erase(c);
    }
  }
  passes::refresh(graph);
  return marked + reorders;
}

}  // namespace galley::model
