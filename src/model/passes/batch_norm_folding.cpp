// Batch-norm folding for inference: BN(conv(x, W) + b) with constant statistics is one conv,
//   s = scale / sqrt(var + eps),  W'[k] = W[k] * s[k],  b'[k] = (b[k] - mean[k]) * s[k] + bias[k],
// computed in double. Only when the conv's output feeds the BN alone (another reader would need
// the unnormalised value) and the BN is the inference form (one output).
#include <cmath>

#include "galley/model/passes.hpp"
#include "model/passes/graph_edit.hpp"

namespace galley::model {
namespace {

// The BN's constant input i as doubles when it is a [k] float constant.
const HostTensor* channel_constant(const Graph& graph, const Node& bn, std::size_t i, std::int64_t k) {
  if (i >= bn.inputs.size() || bn.inputs[i].empty()) return nullptr;
  const auto it = graph.constants.find(bn.inputs[i]);
  if (it == graph.constants.end() || !passes::is_float(it->second.type) || it->second.shape != Shape{k})
    return nullptr;
  return &it->second;
}

}  // namespace

int fold_batch_norm(Graph& graph) {
  const auto readers = passes::readers(graph);
  const auto producers = passes::producers(graph);
  std::vector<bool> removed(graph.nodes.size(), false);
  int folded = 0;
  for (std::size_t j = 0; j < graph.nodes.size(); ++j) {
    const Node& bn = graph.nodes[j];
    if (bn.op_type != "BatchNormalization" || bn.inputs.empty() || bn.int_attr("training_mode", 0) != 0)
      continue;
    bool extra_outputs = false;
    for (std::size_t o = 1; o < bn.outputs.size(); ++o)
      extra_outputs = extra_outputs || !bn.outputs[o].empty();
    if (extra_outputs) continue;
    const std::string& x = bn.inputs[0];
    const auto prod = producers.find(x);
    if (prod == producers.end() || removed[prod->second]) continue;
    Node& conv = graph.nodes[prod->second];
    if (conv.op_type != "Conv" || conv.inputs.size() < 2 || conv.outputs.size() != 1) continue;
    if (readers.at(x).size() != 1 || passes::is_graph_output(graph, x)) continue;
    const auto w_it = graph.constants.find(conv.inputs[1]);
    if (w_it == graph.constants.end() || !passes::is_float(w_it->second.type) ||
        w_it->second.shape.size() != 4)
      continue;
    const HostTensor& w = w_it->second;
    const std::int64_t k = w.shape[0];
    const HostTensor* bias = nullptr;
    if (conv.inputs.size() > 2 && !conv.inputs[2].empty()) {
      const auto b_it = graph.constants.find(conv.inputs[2]);
      if (b_it == graph.constants.end() || b_it->second.shape != Shape{k}) continue;
      bias = &b_it->second;
    }
    const HostTensor* stats[4];
    bool all = true;
    for (std::size_t i = 0; i < 4; ++i)
      all = all && (stats[i] = channel_constant(graph, bn, i + 1, k)) != nullptr;
    if (!all) continue;

    const double eps = bn.float_attr("epsilon", 1e-5);
    const auto scale = stats[0]->as_double(), shift = stats[1]->as_double(), mean = stats[2]->as_double(),
               var = stats[3]->as_double();
    auto wv = w.as_double();
    const std::vector<double> bv =
        bias ? bias->as_double() : std::vector<double>(static_cast<std::size_t>(k), 0.0);
    std::vector<double> new_bias(static_cast<std::size_t>(k));
    const std::size_t per_filter = wv.size() / static_cast<std::size_t>(k);
    for (std::size_t c = 0; c < static_cast<std::size_t>(k); ++c) {
      const double s = scale[c] / std::sqrt(var[c] + eps);
      for (std::size_t i = 0; i < per_filter; ++i) wv[c * per_filter + i] *= s;
      new_bias[c] = (bv[c] - mean[c]) * s + shift[c];
    }
    const std::string w_name = passes::fresh_name(graph, conv.name + "_bn_w");
    passes::set_constant(graph, w_name, passes::from_doubles(wv, w.shape, w.type));
    const std::string b_name = passes::fresh_name(graph, conv.name + "_bn_b");
    passes::set_constant(graph, b_name, passes::from_doubles(new_bias, {k}, w.type));
    conv.inputs = {conv.inputs[0], w_name, b_name};
    conv.outputs[0] = bn.outputs[0];
    removed[j] = true;
    ++folded;
  }
  if (folded == 0) return 0;
  std::vector<Node> kept;
  for (std::size_t i = 0; i < graph.nodes.size(); ++i) {
    if (!removed[i]) kept.push_back(std::move(graph.nodes[i]));
  }
  graph.nodes = std::move(kept);
  passes::refresh(graph);
  return folded;
}

}  // namespace galley::model
