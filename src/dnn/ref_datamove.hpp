// The references of the data-movement ops (`ref.concat`, `ref.split`, `ref.transpose`, `ref.pad`,
// `ref.reorder`): one element at a time through each tensor's descriptor strides, in logical
// order, sharing nothing with the fast solvers' plans. Internal to libgalley, tests and the CLI.
#pragma once

#include <memory>

#include "galley/dnn/datamove_problem.hpp"
#include "galley/dnn/solver.hpp"

namespace galley::dnn {

/// Synchronous, on host memory; each validates the problem first.
void reference_concat(const ConcatProblem& p, const DataMoveArgs& args);
void reference_split(const SplitProblem& p, const DataMoveArgs& args);
void reference_transpose(const TransposeProblem& p, const DataMoveArgs& args);
void reference_pad(const PadProblem& p, const DataMoveArgs& args);
void reference_reorder(const ReorderProblem& p, const DataMoveArgs& args);

/// The references as solvers, the last entries of the cpu lists.
std::unique_ptr<Solver<ConcatProblem>> make_ref_concat();
std::unique_ptr<Solver<SplitProblem>> make_ref_split();
std::unique_ptr<Solver<TransposeProblem>> make_ref_transpose();
std::unique_ptr<Solver<PadProblem>> make_ref_pad();
std::unique_ptr<Solver<ReorderProblem>> make_ref_reorder();

}  // namespace galley::dnn
