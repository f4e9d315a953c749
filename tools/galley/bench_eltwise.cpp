// `galley bench eltwise`: binary elementwise ops with NumPy broadcasting, e.g.
//   galley bench eltwise --op add --shape 32x256x56x56 --shape1 1x256x1x1 --dtype f16 --layout nhwc -V 1
// With no flags it runs a bias add (8x64x28x28 + 1x64x1x1), so `galley bench eltwise -V 1` alone
// runs and verifies. -F 2 benches the backward (both input gradients), -F 0 both directions.
#include <cfloat>
#include <memory>
#include <string>
#include <vector>

#include "bench_op.hpp"
#include "command.hpp"
#include "galley/core/error.hpp"
#include "galley/dnn/eltwise.hpp"
#include "strict_options.hpp"

namespace galley::cli {
namespace {

struct EltwiseBenchArgs {
  OpBenchFlags common;
  std::string op = "add";
  std::string shape = "8x64x28x28";
  std::string shape1 = "1x64x1x1";
  double alpha = 1.0;
  double beta = 1.0;
};

int run_bench_eltwise(const EltwiseBenchArgs& args, const CLI::App& cmd) {
  dnn::EltwiseProblem base;
  base.op = dnn::parse_eltwise_op(args.op);
  base.a = dnn::parse_shape(args.shape, "--shape");
  base.b = dnn::parse_shape(args.shape1, "--shape1");
  base.alpha = static_cast<float>(args.alpha);
  base.beta = static_cast<float>(args.beta);
  base.dtype = args.common.dtype.empty() ? DType::f32 : parse_dtype(args.common.dtype);
  base.layout = args.common.layout.empty() ? dnn::Layout::nchw : dnn::parse_layout(args.common.layout);
  std::vector<OpBenchLine> lines;
  for (bool backward : directions(args.common)) {
    dnn::EltwiseProblem p = base;
    p.direction = backward ? dnn::EltwiseDirection::backward : dnn::EltwiseDirection::forward;
    p.validate();
    lines.push_back({dnn::AnyProblem::copy_of(dnn::ProblemRef::of(p)), {}});
  }
  return run_op_bench(args.common, cmd, lines);
}

const bool bench_eltwise_registered = register_command([](CLI::App& root) {
  auto args = std::make_shared<EltwiseBenchArgs>();
  CLI::App* cmd = bench_group(root).add_subcommand(
      "eltwise",
      "Time binary elementwise ops with NumPy broadcasting (--op add|sub|mul|div --shape --shape1)");
  cmd->add_option("--op", args->op, "add, sub, mul or div (default add)");
  cmd->add_option("--shape", args->shape, "shape of a, dims joined by 'x' (default 8x64x28x28)");
  cmd->add_option("--shape1", args->shape1,
                  "shape of b, broadcast against a by NumPy's rules (default 1x64x1x1, a bias)");
  cmd->add_option("--alpha", args->alpha, "scale of a: dst = (alpha a) op (beta b) (default 1)")
      ->check(number_in(-FLT_MAX, false, FLT_MAX));
  cmd->add_option("--beta", args->beta, "scale of b (default 1)")->check(number_in(-FLT_MAX, false, FLT_MAX));
  add_op_bench_flags(cmd, args->common, /*with_layout=*/true, /*with_direction=*/true);
  cmd->callback([args, cmd] { set_exit_code(run_bench_eltwise(*args, *cmd)); });
});

}  // namespace
}  // namespace galley::cli
