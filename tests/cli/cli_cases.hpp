// Runs many `galley` command lines as child processes, several at a time, each with its own
// argument vector (no shell: a value may hold spaces, quotes or megabytes) and extra environment,
// each killed after a time limit. For the bad-input suites: every case must fail cleanly.
#pragma once

#include <string>
#include <vector>

namespace galley::testing {

/// One command line: the arguments after `galley` and NAME=value pairs added to the environment.
struct CliCase {
  std::vector<std::string> args;
  std::vector<std::string> env;
  /// A fragment the message must contain (the bad value as the message shows it); empty: none.
  std::string expect;
};

struct CliOutcome {
  int exit_code = -1;        ///< -1 unless the child exited normally
  int signal = 0;            ///< the signal that ended it, 0 when it exited
  bool timed_out = false;    ///< killed after the time limit
  double seconds = 0;        ///< wall time
  std::string output;        ///< stdout and stderr interleaved, at most kMaxKeptOutput bytes
  std::size_t output_bytes;  ///< everything it wrote, kept or not
};

/// Output bytes kept per case; more is counted, not stored.
inline constexpr std::size_t kMaxKeptOutput = 1 << 20;

/// Runs `cases` through GALLEY_TEST_BIN_DIR/galley, `parallel` at a time, each killed (and marked
/// timed_out) after `timeout_s`. Outcomes in the order of `cases`.
std::vector<CliOutcome> run_cli_cases(const std::vector<CliCase>& cases, int parallel, double timeout_s);

/// The command line as a person would paste it (values shortened), for failure messages.
std::string describe(const CliCase& c);

/// Empty when `outcome` is a clean failure: exited non-zero without a signal within `limit_s`, a
/// line starting "galley: error" that contains `c.expect`, no "internal error", and at most
/// `max_output` bytes written. Otherwise what was wrong, with the command and its output.
std::string clean_failure_problem(const CliCase& c, const CliOutcome& outcome, double limit_s,
                                  std::size_t max_output);

}  // namespace galley::testing
