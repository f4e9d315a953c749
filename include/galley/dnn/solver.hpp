// The Solver interface and the ordered per-backend solver lists (oneDNN's implementation lists).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "galley/dnn/conv_problem.hpp"
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

/// Device pointers for one convolution call. Workspace may be null when workspace_bytes() == 0.
struct ConvArgs {
  const void* x = nullptr;
  const void* w = nullptr;
  void* y = nullptr;
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
};

/// One algorithm for convolution. Stateless after construction: check() is cheap and has no side
/// effects; run() is const and thread-safe, and only enqueues work on the stream.
class ConvSolver {
 public:
  virtual ~ConvSolver() = default;
  /// The one name used in code, logs, find-db rows, traces and CLI filters ("cpu.conv.im2col_gemm").
  virtual std::string_view name() const = 0;
  /// Can this solver do `problem` on `device`? A "no" always carries a reason.
  virtual Applicability check(const ConvProblem& problem, const runtime::Device& device) const = 0;
  virtual std::size_t workspace_bytes(const ConvProblem& /*problem*/,
                                      const runtime::Device& /*device*/) const {
    return 0;
  }
  /// Enqueues the convolution on `stream`. Preconditions: check() said yes, the problem is valid,
  /// the pointers are device memory of stream.device() of the problem's sizes.
  virtual void run(runtime::Stream& stream, const ConvProblem& problem, const ConvArgs& args) const = 0;
  /// Extra detail for results (e.g. the cuDNN engine chosen); empty by default.
  virtual std::string detail(const ConvProblem& /*problem*/, const runtime::Device& /*device*/) const {
    return {};
  }
  /// Reference solvers are slow and exist for verification; the tuner never times them when
  /// another solver applies.
  virtual bool is_reference() const { return false; }

  // A solver that searches among its own variants on first use (cuda.conv.cudnn_graph times
  // cuDNN's execution plans) reports its choice as text, which the tuner stores beside the find-db
  // row and hands back in a new process, so the search runs once per device, not once per process
  // (MIOpen's perf-db). Solvers without an inner search keep the defaults.

  /// The inner choice made for `problem` on `device` (searching now if not done yet); empty when
  /// the solver has none.
  virtual std::string tuned_params(const ConvProblem& /*problem*/, const runtime::Device& /*device*/) const {
    return {};
  }
  /// Adopts a choice tuned_params() gave in an earlier process. Returns false when it cannot be
  /// used here (malformed, or the engine is gone); the solver then searches again on first use.
  /// Thread-safe; a no-op returning true when this process already made its choice.
  virtual bool use_tuned_params(const ConvProblem& /*problem*/, const runtime::Device& /*device*/,
                                std::string_view params) const {
    return params.empty();
  }
};

/// The rank of reference solvers: after every other solver in a list.
inline constexpr int kReferenceRank = 1 << 30;

/// Adds a solver to `backend`'s list ("cpu", "cuda", "hip"). Lower `rank` comes first (fastest
/// first, the reference last, see kReferenceRank); equal ranks keep registration order. Called by
/// libgalley for cpu (static initialisers) and by plugins at registration; thread-safe.
/// A name registered twice on one backend throws Error(invalid_argument). The same name may exist
/// on two backends: the single-source gpu.conv.* solvers are registered by both cuda and hip.
/// A null solver or an empty name or backend throws Error(invalid_argument).
/// A plugin registers from galley_plugin_register but must not call the lookups below from there:
/// they wait for plugin loading to finish.
void register_conv_solver(std::string_view backend, int rank, std::unique_ptr<ConvSolver> solver);

/// The ordered list for a backend (empty for an unknown backend). Pointers stay valid for the
/// life of the process.
std::vector<const ConvSolver*> conv_solvers(std::string_view backend);

/// A solver by name on any backend (the first backend that registered it), or nullptr.
const ConvSolver* find_conv_solver(std::string_view name);
/// A solver by name on one backend, or nullptr.
const ConvSolver* find_conv_solver(std::string_view backend, std::string_view name);

/// The names of all registered conv solvers, for error messages and `--solver` help.
std::vector<std::string> conv_solver_names();

}  // namespace galley::dnn
