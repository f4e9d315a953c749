// The one dispatch path every op takes (internal to libgalley): validate, check the pointers,
// pick a solver, log the repro line, take workspace from the caching allocator, run.
#pragma once

#include "galley/dnn/op.hpp"
#include "galley/dnn/problem.hpp"
#include "galley/dnn/solver.hpp"
#include "galley/runtime/stream.hpp"
#include "galley/tensor.hpp"

#include <initializer_list>
#include <utility>

namespace galley::dnn {

/// How execute() chooses when no solver is given. libgalley's tuning layer installs its tuner here
/// when the library loads (dnn may not include tuning, a lower layer); with none installed, the
/// list order (select_solver) is used.
/// The picker fills `report`'s tuner fields when it is not null.
using SolverPicker = Choice (*)(ProblemRef problem, const runtime::Device& device, CallReport* report);
void set_solver_picker(SolverPicker picker);

/// The first solver of `device`'s list for the problem's kind whose check() says yes. Throws
/// Error(unsupported) listing every solver's reason when none does.
const SolverBase& select_solver(ProblemRef problem, const runtime::Device& device);

/// Enqueues one op on `stream` and returns the solver that ran. `op` names the entry point in
/// messages. The problem is validated; every tensor of problem.tensors() must have a non-null
/// pointer in `args` (Error(invalid_argument) naming the tensor). With `solver` null the picker
/// chooses; a given solver must be of the problem's kind, belong to the device's backend and accept
/// the problem, else Error(unsupported) with its reason. Workspace comes from the caching allocator,
/// stream-ordered. With GALLEY_LOG_CMD=1 it prints the `galley bench` line that reproduces the call.
/// `report`, when not null, receives what the call did.
const SolverBase& execute(const char* op, runtime::Stream& stream, ProblemRef problem, OpArgs args,
                          const SolverBase* solver, CallReport* report = nullptr);
/// The same with a choice already made (the tuner timing a config): no picker, no check.
void execute_choice(const char* op, runtime::Stream& stream, ProblemRef problem, OpArgs args, const Choice& choice);

/// execute() with the tensors given as galley::Tensor by role: each is checked against the
/// problem's tensor of that role (defined, on the stream's device, same dtype, dims and strides,
/// storage large enough, aligned) and a mismatch is Error(invalid_argument) naming the tensor.
/// A role the problem has but `tensors` lacks is an error too. `prepared` goes to the solver in
/// OpArgs::prepared.
const SolverBase& execute(const char* op, runtime::Stream& stream, ProblemRef problem,
                          std::initializer_list<std::pair<ArgId, const Tensor*>> tensors, const SolverBase* solver,
                          CallReport* report = nullptr, std::shared_ptr<PreparedWeights> prepared = nullptr);

namespace detail {

/// While alive, execute() calls made by this thread print no GALLEY_LOG_CMD line (the tuner's
/// timed calls and preload's warm-up calls go through execute() like a user's).
class SuppressCmdLog {
 public:
  SuppressCmdLog();
  ~SuppressCmdLog();
  SuppressCmdLog(const SuppressCmdLog&) = delete;
  SuppressCmdLog& operator=(const SuppressCmdLog&) = delete;

 private:
  bool previous_;
};

/// While alive, execute() calls of this thread that name no solver run the device's first
/// reference solver accepting the problem (the executor's reference path, which checks a network
/// against the plain loops); Error(unsupported) when the device has none.
class ReferenceSolversOnly {
 public:
  ReferenceSolversOnly();
  ~ReferenceSolversOnly();
  ReferenceSolversOnly(const ReferenceSolversOnly&) = delete;
  ReferenceSolversOnly& operator=(const ReferenceSolversOnly&) = delete;

 private:
  bool previous_;
};

}  // namespace detail
}  // namespace galley::dnn
