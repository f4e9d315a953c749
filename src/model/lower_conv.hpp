// What Conv and galley.FusedConv lowerings share: the node's convolution problem (in the node's
// layout) and the Conv node's run. Internal to the model layer.
#pragma once

#include <memory>

#include "galley/dnn/conv_problem.hpp"
#include "galley/dnn/prepared_weights.hpp"
#include "model/lowering.hpp"

namespace galley::model::detail {

/// The forward problem of a Conv-like node (inputs X, W[, B]) in node_layout(node); fails naming
/// the node for what the op layer does not run (auto_pad, asymmetric pads, a bias not [K]).
dnn::ConvProblem conv_problem(const LoweringContext& ctx);

/// A slot for the node's weights in a solver's own form when they are a graph constant (input 1),
/// else null: computed weights may change from run to run.
std::shared_ptr<dnn::PreparedWeights> prepared_weights_slot(const LoweringContext& ctx);

/// Runs the convolution of `p` into `y` (the weights seen in the problem's layout), with `bias`
/// (not null) as its fused epilogue and `prepared` (may be null) as the weights' slot; the solver
/// goes into `report`.
void run_conv(RunContext& rc, const dnn::ConvProblem& p, const Tensor& x, const Tensor& w, const Tensor* bias,
              Tensor& y, const std::shared_ptr<dnn::PreparedWeights>& prepared);

}  // namespace galley::model::detail
