// The cpu backend's data-movement solvers, as factories; each op's <op>_list.cpp sets the order.
#pragma once

#include <memory>

#include "galley/dnn/datamove_problem.hpp"
#include "galley/dnn/solver.hpp"

namespace galley::backends::cpu {

/// cpu.concat.copy / cpu.split.copy: memcpy of each part's run in each row, threaded.
std::unique_ptr<dnn::Solver<dnn::ConcatProblem>> make_concat_copy();
std::unique_ptr<dnn::Solver<dnn::SplitProblem>> make_split_copy();
/// cpu.transpose.blocked / cpu.reorder.blocked: contiguous runs copied whole, 32x32 tiles where the
/// unit-stride dim moves, strided rows otherwise.
std::unique_ptr<dnn::Solver<dnn::TransposeProblem>> make_transpose_blocked();
std::unique_ptr<dnn::Solver<dnn::ReorderProblem>> make_reorder_blocked();
/// cpu.pad.copy: forward fills each row's padding around one memcpy; backward is the crop's copy.
std::unique_ptr<dnn::Solver<dnn::PadProblem>> make_pad_copy();

}  // namespace galley::backends::cpu
