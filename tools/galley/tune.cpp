// `galley tune --file LIST [--device D] [--dtype T] [--layout L] [--batch N] [--force] [--json]`:
// pre-warms the find-db by tuning every problem of a list, with a progress bar on a terminal (plain
// lines otherwise), then a summary: problem, chosen solver, time, speedup over the list-order choice.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "command.hpp"
#include "galley/core/error.hpp"
#include "galley/dnn/conv_problem.hpp"
#include "galley/runtime/device.hpp"
#include "galley/tuning/tuner.hpp"
#include "memory_budget.hpp"
#include "problem_file.hpp"
#include "strict_options.hpp"
#include "table.hpp"

namespace galley::cli {
namespace {

struct TuneArgs {
  std::string file, device, dtype, layout;
  std::int64_t batch = 0;
  bool force = false;
  bool json = false;
};

using Line = ProblemLine;

struct Outcome {
  Line line;
  std::string status;  // "tuned", "cached" or "error"
  std::string error;
  std::vector<tuning::RankedSolver> ranked;
  std::string list_order;
  double tune_ms = 0;
  bool time_box_hit = false;
  std::string not_saved;  // why a tuned result did not reach the find-db file; empty when it did
};

// The list's problems, each checked against the device's memory before any is tuned: the tuner
// makes x, w and y on the device, filling x and then w from a host copy.
std::vector<Line> read_lines(const TuneArgs& args, const runtime::Device& device) {
  auto lines = read_problem_file(args.file, {args.dtype, args.layout, args.batch});
  for (const Line& line : lines) {
    const dnn::ConvProblem& p = line.problem;
    MemoryBudget(device)
        .conv_tensors(p)
        .host("host copy of x or w", std::max(p.x_desc().bytes(), p.w_desc().bytes()))
        .check(args.file + ":" + std::to_string(line.line) + ": problem " + p.key());
  }
  return lines;
}

std::string fixed(double v, int digits = 3) {
  if (std::isnan(v)) return "-";
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.*f", digits, v);
  return buffer;
}

std::string name_of(const Line& line) { return line.tag.empty() ? line.problem.key() : line.tag; }

// The time of the list-order choice from the ranked list; NaN when it was not timed.
double list_order_ms(const Outcome& o) {
  for (const auto& r : o.ranked) {
    if (r.solver == o.list_order) return r.ms;
  }
  return std::nan("");
}

class Progress {
 public:
  explicit Progress(std::size_t total) : total_(total), tty_(::isatty(STDERR_FILENO) == 1) {}
  void start(std::size_t index, const std::string& name) {
    if (!tty_) return;
    constexpr int kWidth = 30;
    const int filled = static_cast<int>(kWidth * index / total_);
    std::fprintf(stderr, "\r\033[K[%s%s] %zu/%zu %s", std::string(filled, '#').c_str(),
                 std::string(kWidth - filled, '.').c_str(), index, total_, name.c_str());
    std::fflush(stderr);
  }
  void done(std::size_t index, const Outcome& o) {
    if (tty_) {
      if (index + 1 == total_) std::fprintf(stderr, "\r\033[K");
      return;
    }
    std::string what = o.status == "error" ? "error: " + o.error
                       : o.ranked.empty()  ? o.status
                                           : o.ranked[0].solver + " " + fixed(o.ranked[0].ms) + " ms (" + o.status +
                                                 (o.status == "tuned" ? " in " + fixed(o.tune_ms, 0) + " ms" : "") +
                                                 (o.not_saved.empty() ? "" : ", not saved") + ")";
    std::fprintf(stderr, "[%zu/%zu] %s: %s\n", index + 1, total_, name_of(o.line).c_str(), what.c_str());
  }

