// Softmax and LogSoftmax nodes as softmax_forward calls.
#include "galley/dnn/softmax.hpp"
#include "model/lowering.hpp"

namespace galley::model::detail {
namespace {

// Opset < 13 softmax flattens to [prod(dims before axis), prod(dims from axis)] and normalises the
// rows; opset >= 13 normalises along the one axis. Both run on a contiguous view of the input.
LoweredNode softmax(const LoweringContext& ctx, dnn::SoftmaxAlgorithm algorithm) {
  const dnn::TensorDesc desc = ctx.input_desc(0);
  const auto rank = static_cast<std::int64_t>(ctx.input(0).shape.size());
  std::int64_t axis = ctx.node.int_attr("axis", ctx.graph.opset >= 13 ? -1 : 1);
  if (axis < -rank || axis >= rank) ctx.fail("attribute 'axis' = " + std::to_string(axis) + " is out of range");
  if (axis < 0) axis += rank;
  dnn::TensorDesc view = desc;
  int view_axis = static_cast<int>(axis);
  if (ctx.graph.opset < 13 && axis != rank - 1) {
    const Shape& s = ctx.input(0).shape;
    std::int64_t outer = 1, inner = 1;
    for (std::int64_t i = 0; i < rank; ++i) (i < axis ? outer : inner) *= s[static_cast<std::size_t>(i)];
    view = dnn::TensorDesc::contiguous(desc.dtype, {outer, inner});
    view_axis = 1;
  }
  const dnn::SoftmaxProblem p = dnn::SoftmaxProblem::over(view, view_axis, algorithm);
  p.validate();
  LoweredNode out;
  out.output_descs.push_back(desc);
  out.run = [p, view](RunContext& rc) {
    const Tensor& x = *rc.inputs[0];
    Tensor& y = *rc.outputs[0];
    const Tensor xv = Tensor::wrap(x.device(), view, x.data(), x.storage_bytes());
    Tensor yv = Tensor::wrap(y.device(), view, y.data(), y.storage_bytes());
    dnn::softmax_forward(rc.stream, p, xv, yv, nullptr, &rc.report);
  };
  return out;
}

const bool kRegistered = [] {
  register_lowering("Softmax", [](const LoweringContext& c) { return softmax(c, dnn::SoftmaxAlgorithm::softmax); });
  register_lowering("LogSoftmax", [](const LoweringContext& c) { return softmax(c, dnn::SoftmaxAlgorithm::log_softmax); });
  return true;
}();

}  // namespace
}  // namespace galley::model::detail
