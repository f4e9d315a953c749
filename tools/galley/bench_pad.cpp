// `galley bench pad`: constant padding before and after each dim; -F 2 is its backward (the crop).
//   galley bench pad --dims 8,64,56,56 --before 0,0,1,1 --after 0,0,1,1 --value 0 -V 1
#include <cmath>
#include <memory>
#include <string>

#include "bench_datamove_flags.hpp"
#include "command.hpp"
#include "galley/dnn/datamove_problem.hpp"
#include "strict_options.hpp"

namespace galley::cli {
namespace {

struct PadArgs {
  OpBenchFlags flags;
  std::string dims = "8,64,56,56";
  std::string before = "0,0,1,1";
  std::string after = "0,0,1,1";
  std::string value = "0";
};

// A finite number, or inf / -inf (max pooling pads with -inf).
double parse_value(const std::string& text) {
  if (text == "inf") return INFINITY;
  if (text == "-inf") return -INFINITY;
  return parse_number("--value", text, -std::numeric_limits<double>::max(), false);
}

int run_pad_bench(const PadArgs& a, const CLI::App& cmd) {
  dnn::PadProblem p;
  p.dtype = bench_dtype(a.flags);
  p.layout = bench_layout(a.flags);
  p.dims = parse_int_list("--dims", a.dims, 1, std::int64_t(1) << 40);
  p.before = parse_int_list("--before", a.before, 0, std::int64_t(1) << 40);
  p.after = parse_int_list("--after", a.after, 0, std::int64_t(1) << 40);
  p.value = parse_value(a.value);
  p.validate();
  std::vector<OpBenchLine> lines;
  for (bool backward : directions(a.flags)) {
    const dnn::PadProblem q = backward ? p.backward() : p;
    lines.push_back({dnn::AnyProblem::copy_of(dnn::ProblemRef::of(q)), ""});
  }
  return run_op_bench(a.flags, cmd, lines);
}

const bool bench_pad_registered = register_command([](CLI::App& root) {
  auto a = std::make_shared<PadArgs>();
  CLI::App* cmd = bench_group(root).add_subcommand("pad", "Constant padding (-F 2: the crop, its backward)");
  add_op_bench_flags(cmd, a->flags, true, true);
  cmd->add_option("--dims", a->dims, "the unpadded tensor's dims, comma-separated (default 8,64,56,56)");
  cmd->add_option("--before", a->before, "elements of padding ahead of each dim (default 0,0,1,1)");
  cmd->add_option("--after", a->after, "elements of padding behind each dim (default 0,0,1,1)");
  cmd->add_option("--value", a->value, "the padding value, or inf / -inf (default 0; -V 1 cannot judge inf)");
  cmd->callback([a, cmd] { set_exit_code(run_pad_bench(*a, *cmd)); });
});

}  // namespace
}  // namespace galley::cli
