// `galley bench reduce`: sum or mean over axes of any shape (--shape 2x3x4x5 --axes 1,2 --op
// sum|mean), both directions, through the op-generic bench runner.
#include <memory>
#include <string>
#include <vector>

#include "bench_op.hpp"
#include "command.hpp"
#include "galley/core/error.hpp"
#include "galley/dnn/reduce.hpp"
#include "strict_options.hpp"

namespace galley::cli {
namespace {

struct ReduceBenchArgs {
  OpBenchFlags common;
  // The global average pool of a ResNet stage: 32 x 64 x 14 x 14 over H and W.
  std::string shape = "32x64x14x14";
  std::string axes = "2,3";
  std::string op = "mean";
};

std::vector<std::int64_t> split_integers(const std::string& option, const std::string& text, char sep,
                                         std::int64_t min, std::int64_t max) {
  std::vector<std::int64_t> out;
  std::size_t start = 0;
  while (true) {
    const std::size_t end = text.find(sep, start);
    out.push_back(parse_integer(
        option, text.substr(start, end == std::string::npos ? std::string::npos : end - start), min, max));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

int run(const ReduceBenchArgs& a, const CLI::App& cmd) {
  const DType dtype = a.common.dtype.empty() ? DType::f32 : parse_dtype(a.common.dtype);
  const std::vector<std::int64_t> dims =
      split_integers("--shape", a.shape, 'x', 1, std::numeric_limits<std::int64_t>::max());
  if (dims.size() > static_cast<std::size_t>(dnn::kMaxRank)) {
    throw Error(Status::invalid_argument, "--shape " + a.shape + " has " + std::to_string(dims.size()) +
                                              " dims (valid: 1 to " + std::to_string(dnn::kMaxRank) + ")");
  }
  std::int64_t bytes = 4;  // the widest element; contiguous strides would wrap past 2^63
  for (std::int64_t d : dims) {
    if (__builtin_mul_overflow(bytes, d, &bytes)) {
      throw Error(Status::invalid_argument, "--shape " + a.shape + ": the tensor's size overflows 64 bits");
    }
  }
  std::vector<int> axes;
  for (std::int64_t v : split_integers("--axes", a.axes, ',', -dnn::kMaxRank, dnn::kMaxRank - 1)) {
    axes.push_back(static_cast<int>(v));
  }
  const dnn::ReduceOp op = dnn::parse_reduce_op(a.op);
  const dnn::TensorDesc desc = dnn::TensorDesc::contiguous(dtype, dims.data(), static_cast<int>(dims.size()));
  std::vector<OpBenchLine> lines;
  for (bool backward : directions(a.common)) {
    const dnn::ReduceProblem p = dnn::ReduceProblem::over(desc, axes, op, backward);
    lines.push_back({dnn::AnyProblem::copy_of(dnn::ProblemRef::of(p)), ""});
  }
  return run_op_bench(a.common, cmd, lines);
}

const bool bench_reduce_registered = register_command([](CLI::App& root) {
  auto args = std::make_shared<ReduceBenchArgs>();
  CLI::App* cmd = bench_group(root).add_subcommand("reduce", "Sum / mean over axes, forward and backward");
  cmd->add_option("--shape", args->shape, "the input's dims, e.g. 2x3x4x5 (default 32x64x14x14)");
  cmd->add_option("--axes", args->axes, "comma list of axes to reduce, negative from the end (default 2,3)");
  cmd->add_option("--op", args->op, "sum or mean (default mean)");
  add_op_bench_flags(cmd, args->common, false, true);
  cmd->callback([args, cmd] { set_exit_code(run(*args, *cmd)); });
});

}  // namespace
}  // namespace galley::cli
