// The measuring half of `galley bench conv`: one problem, a list of solvers, device events around
// each run after warm-up, the median, and verification against ref.conv.direct.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "galley/dnn/conv_problem.hpp"
#include "galley/dnn/conv_solver.hpp"
#include "galley/runtime/stream.hpp"

namespace galley::cli {

struct ConvBenchOptions {
  int iterations = 10;   ///< timed runs; the median is reported
  int warmup = 1;        ///< untimed runs before timing (the verification run comes on top)
  bool verify = false;   ///< compare with ref.conv.direct on poisoned output
  double tolerance = 0;  ///< max relative error that passes; <= 0: dnn::conv_tolerance(dtype)
  /// Forward: give each solver a prepared-weights slot of its own, as a model's constant weights
  /// have, so a solver that packs or transforms w does it once (in the verification or warm-up
  /// run) and the timed runs read that form.
  bool prepared = false;
};

struct ConvBenchResult {
  std::string solver;
  double ms = 0;      ///< median over the timed samples, per call
  int batch = 1;      ///< back-to-back calls per timed sample (bench_stats.hpp: batch_for)
  double tflops = 0;  ///< problem.flops() / time
  double gbps = 0;    ///< problem.min_bytes() / time
  std::size_t workspace_bytes = 0;
  std::optional<bool> verified;       ///< empty when not verifying
  std::optional<double> max_rel_err;  ///< empty when not verifying
  std::string verify_summary;         ///< the comparison in words, when verifying
  std::string detail;                 ///< ConvSolver::detail (e.g. the vendor engine used)
  std::string error;                  ///< non-empty when the solver threw; nothing was measured
  bool failed() const { return !error.empty() || (verified.has_value() && !*verified); }
};

struct ConvBenchSkip {
  std::string solver;
  std::string reason;
};

struct ConvBenchProblem {
  dnn::ConvProblem problem;
  std::string tag;
  std::vector<ConvBenchResult> results;
  std::vector<ConvBenchSkip> skipped;  ///< solvers whose check() said no, with the reason
};

/// Throws Error(out_of_memory) naming each buffer when the problem's x, w, y (and the host copies
/// that fill and verify them) need more memory than `device` (and the host) have available.
void check_conv_bench_memory(const runtime::Device& device, const dnn::ConvProblem& problem,
                             const ConvBenchOptions& options);

/// Runs each solver of `solvers` that accepts `problem` on `stream` (inputs: seeded random data,
/// the seed derived from the problem key so reruns see the same numbers).
ConvBenchProblem bench_conv_problem(runtime::Stream& stream, const dnn::ConvProblem& problem, std::string tag,
                                    const std::vector<const dnn::ConvSolver*>& solvers,
                                    const ConvBenchOptions& options);

}  // namespace galley::cli
