// The cpu backend's fast softmax and reduce solvers, as factories; cpu/softmax_list.cpp and
// cpu/reduce_list.cpp set their order.
#pragma once

#include <memory>

#include "galley/dnn/reduce.hpp"
#include "galley/dnn/softmax.hpp"

namespace galley::backends::cpu {

/// cpu.softmax.rows: the axis is innermost (stride 1): one vectorised row at a time, threaded
/// over the rows.
std::unique_ptr<dnn::Solver<dnn::SoftmaxProblem>> make_softmax_rows();
/// cpu.softmax.strided: any axis; vectorised across the contiguous positions after the axis
/// (NCHW channels, NHWC heights), threaded over outer index and column blocks.
std::unique_ptr<dnn::Solver<dnn::SoftmaxProblem>> make_softmax_strided();
/// cpu.reduce.direct: any axis set, both directions, over the coalesced groups of the problem.
std::unique_ptr<dnn::Solver<dnn::ReduceProblem>> make_reduce_direct();

}  // namespace galley::backends::cpu
