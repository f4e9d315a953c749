// The GEMM solver type and typed views of the per-backend gemm lists.
#pragma once

#include <string_view>
#include <vector>

#include "galley/dnn/gemm_problem.hpp"
#include "galley/dnn/solver.hpp"

namespace galley::dnn {

using GemmSolver = Solver<GemmProblem>;

inline std::vector<const GemmSolver*> gemm_solvers(std::string_view backend) {
  return solvers_for<GemmProblem>(backend);
}
inline const GemmSolver* find_gemm_solver(std::string_view backend, std::string_view name) {
  return find_solver_for<GemmProblem>(backend, name);
}

}  // namespace galley::dnn
