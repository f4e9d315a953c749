// The cuda plugin's vendor activation solver, placed in the list by activ_list.cpp.
#pragma once

#include <memory>

#include "galley/dnn/activation.hpp"

namespace galley::backends::cuda {

/// cuda.activ.cudnn: cudnnActivationForward/Backward for the functions cuDNN has.
std::unique_ptr<dnn::ActivSolver> make_cudnn_activ_solver();

}  // namespace galley::backends::cuda
