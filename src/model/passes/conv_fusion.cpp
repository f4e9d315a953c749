// Conv epilogue fusion: Conv -> [Add per-channel constant] -> [Add residual] -> [activation]
// becomes one "galley.FusedConv" node, Y = activation(conv(X, W) + B + R), so that a conv entry
// point with a fused epilogue can do it in one pass over Y. Each value inside the chain must have
// one reader and not be a graph output; the fused node takes the place of the chain's last node
// (every input it reads is defined by then).
//
// First, x * Sigmoid(x) (SiLU as exported: EfficientNet's activation) becomes one "galley.Silu"
// node, which runs in place: without it x and Sigmoid(x) are both alive at the Mul. It stays a
// node of its own rather than a conv epilogue: the cpu epilogue's silu is several times slower
// than the activation op's (EfficientNet-B0 b8 f32 on 2 cores: about 100 ms for one 1x1 conv with
// a silu epilogue, 25 ms for the conv, Sigmoid and Mul apart).
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

// Mul(x, Sigmoid(x)) or Mul(Sigmoid(x), x), the Sigmoid's output read by that Mul only and no
// graph output, into galley.Silu(x) at the Mul's place. Returns the number rewritten.
int fuse_silu(Graph& graph) {
  const auto readers = passes::readers(graph);
  const auto producers = passes::producers(graph);
  std::vector<bool> removed(graph.nodes.size(), false);
  int count = 0;
  for (Node& mul : graph.nodes) {
    if (mul.op_type != "Mul" || mul.inputs.size() != 2 || mul.outputs.size() != 1) continue;
    for (std::size_t k = 0; k < 2; ++k) {
      const std::string& s = mul.inputs[k];
      const std::string& x = mul.inputs[1 - k];
      const auto p = producers.find(s);
      if (p == producers.end() || removed[p->second]) continue;
      const Node& sigmoid = graph.nodes[p->second];
      if (sigmoid.op_type != "Sigmoid" || sigmoid.inputs.size() != 1 || sigmoid.inputs[0] != x) continue;
      const auto r = readers.find(s);
      if (r == readers.end() || r->second.size() != 1 || passes::is_graph_output(graph, s)) continue;
      removed[p->second] = true;
      mul.op_type = "galley.Silu";
      mul.inputs = {x};
      mul.attributes.clear();
      ++count;
      break;
    }
  }
  if (count == 0) return 0;
  std::vector<Node> kept;
  for (std::size_t i = 0; i < graph.nodes.size(); ++i) {
    if (!removed[i]) kept.push_back(std::move(graph.nodes[i]));
  }
  graph.nodes = std::move(kept);
  passes::refresh(graph);
  return count;
}

}  // namespace

int fuse_conv_epilogues(Graph& graph) {
  const int silu_count = fuse_silu(graph);
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
  if (fused_count == 0) return silu_count;
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
  return silu_count + fused_count;
}

}  // namespace galley::model
