// The cuda plugin's vendor softmax and reduce solvers (cuDNN), placed in the lists by softmax_list.cpp
// and reduce_list.cpp.
#pragma once

#include <memory>

#include "galley/dnn/reduce.hpp"
#include "galley/dnn/softmax.hpp"

namespace galley::backends::cuda {

std::unique_ptr<dnn::Solver<dnn::SoftmaxProblem>> make_cudnn_softmax_solver();
std::unique_ptr<dnn::Solver<dnn::ReduceProblem>> make_cudnn_reduce_solver();

}  // namespace galley::backends::cuda
