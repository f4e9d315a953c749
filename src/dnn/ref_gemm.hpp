// The reference GEMM (`ref.gemm`), every direction: the ground truth that every GEMM solver, the
// tests and `galley bench gemm -V 1` are checked against. Internal to libgalley, tests and the CLI.
#pragma once

#include <memory>

#include "galley/dnn/gemm_solver.hpp"

namespace galley::dnn {

/// The name of the reference solver, the last entry of the cpu gemm list.
inline constexpr const char* kRefGemmName = "ref.gemm";

/// Runs `problem` (its direction) on host memory straight from the definitions, with no lowering
/// to another product: forward dst = alpha op(A) op(B) + beta dst + bias; backward_data
/// dA = alpha * dC op(B)^T (transposed back when trans_a); backward_weights dB = alpha * op(A)^T dC
/// (likewise) and dbias = column sums of dC; a shared operand's gradient sums over the batch.
/// Products and sums in double, rounded once to the storage type. Parallel over host threads.
/// Validates the problem first; `args` holds host pointers by role.
void reference_gemm(const GemmProblem& problem, const GemmArgs& args);

/// The reference as a solver, the last entry of the cpu gemm list.
std::unique_ptr<GemmSolver> make_ref_gemm();

}  // namespace galley::dnn
