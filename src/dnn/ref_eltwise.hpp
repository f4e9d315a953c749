// The reference eltwise op (`ref.eltwise`): the ground truth every other eltwise solver, the tests
// and `galley bench eltwise -V 1` are checked against. Internal to libgalley, tests and the CLI.
#pragma once

#include <memory>

#include "galley/dnn/eltwise.hpp"

namespace galley::dnn {

inline constexpr const char* kRefEltwiseName = "ref.eltwise";

/// Synchronous forward on host memory in the problem's dtype and descriptors: each element in
/// double from the inputs' own strides (no shared geometry code), rounded once at the end.
void reference_eltwise_forward(const EltwiseProblem& problem, const void* a, const void* b, void* dst);
/// Synchronous backward: da and db summed in double over the broadcast axes. a and b may be null
/// for add and sub.
void reference_eltwise_backward(const EltwiseProblem& problem, const void* dy, const void* a, const void* b,
                                void* da, void* db);

/// The reference as a solver, the last entry of the cpu eltwise list.
std::unique_ptr<EltwiseSolver> make_ref_eltwise();

}  // namespace galley::dnn
