// Op kinds and tensor roles by name, and the one table that maps a key's kind to its problem type.
#include "galley/dnn/op.hpp"

#include <string>

#include "galley/core/error.hpp"
#include "galley/dnn/conv_problem.hpp"
#include "galley/dnn/problem.hpp"

namespace galley::dnn {

const char* to_string(OpKind kind) noexcept {
  switch (kind) {
    case OpKind::conv: return "conv";
  }
  return "?";
}

OpKind op_kind_of_key(std::string_view key) {
  const std::string_view head = key.substr(0, key.find('-'));
  if (head == "conv") return OpKind::conv;
  throw Error(Status::invalid_argument,
              "problem key '" + std::string(key.substr(0, 80)) + (key.size() > 80 ? "...'" : "'") +
                  " names no known op kind '" + std::string(head.substr(0, 40)) + "' (known: conv)");
}

const char* to_string(ArgId id) noexcept {
  switch (id) {
    case ArgId::src: return "src";
    case ArgId::wei: return "wei";
    case ArgId::bias: return "bias";
    case ArgId::dst: return "dst";
    case ArgId::diff_src: return "diff_src";
    case ArgId::diff_wei: return "diff_wei";
    case ArgId::diff_bias: return "diff_bias";
    case ArgId::diff_dst: return "diff_dst";
  }
  return "?";
}

const ProblemOps& problem_ops_for(OpKind kind) {
  switch (kind) {
    case OpKind::conv: return problem_ops<ConvProblem>();
  }
  throw Error(Status::invalid_argument, "unknown op kind " + std::to_string(static_cast<int>(kind)));
}

AnyProblem parse_problem_key(std::string_view key) {
  const ProblemOps& ops = problem_ops_for(op_kind_of_key(key));
  return AnyProblem{ops.parse_key(key), &ops};
}

}  // namespace galley::dnn
