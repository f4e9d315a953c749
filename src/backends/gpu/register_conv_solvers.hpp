// Registration of the conv solvers a GPU plugin brings: the single-source gpu.conv.* set on every
// GPU backend, plus the vendor solvers where the build has them (cuda.conv.cudnn, cublas_gemm).
#pragma once

#include <string_view>

namespace galley::backends::gpu {

/// Adds gpu.conv.depthwise, grouped, igemm_tc(_nchw), winograd, igemm_f32 and direct to `backend`'s list
/// ("cuda" or "hip"). Throws Error if they are already registered there.
void register_gpu_conv_solvers(std::string_view backend);

/// What galley_plugin_register calls once: register_gpu_conv_solvers(backend) and, in the cuda
/// plugin, the cuDNN and cuBLAS solvers.
void register_plugin_conv_solvers(std::string_view backend);

}  // namespace galley::backends::gpu
