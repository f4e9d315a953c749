// Convolution's typed names for the op-generic solver interface and lists.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "galley/dnn/conv_problem.hpp"
#include "galley/dnn/solver.hpp"

namespace galley::dnn {

/// One algorithm for convolution (any direction; check() rejects the directions it does not do).
using ConvSolver = Solver<ConvProblem>;

/// The conv list of a backend, fastest first and the reference last.
inline std::vector<const ConvSolver*> conv_solvers(std::string_view backend) {
  return solvers_for<ConvProblem>(backend);
}
/// A conv solver by name on any backend, or nullptr.
inline const ConvSolver* find_conv_solver(std::string_view name) { return find_solver_for<ConvProblem>(name); }
/// A conv solver by name on one backend, or nullptr.
inline const ConvSolver* find_conv_solver(std::string_view backend, std::string_view name) {
  return find_solver_for<ConvProblem>(backend, name);
}
/// Every registered conv solver's name, sorted.
inline std::vector<std::string> conv_solver_names() { return solver_names(OpKind::conv); }

}  // namespace galley::dnn
