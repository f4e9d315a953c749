// register_cuda_conv_solvers(): the cuda plugin's whole conv solver list in one call.
#include "backends/cuda/conv_register.hpp"

#include "backends/gpu/register_conv_solvers.hpp"

namespace galley::backends::cuda {

void register_cuda_conv_solvers() {
  gpu::register_gpu_conv_solvers("cuda");
  // Between the specialised own solvers (depthwise 10, grouped 11) and the implicit GEMMs (30, 50):
  // cuDNN is the usual first choice when nothing has been measured yet.
  dnn::register_conv_solver("cuda", 20, make_cudnn_conv_solver());
  dnn::register_conv_solver("cuda", 40, make_cublas_gemm_conv_solver());
}

}  // namespace galley::backends::cuda
