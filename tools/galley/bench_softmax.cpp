// `galley bench softmax`: MIOpenDriver's softmax flags (-n -c -H -W, -a algorithm, -m mode) or any
// shape (--shape 8x1000, --axis, --log), both directions, through the op-generic bench runner.
#include <memory>
#include <string>
#include <vector>

#include "bench_op.hpp"
#include "command.hpp"
#include "galley/core/error.hpp"
#include "galley/dnn/softmax.hpp"
#include "strict_options.hpp"

namespace galley::cli {
namespace {

struct SoftmaxBenchArgs {
  OpBenchFlags common;
  // MIOpenDriver's defaults (softmax_driver.hpp).
  std::int64_t n = 100, c = 3, h = 32, w = 32;
  int algorithm = 1;
  int mode = 1;
  std::string shape;
  int axis = 1;
  bool log = false;
};

std::vector<std::int64_t> parse_shape(const std::string& text) {
  std::vector<std::int64_t> dims;
  std::size_t start = 0;
  while (true) {
    const std::size_t end = text.find('x', start);
    const std::string part = text.substr(start, end == std::string::npos ? std::string::npos : end - start);
    dims.push_back(parse_integer("--shape", part, 1, std::numeric_limits<std::int64_t>::max()));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  if (dims.size() > static_cast<std::size_t>(dnn::kMaxRank)) {
    throw Error(Status::invalid_argument, "--shape " + text + " has " + std::to_string(dims.size()) +
                                              " dims (valid: 1 to " + std::to_string(dnn::kMaxRank) + ")");
  }
  return dims;
}

// Error naming `what` when the tensor of `dims` would span more than 2^63 bytes: TensorDesc's
// packed strides would wrap silently before any validation saw them.
void require_bytes_fit(const std::vector<std::int64_t>& dims, const std::string& what) {
  std::int64_t bytes = 4;  // the widest element
  for (std::int64_t d : dims) {
    if (__builtin_mul_overflow(bytes, d, &bytes)) {
      throw Error(Status::invalid_argument, what + ": the tensor's size overflows 64 bits");
    }
  }
}

int run(const SoftmaxBenchArgs& a, const CLI::App& cmd) {
  for (const char* flag : {"-n", "-c", "-H", "-W", "-m"}) require_apart(cmd, "--shape", flag);
  require_apart(cmd, "-m", "--axis");
  const DType dtype = a.common.dtype.empty() ? DType::f32 : parse_dtype(a.common.dtype);
  const dnn::Layout layout = a.common.layout.empty() ? dnn::Layout::nchw : dnn::parse_layout(a.common.layout);
  dnn::TensorDesc desc;
  int axis = a.axis;
  if (!a.shape.empty()) {
    const std::vector<std::int64_t> dims = parse_shape(a.shape);
    require_bytes_fit(dims, "--shape " + a.shape);
    if (dims.size() == 4) {
      desc = dnn::TensorDesc::packed(dtype, layout, dims[0], dims[1], dims[2], dims[3]);
    } else {
      if (layout != dnn::Layout::nchw) {
        throw Error(Status::invalid_argument,
                    "--layout " + a.common.layout + " needs a 4-dim --shape (N, C, H, W)");
      }
      desc = dnn::TensorDesc::contiguous(dtype, dims.data(), static_cast<int>(dims.size()));
    }
  } else if (a.mode == 0) {
    // MIOpen's instance mode: one softmax over all of C, H and W of each image.
    std::int64_t chw = 0;
    if (__builtin_mul_overflow(a.c, a.h, &chw) || __builtin_mul_overflow(chw, a.w, &chw)) {
      throw Error(Status::invalid_argument, "-m 0: c * H * W overflows 64 bits");
    }
    desc = dnn::TensorDesc::contiguous(dtype, {a.n, chw});
    axis = 1;
  } else {
    require_bytes_fit({a.n, a.c, a.h, a.w}, "-n * -c * -H * -W");
    desc = dnn::TensorDesc::packed(dtype, layout, a.n, a.c, a.h, a.w);
  }
  const bool log = a.log || a.algorithm == 2;
  std::vector<OpBenchLine> lines;
  for (bool backward : directions(a.common)) {
    const dnn::SoftmaxProblem p = dnn::SoftmaxProblem::over(
        desc, axis, log ? dnn::SoftmaxAlgorithm::log_softmax : dnn::SoftmaxAlgorithm::softmax, backward);
    lines.push_back({dnn::AnyProblem::copy_of(dnn::ProblemRef::of(p)), ""});
  }
  return run_op_bench(a.common, cmd, lines);
}

const bool bench_softmax_registered = register_command([](CLI::App& root) {
  auto args = std::make_shared<SoftmaxBenchArgs>();
  CLI::App* cmd = bench_group(root).add_subcommand(
      "softmax", "Softmax / log-softmax along one axis, forward and backward (MIOpenDriver softmax flags)");
  cmd->add_option("-n", args->n, "batch (default 100)")->check(integer_in(1));
  cmd->add_option("-c", args->c, "channels (default 3)")->check(integer_in(1));
  cmd->add_option("-H", args->h, "height (default 32)")->check(integer_in(1));
  cmd->add_option("-W", args->w, "width (default 32)")->check(integer_in(1));
  cmd->add_option("-a", args->algorithm,
                  "MIOpen algorithm: 0 fast, 1 accurate (both max-subtracted here), 2 log")
      ->check(integer_in(0, 2));
  cmd->add_option("-m", args->mode, "MIOpen mode: 0 instance (over C*H*W), 1 channel (default)")
      ->check(integer_in(0, 1));
  cmd->add_option("--shape", args->shape, "any shape instead of -n -c -H -W, e.g. 64x1000 or 2x3x4x5x6");
  cmd->add_option("--axis", args->axis,
                  "the softmax axis (default 1, the channels); negative counts from the end")
      ->check(integer_in(-dnn::kMaxRank, dnn::kMaxRank - 1));
  cmd->add_flag("--log", args->log, "log-softmax (as -a 2)");
  add_op_bench_flags(cmd, args->common, true, true);
  cmd->callback([args, cmd] { set_exit_code(run(*args, *cmd)); });
});

}  // namespace
}  // namespace galley::cli
