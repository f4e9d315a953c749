// Cast between float types and the layout pass's galley.Reorder as reorder calls: the same logical
// dims, another dtype (round to nearest even) or memory order.
#include "galley/dnn/data_movement.hpp"
#include "model/lowering.hpp"

namespace galley::model::detail {
namespace {

std::vector<std::int64_t> dims_of(const LoweringContext& ctx) {
  const Shape& s = ctx.input(0).shape;
  return s.empty() ? std::vector<std::int64_t>{1} : std::vector<std::int64_t>(s.begin(), s.end());
}

DType float_dtype(const LoweringContext& ctx, const ValueInfo& value, const std::string& name) {
  const auto dtype = device_dtype(value.type);
  if (!dtype || (*dtype != DType::f32 && *dtype != DType::f16 && *dtype != DType::bf16)) {
    ctx.fail("value '" + name + "' is " + to_string(value.type) +
             "; only f32, f16 and bf16 convert on a device");
  }
  return *dtype;
}

LoweredNode run_reorder(const dnn::ReorderProblem& p) {
  p.validate();
  LoweredNode out;
  out.output_descs.push_back(p.dst_desc());
  out.run = [](RunContext& rc) {
    dnn::reorder(rc.stream, *rc.inputs[0], *rc.outputs[0], nullptr, &rc.report);
  };
  return out;
}

LoweredNode cast(const LoweringContext& ctx) {
  const DType from = float_dtype(ctx, ctx.input(0), ctx.node.inputs[0]);
  const DType to = float_dtype(ctx, ctx.output(0), ctx.node.outputs[0]);
  return run_reorder({.dims = dims_of(ctx), .src_dtype = from, .dst_dtype = to});
}

LoweredNode reorder(const LoweringContext& ctx) {
  const DType dtype = float_dtype(ctx, ctx.input(0), ctx.node.inputs[0]);
  if (ctx.input(0).shape.size() != 4) ctx.fail("only rank-4 values change layout");
  const dnn::Layout to =
      ctx.node.string_attr("layout", "NCHW") == "NHWC" ? dnn::Layout::nhwc : dnn::Layout::nchw;
  const dnn::Layout from = to == dnn::Layout::nhwc ? dnn::Layout::nchw : dnn::Layout::nhwc;
  return run_reorder(
      {.dims = dims_of(ctx), .src_dtype = dtype, .src_layout = from, .dst_dtype = dtype, .dst_layout = to});
}

const bool kRegistered = [] {
  register_lowering("Cast", cast);
  register_lowering("galley.Reorder", reorder);
  return true;
}();

}  // namespace
}  // namespace galley::model::detail
