// Measuring solvers of any op for the tuner: which solvers are candidates (and why the others are not),
// and timing them on one stream with events under a per-problem time box. Internal to libgalley.
#pragma once

#include <cstddef>
#include <chrono>
#include <string>
#include <vector>

#include "galley/dnn/problem.hpp"
#include "galley/dnn/solver.hpp"
#include "galley/memory/buffer.hpp"
#include "galley/runtime/device.hpp"
#include "galley/runtime/stream.hpp"
#include "galley/tuning/tuner.hpp"

namespace galley::tuning::detail {

/// Device tensors for timing one problem: seeded random inputs in [-1, 1) (so data-dependent fast
/// paths such as zeros cannot flatter a solver) and uninitialised outputs, by role.
struct ScratchTensors {
  ScratchTensors(runtime::Stream& stream, dnn::ProblemRef problem);
  std::vector<memory::Buffer> buffers;
  dnn::OpArgs args;
};

/// One thing the tuner can time: a solver, and for a solver with inner choices one of its configs.
struct Candidate {
  const dnn::SolverBase* solver = nullptr;
  dnn::ConfigHandle config;  ///< null: a solver without configs
  std::string config_text;   ///< the config as the find-db stores it; empty without one
  /// "cuda.conv.cudnn_graph[eng47{...}]" or the bare name, for logs and rejections.
  std::string label() const;
  dnn::Choice choice() const { return {solver, config}; }
};

/// The candidates worth timing for one problem, in list order (a solver's configs in its order).
struct Candidates {
  std::vector<Candidate> timed;  ///< to benchmark (no reference when another applies)
  Candidate list_first;          ///< first applicable solver of the list within the limit (its default config)
  bool any() const { return list_first.solver != nullptr; }
  std::vector<Rejection> rejected;              ///< with reasons, also logged at debug level
};

/// Walks the device's ordered list: only_solvers filter, check(), workspace limit, reference rule.
/// Rejections are logged at debug level when `log_rejections` (tuning), not for a plain list-order walk.
Candidates find_candidates(dnn::ProblemRef problem, const runtime::Device& device,
                           std::size_t workspace_limit, const std::vector<std::string>& only_solvers,
                           bool log_rejections = true);

/// Error(unsupported) naming the problem, the device and every rejection's reason.
[[noreturn]] void throw_no_solver(dnn::ProblemRef problem, const runtime::Device& device,
                                  const std::vector<Rejection>& rejected);

/// One candidate's measurement.
struct Timing {
  Candidate candidate;
  double ms = 0;  ///< its pace: the fastest sample on the host, the median on a GPU
  std::size_t workspace_bytes = 0;
  int runs = 0;
};

/// Times `solvers` on random data: each warmed up in list order (a cold run, then a warm one that
/// sets its batch: a sample is ~0.5 ms of back-to-back runs divided by their count, at most 64); a
/// solver whose cold and warm runs were both far slower than the best warm run is dropped there.
/// The rest are timed in rounds (one sample of every active solver per round, each round starting one
/// solver further along, so load drift hits all alike) until every one's median is stable or the run
/// cap is reached. After three rounds a solver whose best run is far slower than the best median is
/// dropped. Solvers whose medians end within 3% of the best get a runoff of more rounds.
/// The time box runs from `box_start` (the caller's start of the problem's tuning, so that the
/// solvers' own preparation counts against it): once it has run out nothing more runs (tuning overruns it by
/// at most the run in flight): solvers not reached are left out, solvers warmed up but not yet timed
/// are ranked by their warm-up run. Solvers whose run throws are added to `rejected`. Returns the
/// timings sorted fastest first; `time_box_hit` says whether the box was hit.
std::vector<Timing> time_solvers(dnn::ProblemRef problem, const runtime::Device& device,
                                 const std::vector<Candidate>& solvers, double time_box_ms,
                                 std::chrono::steady_clock::time_point box_start, std::vector<Rejection>& rejected,
                                 bool& time_box_hit);

}  // namespace galley::tuning::detail
