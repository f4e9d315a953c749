// Problem lists (`--file`): one MIOpenDriver line per problem, '#' comments and tags, as
// shared/bench/conv_problems.txt. Shared by `galley tune`, `bench conv` and `bench tuner` so a bad
// line is reported the same way everywhere: "FILE:LINE: what is wrong".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "galley/dnn/conv_problem.hpp"

namespace galley::cli {

struct ProblemLine {
  dnn::ConvProblem problem;
  std::string tag;  ///< the text after '#', trimmed
  int line = 0;     ///< 1-based line number in the file
};

/// What the command line overrides in every problem of a list.
struct ProblemOverrides {
  std::string dtype;       ///< --dtype; empty: each line's own
  std::string layout;      ///< --layout; empty: each line's own
  std::int64_t batch = 0;  ///< --batch; 0: each line's -n
};

/// Every problem of `path` with `overrides` applied, each validated. Throws Error: io_error when the
/// file cannot be read (or is a directory), invalid_argument with a "path:line: " prefix for a bad
/// line, invalid_argument when the file holds no problem.
std::vector<ProblemLine> read_problem_file(const std::string& path, const ProblemOverrides& overrides = {});

}  // namespace galley::cli
