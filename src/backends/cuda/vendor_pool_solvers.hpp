// The cuda plugin's vendor pooling solver (cuDNN), placed in the list by pool_list.cpp.
#pragma once

#include <memory>

#include "galley/dnn/pool.hpp"

namespace galley::backends::cuda {

/// cuda.pool.cudnn: cuDNN's legacy pooling API (cudnnPoolingForward / cudnnPoolingBackward).
std::unique_ptr<dnn::PoolSolver> make_cudnn_pool_solver();

}  // namespace galley::backends::cuda
