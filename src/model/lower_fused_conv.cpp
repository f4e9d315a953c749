// galley.FusedConv (the conv-fusion pass's node): Y = activation(conv(X, W) + B + R), one
// convolution_forward call with the fused epilogue; the tuner chooses between the solvers that
// apply it and the unfused sequence (<backend>.conv.unfused).
#include "galley/dnn/activation.hpp"
#include "galley/dnn/convolution.hpp"
#include "model/lower_conv.hpp"

namespace galley::model::detail {
namespace {

// The epilogue's activation from the node's "activation" attribute ("" for none), with the
// activation op's parameters (alpha: leaky relu's slope, elu's alpha, clip's min; beta: clip's max).
std::optional<dnn::Activation> epilogue_activation(const LoweringContext& ctx) {
  const std::string name = ctx.node.string_attr("activation", "");
  using A = dnn::Activation;
  if (name.empty()) return std::nullopt;
  if (name == "Relu") return A::relu;
  if (name == "LeakyRelu") return A::leaky_relu;
  if (name == "Elu") return A::elu;
  if (name == "Clip") return A::clip;
  if (name == "Sigmoid") return A::sigmoid;
  if (name == "Tanh") return A::tanh;
  if (name == "HardSwish") return A::hardswish;
  ctx.fail("attribute 'activation' = '" + name + "' is not an epilogue activation");
}

LoweredNode fused_conv(const LoweringContext& ctx) {
  dnn::ConvProblem p = conv_problem(ctx);
  p.epilogue.bias = ctx.has_input(2);
  p.epilogue.residual = ctx.has_input(3);
  p.epilogue.activation = epilogue_activation(ctx);
  if (p.epilogue.activation) {
    const auto a = *p.epilogue.activation;
    using A = dnn::Activation;
    const bool has_alpha = a == A::leaky_relu || a == A::elu || a == A::clip;
    p.epilogue.alpha = has_alpha ? ctx.node.float_attr("activation_alpha", 0) : 0;
    p.epilogue.beta = a == A::clip ? ctx.node.float_attr("activation_beta", 0) : 0;
  }
  try {
    p.validate();
  } catch (const Error& e) {
    ctx.fail(e.what());
  }
  LoweredNode out;
  out.output_descs.push_back(p.y_desc());
  out.run = [p, prepared = prepared_weights_slot(ctx)](RunContext& rc) {
    Tensor& y = *rc.outputs[0];
    const Tensor& w = *rc.inputs[1];
    // Constants are uploaded row-major in their logical shape; under NHWC the layout pass stored
    // the weights' bytes as K, Y, X, C, which the problem's descriptor reads.
    const Tensor wv = Tensor::wrap(w.device(), p.w_desc(), w.data(), w.storage_bytes());
    std::optional<Tensor> bias, residual;
    if (p.epilogue.bias) {
      const Tensor& b = *rc.inputs[2];
      bias = Tensor::wrap(b.device(), dnn::TensorDesc::contiguous(p.dtype, {p.k}), b.data(), b.storage_bytes());
    }
    if (p.epilogue.residual) {
      const Tensor& r = *rc.inputs[3];
      residual = Tensor::wrap(r.device(), p.y_desc(), r.data(), r.storage_bytes());
    }
    dnn::convolution_forward(rc.stream, p, *rc.inputs[0], wv, bias ? &*bias : nullptr, residual ? &*residual : nullptr,
                             y, nullptr, &rc.report, prepared);
  };
  return out;
}

const bool kRegistered = register_lowering("galley.FusedConv", fused_conv);

}  // namespace
}  // namespace galley::model::detail
