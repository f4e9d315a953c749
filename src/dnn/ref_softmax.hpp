// The reference softmax (`ref.softmax`), forward and backward, in double: the ground truth every
// softmax solver, the tests and `galley bench softmax -V 1` are checked against. Internal to
// libgalley, tests and the CLI.
#pragma once

#include <memory>

#include "galley/dnn/softmax.hpp"

namespace galley::dnn {

inline constexpr const char* kRefSoftmaxName = "ref.softmax";

/// Synchronous forward on host memory in the problem's dtype and layout: the row's maximum
/// subtracted, exp and sums in double, rounded once at the end. Validates the problem first.
void reference_softmax_forward(const SoftmaxProblem& problem, const void* src, void* dst);
/// Synchronous backward on host memory, in double.
void reference_softmax_backward(const SoftmaxProblem& problem, const void* diff_dst, const void* dst,
                                void* diff_src);

/// The reference as a solver of both directions, the last entry of the cpu softmax list.
std::unique_ptr<Solver<SoftmaxProblem>> make_ref_softmax();

}  // namespace galley::dnn
