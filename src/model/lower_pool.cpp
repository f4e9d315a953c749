// MaxPool, AveragePool, GlobalAveragePool and GlobalMaxPool nodes as pooling_forward calls.
#include "galley/dnn/pool.hpp"
#include "model/lowering.hpp"

namespace galley::model::detail {
namespace {

LoweredNode run_pool(dnn::PoolProblem p) {
  p.validate();
  LoweredNode out;
  out.output_descs.push_back(p.dst_desc());
  out.run = [p](RunContext& rc) {
    dnn::pooling_forward(rc.stream, p, *rc.inputs[0], *rc.outputs[0], nullptr, nullptr, &rc.report);
  };
  return out;
}

LoweredNode window_pool(const LoweringContext& ctx, bool max) {
  const Shape& x = ctx.input(0).shape;
  if (x.size() != 4) ctx.fail("only 2-D pooling runs");
  const auto k = ctx.node.ints_attr("kernel_shape", {});
  const auto strides = ctx.node.ints_attr("strides", {1, 1});
  const auto pads = ctx.node.ints_attr("pads", {0, 0, 0, 0});
  if (ctx.node.string_attr("auto_pad", "NOTSET") != "NOTSET") ctx.fail("attribute 'auto_pad' is not supported; export with explicit pads");
  if (pads[0] != pads[2] || pads[1] != pads[3]) ctx.fail("asymmetric 'pads' are not supported");
  if (ctx.node.ints_attr("dilations", {1, 1}) != std::vector<std::int64_t>{1, 1}) ctx.fail("attribute 'dilations' other than 1 is not supported");
  const auto dtype = device_dtype(ctx.input(0).type).value_or(DType::f32);
  dnn::PoolProblem p{.mode = max ? dnn::PoolMode::max
                                 : (ctx.node.int_attr("count_include_pad", 0) ? dnn::PoolMode::avg_include_pad : dnn::PoolMode::avg_exclude_pad),
                     .n = x[0], .c = x[1], .h = x[2], .w = x[3], .kernel_h = k.at(0), .kernel_w = k.at(1),
                     .pad_h = pads[0], .pad_w = pads[1], .stride_h = strides[0], .stride_w = strides[1],
                     .ceil_mode = ctx.node.int_attr("ceil_mode", 0) != 0, .dtype = dtype,
                     .layout = node_layout(ctx.node)};
  return run_pool(p);
}

LoweredNode global_pool(const LoweringContext& ctx, bool max) {
  const Shape& x = ctx.input(0).shape;
  if (x.size() != 4) ctx.fail("only 2-D global pooling runs");
  dnn::PoolProblem p{.mode = max ? dnn::PoolMode::max : dnn::PoolMode::avg_include_pad, .window = dnn::PoolWindow::global,
                     .n = x[0], .c = x[1], .h = x[2], .w = x[3],
                     .dtype = device_dtype(ctx.input(0).type).value_or(DType::f32), .layout = node_layout(ctx.node)};
  return run_pool(p);
}

const bool kRegistered = [] {
  register_lowering("MaxPool", [](const LoweringContext& c) { return window_pool(c, true); });
  register_lowering("AveragePool", [](const LoweringContext& c) { return window_pool(c, false); });
  register_lowering("GlobalAveragePool", [](const LoweringContext& c) { return global_pool(c, false); });
  register_lowering("GlobalMaxPool", [](const LoweringContext& c) { return global_pool(c, true); });
  return true;
}();

}  // namespace
}  // namespace galley::model::detail
