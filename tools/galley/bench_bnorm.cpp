// `galley bench bnorm`: batch normalisation with MIOpenDriver's bnorm flags (-n -c -H -W, -m 1
// spatial, -F/--forw 1 training forward or 2 inference forward, -b/--back 1 backward) plus the
// common op-bench flags.
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

struct BnormBenchArgs {
  OpBenchFlags flags;
  std::int64_t n = 16, c = 64, h = 28, w = 28;
  int mode = 1;  // MIOpenDriver: 0 per activation, 1 spatial
  int forw = 1;
  int back = 0;
  double epsilon = 1e-5;
  double momentum = 0.1;
};

int run_bench_bnorm(const BnormBenchArgs& args, const CLI::App& cmd) {
  if (args.mode != 1) {
    throw Error(Status::unsupported, "-m " + std::to_string(args.mode) +
                                         ": per-activation batch norm is not supported; -m 1 (spatial) is");
  }
  if (args.forw == 0 && args.back == 0) {
    throw Error(Status::invalid_argument,
                "-F 0 -b 0 runs nothing: give -F 1 (training), -F 2 (inference) or -b 1");
  }
  dnn::BatchNormProblem base{.n = args.n, .c = args.c, .h = args.h, .w = args.w};
  if (!args.flags.dtype.empty()) base.dtype = parse_dtype(args.flags.dtype);
  if (!args.flags.layout.empty()) base.layout = dnn::parse_layout(args.flags.layout);
  base.epsilon = args.epsilon;
  base.momentum = args.momentum;
  std::vector<dnn::BatchNormProblem> problems;
  if (args.forw != 0) {
    dnn::BatchNormProblem p = base;
    p.mode = args.forw == 1 ? dnn::BatchNormMode::training : dnn::BatchNormMode::inference;
    problems.push_back(p);
  }
  if (args.back == 1) {
    dnn::BatchNormProblem p = base;
    p.mode = dnn::BatchNormMode::training;
    p.direction = dnn::NormDirection::backward;
    problems.push_back(p);
  }
  std::vector<OpBenchLine> lines;
  for (const auto& p : problems) {
    p.validate();
    lines.push_back({dnn::AnyProblem::copy_of(dnn::ProblemRef::of(p)), ""});
  }
  return run_op_bench(args.flags, cmd, lines);
}

const bool bench_bnorm_registered = register_command([](CLI::App& root) {
  auto args = std::make_shared<BnormBenchArgs>();
  CLI::App* cmd = bench_group(root).add_subcommand(
      "bnorm",
      "Time batch normalisation solvers (MIOpenDriver bnorm flags: -n -c -H -W -m 1 -F 1 training / -F 2 "
      "inference forward, -b 1 backward); default -n 16 -c 64 -H 28 -W 28 -F 1");
  cmd->add_option("-n,--batchsize", args->n, "batch (default 16)")->check(integer_in(1));
  cmd->add_option("-c,--in_channels", args->c, "channels (default 64)")->check(integer_in(1));
  cmd->add_option("-H,--in_h", args->h, "height (default 28)")->check(integer_in(1));
  cmd->add_option("-W,--in_w", args->w, "width (default 28)")->check(integer_in(1));
  cmd->add_option("-m,--mode", args->mode,
                  "1: spatial (statistics per channel, default); 0 (per activation) is not supported")
      ->check(integer_in(0, 1));
  cmd->add_option("-F,--forw", args->forw, "forward: 0 none, 1 training (default), 2 inference")
      ->check(integer_in(0, 2));
  cmd->add_option("-b,--back", args->back, "1: also the backward (training) problem")
      ->check(integer_in(0, 1));
  cmd->add_option("-e,--epsilon", args->epsilon, "added to the variance (default 0.00001)")
      ->check(number_in(0, true));
  cmd->add_option("--momentum", args->momentum, "running-average factor of training, in [0, 1] (default 0.1)")
      ->check(number_in(0, false, 1));
  add_op_bench_flags(cmd, args->flags, true, false);
  cmd->callback([args, cmd] { set_exit_code(run_bench_bnorm(*args, *cmd)); });
});

}  // namespace
}  // namespace galley::cli
