// The auto-tuner: chooses a solver per problem (of any op kind) and device by measurement,
// remembers the choice in an in-process cache and in the find-db, and honours the find modes.
//
//   tuning::Tuner& tuner = tuning::default_tuner();
//   tuning::Pick p = tuner.pick(problem, device);   // p.solver, p.hit
//   auto list = tuner.ranked(problem, device);      // [{solver, ms, workspace_bytes}], best first
//
// A hit (in-process cache or find-db) is trusted only after the stored solver still exists on the
// device's backend, its check() still says yes and its workspace fits the limit; otherwise the
// problem is re-tuned and the stored rows replaced. A hit served by the in-process cache touches
// neither SQLite nor the solver registry.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "galley/dnn/conv_solver.hpp"
#include "galley/dnn/problem.hpp"
#include "galley/dnn/solver.hpp"
#include "galley/runtime/device.hpp"
#include "galley/runtime/stream.hpp"
#include "galley/tuning/find_db.hpp"
#include "galley/tuning/find_mode.hpp"

namespace galley::tuning {

/// Everything a Tuner is configured with.
struct TunerOptions {
  FindOptions find;  ///< mode, enforce, time box
  /// The find-db files. Ignored in FindMode::off.
  FindDbPaths db_paths;
  /// Solvers needing more workspace are skipped. 0: a quarter of the device's memory, at most 4 GiB.
  std::size_t workspace_limit = 0;
  /// When not empty, only these solver names are candidates (tests, `--solver` style filters).
  std::vector<std::string> only_solvers;

  /// FindOptions::from_env() and default_find_db_paths().
  static TunerOptions from_env();
};

/// One entry of a ranked list.
struct RankedSolver {
  std::string solver;
  /// Time per call as tuned (the fastest sample on the cpu, the median on a GPU); NaN when not
  /// timed (reference solver alone, or from a fast choice).
  double ms = 0;
  std::size_t workspace_bytes = 0;
  std::string params;  ///< the solver's inner choice: its config text (TunableSolver); often empty
};

/// Where a pick came from.
enum class PickSource {
  cache,       ///< the in-process cache (of a find-db hit or of this process's tuning)
  user_db,     ///< a user find-db row
  system_db,   ///< a system find-db row
  tuned,       ///< benchmarked just now
  list_order,  ///< the first applicable solver of the ordered list (fast miss, off)
};
const char* to_string(PickSource source) noexcept;

/// What preload() did.
struct PreloadResult {
  int problems = 0;  ///< stored problems of the device's identity
  int prepared = 0;  ///< resolved to a valid stored solver and run once
  /// Problems that could not be prepared (unparsable key, no valid stored solver, a failed run),
  /// each with its reason; they are tuned or resolved again on their first pick as usual.
  std::vector<std::pair<std::string, std::string>> skipped;
  double ms = 0;  ///< wall time
};

/// The answer of pick(), typed by the solver's problem.
template <class SolverType>
struct BasicPick {
  const SolverType* solver = nullptr;  ///< never null
  /// True when the solver came from stored tuning results (find-db, or the in-process cache of a
  /// db hit or of earlier tuning) without benchmarking now; false after tuning or a list-order choice.
  bool hit = false;
  PickSource source = PickSource::list_order;
  /// The solver's inner choice as text (empty: none, or its default) and parsed, for the dispatcher.
  std::string config;
  dnn::ConfigHandle config_handle;
};
using AnyPick = BasicPick<dnn::SolverBase>;
using Pick = BasicPick<dnn::ConvSolver>;

/// A solver that was not a candidate, and why.
struct Rejection {
  std::string solver;
  std::string reason;
};

/// What benchmarking one problem produced (tune(), `galley tune`).
struct TuneResult {
  std::vector<RankedSolver> ranked;  ///< best first; solvers cut by the time box are absent
  std::string list_order_choice;     ///< the first applicable solver of the ordered list
  std::vector<Rejection> rejected;   ///< check() said no, workspace too large, reference skipped
  double tune_ms = 0;                ///< wall time spent benchmarking
  bool time_box_hit = false;         ///< the time box stopped benchmarking early
};

class Tuner {
 public:
  explicit Tuner(TunerOptions options);
  ~Tuner();
  Tuner(const Tuner&) = delete;
  Tuner& operator=(const Tuner&) = delete;

