// `galley bench concat` and `galley bench split`: one axis of a tensor cut into parts or joined
// from them. -F 2 benches the other op, the backward of this one.
//   galley bench concat --dims 8,256,28,28 --axis 1 --sizes 64,64,128 -V 1
//   galley bench split --dims 8,256,28,28 --axis 1 --inputs 4 --layout nhwc
#include <memory>
#include <numeric>
#include <string>

#include "bench_datamove_flags.hpp"
#include "command.hpp"
#include "galley/core/error.hpp"
#include "galley/dnn/datamove_problem.hpp"
#include "strict_options.hpp"

namespace galley::cli {
namespace {

struct PartsArgs {
  OpBenchFlags flags;
  std::string dims, sizes;
  int axis = 1;
  int parts = 4;
};

int run_parts_bench(const PartsArgs& a, const CLI::App& cmd, bool concat) {
  require_apart(cmd, "--sizes", "--inputs", "--sizes gives each part's extent, --inputs cuts equal parts");
  dnn::ConcatProblem p;
  p.dtype = bench_dtype(a.flags);
  p.layout = bench_layout(a.flags);
  p.axis = a.axis;
  const bool have_dims = cmd.count("--dims") > 0;
  p.dims = have_dims ? parse_int_list("--dims", a.dims, 1, std::int64_t(1) << 40)
                     : std::vector<std::int64_t>{8, 256, 28, 28};
  if (a.axis < 0 || a.axis >= static_cast<int>(p.dims.size())) {
    throw Error(Status::invalid_argument, "--axis " + std::to_string(a.axis) +
                                              " is out of range for --dims of rank " +
                                              std::to_string(p.dims.size()) + " (valid: 0 to " +
                                              std::to_string(p.dims.size() - 1) + ")");
  }
  auto& extent = p.dims[static_cast<std::size_t>(a.axis)];
  if (cmd.count("--sizes") > 0) {
    p.sizes = parse_int_list("--sizes", a.sizes, 1, std::int64_t(1) << 40);
    // Without --dims, the axis is as long as the parts; with it, validate() checks they agree.
    if (!have_dims) extent = std::accumulate(p.sizes.begin(), p.sizes.end(), std::int64_t(0));
  } else {
    if (extent % a.parts != 0) {
      throw Error(Status::invalid_argument, "--inputs " + std::to_string(a.parts) +
                                                " does not divide the axis extent " + std::to_string(extent) +
                                                " (give --sizes for unequal parts)");
    }
    p.sizes.assign(static_cast<std::size_t>(a.parts), extent / a.parts);
  }
  p.validate();
  std::vector<OpBenchLine> lines;
  for (bool backward : directions(a.flags)) {
    if (concat != backward) {
      lines.push_back(
          {dnn::AnyProblem::copy_of(dnn::ProblemRef::of(p)), backward ? "split (concat backward)" : ""});
    } else {
      const dnn::SplitProblem s = p.backward();
      lines.push_back(
          {dnn::AnyProblem::copy_of(dnn::ProblemRef::of(s)), backward ? "concat (split backward)" : ""});
    }
  }
  return run_op_bench(a.flags, cmd, lines);
}

void add_parts_command(CLI::App& root, const char* name, bool concat) {
  auto a = std::make_shared<PartsArgs>();
  CLI::App* cmd = bench_group(root).add_subcommand(
      name, concat ? "Concatenation along one axis (-F 2: split, its backward)"
                   : "Split along one axis (-F 2: concat, its backward)");
  add_op_bench_flags(cmd, a->flags, true, true);
  cmd->add_option("--dims", a->dims,
                  "the whole tensor's dims, comma-separated (default 8,256,28,28; nhwc: N,C,H,W)");
  cmd->add_option("--axis", a->axis, "the axis to cut or join (default 1)")
      ->check(integer_in(0, dnn::kMaxRank - 1));
  cmd->add_option("--sizes", a->sizes, "each part's extent along the axis, comma-separated");
  cmd->add_option("--inputs", a->parts, "cut the axis into this many equal parts (default 4)")
      ->check(integer_in(1, static_cast<std::int64_t>(dnn::kMaxMultiArgs)));
  CLI::App* self = cmd;
  cmd->callback([a, self, concat] { set_exit_code(run_parts_bench(*a, *self, concat)); });
}

const bool bench_concat_registered = register_command([](CLI::App& root) {
  add_parts_command(root, "concat", true);
  add_parts_command(root, "split", false);
});

}  // namespace
}  // namespace galley::cli
