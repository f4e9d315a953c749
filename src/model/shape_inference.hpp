// Shape inference of one node, for builders that add nodes one at a time (infer_shapes() runs it
// over a whole graph). Internal to the model layer.
#pragma once

#include "galley/model/graph.hpp"

namespace galley::model {

/// Infers (or folds) `node`'s outputs into `graph` from its inputs' infos; throws as infer_shapes().
void infer_node(Graph& graph, const Node& node);

/// True when a value of `shape` (no negative dim) and `type` has a byte size that int64 holds.
bool byte_size_fits(const Shape& shape, ElemType type);

}  // namespace galley::model
