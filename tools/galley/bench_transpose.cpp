// `galley bench transpose`: a permutation of a row-major tensor's axes; -F 2 is the inverse
// permutation (the backward).
//   galley bench transpose --dims 8,64,56,56 --perm 0,2,3,1 --dtype f16 -V 1
#include <memory>
#include <string>

#include "bench_datamove_flags.hpp"
#include "command.hpp"
#include "galley/dnn/datamove_problem.hpp"

namespace galley::cli {
namespace {

struct TransposeArgs {
  OpBenchFlags flags;
  std::string dims = "8,64,56,56";
  std::string perm = "0,2,3,1";
};

int run_transpose_bench(const TransposeArgs& a, const CLI::App& cmd) {
  dnn::TransposeProblem p;
  p.dtype = bench_dtype(a.flags);
  p.dims = parse_int_list("--dims", a.dims, 1, std::int64_t(1) << 40);
  for (std::int64_t v : parse_int_list("--perm", a.perm, 0, dnn::kMaxRank - 1))
    p.perm.push_back(static_cast<int>(v));
  p.validate();
  std::vector<OpBenchLine> lines;
  for (bool backward : directions(a.flags)) {
    const dnn::TransposeProblem q = backward ? p.backward() : p;
    lines.push_back(
        {dnn::AnyProblem::copy_of(dnn::ProblemRef::of(q)), backward ? "backward (inverse perm)" : ""});
  }
  return run_op_bench(a.flags, cmd, lines);
}

const bool bench_transpose_registered = register_command([](CLI::App& root) {
  auto a = std::make_shared<TransposeArgs>();
  CLI::App* cmd = bench_group(root).add_subcommand(
      "transpose", "Permutation of a row-major tensor's axes (-F 2: the inverse permutation)");
  add_op_bench_flags(cmd, a->flags, false, true);
  cmd->add_option("--dims", a->dims, "the input's dims, comma-separated (default 8,64,56,56)");
  cmd->add_option("--perm", a->perm, "output dim i is input dim perm[i], comma-separated (default 0,2,3,1)");
  cmd->callback([a, cmd] { set_exit_code(run_transpose_bench(*a, *cmd)); });
});

}  // namespace
}  // namespace galley::cli
