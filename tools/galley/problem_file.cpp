#include "problem_file.hpp"

#include <filesystem>
#include <fstream>

#include "core/quoted_input.hpp"
#include "galley/core/error.hpp"

namespace galley::cli {

std::vector<ProblemLine> read_problem_file(const std::string& path, const ProblemOverrides& overrides) {
  const std::string name = "--file " + quoted_input(path);
  std::error_code ec;
  // An ifstream opens a directory without complaint and then reads nothing.
  if (std::filesystem::is_directory(path, ec))
    throw Error(Status::io_error, name + ": is a directory, not a file");
  std::ifstream in(path);
  if (!in) throw Error(Status::io_error, name + ": cannot open");
  std::vector<ProblemLine> out;
  std::string text;
  for (int number = 1; std::getline(in, text); ++number) {
    const auto first = text.find_first_not_of(" \t\r");
    if (first == std::string::npos || text[first] == '#') continue;
    ProblemLine line;
    line.line = number;
    try {
      line.problem = dnn::ConvProblem::parse_driver_line(text, &line.tag);
      // An explicit --dtype/--layout/--batch wins over the line's own; otherwise the line's stands.
      if (!overrides.dtype.empty()) line.problem.dtype = parse_dtype(overrides.dtype);
      if (!overrides.layout.empty()) line.problem.layout = dnn::parse_layout(overrides.layout);
      if (overrides.batch > 0) line.problem.n = overrides.batch;
      line.problem.validate();
    } catch (const Error& e) {
      throw Error(e.status(), path + ":" + std::to_string(number) + ": " + e.what());
    }
    out.push_back(std::move(line));
  }
  if (in.bad()) throw Error(Status::io_error, name + ": read failed");
  if (out.empty()) throw Error(Status::invalid_argument, name + ": no problems in it");
  return out;
}

}  // namespace galley::cli
