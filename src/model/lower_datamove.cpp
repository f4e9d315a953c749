// Concat, Split, Transpose and Pad (constant) nodes as the data-movement ops.
#include <numeric>

#include "galley/dnn/data_movement.hpp"
#include "model/lowering.hpp"

namespace galley::model::detail {
namespace {

int axis_of(const LoweringContext& ctx, std::int64_t fallback) {
  const auto rank = static_cast<std::int64_t>(ctx.input(0).shape.size());
  std::int64_t axis = ctx.node.int_attr("axis", fallback);
  if (axis < -rank || axis >= rank) ctx.fail("attribute 'axis' = " + std::to_string(axis) + " is out of range");
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

LoweredNode concat(const LoweringContext& ctx) {
  const int axis = axis_of(ctx, 0);
  for (std::size_t i = 0; i < ctx.node.inputs.size(); ++i) ctx.input_desc(i);
  LoweredNode out;
  out.output_descs.push_back(ctx.output_desc(0));
  out.run = [axis](RunContext& rc) {
    std::vector<Tensor> inputs;
    for (const Tensor* t : rc.inputs) inputs.push_back(*t);
    dnn::concat(rc.stream, inputs, *rc.outputs[0], axis, nullptr, &rc.report);
  };
  return out;
}

LoweredNode split(const LoweringContext& ctx) {
  const int axis = axis_of(ctx, 0);
  LoweredNode out;
  for (std::size_t i = 0; i < ctx.node.outputs.size(); ++i) out.output_descs.push_back(ctx.output_desc(i));
  out.run = [axis](RunContext& rc) {
    std::vector<Tensor> outputs;
    for (Tensor* t : rc.outputs) outputs.push_back(*t);  // copies share the storage
    dnn::split(rc.stream, *rc.inputs[0], outputs, axis, nullptr, &rc.report);
  };
  return out;
}

LoweredNode transpose(const LoweringContext& ctx) {
  const auto rank = ctx.input(0).shape.size();
  std::vector<std::int64_t> reversed(rank);
  std::iota(reversed.rbegin(), reversed.rend(), 0);
  const auto perm64 = ctx.node.ints_attr("perm", reversed);
  const std::vector<int> perm(perm64.begin(), perm64.end());
  LoweredNode out;
  out.output_descs.push_back(ctx.output_desc(0));
  out.run = [perm](RunContext& rc) { dnn::transpose(rc.stream, *rc.inputs[0], *rc.outputs[0], perm, nullptr, &rc.report); };
  return out;
}

LoweredNode pad(const LoweringContext& ctx) {
  const std::size_t rank = ctx.input(0).shape.size();
  std::vector<std::int64_t> pads = ctx.node.ints_attr("pads", {});
  if (pads.empty()) {
    const HostTensor* t = ctx.constant(1);
    if (t == nullptr) ctx.fail("input 'pads' must be a constant");
    pads = t->as_int64(ctx.node.label() + " pads");
  }
  double value = ctx.node.float_attr("value", 0.0);
  if (const HostTensor* v = ctx.constant(2)) value = v->as_double().at(0);
  const std::vector<std::int64_t> before(pads.begin(), pads.begin() + static_cast<std::ptrdiff_t>(rank));
  const std::vector<std::int64_t> after(pads.begin() + static_cast<std::ptrdiff_t>(rank), pads.end());
  LoweredNode out;
  out.output_descs.push_back(ctx.output_desc(0));
  out.run = [before, after, value](RunContext& rc) {
    dnn::pad(rc.stream, *rc.inputs[0], *rc.outputs[0], before, after, value, nullptr, &rc.report);
  };
  return out;
}

const bool kRegistered = [] {
  register_lowering("Concat", concat);
  register_lowering("Split", split);
  register_lowering("Transpose", transpose);
  register_lowering("Pad", pad);
  return true;
}();

}  // namespace
}  // namespace galley::model::detail
