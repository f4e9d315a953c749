// `galley bench lnorm`: layer normalisation with MIOpenDriver's layernorm flags (-X dims as
// "8x197x768", -o first normalised dim, -e epsilon), -F 1 forward / 2 backward / 0 both, plus the
// common op-bench flags.
#include <memory>
#include <string>
#include <vector>

#include "bench_op.hpp"
#include "command.hpp"
#include "core/quoted_input.hpp"
#include "galley/core/error.hpp"
#include "galley/dnn/normalization.hpp"
#include "strict_options.hpp"

namespace galley::cli {
namespace {

struct LnormBenchArgs {
  OpBenchFlags flags;
  std::string input = "8x197x768";
  int axis = -1;  // default: the last dim
  double epsilon = 1e-5;
};

dnn::LayerNormProblem shape_of(const std::string& text) {
  dnn::LayerNormProblem p;
  p.rank = 0;
  std::size_t start = 0;
  while (true) {
    const std::size_t end = text.find('x', start);
    const std::string_view part =
        std::string_view(text).substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (p.rank == dnn::kMaxRank) {
      throw Error(Status::invalid_argument,
                  "-X " + quoted_input(text) + " has more than " + std::to_string(dnn::kMaxRank) + " dims");
    }
    p.dims[static_cast<std::size_t>(p.rank++)] =
        parse_integer("-X", part, 1, std::numeric_limits<std::int64_t>::max());
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return p;
}

int run_bench_lnorm(const LnormBenchArgs& args, const CLI::App& cmd) {
  dnn::LayerNormProblem base = shape_of(args.input);
  base.axis = args.axis < 0 ? base.rank - 1 : args.axis;
  if (!args.flags.dtype.empty()) base.dtype = parse_dtype(args.flags.dtype);
  base.epsilon = args.epsilon;
  std::vector<OpBenchLine> lines;
  for (bool backward : directions(args.flags)) {
    dnn::LayerNormProblem p = base;
    p.direction = backward ? dnn::NormDirection::backward : dnn::NormDirection::forward;
    p.validate();
    lines.push_back({dnn::AnyProblem::copy_of(dnn::ProblemRef::of(p)), ""});
  }
  return run_op_bench(args.flags, cmd, lines);
}

const bool bench_lnorm_registered = register_command([](CLI::App& root) {
  auto args = std::make_shared<LnormBenchArgs>();
  CLI::App* cmd = bench_group(root).add_subcommand(
      "lnorm",
      "Time layer normalisation solvers (MIOpenDriver layernorm flags: -X dims, -o first normalised dim); "
      "default -X 8x197x768 -o 2");
  cmd->add_option("-X,--input", args->input, "row-major dims joined by x, e.g. 8x197x768 (default)");
  cmd->add_option("-o,--normalized_dim", args->axis,
                  "first normalised dim: the statistics run over dims o.. (default: the last dim)")
      ->check(integer_in(0, dnn::kMaxRank - 1));
  cmd->add_option("-e,--epsilon", args->epsilon, "added to the variance (default 0.00001)")
      ->check(number_in(0, true));
  add_op_bench_flags(cmd, args->flags, false, true);
  cmd->callback([args, cmd] { set_exit_code(run_bench_lnorm(*args, *cmd)); });
});

}  // namespace
}  // namespace galley::cli
