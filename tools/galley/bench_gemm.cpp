// `galley bench gemm`: MIOpenDriver's gemm flags (-m -n -k, -u/--transA, -v/--transB,
// -b/--batch_count, -A/--alpha, -B/--beta) plus --bias and the shared-operand flags, in every
// direction (-F as `galley bench conv`: 1 forward, 2 backward data, 4 backward weights, sums of
// them, 0 all three), through the op-generic runner.
#include <memory>
#include <string>
#include <vector>

#include "bench_op.hpp"
#include "command.hpp"
#include "galley/core/error.hpp"
#include "galley/dnn/gemm_problem.hpp"
#include "strict_options.hpp"

namespace galley::cli {
namespace {

struct GemmBenchArgs {
  OpBenchFlags common;
  std::int64_t m = 256, n = 256, k = 256, batch = 1;
  int trans_a = 0, trans_b = 0;
  int direction = 1;
  bool shared_a = false, shared_b = false, bias = false;
  double alpha = 1.0, beta = 0.0;
};

int run(const GemmBenchArgs& args, const CLI::App& cmd) {
  if (args.direction != 0 && cmd.count("--beta") > 0 && args.beta != 0 && (args.direction & 1) == 0) {
    throw Error(Status::invalid_argument, "--beta scales the old output of the forward; -F " +
                                              std::to_string(args.direction) + " runs no forward");
  }
  dnn::GemmProblem base;
  base.m = args.m, base.n = args.n, base.k = args.k, base.batch = args.batch;
  base.trans_a = args.trans_a == 1, base.trans_b = args.trans_b == 1;
  base.shared_a = args.shared_a, base.shared_b = args.shared_b, base.bias = args.bias;
  base.alpha = args.alpha, base.beta = args.beta;
  base.dtype = args.common.dtype.empty() ? DType::f32 : parse_dtype(args.common.dtype);
  const int mask = args.direction == 0 ? 7 : args.direction;
  std::vector<OpBenchLine> lines;
  const dnn::GemmDirection directions[] = {dnn::GemmDirection::forward, dnn::GemmDirection::backward_data,
                                           dnn::GemmDirection::backward_weights};
  for (int bit = 0; bit < 3; ++bit) {
    if ((mask & (1 << bit)) == 0) continue;
    dnn::GemmProblem p = base;
    p.direction = directions[bit];
    if (p.direction != dnn::GemmDirection::forward) p.beta = 0;
    p.validate();
    lines.push_back({dnn::AnyProblem::copy_of(dnn::ProblemRef::of(p)), ""});
  }
  return run_op_bench(args.common, cmd, lines);
}

const bool bench_gemm_registered = register_command([](CLI::App& root) {
  auto args = std::make_shared<GemmBenchArgs>();
  CLI::App* cmd = bench_group(root).add_subcommand(
      "gemm", "Batched GEMM / linear: C = alpha op(A) op(B) + beta C + bias, forward and backward");
  add_op_bench_flags(cmd, args->common, /*with_layout=*/false, /*with_direction=*/false);
  cmd->add_option("-m", args->m, "rows of op(A) and C (default 256)")->check(integer_in(1));
  cmd->add_option("-n", args->n, "columns of op(B) and C (default 256)")->check(integer_in(1));
  cmd->add_option("-k", args->k, "columns of op(A), rows of op(B) (default 256)")->check(integer_in(1));
  cmd->add_option("-u,--transA", args->trans_a, "1: A is stored k x m (default 0)")->check(integer_in(0, 1));
  cmd->add_option("-v,--transB", args->trans_b, "1: B is stored n x k, as nn.Linear's weight (default 0)")
      ->check(integer_in(0, 1));
  cmd->add_option("-b,--batch_count", args->batch, "products in the batch (default 1)")->check(integer_in(1));
  cmd->add_flag("--shared_a", args->shared_a, "one A for every batch (batch stride 0)");
  cmd->add_flag("--shared_b", args->shared_b, "one B for every batch (batch stride 0; a linear layer's weight)");
  cmd->add_flag("--bias", args->bias, "add a bias vector of n to every row (backward: its gradient too)");
  cmd->add_option("-A,--alpha", args->alpha, "scale of the product (default 1)")->check(number_in(-1e30, false, 1e30));
  cmd->add_option("-B,--beta", args->beta, "scale of the old C, forward only (default 0)")
      ->check(number_in(-1e30, false, 1e30));
  cmd->add_option("-F", args->direction,
                  "1 forward (default), 2 backward data, 4 backward weights (and bias), sums of them, 0 all three")
      ->check(integer_in(0, 7));
  cmd->callback([args, cmd] { set_exit_code(run(*args, *cmd)); });
});

}  // namespace
}  // namespace galley::cli
