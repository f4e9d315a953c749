// The reference normalisations (`ref.bnorm`, `ref.lnorm`, `ref.gnorm`): the ground truth that every
// other solver, the tests and `galley bench <op> -V 1` are checked against. Statistics are two-pass
// in double (mean first, then the centred sum of squares), so a constant channel gives variance 0
// exactly and a large mean costs no precision. Internal to libgalley, tests and the CLI.
#pragma once

#include <memory>

#include "galley/dnn/bnorm_problem.hpp"
#include "galley/dnn/gnorm_problem.hpp"
#include "galley/dnn/lnorm_problem.hpp"
#include "galley/dnn/solver.hpp"

namespace galley::dnn {

inline constexpr const char* kRefBnormName = "ref.bnorm";
inline constexpr const char* kRefLnormName = "ref.lnorm";
inline constexpr const char* kRefGnormName = "ref.gnorm";

/// The whole math in double on host arrays in the problem's layout (the tests' finite differences
/// use these). Forward training (batch norm) or forward (layer/group norm) computes the batch
/// statistics and writes saved_mean/saved_invstd; batch norm inference reads running_mean and
/// running_var instead, training updates them in place. Pointers an op does not use may be null.
struct NormDoubleArgs {
  const double* x = nullptr;
  const double* scale = nullptr;
  const double* shift = nullptr;
  double* y = nullptr;
  double* running_mean = nullptr;
  double* running_var = nullptr;
  double* saved_mean = nullptr;
  double* saved_invstd = nullptr;
  const double* dy = nullptr;
  double* dx = nullptr;
  double* dscale = nullptr;
  double* dshift = nullptr;
};
void reference_norm_double(const BatchNormProblem& problem, const NormDoubleArgs& args);
void reference_norm_double(const LayerNormProblem& problem, const NormDoubleArgs& args);
void reference_norm_double(const GroupNormProblem& problem, const NormDoubleArgs& args);

/// The same on host memory of the problem's dtypes (data f32/f16/bf16, the rest f32): inputs are
/// widened to double, outputs rounded once (to f32, then to the storage type).
void reference_norm(const BatchNormProblem& problem, const NormArgs& args);
void reference_norm(const LayerNormProblem& problem, const NormArgs& args);
void reference_norm(const GroupNormProblem& problem, const NormArgs& args);

/// The references as solvers, the last entries of the cpu lists.
std::unique_ptr<Solver<BatchNormProblem>> make_ref_bnorm();
std::unique_ptr<Solver<LayerNormProblem>> make_ref_lnorm();
std::unique_ptr<Solver<GroupNormProblem>> make_ref_gnorm();

}  // namespace galley::dnn
