// Activation nodes as activation_forward calls: Relu, LeakyRelu, Elu, Sigmoid, Tanh, Clip,
// HardSigmoid (PyTorch's slope and offset only), HardSwish, Gelu (erf and tanh forms), and the
// conv-fusion pass's galley.Silu.
#include <cmath>
#include <limits>

#include "galley/dnn/activation.hpp"
#include "model/lowering.hpp"

namespace galley::model::detail {
namespace {

LoweredNode activation(const LoweringContext& ctx, dnn::Activation act, double alpha, double beta) {
  const dnn::TensorDesc desc = in_node_layout(ctx.node, ctx.input_desc(0));
  const dnn::ActivProblem p = activation_problem(ctx.node, act, desc, alpha, beta);
  p.validate();
  LoweredNode out;
  out.output_descs.push_back(p.desc());
  out.inplace_inputs = {0};  // activation_forward allows y == x
  out.run = [p](RunContext& rc) {
    dnn::activation_forward(rc.stream, p, *rc.inputs[0], *rc.outputs[0], nullptr, &rc.report);
  };
  return out;
}

double clip_bound(const LoweringContext& ctx, std::size_t input, const char* attr, double fallback) {
  if (ctx.node.has(attr)) return ctx.node.float_attr(attr, fallback);
  if (const HostTensor* t = ctx.constant(input)) return t->as_double().at(0);
  if (ctx.has_input(input)) ctx.fail(std::string("input '") + attr + "' must be a constant");
  return fallback;
}

const bool kRegistered = [] {
  using A = dnn::Activation;
  register_lowering("Relu", [](const LoweringContext& c) { return activation(c, A::relu, 0, 0); });
  register_lowering("LeakyRelu", [](const LoweringContext& c) { return activation(c, A::leaky_relu, c.node.float_attr("alpha", 0.01), 0); });
  register_lowering("Elu", [](const LoweringContext& c) { return activation(c, A::elu, c.node.float_attr("alpha", 1.0), 0); });
  register_lowering("Sigmoid", [](const LoweringContext& c) { return activation(c, A::sigmoid, 0, 0); });
  register_lowering("Tanh", [](const LoweringContext& c) { return activation(c, A::tanh, 0, 0); });
  register_lowering("HardSwish", [](const LoweringContext& c) { return activation(c, A::hardswish, 0, 0); });
  register_lowering("galley.Silu", [](const LoweringContext& c) { return activation(c, A::silu, 0, 0); });
  register_lowering("Clip", [](const LoweringContext& c) {
    const double inf = std::numeric_limits<double>::infinity();
    const double lo = clip_bound(c, 1, "min", -inf), hi = clip_bound(c, 2, "max", inf);
    if (lo == 0 && std::isinf(hi)) return activation(c, A::relu, 0, 0);
    if (!std::isfinite(lo) || !std::isfinite(hi)) c.fail("a one-sided Clip other than relu is not supported");
    return activation(c, A::clip, lo, hi);
  });
  register_lowering("HardSigmoid", [](const LoweringContext& c) {
    const double alpha = c.node.float_attr("alpha", 0.2), beta = c.node.float_attr("beta", 0.5);
    if (std::abs(alpha - 1.0 / 6) > 1e-6 || std::abs(beta - 0.5) > 1e-6) {
      c.fail("attributes alpha = " + std::to_string(alpha) + ", beta = " + std::to_string(beta) +
             ": only PyTorch's hardsigmoid (alpha 1/6, beta 0.5) runs");
    }
    return activation(c, A::hardsigmoid, 0, 0);
  });
  register_lowering("Gelu", [](const LoweringContext& c) {
    const std::string approximate = c.node.string_attr("approximate", "none");
    if (approximate != "none" && approximate != "tanh") c.fail("attribute 'approximate' = '" + approximate + "' (valid: none, tanh)");
    return activation(c, approximate == "tanh" ? A::gelu_tanh : A::gelu_erf, 0, 0);
  });
  return true;
}();

}  // namespace
}  // namespace galley::model::detail
