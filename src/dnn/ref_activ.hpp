// The reference activation (`ref.activ`), forward and backward: the ground truth every activation
// solver, the tests and `galley bench activ -V 1` are checked against. Internal to libgalley,
// tests and the CLI.
#pragma once

#include <memory>

#include "galley/dnn/activation.hpp"

namespace galley::dnn {

inline constexpr const char* kRefActivName = "ref.activ";

/// Synchronous activation on host memory, either direction (args as ActivArgs documents them,
/// in place allowed). Each element is computed in double from the stored input, with alpha and
/// beta rounded to float as PyTorch's kernels take them, and rounded once to the storage type.
/// Validates the problem first.
void reference_activation(const ActivProblem& problem, const ActivArgs& args);

/// The reference as a solver, the last entry of the cpu activ list.
std::unique_ptr<ActivSolver> make_ref_activ();

}  // namespace galley::dnn
