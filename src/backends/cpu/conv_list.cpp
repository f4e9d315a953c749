// The cpu backend's convolution list, all three directions, fastest first: forward's 1x1 GEMM and
// depthwise kernels lead for the shapes they claim, Winograd F(4x4,3x3) before im2col + GEMM for
// 3x3 stride 1, the direct kernel for what no GEMM form suits; the backward depthwise kernels before
// the backward GEMMs; the unfused sequence for a fused epilogue no kernel above takes; the
// references last. Each solver refuses the directions it does not do. The
// order lives here alone.
#include "backends/cpu/conv_solvers.hpp"
#include "dnn/conv_unfused.hpp"
#include "dnn/ref_conv_backward.hpp"
#include "dnn/ref_conv_direct.hpp"

namespace galley::backends::cpu {
namespace {

const bool kRegistered = [] {
  std::vector<std::unique_ptr<dnn::SolverBase>> list;
  list.push_back(make_conv_gemm_1x1());
  list.push_back(make_conv_depthwise());
  list.push_back(make_conv_winograd_f4x3());
  list.push_back(make_conv_im2col_gemm());
  list.push_back(make_conv_direct());
  list.push_back(make_conv_bwd_data_depthwise());
  list.push_back(make_conv_bwd_weights_depthwise());
  list.push_back(make_conv_bwd_data_gemm());
  list.push_back(make_conv_bwd_weights_gemm());
  list.push_back(dnn::make_conv_unfused("cpu"));
  list.push_back(dnn::make_ref_conv_direct());
  list.push_back(dnn::make_ref_conv_bwd_data());
  list.push_back(dnn::make_ref_conv_bwd_weights());
  dnn::register_solvers("cpu", dnn::OpKind::conv, std::move(list));
  return true;
}();

}  // namespace
}  // namespace galley::backends::cpu
