// Add, Sub, Mul and Div nodes as eltwise_forward calls with NumPy broadcasting.
#include "galley/dnn/eltwise.hpp"
#include "model/lowering.hpp"

namespace galley::model::detail {
namespace {

LoweredNode binary(const LoweringContext& ctx, dnn::EltwiseOp op) {
  const dnn::TensorDesc a = ctx.input_desc(0), b = ctx.input_desc(1);
  if (a.dtype != b.dtype) ctx.fail("inputs of different element types");
  dnn::EltwiseProblem p{.op = op,
                        .a = std::vector<std::int64_t>(a.dims.begin(), a.dims.begin() + a.rank),
                        .b = std::vector<std::int64_t>(b.dims.begin(), b.dims.begin() + b.rank),
                        .dtype = a.dtype,
                        .layout = a.rank == 4 && b.rank == 4 ? node_layout(ctx.node) : dnn::Layout::nchw};
  p.validate();
  LoweredNode out;
  out.output_descs.push_back(p.dst_desc());
  // eltwise_forward allows dst to be a or b when that input has dst's shape (not broadcast).
  if (p.a == p.dst_shape()) out.inplace_inputs.push_back(0);
  if (p.b == p.dst_shape()) out.inplace_inputs.push_back(1);
  // Under NHWC a constant operand arrives with its row-major upload descriptor (its bytes re-laid
  // by the layout pass), and a [N,C,1,1] value with either layout's strides: seen as the problem's.
  const dnn::TensorDesc a_desc = p.a_desc(), b_desc = p.b_desc();
  out.run = [p, a_desc, b_desc](RunContext& rc) {
    const Tensor& a = *rc.inputs[0];
    const Tensor& b = *rc.inputs[1];
    const Tensor av = Tensor::wrap(a.device(), a_desc, a.data(), a.storage_bytes());
    const Tensor bv = Tensor::wrap(b.device(), b_desc, b.data(), b.storage_bytes());
    dnn::eltwise_forward(rc.stream, p, av, bv, *rc.outputs[0], nullptr, &rc.report);
  };
  return out;
}

const bool kRegistered = [] {
  register_lowering("Add", [](const LoweringContext& c) { return binary(c, dnn::EltwiseOp::add); });
  register_lowering("Sub", [](const LoweringContext& c) { return binary(c, dnn::EltwiseOp::sub); });
  register_lowering("Mul", [](const LoweringContext& c) { return binary(c, dnn::EltwiseOp::mul); });
  register_lowering("Div", [](const LoweringContext& c) { return binary(c, dnn::EltwiseOp::div); });
  return true;
}();

}  // namespace
}  // namespace galley::model::detail
