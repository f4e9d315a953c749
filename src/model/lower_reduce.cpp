// ReduceMean and ReduceSum nodes as reduce_forward calls (keepdims either way: the output is a
// view of the keep-dims result).
#include "galley/dnn/reduce.hpp"
#include "model/lowering.hpp"

namespace galley::model::detail {
namespace {

LoweredNode reduce(const LoweringContext& ctx, dnn::ReduceOp op) {
  const dnn::TensorDesc desc = ctx.input_desc(0);
  const auto rank = static_cast<std::int64_t>(ctx.input(0).shape.size());
  std::vector<std::int64_t> axes = ctx.node.ints_attr("axes", {});
  if (axes.empty() && ctx.has_input(1)) {
    const HostTensor* t = ctx.constant(1);
    if (t == nullptr) ctx.fail("input 'axes' must be a constant");
    axes = t->as_int64(ctx.node.label() + " axes");
  }
  if (axes.empty()) {
    if (ctx.node.int_attr("noop_with_empty_axes", 0) != 0) ctx.fail("noop_with_empty_axes = 1 is not supported");
    for (std::int64_t i = 0; i < rank; ++i) axes.push_back(i);
  }
  std::vector<int> ax;
  for (const std::int64_t a : axes) {
    if (a < -rank || a >= rank) ctx.fail("axis " + std::to_string(a) + " is out of range");
    ax.push_back(static_cast<int>(a < 0 ? a + rank : a));
  }
  const dnn::ReduceProblem p = dnn::ReduceProblem::over(desc, ax, op);
  p.validate();
  LoweredNode out;
  out.output_descs.push_back(ctx.output_desc(0));
  const dnn::TensorDesc kept = p.dst_desc();
  out.run = [p, kept](RunContext& rc) {
    Tensor& y = *rc.outputs[0];
    Tensor view = Tensor::wrap(y.device(), kept, y.data(), y.storage_bytes());
    dnn::reduce_forward(rc.stream, p, *rc.inputs[0], view, nullptr, &rc.report);
  };
  return out;
}

const bool kRegistered = [] {
  register_lowering("ReduceMean", [](const LoweringContext& c) { return reduce(c, dnn::ReduceOp::mean); });
  register_lowering("ReduceSum", [](const LoweringContext& c) { return reduce(c, dnn::ReduceOp::sum); });
  return true;
}();

}  // namespace
}  // namespace galley::model::detail
