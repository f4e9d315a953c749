// `galley bench pool`: MIOpenDriver's pool flags (-n -c -H -W, -y -x window, -p -q padding, -u -v
// stride, -m max|avg|avg_in) plus what PyTorch has and MIOpenDriver lacks (--ceil, --global,
// --adaptive OHxOW, --keep-indices), and the common op flags. Without flags it runs ResNet's stem
// pooling on a small batch, so `galley bench pool -V 1` alone runs and verifies.
#include <charconv>
#include <memory>
#include <string>
#include <vector>

#include "bench_op.hpp"
#include "command.hpp"
#include "core/quoted_input.hpp"
#include "galley/core/error.hpp"
#include "galley/dnn/pool.hpp"
#include "strict_options.hpp"

namespace galley::cli {
namespace {

struct PoolBenchArgs {
  OpBenchFlags common;
  dnn::PoolProblem problem{
      .n = 8, .c = 64, .h = 56, .w = 56, .kernel_h = 3, .kernel_w = 3, .pad_h = 1, .pad_w = 1};
  std::string mode = "max";
  std::string adaptive;
  bool global = false;
  bool ceil = false;
  bool keep_indices = false;
};

[[noreturn]] void bad(const std::string& message) { throw Error(Status::invalid_argument, message); }

// MIOpenDriver's -m names (avg excludes padding, avg_in includes it) and the problem's own names.
dnn::PoolMode parse_mode(const std::string& text) {
  if (text == "avg") return dnn::PoolMode::avg_exclude_pad;
  if (text == "avg_in") return dnn::PoolMode::avg_include_pad;
  if (text == "max" || text == "avg_include_pad" || text == "avg_exclude_pad")
    return dnn::parse_pool_mode(text);
  bad("-m " + quoted_input(text) +
      " is not a pooling mode (valid: max, avg (padding not counted, as MIOpen), avg_in (padding counted), "
      "avg_include_pad, avg_exclude_pad)");
}

std::int64_t parse_extent(std::string_view text, const std::string& whole) {
  std::int64_t v = 0;
  const bool canonical = !text.empty() && !(text.size() > 1 && text.front() == '0');
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (!canonical || ec != std::errc() || ptr != text.data() + text.size() || v < 1) {
    bad("--adaptive " + quoted_input(whole) + " is not OHxOW with positive decimal sizes (e.g. 7x7)");
  }
  return v;
}

dnn::PoolProblem problem_from(const PoolBenchArgs& a, const CLI::App& cmd) {
  dnn::PoolProblem p = a.problem;
  p.mode = parse_mode(a.mode);
  const char* window_flags[] = {"-y", "-x", "-p", "-q", "-u", "-v"};
  const bool global = a.global, adaptive = cmd.count("--adaptive") > 0;
  if (global && adaptive) bad("--global and --adaptive exclude each other (pick one window)");
  if (global || adaptive) {
    for (const char* f : window_flags) {
      if (cmd.count(f) > 0) {
        bad(std::string(f) + " sets a kernel window, but " + (global ? "--global" : "--adaptive") +
            " derives the windows from the sizes");
      }
    }
    const dnn::PoolProblem defaults{};
    p.kernel_h = defaults.kernel_h, p.kernel_w = defaults.kernel_w;
    p.pad_h = defaults.pad_h, p.pad_w = defaults.pad_w;
    p.stride_h = defaults.stride_h, p.stride_w = defaults.stride_w;
    p.window = global ? dnn::PoolWindow::global : dnn::PoolWindow::adaptive;
  }
  if (adaptive) {
    const std::size_t x = a.adaptive.find('x');
    if (x == std::string::npos) bad("--adaptive " + quoted_input(a.adaptive) + " is not OHxOW (e.g. 7x7)");
    p.adaptive_h = parse_extent(std::string_view(a.adaptive).substr(0, x), a.adaptive);
    p.adaptive_w = parse_extent(std::string_view(a.adaptive).substr(x + 1), a.adaptive);
  }
  p.ceil_mode = a.ceil;
  p.keep_indices = a.keep_indices;
  if (!a.common.dtype.empty()) {
    p.dtype = parse_dtype(a.common.dtype);
    if (p.dtype != DType::f32 && p.dtype != DType::f16 && p.dtype != DType::bf16) {
      bad("--dtype " + a.common.dtype + " is not supported by pooling (valid: f32, f16, bf16)");
    }
  }
  if (!a.common.layout.empty()) p.layout = dnn::parse_layout(a.common.layout);
  return p;
}

int run_pool(const PoolBenchArgs& a, const CLI::App& cmd) {
  const dnn::PoolProblem base = problem_from(a, cmd);
  std::vector<OpBenchLine> lines;
  for (bool backward : directions(a.common)) {
    dnn::PoolProblem p = base;
    p.direction = backward ? dnn::PoolDirection::backward : dnn::PoolDirection::forward;
    p.validate();
    lines.push_back({dnn::AnyProblem::copy_of(dnn::ProblemRef::of(p)), ""});
  }
  return run_op_bench(a.common, cmd, lines);
}

const bool bench_pool_registered = register_command([](CLI::App& root) {
  auto a = std::make_shared<PoolBenchArgs>();
  CLI::App* cmd = bench_group(root).add_subcommand(
      "pool", "Pooling (max, average, global, adaptive), forward and backward, every chosen solver timed");
  dnn::PoolProblem& p = a->problem;
  cmd->add_option("-n", p.n, "batch size (default 8)")->check(integer_in(1));
  cmd->add_option("-c", p.c, "channels (default 64)")->check(integer_in(1));
  cmd->add_option("-H", p.h, "input height (default 56)")->check(integer_in(1));
  cmd->add_option("-W", p.w, "input width (default 56)")->check(integer_in(1));
  cmd->add_option("-y", p.kernel_h, "window height (default 3)")->check(integer_in(1));
  cmd->add_option("-x", p.kernel_w, "window width (default 3)")->check(integer_in(1));
  cmd->add_option("-p", p.pad_h, "padding height, at most half the window (default 1)")->check(integer_in(0));
  cmd->add_option("-q", p.pad_w, "padding width, at most half the window (default 1)")->check(integer_in(0));
  cmd->add_option("-u", p.stride_h, "stride height (default 2)")->check(integer_in(1));
  cmd->add_option("-v", p.stride_w, "stride width (default 2)")->check(integer_in(1));
  cmd->add_option("-m", a->mode,
                  "max (default), avg (padding not counted, as MIOpen), avg_in (padding counted), "
                  "avg_include_pad, avg_exclude_pad");
  cmd->add_flag("--ceil", a->ceil, "ceil mode: round the output size up");
  cmd->add_flag("--global", a->global, "one window over the whole input plane");
  cmd->add_option("--adaptive", a->adaptive, "adaptive pooling to an OHxOW output (e.g. 7x7)");
  cmd->add_flag("--keep-indices", a->keep_indices, "max: forward writes i32 indices, backward reads them");
  add_op_bench_flags(cmd, a->common, /*with_layout=*/true, /*with_direction=*/true);
  cmd->callback([a, cmd] { set_exit_code(run_pool(*a, *cmd)); });
});

}  // namespace
}  // namespace galley::cli
