// The cpu backend's pooling solvers, as factories; cpu/pool_list.cpp sets their order.
#pragma once

#include <memory>

#include "galley/dnn/pool.hpp"

namespace galley::backends::cpu {

/// cpu.pool.direct: every pooling problem, both layouts and directions, threaded over planes
/// (nchw) or output rows (nhwc) with the channel loop innermost.
std::unique_ptr<dnn::PoolSolver> make_pool_direct();

}  // namespace galley::backends::cpu
