// The cpu backend's convolution solvers, as factories; conv_list.cpp sets their order.
#pragma once

#include <memory>

#include "galley/dnn/conv_solver.hpp"

namespace galley::backends::cpu {

std::unique_ptr<dnn::ConvSolver> make_conv_gemm_1x1();
std::unique_ptr<dnn::ConvSolver> make_conv_depthwise();
std::unique_ptr<dnn::ConvSolver> make_conv_winograd_f4x3();
std::unique_ptr<dnn::ConvSolver> make_conv_im2col_gemm();
std::unique_ptr<dnn::ConvSolver> make_conv_direct();

std::unique_ptr<dnn::ConvSolver> make_conv_bwd_data_depthwise();
std::unique_ptr<dnn::ConvSolver> make_conv_bwd_weights_depthwise();
std::unique_ptr<dnn::ConvSolver> make_conv_bwd_data_gemm();
std::unique_ptr<dnn::ConvSolver> make_conv_bwd_weights_gemm();

}  // namespace galley::backends::cpu
