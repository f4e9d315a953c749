// Dead-node removal: walking back from the graph outputs, a node is live when one of its outputs is
// read by a live node or is a graph output. Nodes infer_shapes() folded into constants are dropped
// too (their outputs live on as constants), and so is every constant no live node reads.
#include <set>

#include "galley/model/passes.hpp"
#include "model/passes/graph_edit.hpp"

namespace galley::model {

int remove_dead_nodes(Graph& graph) {
  std::set<std::string> needed(graph.outputs.begin(), graph.outputs.end());
  std::vector<bool> live(graph.nodes.size(), false);
  for (std::size_t i = graph.nodes.size(); i-- > 0;) {
    const Node& node = graph.nodes[i];
    if (passes::is_folded(graph, node)) continue;
    for (const std::string& out : node.outputs) live[i] = live[i] || (!out.empty() && needed.count(out) != 0);
    if (!live[i]) continue;
    for (const std::string& in : node.inputs) {
      if (!in.empty()) needed.insert(in);
    }
  }
  int removed = 0;
  std::vector<Node> kept;
  for (std::size_t i = 0; i < graph.nodes.size(); ++i) {
    if (live[i]) {
      kept.push_back(std::move(graph.nodes[i]));
    } else {
      ++removed;
    }
  }
  graph.nodes = std::move(kept);
  for (auto it = graph.constants.begin(); it != graph.constants.end();) {
    if (needed.count(it->first) == 0) {
      graph.values.erase(it->first);
      it = graph.constants.erase(it);
      ++removed;
    } else {
      ++it;
    }
  }
  if (removed > 0) passes::refresh(graph);
  return removed;
}

}  // namespace galley::model
