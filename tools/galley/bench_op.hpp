// What every `galley bench <op>` shares, for any op kind: the common flags (-V -i --warmup
// --tolerance --dtype --layout --device --solver --all-solvers --json -F), the measuring loop (device
// events around batches of calls after warm-up, the median), verification of every output against
// the cpu backend's reference solver on poisoned outputs, and the table or JSON. An op's bench file
// adds its own problem flags, builds its problems and calls run_op_bench().
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <vector>

#include "galley/dnn/problem.hpp"
#include "galley/dnn/solver.hpp"
#include "galley/runtime/stream.hpp"

namespace galley::cli {

/// The flags every op bench takes, with their defaults.
struct OpBenchFlags {
  int verify = 0;
  int iterations = 10;
  int warmup = 1;
  /// -F: 1 forward, 2 backward, 0 both (for ops with a backward). run_op_bench() does not read it;
  /// the op's file turns it into problems (directions()).
  int direction = 1;
  double tolerance = 0;
  std::string dtype, layout, device, solver;
  bool all_solvers = false;
  bool json = false;
  bool graph = false;
};

/// Adds the common flags to `cmd`. `with_layout` / `with_direction`: whether the op has a memory
/// layout (nchw/nhwc) or a backward (-F).
void add_op_bench_flags(CLI::App* cmd, OpBenchFlags& flags, bool with_layout, bool with_direction);

/// -F as a list of "is backward" values: 1 -> {false}, 2 -> {true}, 0 -> {false, true}.
std::vector<bool> directions(const OpBenchFlags& flags);

/// One problem to bench, with an optional tag for the table.
struct OpBenchLine {
  dnn::AnyProblem problem;
  std::string tag;
};

struct OpBenchOptions {
  int iterations = 10;
  int warmup = 1;
  bool verify = false;
  double tolerance = 0;  ///< <= 0: the problem's own tolerance()
  /// Time replays of a device graph holding each sample's batch of calls (the kernels' own pace,
  /// as a peer replaying a CUDA graph), instead of launching the calls one by one.
  bool graph = false;
};

struct OpBenchResult {
  std::string solver;
  double ms = 0;       ///< median per call
  int batch = 1;       ///< back-to-back calls per timed sample
  bool graph = false;  ///< the samples were graph replays (OpBenchOptions::graph)
  double tflops = 0;
  double gbps = 0;  ///< problem.min_bytes() / time
  std::size_t workspace_bytes = 0;
  std::optional<bool> verified;
  std::optional<double> max_rel_err;  ///< the worst over the outputs
  std::string verify_summary;         ///< per output, when verifying
  std::string detail;
  std::string error;
  bool failed() const { return !error.empty() || (verified.has_value() && !*verified); }
};

struct OpBenchProblem {
  dnn::AnyProblem problem;
  std::string tag;
  std::vector<OpBenchResult> results;
  std::vector<std::pair<std::string, std::string>> skipped;  ///< solver, reason
};

/// Runs each choice that accepts `problem` on `stream`: inputs are seeded random data (by each
/// tensor's Fill), outputs are poisoned with NaN before the verified run, and each output is
/// compared with what the cpu backend's reference solver of the op computes from the same inputs.
OpBenchProblem bench_op_problem(runtime::Stream& stream, dnn::ProblemRef problem, std::string tag,
                                const std::vector<dnn::Choice>& choices, const OpBenchOptions& options);

/// The whole command: picks the solvers (--solver, --all-solvers, else the tuner's pick), benches
/// every line, prints the table or JSON. Returns the exit code: 1 when a verification failed or a
/// solver threw. Throws Error(unsupported) when no solver ran at all.
int run_op_bench(const OpBenchFlags& flags, const CLI::App& cmd, const std::vector<OpBenchLine>& lines);

}  // namespace galley::cli
