// Ops that only rename or reshape a contiguous value: its storage is shared, nothing runs.
#include "model/lowering.hpp"

namespace galley::model::detail {
namespace {

LoweredNode view_of_input0(const LoweringContext& ctx) {
  LoweredNode out;
  out.alias_input = 0;
  out.output_descs.push_back(ctx.output_desc(0));
  if (ctx.input_desc(0).elements() != out.output_descs[0].elements()) ctx.fail("a view must keep the element count");
  return out;
}

LoweredNode dropout(const LoweringContext& ctx) {
  if (ctx.node.outputs.size() > 1 && !ctx.node.outputs[1].empty()) ctx.fail("output 'mask' is not supported (inference only)");
  return view_of_input0(ctx);
}

const bool kRegistered = [] {
  for (const char* op : {"Identity", "Flatten", "Reshape", "Squeeze", "Unsqueeze"}) register_lowering(op, view_of_input0);
  register_lowering("Dropout", dropout);
  return true;
}();

}  // namespace
}  // namespace galley::model::detail
