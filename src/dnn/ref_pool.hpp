// The reference pooling (`ref.pool`), forward and backward: the ground truth every pooling solver,
// the tests and `galley bench pool -V 1` are checked against. Internal to libgalley, tests and the CLI.
#pragma once

#include <memory>

#include "galley/dnn/pool.hpp"

namespace galley::dnn {

inline constexpr const char* kRefPoolName = "ref.pool";

/// Synchronous pooling on host memory in the problem's dtype and layout, by its direction (args as
/// PoolArgs names them). Sums in double, rounded once at the end. Backward scatters each output's
/// gradient into its window (average) or to its maximum (max), so it is the plain definition the
/// gather-form solvers must agree with. Validates the problem first.
void reference_pool(const PoolProblem& problem, const PoolArgs& args);

/// The reference as a solver, the last entry of the cpu pool list.
std::unique_ptr<PoolSolver> make_ref_pool();

}  // namespace galley::dnn
