// The single-source gpu.pool.* solvers, as factories; each GPU backend's pool_list.cpp sets their
// order.
#pragma once

#include <memory>
#include <string_view>

#include "galley/dnn/pool.hpp"

namespace galley::backends::gpu {

/// gpu.pool.global: problems whose one window is the whole plane (global pooling, adaptive to
/// 1x1, or a kernel the size of the unpadded input), a warp (nchw) or a block column (nhwc) per
/// reduction instead of one thread.
std::unique_ptr<dnn::PoolSolver> make_pool_global(std::string_view backend);
/// gpu.pool.strips: nhwc, channels a multiple of 8, square 2x2 or 3x3 windows at stride 1 or 2
/// forward and max at stride 2 backward, each input row read once per strip of output rows (and
/// backward's maxima found again in the same pass).
std::unique_ptr<dnn::PoolSolver> make_pool_strips(std::string_view backend);
/// gpu.pool.direct: every pooling problem, one thread per output (forward) or input (backward,
/// gathered), nhwc vectorised over 8 channels. The last entry of a GPU list.
std::unique_ptr<dnn::PoolSolver> make_pool_direct(std::string_view backend);

}  // namespace galley::backends::gpu
