// What Conv and galley.FusedConv lowerings share: the node's convolution problem (in the node's
// layout) and its bias add. Internal to the model layer.
#pragma once

#include "galley/dnn/conv_problem.hpp"
#include "galley/dnn/eltwise.hpp"
#include "model/lowering.hpp"

namespace galley::model::detail {

/// The forward problem of a Conv-like node (inputs X, W[, B]) in node_layout(node); fails naming
/// the node for what the op layer does not run (auto_pad, asymmetric pads, a bias not [K]).
dnn::ConvProblem conv_problem(const LoweringContext& ctx);

/// y += b broadcast over [1, K, 1, 1], in the conv's layout.
dnn::EltwiseProblem bias_add_problem(const dnn::ConvProblem& p);

/// Runs the convolution of `p` into `y` (the weights seen in the problem's layout), then the bias
/// add when `bias` is not null; the solvers go into `report`.
void run_conv(RunContext& rc, const dnn::ConvProblem& p, const Tensor& x, const Tensor& w, const Tensor* bias,
              Tensor& y);

}  // namespace galley::model::detail
