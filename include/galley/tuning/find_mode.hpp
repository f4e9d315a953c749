// How the tuner chooses a solver: the find modes (MIOpen's MIOPEN_FIND_MODE, reduced to the four
// that matter) and the knobs read from GALLEY_FIND_MODE, GALLEY_FIND_ENFORCE and GALLEY_FIND_TIME_MS.
#pragma once

#include <string_view>

namespace galley::tuning {

/// What pick() does for a problem it has not seen in this process.
enum class FindMode {
  /// Benchmark every applicable solver once per process (the find-db is written, not trusted),
  /// as MIOpen's NORMAL: for measuring, or when the db may be stale in ways keys cannot see.
  normal,
  /// A find-db hit, else the first applicable solver of the ordered list, without benchmarking or
  /// storing: no tuning cost ever, for dynamic shapes.
  fast,
  /// A find-db hit, else benchmark like normal and store the ranked list (the default).
  hybrid,
  /// The find-db is never read or written; the first applicable solver of the ordered list.
  off,
};

/// "normal", "fast", "hybrid", "off".
const char* to_string(FindMode mode) noexcept;

/// Parses a mode name (case-insensitive). Anything else throws Error(invalid_argument) naming the
/// text and listing the valid values.
FindMode parse_find_mode(std::string_view text);

/// The tuner's settings that come from the environment.
struct FindOptions {
  FindMode mode = FindMode::hybrid;
  /// GALLEY_FIND_ENFORCE=search: benchmark even on a find-db hit (once per process and problem)
  /// and replace the stored rows.
  bool enforce_search = false;
  /// GALLEY_FIND_TIME_MS: wall-clock budget for tuning one problem, the candidates' own preparation
  /// (check() and workspace_bytes(), which can be a vendor library's plan search) included. When it
  /// runs out nothing more runs (the run or preparation in flight finishes; the first candidate
  /// always runs once, so there is an answer): solvers not reached are left out of the ranked list,
  /// solvers warmed up but not yet timed are ranked by their warm-up run.
  double time_box_ms = 2000;

  /// Reads GALLEY_FIND_MODE (default hybrid), GALLEY_FIND_ENFORCE (none|search) and
  /// GALLEY_FIND_TIME_MS (a positive number). A malformed value throws Error(invalid_argument)
  /// naming the variable and the valid values.
  static FindOptions from_env();
};

}  // namespace galley::tuning
