// The single-source gpu data-movement solvers a GPU plugin brings, as factories; each GPU
// backend's <op>_list.cpp sets the order.
#pragma once

#include <memory>
#include <string_view>

#include "galley/dnn/datamove_problem.hpp"
#include "galley/dnn/solver.hpp"

namespace galley::backends::gpu {

/// Each makes one solver for `backend` ("cuda" or "hip"), whose device it checks against; each
/// claims every problem of its op, but the register transposes (gpu.transpose.regs,
/// gpu.reorder.regs), which claim same-dtype moves of 2- or 4-byte elements whose swapped dims are
/// whole 16-byte vectors.
std::unique_ptr<dnn::Solver<dnn::ConcatProblem>> make_concat_copy(std::string_view backend);
std::unique_ptr<dnn::Solver<dnn::SplitProblem>> make_split_copy(std::string_view backend);
std::unique_ptr<dnn::Solver<dnn::TransposeProblem>> make_transpose_tiled(std::string_view backend);
std::unique_ptr<dnn::Solver<dnn::PadProblem>> make_pad_copy(std::string_view backend);
std::unique_ptr<dnn::Solver<dnn::ReorderProblem>> make_reorder_tiled(std::string_view backend);
std::unique_ptr<dnn::Solver<dnn::TransposeProblem>> make_transpose_regs(std::string_view backend);
std::unique_ptr<dnn::Solver<dnn::ReorderProblem>> make_reorder_regs(std::string_view backend);

}  // namespace galley::backends::gpu
