// Registration of the single-source GPU conv solvers (gpu.conv.*) on one GPU backend.
#pragma once

#include <string_view>

namespace galley::backends::gpu {

/// Adds gpu.conv.depthwise, grouped, igemm_tc, igemm_f32 and direct to `backend`'s list ("cuda" or
/// "hip"). Call once per process from the plugin's galley_plugin_register; throws Error on a repeat.
void register_gpu_conv_solvers(std::string_view backend);

}  // namespace galley::backends::gpu
