// The problem-text parsers: a bench/problem-file line (ConvProblem::parse_driver_line) and a
// find-db key (ConvProblem::parse_key, dnn::parse_problem_key). Input: the text itself.
// Besides "a result or a galley::Error", a parsed problem must survive its key's round trip.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_check.hpp"
#include "galley/dnn/conv_problem.hpp"
#include "galley/dnn/problem.hpp"

namespace {

using galley::dnn::ConvProblem;

void check_round_trip(const ConvProblem& problem) {
  const std::string key = problem.key();
  const ConvProblem again = ConvProblem::parse_key(key);
  if (!(again == problem)) galley::fuzz::finding("parse_key(key()) differs from the parsed problem");
  if (again.key() != key) galley::fuzz::finding("key() is not stable over parse_key");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  galley::fuzz::expect_result_or_error("parse_driver_line", [&] {
    std::string tag;
    check_round_trip(ConvProblem::parse_driver_line(text, &tag));
  });
  galley::fuzz::expect_result_or_error("ConvProblem::parse_key", [&] { check_round_trip(ConvProblem::parse_key(text)); });
  galley::fuzz::expect_result_or_error("parse_problem_key", [&] {
    const galley::dnn::AnyProblem any = galley::dnn::parse_problem_key(text);
    if (any.problem == nullptr || any.ops == nullptr) galley::fuzz::finding("parse_problem_key returned no problem");
  });
  return 0;
}
