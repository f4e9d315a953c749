// The cuda plugin's vendor eltwise solver, placed in the list by eltwise_list.cpp.
#pragma once

#include <memory>

#include "galley/dnn/eltwise.hpp"

namespace galley::backends::cuda {

/// cuda.eltwise.cudnn: cudnnOpTensor for add, sub and mul, forward.
std::unique_ptr<dnn::EltwiseSolver> make_cudnn_eltwise_solver();

}  // namespace galley::backends::cuda
