// The cuda plugin's vendor softmax solver (cuDNN), placed in the list by softmax_list.cpp.
#pragma once

#include <memory>

#include "galley/dnn/softmax.hpp"

namespace galley::backends::cuda {

std::unique_ptr<dnn::Solver<dnn::SoftmaxProblem>> make_cudnn_softmax_solver();

}  // namespace galley::backends::cuda
