// The cuda plugin's vendor conv solvers (cuDNN, cuBLAS), placed in the list by conv_list.cpp.
#pragma once

#include <memory>

#include "galley/dnn/conv_solver.hpp"

namespace galley::backends::cuda {

std::unique_ptr<dnn::ConvSolver> make_cudnn_conv_solver();
std::unique_ptr<dnn::ConvSolver> make_cudnn_graph_conv_solver();
std::unique_ptr<dnn::ConvSolver> make_cudnn_graph_bwd_data_conv_solver();
std::unique_ptr<dnn::ConvSolver> make_cudnn_graph_bwd_weights_conv_solver();
std::unique_ptr<dnn::ConvSolver> make_cublas_gemm_conv_solver();
std::unique_ptr<dnn::ConvSolver> make_cudnn_bwd_data_conv_solver();
std::unique_ptr<dnn::ConvSolver> make_cudnn_bwd_weights_conv_solver();
std::unique_ptr<dnn::ConvSolver> make_cublas_bwd_data_conv_solver();
std::unique_ptr<dnn::ConvSolver> make_cublas_bwd_weights_conv_solver();

}  // namespace galley::backends::cuda
