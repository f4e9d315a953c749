// `galley bench gnorm`: group normalisation (-n -c -H -W -g groups, -F 1 forward / 2 backward /
// 0 both) plus the common op-bench flags.
#include <memory>
#include <string>
#include <vector>

#include "bench_op.hpp"
#include "command.hpp"
#include "galley/core/error.hpp"
#include "galley/dnn/normalization.hpp"
#include "strict_options.hpp"

namespace galley::cli {
namespace {

struct GnormBenchArgs {
  OpBenchFlags flags;
  std::int64_t n = 8, c = 64, h = 28, w = 28, groups = 32;
  double epsilon = 1e-5;
};

int run_bench_gnorm(const GnormBenchArgs& args, const CLI::App& cmd) {
  dnn::GroupNormProblem base{.n = args.n, .c = args.c, .h = args.h, .w = args.w, .groups = args.groups};
  if (!args.flags.dtype.empty()) base.dtype = parse_dtype(args.flags.dtype);
  if (!args.flags.layout.empty()) base.layout = dnn::parse_layout(args.flags.layout);
  base.epsilon = args.epsilon;
  std::vector<OpBenchLine> lines;
  for (bool backward : directions(args.flags)) {
    dnn::GroupNormProblem p = base;
    p.direction = backward ? dnn::NormDirection::backward : dnn::NormDirection::forward;
    p.validate();
    lines.push_back({dnn::AnyProblem::copy_of(dnn::ProblemRef::of(p)), ""});
  }
  return run_op_bench(args.flags, cmd, lines);
}

const bool bench_gnorm_registered = register_command([](CLI::App& root) {
  auto args = std::make_shared<GnormBenchArgs>();
  CLI::App* cmd = bench_group(root).add_subcommand(
      "gnorm", "Time group normalisation solvers (-n -c -H -W -g); default -n 8 -c 64 -H 28 -W 28 -g 32");
  cmd->add_option("-n,--batchsize", args->n, "batch (default 8)")->check(integer_in(1));
  cmd->add_option("-c,--in_channels", args->c, "channels (default 64)")->check(integer_in(1));
  cmd->add_option("-H,--in_h", args->h, "height (default 28)")->check(integer_in(1));
  cmd->add_option("-W,--in_w", args->w, "width (default 28)")->check(integer_in(1));
  cmd->add_option("-g,--num_groups", args->groups, "groups, dividing c (default 32)")->check(integer_in(1));
  cmd->add_option("-e,--epsilon", args->epsilon, "added to the variance (default 0.00001)")
      ->check(number_in(0, true));
  add_op_bench_flags(cmd, args->flags, true, true);
  cmd->callback([args, cmd] { set_exit_code(run_bench_gnorm(*args, *cmd)); });
});

}  // namespace
}  // namespace galley::cli
