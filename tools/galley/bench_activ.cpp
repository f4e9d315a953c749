// `galley bench activ`: one activation problem from MIOpenDriver's activ flags (-n -c -H -W, -m the
// function, -A alpha, -B beta) or a row-major shape of any rank (--shape 7,129), forward and/or
// backward (-F), timed and optionally verified against ref.activ through the op-generic runner.
// Without problem flags it benches relu on 32x64x56x56.
#include <cfloat>
#include <memory>
#include <string>
#include <vector>

#include "bench_op.hpp"
#include "command.hpp"
#include "core/quoted_input.hpp"
#include "galley/core/error.hpp"
#include "galley/dnn/activation.hpp"
#include "strict_options.hpp"

namespace galley::cli {
namespace {

struct ActivBenchArgs {
  OpBenchFlags common;
  std::string mode = "relu";
  double alpha = 0, beta = 0;
  std::int64_t n = 32, c = 64, h = 56, w = 56;
  std::string shape;
};

[[noreturn]] void bad(const std::string& message) { throw Error(Status::invalid_argument, message); }

// -m's names: the canonical ones plus the names PyTorch users type, each with its parameters.
dnn::Activation activation_named(const std::string& name, double* alpha, double* beta, bool* preset) {
  *preset = true;
  if (name == "relu6") {
    *alpha = 0, *beta = 6;
    return dnn::Activation::clip;
  }
  if (name == "hardtanh") {
    *alpha = -1, *beta = 1;
    return dnn::Activation::clip;
  }
  *preset = false;
  if (name == "gelu") return dnn::Activation::gelu_erf;
  if (name == "swish") return dnn::Activation::silu;
  try {
    return dnn::parse_activation(name);
  } catch (const Error& e) {
    bad(std::string("-m: ") + e.what() + "; also relu6, hardtanh, gelu (gelu_erf), swish (silu)");
  }
}

std::vector<std::int64_t> parse_shape(const std::string& text) {
  std::vector<std::int64_t> dims;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = text.find(',', start);
    const std::string part = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    dims.push_back(parse_integer("--shape", part, 1, INT64_MAX));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (dims.size() > static_cast<std::size_t>(dnn::kMaxRank)) {
    bad("--shape " + quoted_input(text) + " has " + std::to_string(dims.size()) + " dims; at most " +
        std::to_string(dnn::kMaxRank));
  }
  return dims;
}

int run_bench_activ(const ActivBenchArgs& args, const CLI::App& cmd) {
  double alpha = 0, beta = 0;
  bool preset = false;
  const dnn::Activation activation = activation_named(args.mode, &alpha, &beta, &preset);
  if (!preset) {
    alpha = dnn::default_alpha(activation);
    beta = dnn::default_beta(activation);
  }
  if (cmd.count("-A") > 0) alpha = args.alpha;
  if (cmd.count("-B") > 0) beta = args.beta;
  const DType dtype = args.common.dtype.empty() ? DType::f32 : parse_dtype(args.common.dtype);

  dnn::ActivProblem base;
  if (!args.shape.empty()) {
    for (const char* flag : {"-n", "-c", "-H", "-W", "--layout"}) {
      if (cmd.count(flag) > 0) bad(std::string(flag) + " and --shape both give the shape; use one");
    }
    const std::vector<std::int64_t> dims = parse_shape(args.shape);
    base.rank = static_cast<int>(dims.size());
    for (std::size_t i = 0; i < dims.size(); ++i) base.dims[i] = dims[i];
    if (base.rank == 4) base.layout = dnn::Layout::nchw;
  } else {
    base.rank = 4;
    base.dims = {args.n, args.c, args.h, args.w, 1, 1};
    base.layout = args.common.layout.empty() ? dnn::Layout::nchw : dnn::parse_layout(args.common.layout);
  }
  base.activation = activation;
  base.alpha = alpha;
  base.beta = beta;
  base.dtype = dtype;

  std::vector<OpBenchLine> lines;
  for (bool backward : directions(args.common)) {
    dnn::ActivProblem p = base;
    p.direction = backward ? dnn::ActivDirection::backward : dnn::ActivDirection::forward;
    p.validate();
    lines.push_back({dnn::AnyProblem::copy_of(dnn::ProblemRef::of(p)), ""});
  }
  return run_op_bench(args.common, cmd, lines);
}

const bool bench_activ_registered = register_command([](CLI::App& root) {
  auto args = std::make_shared<ActivBenchArgs>();
  CLI::App* cmd = bench_group(root).add_subcommand(
      "activ", "Time activation solvers (relu, gelu, silu, ...), forward and backward (MIOpenDriver's activ flags)");
  cmd->add_option("-m", args->mode,
                  "activation: relu, leaky_relu, clip, elu, sigmoid, tanh, gelu_erf, gelu_tanh, silu, hardswish, "
                  "hardsigmoid; also relu6, hardtanh, gelu, swish (default relu)");
  cmd->add_option("-A", args->alpha, "alpha: leaky_relu's slope, clip's lower bound, elu's alpha (default PyTorch's)")
      ->check(number_in(-DBL_MAX, false));
  cmd->add_option("-B", args->beta, "beta: clip's upper bound (default 6)")->check(number_in(-DBL_MAX, false));
  cmd->add_option("-n", args->n, "batch (default 32)")->check(integer_in(1));
  cmd->add_option("-c", args->c, "channels (default 64)")->check(integer_in(1));
  cmd->add_option("-H", args->h, "height (default 56)")->check(integer_in(1));
  cmd->add_option("-W", args->w, "width (default 56)")->check(integer_in(1));
  cmd->add_option("--shape", args->shape, "a row-major shape of any rank instead of -n -c -H -W, e.g. 7,129");
  add_op_bench_flags(cmd, args->common, true, true);
  cmd->callback([args, cmd] { set_exit_code(run_bench_activ(*args, *cmd)); });
});

}  // namespace
}  // namespace galley::cli