  /// The solver to run `problem` on `device`, by the find mode (see find_mode.hpp). Throws
  /// Error(unsupported) listing each solver's reason when none applies. Thread-safe.
  AnyPick pick(dnn::ProblemRef problem, const runtime::Device& device);

  /// The ranked list for `problem`: the stored one on a valid hit (hybrid/fast, no enforce),
  /// otherwise benchmarked now (and stored unless the mode is off). Entries whose solver no longer
  /// exists or applies are dropped.
  std::vector<RankedSolver> ranked(dnn::ProblemRef problem, const runtime::Device& device);

  /// Benchmarks now, whatever the mode, stores the list (unless off) and updates the cache.
  TuneResult tune(dnn::ProblemRef problem, const runtime::Device& device);

  /// The stored, still valid ranked list (in-process cache, then find-db), or empty on a miss.
  /// Never benchmarks. Always empty in FindMode::off.
  std::vector<RankedSolver> lookup(dnn::ProblemRef problem, const runtime::Device& device);

  /// The first applicable solver of the ordered list within the workspace limit (what fast and
  /// off choose on a miss). Throws Error(unsupported) with every reason when none applies.
  const dnn::SolverBase& list_order_choice(dnn::ProblemRef problem, const runtime::Device& device);

  // The same, typed by the problem.
  template <dnn::OpProblem P>
  BasicPick<dnn::Solver<P>> pick(const P& problem, const runtime::Device& device) {
    AnyPick p = pick(dnn::ProblemRef::of(problem), device);
    return {static_cast<const dnn::Solver<P>*>(p.solver), p.hit, p.source, std::move(p.config),
            std::move(p.config_handle)};
  }
  template <dnn::OpProblem P>
  std::vector<RankedSolver> ranked(const P& problem, const runtime::Device& device) {
    return ranked(dnn::ProblemRef::of(problem), device);
  }
  template <dnn::OpProblem P>
  TuneResult tune(const P& problem, const runtime::Device& device) {
    return tune(dnn::ProblemRef::of(problem), device);
  }
  template <dnn::OpProblem P>
  std::vector<RankedSolver> lookup(const P& problem, const runtime::Device& device) {
    return lookup(dnn::ProblemRef::of(problem), device);
  }
  template <dnn::OpProblem P>
  const dnn::Solver<P>& list_order_choice(const P& problem, const runtime::Device& device) {
    return static_cast<const dnn::Solver<P>&>(list_order_choice(dnn::ProblemRef::of(problem), device));
  }

  /// Startup warm-up for deployment: resolves every problem stored in the find-db for the stream's
  /// device (the stored solver, its inner choice, its check()), then runs each once on scratch
  /// tensors on `stream`, so that kernels are loaded, vendor plans built and workspace blocks
  /// cached for that stream before the first real call, which then costs what later calls cost.
  /// Never benchmarks and never writes the db. Does nothing in FindMode::off or under
  /// GALLEY_FIND_ENFORCE=search. Scratch memory comes from the caching allocator and is returned to it.
  PreloadResult preload(runtime::Stream& stream);

  /// Forgets the in-process cache (the find-db is untouched).
  void clear_cache();

  const TunerOptions& options() const;
  /// The find-db, opened on first use (pick() and ranked() never open it in FindMode::off).
  FindDb& db();

 private:
  /// pick() without its trace record (the profiler's tuner span wraps it).
  AnyPick pick_untraced(dnn::ProblemRef problem, const runtime::Device& device);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// The process-wide tuner used by every op's entry point (dnn::convolution_forward, ...). Built on
/// first use from the options configure_default_tuner() was given, else from the environment
/// (TunerOptions::from_env(); a malformed variable throws here, and again on the next call).
Tuner& default_tuner();

/// Sets the options the default tuner is built with, in code instead of GALLEY_FIND_* (e.g. a
/// find-db path of the application's own, a solver filter, a time box). Must come before the
/// default tuner's first use (the first op call or default_tuner()); afterwards it throws
/// Error(invalid_argument), since picks already made would not follow the new options.
void configure_default_tuner(TunerOptions options);

}  // namespace galley::tuning
