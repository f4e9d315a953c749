// The op-generic solver interface and the ordered per-backend solver lists (oneDNN's
// implementation lists): one base for every op kind, typed per problem by Solver<P>.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "galley/dnn/problem.hpp"
#include "galley/runtime/device.hpp"
#include "galley/runtime/stream.hpp"

namespace galley::dnn {

/// The answer of a cheap check(): yes, or no with a reason a person can read.
struct Applicability {
  bool ok = true;
  std::string reason;  ///< empty when ok
  static Applicability yes() { return {}; }
  static Applicability no(std::string why) { return {false, std::move(why)}; }
  explicit operator bool() const { return ok; }
};

/// One algorithm for one op kind. Stateless after construction: check() is cheap and has no side
/// effects; run() is const and thread-safe, and only enqueues work on the stream. The registry,
/// dispatcher and tuner use the type-erased `*_any` entry points; solvers implement Solver<P>.
class SolverBase {
 public:
  virtual ~SolverBase() = default;
  /// The one name used in code, logs, find-db rows, traces and CLI filters ("cpu.conv.im2col_gemm").
  virtual std::string_view name() const = 0;
  virtual OpKind kind() const = 0;
  /// Reference solvers are slow and exist for verification; the tuner never times them when
  /// another solver applies.
  virtual bool is_reference() const { return false; }

  virtual Applicability check_any(ProblemRef problem, const runtime::Device& device) const = 0;
  virtual std::size_t workspace_bytes_any(ProblemRef problem, const runtime::Device& device) const = 0;
  virtual void run_any(runtime::Stream& stream, ProblemRef problem, const OpArgs& args) const = 0;
  virtual std::string detail_any(ProblemRef problem, const runtime::Device& device) const = 0;
  virtual std::string tuned_params_any(ProblemRef problem, const runtime::Device& device) const = 0;
  virtual bool use_tuned_params_any(ProblemRef problem, const runtime::Device& device,
                                    std::string_view params) const = 0;
};

/// A solver of problems of type P.
template <OpProblem P>
class Solver : public SolverBase {
 public:
  using Problem = P;
  using Args = typename P::Args;

  OpKind kind() const final { return P::kKind; }

  /// Can this solver do `problem` on `device`? A "no" always carries a reason.
  virtual Applicability check(const P& problem, const runtime::Device& device) const = 0;
  virtual std::size_t workspace_bytes(const P& /*problem*/, const runtime::Device& /*device*/) const { return 0; }
  /// Enqueues the op on `stream`. Preconditions: check() said yes, the problem is valid, the
  /// pointers are device memory of stream.device() of the problem's sizes.
  virtual void run(runtime::Stream& stream, const P& problem, const Args& args) const = 0;
  /// Extra detail for results (e.g. the cuDNN engine chosen); empty by default.
  virtual std::string detail(const P& /*problem*/, const runtime::Device& /*device*/) const { return {}; }

  // A solver that searches among its own variants on first use reports its choice as text, which
  // the tuner stores beside the find-db row and hands back in a new process, so the search runs
  // once per device, not once per process (MIOpen's perf-db). Solvers without one keep the defaults.

  /// The inner choice made for `problem` on `device` (searching now if not done yet); empty when
  /// the solver has none.
  virtual std::string tuned_params(const P& /*problem*/, const runtime::Device& /*device*/) const { return {}; }
  /// Adopts a choice tuned_params() gave in an earlier process. Returns false when it cannot be
  /// used here (malformed, or the variant is gone); the solver then searches again on first use.
  virtual bool use_tuned_params(const P& /*problem*/, const runtime::Device& /*device*/,
                                std::string_view params) const {
    return params.empty();
  }

  Applicability check_any(ProblemRef p, const runtime::Device& d) const final { return check(p.as<P>(), d); }
  std::size_t workspace_bytes_any(ProblemRef p, const runtime::Device& d) const final {
    return workspace_bytes(p.as<P>(), d);
  }
  void run_any(runtime::Stream& stream, ProblemRef p, const OpArgs& args) const final {
    run(stream, p.as<P>(), Args::from(args));
  }
  std::string detail_any(ProblemRef p, const runtime::Device& d) const final { return detail(p.as<P>(), d); }
  std::string tuned_params_any(ProblemRef p, const runtime::Device& d) const final {
    return tuned_params(p.as<P>(), d);
  }
  bool use_tuned_params_any(ProblemRef p, const runtime::Device& d, std::string_view params) const final {
    return use_tuned_params(p.as<P>(), d, params);
  }
};

/// Appends `solvers`, in order, to `backend`'s list for their op kind ("cpu", "cuda", "hip"): a
/// backend's list file calls this once per op kind, fastest first and the reference last, so the
/// order lives in that file alone. Thread-safe. A null solver, an empty name or backend, a solver
/// of another kind, or a name already registered on the backend throws Error(invalid_argument).
/// The same name may exist on two backends (the single-source gpu.* solvers are on cuda and hip).
/// A plugin registers from galley_plugin_register but must not call the lookups below from there:
/// they wait for plugin loading to finish.
void register_solvers(std::string_view backend, OpKind kind, std::vector<std::unique_ptr<SolverBase>> solvers);

/// The ordered list of `kind` for a backend (empty for an unknown backend). Pointers stay valid for
/// the life of the process.
std::vector<const SolverBase*> solvers_of(std::string_view backend, OpKind kind);
/// A solver of `kind` by name on one backend, or nullptr.
const SolverBase* find_solver(std::string_view backend, OpKind kind, std::string_view name);
/// A solver of `kind` by name on any backend (the first backend that registered it), or nullptr.
const SolverBase* find_solver(OpKind kind, std::string_view name);
/// The names of every registered solver of `kind`, sorted, for messages and `--solver` help.
std::vector<std::string> solver_names(OpKind kind);

/// Typed views of the lists.
template <OpProblem P>
std::vector<const Solver<P>*> solvers_for(std::string_view backend) {
  std::vector<const Solver<P>*> out;
  for (const SolverBase* s : solvers_of(backend, P::kKind)) out.push_back(static_cast<const Solver<P>*>(s));
  return out;
}
template <OpProblem P>
const Solver<P>* find_solver_for(std::string_view backend, std::string_view name) {
  return static_cast<const Solver<P>*>(find_solver(backend, P::kKind, name));
}
template <OpProblem P>
const Solver<P>* find_solver_for(std::string_view name) {
  return static_cast<const Solver<P>*>(find_solver(P::kKind, name));
}

}  // namespace galley::dnn
