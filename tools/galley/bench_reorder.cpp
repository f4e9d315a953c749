// `galley bench reorder`: dtype and/or layout conversion; -F 2 is the reverse conversion.
// Without --to-dtype the dtype stays; without --to-dtype and --to-layout the layout flips
// (nchw <-> nhwc), so the default problem is the NCHW -> NHWC rewrite.
//   galley bench reorder --dims 8,64,56,56 --dtype f32 --to-dtype f16 --layout nchw --to-layout nhwc
#include <memory>
#include <string>

#include "bench_datamove_flags.hpp"
#include "command.hpp"
#include "galley/dnn/datamove_problem.hpp"

namespace galley::cli {
namespace {

struct ReorderArgs {
  OpBenchFlags flags;
  std::string dims = "8,64,56,56";
  std::string to_dtype, to_layout;
};

int run_reorder_bench(const ReorderArgs& a, const CLI::App& cmd) {
  dnn::ReorderProblem p;
  p.dims = parse_int_list("--dims", a.dims, 1, std::int64_t(1) << 40);
  p.src_dtype = bench_dtype(a.flags);
  p.src_layout = bench_layout(a.flags);
  p.dst_dtype = a.to_dtype.empty() ? p.src_dtype : parse_dtype(a.to_dtype);
  if (!a.to_layout.empty()) {
    p.dst_layout = dnn::parse_layout(a.to_layout);
  } else if (a.to_dtype.empty() && p.dims.size() == 4) {
    p.dst_layout = p.src_layout == dnn::Layout::nchw ? dnn::Layout::nhwc : dnn::Layout::nchw;
  } else {
    p.dst_layout = p.src_layout;
  }
  p.validate();
  std::vector<OpBenchLine> lines;
  for (bool backward : directions(a.flags)) {
    const dnn::ReorderProblem q = backward ? p.backward() : p;
    lines.push_back({dnn::AnyProblem::copy_of(dnn::ProblemRef::of(q)), backward ? "backward (reverse)" : ""});
  }
  return run_op_bench(a.flags, cmd, lines);
}

const bool bench_reorder_registered = register_command([](CLI::App& root) {
  auto a = std::make_shared<ReorderArgs>();
  CLI::App* cmd = bench_group(root).add_subcommand(
      "reorder", "dtype (f32/f16/bf16) and/or layout (nchw/nhwc) conversion (-F 2: the reverse)");
  add_op_bench_flags(cmd, a->flags, true, true);
  cmd->add_option("--dims", a->dims,
                  "dims, comma-separated, N,C,H,W for a layout change (default 8,64,56,56)");
  cmd->add_option("--to-dtype", a->to_dtype, "the output's dtype (default: --dtype)");
  cmd->add_option(
      "--to-layout", a->to_layout,
      "the output's layout (default: the other layout when --to-dtype is not given, else --layout)");
  cmd->callback([a, cmd] { set_exit_code(run_reorder_bench(*a, *cmd)); });
});

}  // namespace
}  // namespace galley::cli
