// The reference reduction (`ref.reduce`), forward and backward, in double: the ground truth every
// reduce solver, the tests and `galley bench reduce -V 1` are checked against. Internal to
// libgalley, tests and the CLI.
#pragma once

#include <memory>

#include "galley/dnn/reduce.hpp"

namespace galley::dnn {

inline constexpr const char* kRefReduceName = "ref.reduce";

/// Synchronous forward on host memory: sums in double, divided by the count for mean, rounded
/// once. Validates the problem first.
void reference_reduce_forward(const ReduceProblem& problem, const void* src, void* dst);
/// Synchronous backward on host memory: the broadcast of diff_dst, times 1 / count for mean.
void reference_reduce_backward(const ReduceProblem& problem, const void* diff_dst, void* diff_src);

/// The reference as a solver of both directions, the last entry of the cpu reduce list.
std::unique_ptr<Solver<ReduceProblem>> make_ref_reduce();

}  // namespace galley::dnn
