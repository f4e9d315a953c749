// The cuda plugin's vendor normalisation solvers, placed in their lists by bnorm_list.cpp.
#pragma once

#include <memory>

#include "galley/dnn/normalization.hpp"

namespace galley::backends::cuda {

/// cuda.bnorm.cudnn: cuDNN's batch norm (spatial mode), inference, training and backward.
std::unique_ptr<dnn::BatchNormSolver> make_cudnn_bnorm_solver();

}  // namespace galley::backends::cuda
