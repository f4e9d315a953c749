// `<backend>.conv.unfused`: a fused convolution (see ConvEpilogue) run as the sequence a framework
// without fusion runs: the plain convolution, then the bias add, the residual add and the
// activation as their own ops, each a pass over y. It gives every backend a correct fused
// convolution at once, and it is what the tuner times the fused solvers against. Internal to
// libgalley and the backends, which register it in their conv lists.
#pragma once

#include <memory>
#include <string_view>

#include "galley/dnn/conv_solver.hpp"

namespace galley::dnn {

/// The unfused sequence for `backend` ("cpu", "cuda", "hip"), named "<backend>.conv.unfused". Its
/// configs are the plain solvers that accept the problem without its epilogue (the tuner times
/// each); the epilogue ops run through the first solver of their lists that accepts them.
std::unique_ptr<ConvSolver> make_conv_unfused(std::string_view backend);

}  // namespace galley::dnn
