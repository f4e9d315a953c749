// galley.FusedConv (the conv-fusion pass's node): Y = activation(conv(X, W) + B + R). For now it
// runs as the separate op-layer calls an unfused graph makes (conv, bias add, residual add,
// activation, each in place on Y); a conv entry point with a fused epilogue replaces run() alone.
#include "galley/dnn/activation.hpp"
#include "model/lower_conv.hpp"

namespace galley::model::detail {
namespace {

// The epilogue's activation problem on Y, or nothing for "activation" = "".
std::optional<dnn::ActivProblem> epilogue_activation(const LoweringContext& ctx, const dnn::TensorDesc& y) {
  const std::string name = ctx.node.string_attr("activation", "");
  const double alpha = ctx.node.float_attr("activation_alpha", 0),
               beta = ctx.node.float_attr("activation_beta", 0);
  using A = dnn::Activation;
  std::optional<dnn::ActivProblem> p;
  if (name.empty()) return p;
  if (name == "Relu")
    p = activation_problem(ctx.node, A::relu, y, 0, 0);
  else if (name == "LeakyRelu")
    p = activation_problem(ctx.node, A::leaky_relu, y, alpha, 0);
  else if (name == "Elu")
    p = activation_problem(ctx.node, A::elu, y, alpha, 0);
  else if (name == "Clip")
    p = activation_problem(ctx.node, A::clip, y, alpha, beta);
  else if (name == "Sigmoid")
    p = activation_problem(ctx.node, A::sigmoid, y, 0, 0);
  else if (name == "Tanh")
    p = activation_problem(ctx.node, A::tanh, y, 0, 0);
  else if (name == "HardSwish")
    p = activation_problem(ctx.node, A::hardswish, y, 0, 0);
  else
    ctx.fail("attribute 'activation' = '" + name + "' is not an epilogue activation");
  p->validate();
  return p;
}

LoweredNode fused_conv(const LoweringContext& ctx) {
  const dnn::ConvProblem p = conv_problem(ctx);
  const bool bias = ctx.has_input(2), residual = ctx.has_input(3);
  const dnn::TensorDesc y = p.y_desc();
  const auto act = epilogue_activation(ctx, y);
  const dnn::EltwiseProblem add{.op = dnn::EltwiseOp::add,
                                .a = {p.n, p.k, p.out_h(), p.out_w()},
                                .b = {p.n, p.k, p.out_h(), p.out_w()},
                                .dtype = p.dtype,
                                .layout = p.layout};
  if (residual) add.validate();
  LoweredNode out;
  out.output_descs.push_back(y);
  out.run = [p, bias, residual, act, add](RunContext& rc) {
    Tensor& y = *rc.outputs[0];
    run_conv(rc, p, *rc.inputs[0], *rc.inputs[1], bias ? rc.inputs[2] : nullptr, y);
    if (residual) {
      dnn::CallReport r;
      const Tensor& res = *rc.inputs[3];
      const Tensor rv = Tensor::wrap(res.device(), add.b_desc(), res.data(), res.storage_bytes());
      dnn::eltwise_forward(rc.stream, add, y, rv, y, nullptr, &r);
      rc.report.solver += " + " + r.solver;
    }
    if (act) {
      dnn::CallReport r;
      dnn::activation_forward(rc.stream, *act, y, y, nullptr, &r);
      rc.report.solver += " + " + r.solver;
    }
  };
  return out;
}

const bool kRegistered = register_lowering("galley.FusedConv", fused_conv);

}  // namespace
}  // namespace galley::model::detail
