// The single-source gpu.conv.* solvers a GPU plugin brings, as factories, and the list entry point
// that each GPU backend's own conv_list.cpp defines (the order lives there alone).
#pragma once

#include <memory>
#include <string_view>

#include "galley/dnn/conv_solver.hpp"

namespace galley::backends::gpu {

/// Each makes one solver for `backend` ("cuda" or "hip"), whose device it checks against.
std::unique_ptr<dnn::ConvSolver> make_conv_depthwise(std::string_view backend);
std::unique_ptr<dnn::ConvSolver> make_conv_grouped(std::string_view backend);
std::unique_ptr<dnn::ConvSolver> make_conv_igemm_tc(std::string_view backend);
std::unique_ptr<dnn::ConvSolver> make_conv_igemm_tc_nchw(std::string_view backend);
std::unique_ptr<dnn::ConvSolver> make_conv_winograd(std::string_view backend);
std::unique_ptr<dnn::ConvSolver> make_conv_gemm_1x1(std::string_view backend);
/// NHWC 1x1 (no padding, one group) forward (unit stride) and backward data (any stride, through a
/// compact product and a scatter) as one product on gpu.gemm.tc's kernel: "gpu.conv.gemm_1x1_tc".
std::unique_ptr<dnn::ConvSolver> make_conv_gemm_1x1_tc(std::string_view backend);
std::unique_ptr<dnn::ConvSolver> make_conv_igemm_f32_nchw(std::string_view backend);
std::unique_ptr<dnn::ConvSolver> make_conv_igemm_f32(std::string_view backend);
/// Claims every problem: the last entry of a GPU list.
std::unique_ptr<dnn::ConvSolver> make_conv_direct(std::string_view backend);

/// The backward directions' single-source solvers.
std::unique_ptr<dnn::ConvSolver> make_conv_bwd_data_depthwise(std::string_view backend);
std::unique_ptr<dnn::ConvSolver> make_conv_bwd_weights_depthwise(std::string_view backend);
/// Backward-data run by the forward solver named `forward` ("gpu.conv.igemm_tc") on a view of dy with
/// the flipped filter, named "gpu.conv.bwd_data_via_igemm_tc": any groups, stride and padding within
/// the filter's extent.
std::unique_ptr<dnn::ConvSolver> make_conv_bwd_data_as_forward(std::string_view backend,
                                                               std::string_view forward);
/// Backward-weights (unit stride and dilation, groups 1) as one forward product on igemm_tc's kernel
/// over x and dy with the batch moved innermost: "gpu.conv.bwd_weights_via_igemm_tc".
std::unique_ptr<dnn::ConvSolver> make_conv_bwd_weights_via_igemm_tc(std::string_view backend);
std::unique_ptr<dnn::ConvSolver> make_conv_bwd_data_igemm(std::string_view backend);
/// "gpu.conv.bwd_weights_winograd": f32 3x3 stride-1 weight gradients as Winograd F(3x3, 4x4).
std::unique_ptr<dnn::ConvSolver> make_conv_bwd_weights_winograd(std::string_view backend);
std::unique_ptr<dnn::ConvSolver> make_conv_bwd_weights_igemm(std::string_view backend);
/// Claim every backward problem: the last backward entries of a GPU list.
std::unique_ptr<dnn::ConvSolver> make_conv_bwd_data_direct(std::string_view backend);
std::unique_ptr<dnn::ConvSolver> make_conv_bwd_weights_direct(std::string_view backend);

}  // namespace galley::backends::gpu
