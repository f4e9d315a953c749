// The single-source gpu.softmax.* and gpu.reduce.* solvers a GPU plugin brings, as factories; each
// GPU backend's softmax_list.cpp and reduce_list.cpp sets their order.
#pragma once

#include <memory>
#include <string_view>

#include "galley/dnn/reduce.hpp"
#include "galley/dnn/softmax.hpp"

namespace galley::backends::gpu {

/// gpu.softmax.rows: the axis is innermost. Rows of up to 1024 elements: one 32-lane group per row,
/// the row held in registers, one read; longer rows: a block per row, online (max, sum) pass then
/// the write pass.
std::unique_ptr<dnn::Solver<dnn::SoftmaxProblem>> make_softmax_rows(std::string_view backend);
/// gpu.softmax.strided: any axis (NCHW channels): 32 adjacent columns per block, the axis split
/// over 8 thread rows, online (max, sum) pass then the write pass.
std::unique_ptr<dnn::Solver<dnn::SoftmaxProblem>> make_softmax_strided(std::string_view backend);
/// gpu.reduce.direct: any axis set, both directions; block tree reductions, a deterministic
/// two-pass split (partials in the workspace, no atomics) when the outputs alone cannot fill the GPU.
std::unique_ptr<dnn::Solver<dnn::ReduceProblem>> make_reduce_direct(std::string_view backend);

}  // namespace galley::backends::gpu
