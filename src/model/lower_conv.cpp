// Conv nodes as convolution_forward calls (NCHW as ONNX gives it, or NHWC where the layout pass
// chose it). A bias is the call's fused epilogue, so a solver that takes it adds it as it stores
// each output tile (the tuner weighs that against the unfused sequence, conv then the elementwise
// add), instead of a second pass over y: a linear projection (MobileNet's bottlenecks, ResNet's
// downsampling branch) is a Conv with a bias and nothing after it for the conv-fusion pass.
// Weights that are graph constants get a prepared-weights slot per node, so a solver that packs or
// transforms them does that once per executor instead of once per run.
#include "galley/dnn/convolution.hpp"
#include "model/lower_conv.hpp"

namespace galley::model::detail {

dnn::ConvProblem conv_problem(const LoweringContext& ctx) {
  const Shape& x = ctx.input(0).shape;
  const Shape& w = ctx.input(1).shape;
  const Shape& y = ctx.output(0).shape;
  if (x.size() != 4 || w.size() != 4) ctx.fail("only 2-D convolution runs");
  const auto pads = ctx.node.ints_attr("pads", {0, 0, 0, 0});
  const auto strides = ctx.node.ints_attr("strides", {1, 1});
  const auto dilations = ctx.node.ints_attr("dilations", {1, 1});
  if (ctx.node.string_attr("auto_pad", "NOTSET") != "NOTSET") ctx.fail("attribute 'auto_pad' is not supported; export with explicit pads");
  if (pads[0] != pads[2] || pads[1] != pads[3]) ctx.fail("asymmetric 'pads' are not supported");
  const auto dtype = device_dtype(ctx.input(0).type);
  dnn::ConvProblem p{.n = x[0], .c = x[1], .h = x[2], .w = x[3], .k = w[0], .y = w[2], .x = w[3],
                     .pad_h = pads[0], .pad_w = pads[1], .stride_h = strides[0], .stride_w = strides[1],
                     .dilation_h = dilations[0], .dilation_w = dilations[1],
                     .groups = ctx.node.int_attr("group", 1), .dtype = dtype.value_or(DType::f32),
                     .layout = node_layout(ctx.node)};
  p.validate();
  if (p.out_h() != y[2] || p.out_w() != y[3]) ctx.fail("output size disagrees with shape inference");
  if (ctx.has_input(2) && ctx.input(2).shape != Shape{p.k}) {
    ctx.fail("bias of shape " + to_string(ctx.input(2).shape) + " is not [" + std::to_string(p.k) + "]");
  }
  return p;
}

std::shared_ptr<dnn::PreparedWeights> prepared_weights_slot(const LoweringContext& ctx) {
  return ctx.constant(1) != nullptr ? std::make_shared<dnn::PreparedWeights>() : nullptr;
}

void run_conv(RunContext& rc, const dnn::ConvProblem& p, const Tensor& x, const Tensor& w, const Tensor* bias,
              Tensor& y, const std::shared_ptr<dnn::PreparedWeights>& prepared) {
  // Constants are uploaded row-major in their logical shape; under NHWC the layout pass stored
  // the weights' bytes as K, Y, X, C, which the problem's descriptor reads.
  const Tensor wv = Tensor::wrap(w.device(), p.w_desc(), w.data(), w.storage_bytes());
  if (bias == nullptr) {
    dnn::convolution_forward(rc.stream, p, x, wv, y, nullptr, &rc.report, prepared);
    return;
  }
  dnn::ConvProblem fused = p;
  fused.epilogue = dnn::ConvEpilogue{.bias = true};
  const Tensor b = Tensor::wrap(bias->device(), dnn::TensorDesc::contiguous(p.dtype, {p.k}), bias->data(),
                                bias->storage_bytes());
  dnn::convolution_forward(rc.stream, fused, x, wv, &b, nullptr, y, nullptr, &rc.report, prepared);
}

namespace {

LoweredNode conv(const LoweringContext& ctx) {
  const dnn::ConvProblem p = conv_problem(ctx);
  const bool bias = ctx.has_input(2);
  LoweredNode out;
  out.output_descs.push_back(p.y_desc());
  out.run = [p, bias, prepared = prepared_weights_slot(ctx)](RunContext& rc) {
    run_conv(rc, p, *rc.inputs[0], *rc.inputs[1], bias ? rc.inputs[2] : nullptr, *rc.outputs[0], prepared);
  };
  return out;
}

const bool kRegistered = register_lowering("Conv", conv);

}  // namespace
}  // namespace galley::model::detail
