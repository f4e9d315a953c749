// Gemm (Y = alpha op(A) op(B) + C with C a bias row) and MatMul nodes as gemm calls.
#include "galley/dnn/gemm.hpp"
#include "model/lowering.hpp"

namespace galley::model::detail {
namespace {

LoweredNode gemm_node(const LoweringContext& ctx) {
  const Shape& a = ctx.input(0).shape;
  const Shape& b = ctx.input(1).shape;
  const bool ta = ctx.node.int_attr("transA", 0) != 0, tb = ctx.node.int_attr("transB", 0) != 0;
  const double alpha = ctx.node.float_attr("alpha", 1.0), beta = ctx.node.float_attr("beta", 1.0);
  dnn::GemmProblem p{.m = ta ? a[1] : a[0], .n = tb ? b[0] : b[1], .k = ta ? a[0] : a[1], .trans_a = ta, .trans_b = tb,
                     .alpha = alpha, .dtype = device_dtype(ctx.input(0).type).value_or(DType::f32)};
  int bias_input = -1;
  if (ctx.has_input(2)) {
    const Shape& c = ctx.input(2).shape;
    const bool row = (c.size() == 1 && c[0] == p.n) || (c.size() == 2 && c[0] == 1 && c[1] == p.n);
    if (!row || beta != 1.0) ctx.fail("input C must be a bias row [N] with beta 1; got " + to_string(c) + ", beta " + std::to_string(beta));
    p.bias = true;
    bias_input = 2;
  }
  p.validate();
  LoweredNode out;
  out.output_descs.push_back(p.c_desc());
  const dnn::TensorDesc bias_desc = p.bias_desc();
  out.run = [p, bias_input, bias_desc](RunContext& rc) {
    Tensor bias;
    if (bias_input >= 0) {
      const Tensor& c = *rc.inputs[static_cast<std::size_t>(bias_input)];
      bias = Tensor::wrap(c.device(), bias_desc, c.data(), c.storage_bytes());  // [1, N] seen as [N]
    }
    dnn::gemm(rc.stream, p, *rc.inputs[0], *rc.inputs[1], *rc.outputs[0], bias_input >= 0 ? &bias : nullptr, nullptr, &rc.report);
  };
  return out;
}

LoweredNode matmul(const LoweringContext& ctx) {
  const Shape& a = ctx.input(0).shape;
  const Shape& b = ctx.input(1).shape;
  if (a.size() < 2 || a.size() > 3 || b.size() != 2) ctx.fail("only [M,K] or [B,M,K] times [K,N] runs, got " + to_string(a) + " x " + to_string(b));
  const std::int64_t batch = a.size() == 3 ? a[0] : 1;
  dnn::GemmProblem p{.m = a[a.size() - 2], .n = b[1], .k = b[0], .batch = batch, .shared_b = batch > 1,
                     .dtype = device_dtype(ctx.input(0).type).value_or(DType::f32)};
  p.validate();
  LoweredNode out;
  out.output_descs.push_back(ctx.output_desc(0));
  const dnn::TensorDesc c_desc = p.c_desc();
  out.run = [p, c_desc](RunContext& rc) {
    Tensor& y = *rc.outputs[0];
    Tensor view = Tensor::wrap(y.device(), c_desc, y.data(), y.storage_bytes());
    dnn::gemm(rc.stream, p, *rc.inputs[0], *rc.inputs[1], view, nullptr, nullptr, &rc.report);
  };
  return out;
}

const bool kRegistered = [] {
  register_lowering("Gemm", gemm_node);
  register_lowering("MatMul", matmul);
  return true;
}();

}  // namespace
}  // namespace galley::model::detail
