// BatchNormalization nodes (inference) as batch_norm_inference calls.
#include "galley/dnn/normalization.hpp"
#include "model/lowering.hpp"

namespace galley::model::detail {
namespace {

LoweredNode batch_norm(const LoweringContext& ctx) {
  const Shape& x = ctx.input(0).shape;
  if (x.size() != 4) ctx.fail("only 4-D batch normalisation runs, got " + to_string(x));
  for (std::size_t i = 1; i < 5; ++i) {
    if (ctx.input(i).type != ElemType::f32) ctx.fail("scale, bias, mean and var must be float32");
  }
  dnn::BatchNormProblem p{.n = x[0], .c = x[1], .h = x[2], .w = x[3],
                          .dtype = device_dtype(ctx.input(0).type).value_or(DType::f32), .layout = node_layout(ctx.node),
                          .mode = dnn::BatchNormMode::inference, .epsilon = ctx.node.float_attr("epsilon", 1e-5)};
  p.validate();
  LoweredNode out;
  out.output_descs.push_back(p.data_desc());
  out.run = [p](RunContext& rc) {
    const auto& in = rc.inputs;
    dnn::batch_norm_inference(rc.stream, p, *in[0], *in[1], *in[2], *in[3], *in[4], *rc.outputs[0], nullptr, &rc.report);
  };
  return out;
}

const bool kRegistered = [] {
  register_lowering("BatchNormalization", batch_norm);
  return true;
}();

}  // namespace
}  // namespace galley::model::detail
