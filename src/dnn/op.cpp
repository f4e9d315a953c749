// Op kinds and tensor roles by name, and the one table that maps a key's kind to its problem type.
#include "galley/dnn/op.hpp"

#include <array>
#include <string>

#include "core/quoted_input.hpp"

#include "galley/core/error.hpp"
#include "galley/dnn/problem.hpp"

namespace galley::dnn {

namespace {

constexpr std::array<const char*, kOpKindCount> kKindNames = {
    "conv",   "pool",   "activ", "bnorm", "lnorm",     "gnorm", "softmax", "gemm",
    "eltwise", "reduce", "concat", "split", "transpose", "pad",   "reorder"};

std::string known_kinds() {
  std::string out;
  for (const char* name : kKindNames) out += (out.empty() ? "" : ", ") + std::string(name);
  return out;
}

constexpr std::array<const char*, static_cast<std::size_t>(ArgId::indices) + 1> kArgNames = {
    "src",   "wei",   "bias",     "dst",        "diff_src",   "diff_wei",   "diff_bias",
    "diff_dst", "src1", "diff_src1", "scale",    "shift",      "mean",       "variance",
    "diff_scale", "diff_shift", "saved_mean", "saved_invstd", "indices"};

// "multi[0]" .. "multi[N-1]", built once so to_string() can return a stable pointer.
const std::array<std::string, kMaxMultiArgs>& multi_names() {
  static const auto names = [] {
    std::array<std::string, kMaxMultiArgs> out;
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = "multi[" + std::to_string(i) + "]";
    return out;
  }();
  return names;
}

// Each problem type registers its operations from its own file (register_problem_ops), so a new
// op kind adds no line here.
std::array<const ProblemOps*, kOpKindCount>& problem_table() {
  static std::array<const ProblemOps*, kOpKindCount> table{};
  return table;
}

}  // namespace

const char* to_string(OpKind kind) noexcept {
  const auto i = static_cast<std::size_t>(kind);
  return i < kKindNames.size() ? kKindNames[i] : "?";
}

OpKind parse_op_kind(std::string_view name) {
  for (std::size_t i = 0; i < kKindNames.size(); ++i) {
    if (name == kKindNames[i]) return static_cast<OpKind>(i);
  }
  throw Error(Status::invalid_argument, "unknown op kind " + quoted_input(name) + " (known: " + known_kinds() + ")");
}

OpKind op_kind_of_key(std::string_view key) {
  const std::string_view head = key.substr(0, key.find('-'));
  for (std::size_t i = 0; i < kKindNames.size(); ++i) {
    if (head == kKindNames[i]) return static_cast<OpKind>(i);
  }
  throw Error(Status::invalid_argument,
              "problem key '" + std::string(key.substr(0, 80)) + (key.size() > 80 ? "...'" : "'") +
                  " names no known op kind '" + std::string(head.substr(0, 40)) + "' (known: " + known_kinds() +
                  ")");
}

const char* to_string(ArgId id) noexcept {
  const auto i = static_cast<std::size_t>(id);
  if (i < kArgNames.size()) return kArgNames[i];
  const std::size_t multi = i - static_cast<std::size_t>(ArgId::multi_first);
  if (i >= static_cast<std::size_t>(ArgId::multi_first) && multi < kMaxMultiArgs) return multi_names()[multi].c_str();
  return "?";
}

bool register_problem_ops(const ProblemOps& ops) {
  problem_table()[static_cast<std::size_t>(ops.kind)] = &ops;
  return true;
}

const ProblemOps& problem_ops_for(OpKind kind) {
  const auto i = static_cast<std::size_t>(kind);
  if (i >= kOpKindCount) {
    throw Error(Status::invalid_argument, "unknown op kind " + std::to_string(i));
  }
  const ProblemOps* ops = problem_table()[i];
  if (ops == nullptr) {
    throw Error(Status::unsupported, std::string("op kind '") + kKindNames[i] + "' has no problem type in this build");
  }
  return *ops;
}

AnyProblem parse_problem_key(std::string_view key) {
  const ProblemOps& ops = problem_ops_for(op_kind_of_key(key));
  return AnyProblem{ops.parse_key(key), &ops};
}

}  // namespace galley::dnn
