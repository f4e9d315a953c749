// Conv epilogue fusion: Conv -> [Add per-channel constant] -> [Add residual] -> [activation]
// becomes one "galley.FusedConv" node, Y = activation(conv(X, W) + B + R), so that a conv entry
// point with a fused epilogue can do it in one pass over Y. Each value inside the chain must have
// one reader and not be a graph output; the fused node takes the place of the chain's last node
// (every input it reads is defined by then).
#include <cmath>
#include <set>

#include "galley/model/passes.hpp"
#include "model/passes/graph_edit.hpp"

namespace galley::model {
namespace {

// The node reading `value`, when it is the only reader and `value` is no graph output.
std::optional<std::size_t> only_reader(const Graph& graph,
                                       const std::map<std::string, std::vector<std::size_t>>& readers,
                                       const std::string& value) {
  const auto it = readers.find(value);
  if (it == readers.end() || it->second.size() != 1 || passes::is_graph_output(graph, value))
    return std::nullopt;
  return it->second[0];
}

// The other input of a binary Add reading `value` once.
std::optional<std::string> other_addend(const Node& add, const std::string& value) {
  if (add.op_type != "Add" || add.inputs.size() != 2 || add.outputs.size() != 1) return std::nullopt;
  if (add.inputs[0] == value && add.inputs[1] != value) return add.inputs[1];
  if (add.inputs[1] == value && add.inputs[0] != value) return add.inputs[0];
  return std::nullopt;
}

// A constant added per output channel: shape [1,K,1,1], [K,1,1], [1] or a scalar, as K values.
std::optional<std::vector<double>> channel_values(const Graph& graph, const std::string& name,
                                                  std::int64_t k) {
  const auto it = graph.constants.find(name);
  if (it == graph.constants.end() || !passes::is_float(it->second.type)) return std::nullopt;
  const Shape& s = it->second.shape;
  const auto v = it->second.as_double();
  if (s == Shape{1, k, 1, 1} || s == Shape{k, 1, 1}) return v;
  if (v.size() == 1 && s.size() <= 4) return std::vector<double>(static_cast<std::size_t>(k), v[0]);
  return std::nullopt;
}

// The activation's attributes on the fused node, when `node` is an activation the epilogue runs.
bool take_activation(const Graph& graph, const Node& node, Node& fused) {
  static const std::set<std::string> plain{"Relu", "Sigmoid", "Tanh", "HardSwish"};
  if (node.inputs.empty() || node.outputs.size() != 1) return false;
  if (plain.count(node.op_type) != 0) {
    fused.attributes["activation"] = node.op_type;
    return true;
  }
  if (node.op_type == "LeakyRelu" || node.op_type == "Elu") {
    fused.attributes["activation"] = node.op_type;
    fused.attributes["activation_alpha"] = node.float_attr("alpha", node.op_type == "Elu" ? 1.0 : 0.01);
    return true;
  }
  if (node.op_type == "Clip") {
    double bound[2] = {-INFINITY, INFINITY};
    const char* attr[2] = {"min", "max"};
    for (std::size_t i = 0; i < 2; ++i) {
      if (node.has(attr[i])) {
        bound[i] = node.float_attr(attr[i], bound[i]);
      } else if (node.inputs.size() > i + 1 && !node.inputs[i + 1].empty()) {
        const auto c = graph.constants.find(node.inputs[i + 1]);
        if (c == graph.constants.end()) return false;
        bound[i] = c->second.as_double().at(0);
      }
    }
    if (bound[0] == 0 && std::isinf(bound[1])) {
      fused.attributes["activation"] = std::string("Relu");
      return true;
    }
    if (!std::isfinite(bound[0]) || !std::isfinite(bound[1])) return false;
    fused.attributes["activation"] = std::string("Clip");
    fused.attributes["activation_alpha"] = bound[0];
    fused.attributes["activation_beta"] = bound[1];
    return true;
  }
  return false;
}

}  // namespace

int fuse_conv_epilogues(Graph& graph) {
  const auto readers = passes::readers(graph);
  std::vector<bool> removed(graph.nodes.size(), false);
  std::map<std::size_t, Node> placed;  // index of a chain's last node -> the fused node there
  int fused_count = 0;
  for (std::size_t i = 0; i < graph.nodes.size(); ++i) {
    const Node& conv = graph.nodes[i];
    if (conv.op_type != "Conv" || conv.inputs.size() < 2 || conv.outputs.size() != 1 || removed[i]) continue;
    const auto w = graph.values.find(conv.inputs[1]);
    if (w == graph.values.end() || w->second.shape.size() != 4) continue;
    const std::int64_t k = w->second.shape[0];
    const ValueInfo& y = graph.value(conv.outputs[0]);

    Node fused;
    fused.name = conv.name;
    fused.op_type = "galley.FusedConv";
    fused.attributes = conv.attributes;
    fused.attributes["activation"] = std::string();
    std::string bias = conv.inputs.size() > 2 ? conv.inputs[2] : std::string();
    std::string residual;
    std::string current = conv.outputs[0];
    std::vector<std::size_t> chain;
    std::optional<std::vector<double>> extra_bias;

    // A node already taken by an earlier conv's chain (an Add of two convs' outputs) stays there.
    auto next = only_reader(graph, readers, current);
    if (next && removed[*next]) next.reset();
    // Add of a per-channel constant: folded into the bias (when the conv's own bias is a constant).
    if (next) {
      const Node& add = graph.nodes[*next];
      const auto other = other_addend(add, current);
      if (other && (bias.empty() || graph.is_constant(bias))) {
        if ((extra_bias = channel_values(graph, *other, k))) {
          chain.push_back(*next);
          current = add.outputs[0];
          next = only_reader(graph, readers, current);
          if (next && removed[*next]) next.reset();
        }
      }
    }
    // Add of a computed value of the output's shape and type: the residual.
    if (next) {
      const Node& add = graph.nodes[*next];
      const auto other = other_addend(add, current);
      if (other && !graph.is_constant(*other)) {
        const auto r = graph.values.find(*other);
        if (r != graph.values.end() && r->second.shape_known && r->second.shape == y.shape &&
            r->second.type == y.type) {
          residual = *other;
          chain.push_back(*next);
          current = add.outputs[0];
          next = only_reader(graph, readers, current);
          if (next && removed[*next]) next.reset();
        }
      }
    }
    if (next && take_activation(graph, graph.nodes[*next], fused)) {
      chain.push_back(*next);
      current = graph.nodes[*next].outputs[0];
    }
    if (chain.empty()) continue;

    if (extra_bias) {
      std::vector<double> sum = *extra_bias;
      if (!bias.empty()) {
        const auto own = graph.constants.at(bias).as_double();
        for (std::size_t c = 0; c < sum.size(); ++c) sum[c] += own[c];
      }
      bias = passes::fresh_name(graph, conv.name + "_fused_b");
      passes::set_constant(graph, bias, passes::from_doubles(sum, {k}, graph.value(conv.inputs[1]).type));
    }
    fused.inputs = {conv.inputs[0], conv.inputs[1], bias, residual};
    fused.outputs = {current};
    removed[i] = true;
    for (const std::size_t c : chain) removed[c] = true;
    placed[chain.back()] = std::move(fused);
    ++fused_count;
  }
  if (fused_count == 0) return 0;
  std::vector<Node> out;
  for (std::size_t i = 0; i < graph.nodes.size(); ++i) {
    if (const auto p = placed.find(i); p != placed.end()) {
      out.push_back(std::move(p->second));
    } else if (!removed[i]) {
      out.push_back(std::move(graph.nodes[i]));
    }
  }
  graph.nodes = std::move(out);
  passes::refresh(graph);
  return fused_count;
}

}  // namespace galley::model
