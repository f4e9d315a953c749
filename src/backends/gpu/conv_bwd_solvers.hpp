// Registration of the single-source backward conv solvers (conv_bwd_solvers.cu).
#pragma once

#include <string_view>

namespace galley::backends::gpu {

/// Adds gpu.conv.bwd_{data,weights}_{depthwise,igemm,direct} to `backend`'s conv list ("cuda" or
/// "hip"). Throws Error if they are already registered there.
void register_gpu_conv_bwd_solvers(std::string_view backend);

}  // namespace galley::backends::gpu
