// register_vendor_conv_solvers(): cuDNN and cuBLAS in the cuda plugin's conv list.
#include "backends/cuda/conv_register.hpp"

namespace galley::backends::cuda {

// conv_bwd_cudnn.cpp, conv_bwd_cublas.cpp
std::unique_ptr<dnn::ConvSolver> make_cudnn_bwd_data_conv_solver();
std::unique_ptr<dnn::ConvSolver> make_cudnn_bwd_weights_conv_solver();
std::unique_ptr<dnn::ConvSolver> make_cublas_bwd_data_conv_solver();
std::unique_ptr<dnn::ConvSolver> make_cublas_bwd_weights_conv_solver();

void register_vendor_conv_solvers() {
  // Between the specialised own solvers (depthwise 10, grouped 11) and the implicit GEMMs (30, 50):
  // cuDNN is the usual first choice when nothing has been measured yet; its graph API (19) reaches
  // engines the legacy API (20) does not.
  dnn::register_conv_solver("cuda", 19, make_cudnn_graph_conv_solver());
  dnn::register_conv_solver("cuda", 20, make_cudnn_conv_solver());
  dnn::register_conv_solver("cuda", 40, make_cublas_gemm_conv_solver());
  // The backward directions: cuDNN after the own depthwise kernels (12, 13), cuBLAS before the
  // implicit GEMMs (51, 52), as forward.
  dnn::register_conv_solver("cuda", 21, make_cudnn_bwd_data_conv_solver());
  dnn::register_conv_solver("cuda", 22, make_cudnn_bwd_weights_conv_solver());
  dnn::register_conv_solver("cuda", 41, make_cublas_bwd_data_conv_solver());
  dnn::register_conv_solver("cuda", 42, make_cublas_bwd_weights_conv_solver());
}

}  // namespace galley::backends::cuda