 private:
  std::size_t total_;
  bool tty_;
};

int run_tune(const TuneArgs& args) {
  auto options = tuning::TunerOptions::from_env();
  if (options.find.mode == tuning::FindMode::off) {
    throw Error(Status::invalid_argument, "GALLEY_FIND_MODE=off: galley tune would store nothing (unset it)");
  }
  tuning::Tuner tuner(options);
  const runtime::Device device = args.device.empty() ? runtime::default_device() : runtime::device(args.device);
  const auto lines = read_lines(args, device);
  Progress progress(lines.size());
  std::vector<Outcome> outcomes;
  const auto start = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < lines.size(); ++i) {
    progress.start(i, name_of(lines[i]));
    Outcome o{lines[i], "", "", {}, "", 0, false};
    try {
      if (!args.force) o.ranked = tuner.lookup(o.line.problem, device);
      if (!o.ranked.empty()) {
        o.status = "cached";
        o.list_order = std::string(tuner.list_order_choice(o.line.problem, device).name());
      } else {
        // The list-order choice comes with the result: asking for it first would run the solvers'
        // check() (a vendor library's plan search, for cuDNN) outside the tuning time reported.
        const std::size_t unsaved_before = tuner.db().unsaved_stores().count;
        const auto result = tuner.tune(o.line.problem, device);
        if (const auto unsaved = tuner.db().unsaved_stores(); unsaved.count > unsaved_before) {
          o.not_saved = unsaved.last_reason;
        }
        o.list_order = result.list_order_choice;
        o.ranked = result.ranked;
        o.tune_ms = result.tune_ms;
        o.time_box_hit = result.time_box_hit;
        o.status = "tuned";
      }
    } catch (const Error& e) {
      o.status = "error";
      o.error = e.what();
    }
    progress.done(i, o);
    outcomes.push_back(std::move(o));
  }
  const double total_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  int errors = 0;
  std::size_t not_saved = 0;
  std::string not_saved_reason;
  for (const auto& o : outcomes) {
    errors += o.status == "error";
    if (!o.not_saved.empty()) {
      ++not_saved;
      not_saved_reason = o.not_saved;
    }
  }
  if (args.json) {
    nlohmann::json problems = nlohmann::json::array();
    for (const auto& o : outcomes) {
      nlohmann::json ranked = nlohmann::json::array();
      for (const auto& r : o.ranked) {
        ranked.push_back({{"solver", r.solver},
                          {"ms", std::isnan(r.ms) ? nlohmann::json(nullptr) : nlohmann::json(r.ms)},
                          {"workspace_bytes", r.workspace_bytes}});
      }
      const double base = list_order_ms(o);
      const double best = o.ranked.empty() ? std::nan("") : o.ranked[0].ms;
      const double speedup = base / best;
      problems.push_back({{"key", o.line.problem.key()},
                          {"tag", o.line.tag},
                          {"status", o.status},
                          {"error", o.error},
                          {"list_order_solver", o.list_order},
                          {"tune_ms", o.tune_ms},
                          {"time_box_hit", o.time_box_hit},
                          {"saved", o.status == "tuned" ? nlohmann::json(o.not_saved.empty()) : nlohmann::json()},
                          {"not_saved", o.not_saved},
                          {"speedup_over_list_order", std::isfinite(speedup) ? nlohmann::json(speedup) : nlohmann::json(nullptr)},
                          {"ranked", ranked}});
    }
    const nlohmann::json doc = {{"device", device.name()},
                                {"db", tuner.db().user_path().string()},
                                {"db_in_memory", tuner.db().in_memory()},
                                {"not_saved", not_saved},
                                {"total_s", total_s},
                                {"problems", problems}};
    std::printf("%s\n", doc.dump(2).c_str());
  } else {
    Table table({"problem", "solver", "ms", "list-order solver", "ms", "speedup", "status"});
    for (const auto& o : outcomes) {
      if (o.status == "error") {
        table.add({name_of(o.line), "-", "-", o.list_order, "-", "-", "error: " + o.error});
        continue;
      }
      const double base = list_order_ms(o);
      const double best = o.ranked.empty() ? std::nan("") : o.ranked[0].ms;
      const std::string status =
          o.status == "tuned" ? "tuned in " + fixed(o.tune_ms, 0) + " ms" + (o.time_box_hit ? " (time box)" : "") +
                                    (o.not_saved.empty() ? "" : ", not saved")
                              : o.status;
      table.add({name_of(o.line), o.ranked.empty() ? "-" : o.ranked[0].solver, fixed(best), o.list_order,
                 fixed(base), std::isfinite(base / best) ? fixed(base / best, 2) + "x" : "-", status});
    }
    table.print();
    std::printf("%zu problems on %s in %.1f s; find-db %s%s\n", outcomes.size(), device.name().c_str(), total_s,
                tuner.db().user_path().string().c_str(),
                not_saved > 0 ? (": " + std::to_string(not_saved) + " tuned results not saved").c_str() : "");
  }
  // Filling the db is what tune is for: a result that did not reach it is a failure, said once.
  if (not_saved > 0) {
    std::fprintf(stderr, "galley: %zu tuned result%s not saved: %s\n", not_saved, not_saved == 1 ? "" : "s",
                 not_saved_reason.c_str());
  }
  return errors == 0 && not_saved == 0 ? 0 : 1;
}

const bool tune_registered = register_command([](CLI::App& root) {
  auto args = std::make_shared<TuneArgs>();
  CLI::App* cmd = root.add_subcommand("tune", "Tune every problem of a list into the find-db (pre-warm)");
  cmd->add_option("--file", args->file, "problem list, one MIOpenDriver line per problem ('# tag' kept)")
      ->required();
  cmd->add_option("--device", args->device, "device to tune for (default: GALLEY_DEVICE, else the first GPU, else cpu)");
  cmd->add_option("--dtype", args->dtype, "override every line's dtype: f32, f16, bf16");
  cmd->add_option("--layout", args->layout, "override every line's layout: nchw, nhwc");
  cmd->add_option("--batch", args->batch, "override every line's batch size (-n)")->check(integer_in(1));
  cmd->add_flag("--force", args->force, "re-tune problems that already have a find-db entry");
  cmd->add_flag("--json", args->json, "machine-readable output");
  cmd->callback([args] { set_exit_code(run_tune(*args)); });
});

}  // namespace
}  // namespace galley::cli
