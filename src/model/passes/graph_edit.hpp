// What the passes share: who reads a value, fresh names, constants as numbers, and re-inferring a
// graph after an edit. Internal to the model layer.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "galley/model/graph.hpp"

namespace galley::model::passes {

/// value -> indices of the nodes reading it (a node reading it twice is listed twice).
std::map<std::string, std::vector<std::size_t>> readers(const Graph& graph);
/// value -> index of the node writing it.
std::map<std::string, std::size_t> producers(const Graph& graph);
bool is_graph_output(const Graph& graph, const std::string& value);
/// True when every output of `node` is a constant already (infer_shapes folded it).
bool is_folded(const Graph& graph, const Node& node);

/// `base`, or `base` with a numeric suffix, naming no value, constant or node of the graph.
std::string fresh_name(const Graph& graph, const std::string& base);

/// Adds or replaces a constant and its value info.
void set_constant(Graph& graph, const std::string& name, HostTensor value);

/// True for f32, f16, bf16 and f64.
bool is_float(ElemType type);
/// `values` as a tensor of `type` (a float type) and `shape`, rounded to nearest even.
HostTensor from_doubles(const std::vector<double>& values, Shape shape, ElemType type);
/// A float constant in another float type.
HostTensor converted(const HostTensor& tensor, ElemType type);

/// Drops value infos no node, input or constant defines any more, re-infers every node's outputs
/// and validates the graph.
void refresh(Graph& graph);

}  // namespace galley::model::passes
