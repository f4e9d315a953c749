// `galley bench tuner --file LIST [--batch N] [--dtype] [--layout] [--device] [--rounds R] [--json]`
// measures what the tuner costs and what it buys, for bench/RESULTS.md:
//   - per problem: T_tune (benchmarking all candidates into a fresh db), T_exec (the pick's median
//     through dnn::convolution_forward), T_avg = T_tune/N + T_exec for N = 1, 10, 1000;
//   - whether the pick is within 3% of the fastest solver, every applicable non-reference solver
//     timed round-robin (R rounds) in samples of back-to-back calls (~1 ms, as the peer times);
//   - the cost of pick() on a hit (in-process cache) and of one SQLite find-db lookup.
// With --first-call it instead measures, in this new process, each problem's first call through the
// default tuner (expected to be a find-db hit after `galley tune`) against its steady state; with
// --preload, after Tuner::preload() warmed every stored problem up (its cost reported apart).
// With --first-call --passes it runs the list as a network runs its layers: the new process's first
// pass against later passes of the same list, each call timed in the stream between its neighbours.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>

#include "bench_stats.hpp"
#include "command.hpp"
#include "dnn/tensor_data.hpp"
#include "galley/core/error.hpp"
#include "galley/dnn/convolution.hpp"
#include "galley/memory/buffer.hpp"
#include "galley/runtime/device.hpp"
#include "galley/tuning/tuner.hpp"
#include "memory_budget.hpp"
#include "problem_file.hpp"
#include "strict_options.hpp"
#include "table.hpp"

namespace galley::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct Args {
  std::string file, device, dtype, layout;
  std::int64_t batch = 0;
  int rounds = 15;
  double budget_ms = 4000;
  bool first_call = false;
  bool explicit_solver = false;
  bool preload = false;
  bool sequence = false;
  bool passes = false;
  bool touch = false;
  bool json = false;
};

using Line = ProblemLine;

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

// Throws Error(out_of_memory) naming each buffer when Tensors for `p` would not fit: x, w, y on
// the device, filled from host copies of x and w.
void require_tensors_fit(const runtime::Device& device, const dnn::ConvProblem& p, const std::string& what) {
  MemoryBudget(device)
      .conv_tensors(p)
      .host("host x", p.x_desc().bytes())
      .host("host w", p.w_desc().bytes())
      .check(what);
}

// x, w (random) and y on `stream`, as a user's tensors would be.
struct Tensors {
  memory::Buffer x, w, y;
  Tensors(runtime::Stream& stream, const dnn::ConvProblem& p) {
    // Again here, not only up front: with --sequence every problem's tensors live at once.
    require_tensors_fit(stream.device(), p, "problem " + p.key());
    auto fill = [&](std::int64_t n, std::uint64_t seed) {
      const auto host = dnn::random_tensor(p.dtype, n, seed);
      memory::Buffer b = memory::allocate(stream, host.size());
      memory::copy_from_host(stream, b, host.data(), host.size());
      stream.synchronize();
      return b;
    };
    x = fill(p.x_desc().elements(), 11);
    w = fill(p.w_desc().elements(), 12);
    y = memory::allocate(stream, p.y_desc().bytes());
    memory::memset(stream, y, 0, p.y_desc().bytes());  // touch every page, as a real output was
    stream.synchronize();
  }
};

// One call of convolution_forward with `solver` (or the mean of a batch), timed on the stream with
// events, as the tuner and `galley bench conv` time: a host clock around a blocking wait would
// mostly measure how soon a loaded machine schedules this thread again. A batch starts with one
// untimed call, as the tuner's samples do: `galley bench conv` times a stream of calls of one solver,
// whose host path is warm, not the first call after other solvers ran. Milliseconds.
double timed_call(runtime::Stream& stream, const dnn::ConvProblem& p, Tensors& t, const dnn::ConvSolver* solver,
                  int batch = 1) {
  runtime::Event before(stream.device()), after(stream.device());
  if (batch > 1) dnn::convolution_forward(stream, p, t.x.data(), t.w.data(), t.y.data(), solver);
  before.record(stream);
  for (int i = 0; i < batch; ++i) dnn::convolution_forward(stream, p, t.x.data(), t.w.data(), t.y.data(), solver);
  after.record(stream);
  after.synchronize();
  return after.elapsed_ms_since(before) / batch;
}


// Tensors for every problem of the list, made before any timed call.
std::vector<std::unique_ptr<Tensors>> tensors_for(runtime::Stream& stream, const std::vector<Line>& lines) {
  std::vector<std::unique_ptr<Tensors>> made;
  for (const Line& line : lines) made.push_back(std::make_unique<Tensors>(stream, line.problem));
  return made;
}

// --preload: the deployment pattern, a warm-up of every stored problem at startup, timed apart and
// reported the same way by every --first-call mode.
struct PreloadStep {
  bool enabled = false;
  tuning::PreloadResult result;

  PreloadStep(bool enable, tuning::Tuner& tuner, runtime::Stream& stream) : enabled(enable) {
    if (!enabled) return;
    result = tuner.preload(stream);
    for (const auto& [key, why] : result.skipped) std::fprintf(stderr, "preload skipped %s: %s\n", key.c_str(), why.c_str());
  }
  nlohmann::json json() const {
    return {{"enabled", enabled}, {"problems", result.problems}, {"prepared", result.prepared}, {"ms", result.ms}};
  }
  void print() const {
    if (enabled) {
      std::printf("preload: %d of %d stored problems prepared in %.1f ms\n", result.prepared, result.problems,
                  result.ms);
    }
  }
};

int run_first_call(const Args& args, const std::vector<Line>& lines, const runtime::Device& device) {
  tuning::Tuner& tuner = tuning::default_tuner();
  // The control (--explicit): the same stored solver named by the caller, found before the clock
  // starts, so the first call carries only the cold start that any first call has.
  std::unique_ptr<tuning::FindDb> db;
  if (args.explicit_solver) db = std::make_unique<tuning::FindDb>(tuning::default_find_db_paths());
  const auto id = tuning::DeviceIdentity::of(device);
  std::vector<double> pick_fraction, ratios;
  runtime::Stream stream(device);
  // --sequence: every problem's tensors exist before the first call, so problem i's first call
  // follows problem i-1's calls with no pause, as a network's layers follow each other.
  std::vector<std::unique_ptr<Tensors>> made;
  if (args.sequence) made = tensors_for(stream, lines);
  const PreloadStep preload(args.preload, tuner, stream);
  Table table({"problem", "solver", "hit", "first ms", "pick us", "steady ms", "first/steady", "idle ms",
               "first/idle"});
  nlohmann::json rows = nlohmann::json::array();
  int within = 0, within_idle = 0, hits = 0;
  std::vector<double> idle_ratios;
  for (std::size_t index = 0; index < lines.size(); ++index) {
    const Line& line = lines[index];
    const auto setup_start = Clock::now();
    std::unique_ptr<Tensors> own;
    if (!args.sequence) own = std::make_unique<Tensors>(stream, line.problem);
    Tensors& t = args.sequence ? *made[index] : *own;
    const double setup_ms = ms_since(setup_start);
    // The first call as a user makes it: pick (a find-db lookup), then the run. The pick is host
    // work (host clock); the run is timed with events (see timed_call).
    tuning::Pick pick;
    if (db) {
      const auto records = db->lookup(line.problem.key(), id);
      if (records.empty()) throw Error(Status::not_found, "--explicit: nothing stored for " + line.problem.key());
      pick.solver = dnn::find_conv_solver(device.backend(), records[0].solver);
      if (pick.solver == nullptr) throw Error(Status::not_found, "--explicit: no solver " + records[0].solver);
    }
    auto start = Clock::now();
    if (!db) pick = tuner.pick(line.problem, device);
    const double pick_ms = ms_since(start);
    const double first = pick_ms + timed_call(stream, line.problem, t, pick.solver);
    std::vector<double> steady;
    for (int i = 0; i < args.rounds; ++i) {
      start = Clock::now();
      const auto* solver = db ? pick.solver : tuner.pick(line.problem, device).solver;
      const double hit_ms = ms_since(start);
      steady.push_back(hit_ms + timed_call(stream, line.problem, t, solver));
    }
    const double m = median(steady);
    // Control for the device's own idle state: the same, now warm, call after the host waits as long
    // as the first call's setup kept the device idle (a GPU that idles lowers its clocks; a cpu pool
    // that idles puts its threads to sleep). Median of 3 such calls.
    std::vector<double> after_idle;
    for (int i = 0; i < 3; ++i) {
      std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(setup_ms));
      start = Clock::now();
      const auto* solver = db ? pick.solver : tuner.pick(line.problem, device).solver;
      const double hit_ms = ms_since(start);
      after_idle.push_back(hit_ms + timed_call(stream, line.problem, t, solver));
    }
    const double idle = median(after_idle);
    within += first <= 1.05 * m;
    within_idle += first <= 1.05 * idle;
    idle_ratios.push_back(first / idle);
    pick_fraction.push_back(pick_ms / m);
    ratios.push_back(first / m);
    hits += pick.hit;
    const std::string name = line.tag.empty() ? line.problem.key() : line.tag;
    table.add({name, std::string(pick.solver->name()), db ? "explicit" : pick.hit ? tuning::to_string(pick.source) : "no",
               fixed(first), fixed(pick_ms * 1000, 1), fixed(m), fixed(first / m, 3), fixed(idle), fixed(first / idle, 3)});
    rows.push_back({{"problem", name}, {"solver", pick.solver->name()}, {"hit", pick.hit},
                    {"source", tuning::to_string(pick.source)}, {"first_ms", first}, {"pick_ms", pick_ms},
                    {"steady_ms", m}, {"after_idle_ms", idle}, {"setup_ms", setup_ms}});
  }
  if (args.json) {
    std::printf("%s\n", nlohmann::json({{"first_call", rows},
                                        {"preload", preload.json()}})
                            .dump(2)
                            .c_str());
  } else {
    preload.print();
    table.print();
    std::printf("%d/%zu problems: first call <= 1.05x steady state (median first/steady %.3f); %d/%zu picks were "
                "find-db hits; the first pick costs a median %.2f%% (max %.2f%%) of the steady-state call\n",
                within, lines.size(), median(ratios), hits, lines.size(), 100 * median(pick_fraction),
                100 * *std::max_element(pick_fraction.begin(), pick_fraction.end()));
    std::printf("control, the same warm call after the same idle time: first <= 1.05x of it on %d/%zu problems "
                "(median first/after-idle %.3f)\n",
                within_idle, lines.size(), median(idle_ratios));
  }
  return 0;
}

// --first-call --passes: the whole list run as a network runs its layers, one after another on one
// stream with no synchronisation inside a pass. Pass 0 is this new process's first pass (every pick
// a first pick); passes 1..rounds are the steady state. An event is recorded between consecutive
// calls, so a call's time runs from the end of the call before it to its own end: host work (the
// pick, a plan build) that leaves the device idle is counted, and every call, first or steady, finds
// the caches and clocks the previous layer left. Against steady calls of one problem back to back
// (run_first_call) this compares like with like: a network never runs one layer twice in a row.
int run_passes(const Args& args, const std::vector<Line>& lines, const runtime::Device& device) {
  tuning::Tuner& tuner = tuning::default_tuner();
  runtime::Stream stream(device);
  const auto tensors = tensors_for(stream, lines);
  const PreloadStep preload(args.preload, tuner, stream);
  const std::size_t count = lines.size();
  // --touch: the control for memory state. Every tensor is read (x, w copied into scratch) and y
  // written right before the first pass, as each steady pass leaves them one pass earlier; what the
  // first pass still costs beyond the steady state is then the first call's own work.
  if (args.touch) {
    std::size_t largest = 0;
    for (const auto& t : tensors) largest = std::max({largest, t->x.size(), t->w.size()});
    memory::Buffer scratch = memory::allocate(stream, largest);
    for (const auto& t : tensors) {
      memory::copy(stream, scratch, t->x, t->x.size());
      memory::copy(stream, scratch, t->w, t->w.size());
      memory::memset(stream, t->y, 0, t->y.size());
    }
    stream.synchronize();
  }
  std::vector<runtime::Event> events;
  for (std::size_t i = 0; i <= count; ++i) events.emplace_back(device);
  std::vector<std::vector<double>> times(count);  // [problem][pass]
  // Host time of each call (pick + enqueue): tells host work (a plan or pointer check inside a
  // vendor library) from device work when a first call is slow.
  std::vector<std::vector<double>> host_ms(count);
  std::vector<double> pass_wall_ms;
  std::vector<std::string> solvers(count);
  int hits = 0;
  for (int pass = 0; pass <= args.rounds; ++pass) {
    const auto start = Clock::now();
    events[0].record(stream);
    for (std::size_t i = 0; i < count; ++i) {
      const auto call_start = Clock::now();
      const tuning::Pick pick = tuner.pick(lines[i].problem, device);
      if (pass == 0) {
        hits += pick.hit;
        solvers[i] = pick.solver->name();
      }
      Tensors& t = *tensors[i];
      dnn::convolution_forward(stream, lines[i].problem, t.x.data(), t.w.data(), t.y.data(), pick.solver);
      host_ms[i].push_back(ms_since(call_start));
      events[i + 1].record(stream);
    }
    events[count].synchronize();
    pass_wall_ms.push_back(ms_since(start));
    for (std::size_t i = 0; i < count; ++i) times[i].push_back(events[i + 1].elapsed_ms_since(events[i]));
  }
  Table table({"problem", "solver", "first ms", "steady ms", "first/steady", "host first us", "host steady us"});
  nlohmann::json rows = nlohmann::json::array();
  std::vector<double> ratios;
  int within = 0;
  double first_sum = 0, steady_sum = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const double first = times[i][0];
    const double steady = median(std::vector<double>(times[i].begin() + 1, times[i].end()));
    const double host_steady = median(std::vector<double>(host_ms[i].begin() + 1, host_ms[i].end()));
    first_sum += first;
    steady_sum += steady;
    ratios.push_back(first / steady);
    within += first <= 1.05 * steady;
    const std::string name = lines[i].tag.empty() ? lines[i].problem.key() : lines[i].tag;
    table.add({name, solvers[i], fixed(first), fixed(steady), fixed(first / steady, 3), fixed(1e3 * host_ms[i][0], 1),
               fixed(1e3 * host_steady, 1)});
    rows.push_back({{"problem", name}, {"solver", solvers[i]}, {"first_ms", first}, {"steady_ms", steady},
                    {"per_pass_ms", times[i]}, {"host_first_ms", host_ms[i][0]}, {"host_steady_ms", host_steady}});
  }
  const double first_wall = pass_wall_ms[0];
  const double steady_wall = median(std::vector<double>(pass_wall_ms.begin() + 1, pass_wall_ms.end()));
  if (args.json) {
    std::printf("%s\n", nlohmann::json({{"passes", rows},
                                        {"steady_passes", args.rounds},
                                        {"hits", hits},
                                        {"touched", args.touch},
                                        {"first_pass_wall_ms", first_wall},
                                        {"steady_pass_wall_ms", steady_wall},
                                        {"preload", preload.json()}})
                            .dump(2)
                            .c_str());
    return 0;
  }
  preload.print();
  table.print();
  std::printf("first pass against the median of %d later passes: %d/%zu problems within 1.05x (median first/steady "
              "%.3f, max %.3f); summed call times %.3f / %.3f ms = %.3fx; pass wall time %.3f / %.3f ms = %.3fx; "
              "%d/%zu first picks were find-db hits\n",
              args.rounds, within, count, median(ratios), *std::max_element(ratios.begin(), ratios.end()), first_sum,
              steady_sum, first_sum / steady_sum, first_wall, steady_wall, first_wall / steady_wall, hits, count);
  return 0;
}

int run_figures(const Args& args, const std::vector<Line>& lines, const runtime::Device& device) {
  // A private db so the figures never depend on (or disturb) the user's.
  const auto dir = std::filesystem::temp_directory_path() /
                   ("galley-bench-tuner-" + std::to_string(::getpid()));
  tuning::TunerOptions options = tuning::TunerOptions::from_env();
  options.find.mode = tuning::FindMode::normal;
  options.db_paths = {dir / "finddb.sqlite", {}};
  tuning::Tuner tuner(options);
  runtime::Stream stream(device);

  Table table({"problem", "pick", "T_tune ms", "T_exec ms", "T_avg N=1", "N=10", "N=1000", "fastest", "ms",
               "pick/fastest"});
  nlohmann::json rows = nlohmann::json::array();
  int within3 = 0, compared = 0;
  double sum_tune = 0, sum_exec = 0, max_tune = 0;
  for (const Line& line : lines) {
    const std::string name = line.tag.empty() ? line.problem.key() : line.tag;
    std::fprintf(stderr, "%s ...\n", name.c_str());
    const tuning::TuneResult tuned = tuner.tune(line.problem, device);
    const auto* pick = dnn::find_conv_solver(device.backend(), tuned.ranked.front().solver);
    // Every applicable non-reference solver (as --all-solvers), timed round-robin so that drift of
    // a shared machine hits them all alike; the pick is one of them.
    std::vector<const dnn::ConvSolver*> all;
    for (const auto* s : dnn::conv_solvers(device.backend())) {
      if (!s->is_reference() && s->check(line.problem, device)) all.push_back(s);
    }
    if (all.empty()) all.push_back(pick);
    Tensors t(stream, line.problem);
    std::vector<std::vector<double>> times(all.size());
    std::vector<int> batches;
    for (const auto* s : all) {
      timed_call(stream, line.problem, t, s);  // cold warm-up, then a warm call sizes the batch
      batches.push_back(batch_for(timed_call(stream, line.problem, t, s)));
    }
    // At least 5 rounds; more up to --rounds while the problem's --budget-ms lasts (heavy problems).
    const auto measure_start = Clock::now();
    // Each round starts one solver further along, as the tuner's rounds do, so that no solver
    // always runs right after the same neighbour.
    for (int r = 0; r < args.rounds && (r < 5 || ms_since(measure_start) < args.budget_ms); ++r) {
      for (std::size_t k = 0; k < all.size(); ++k) {
        const std::size_t i = (k + static_cast<std::size_t>(r)) % all.size();
        times[i].push_back(timed_call(stream, line.problem, t, all[i], batches[i]));
      }
    }
    std::size_t best = 0, picked = 0;
    for (std::size_t i = 0; i < all.size(); ++i) {
      if (median(times[i]) < median(times[best])) best = i;
      if (all[i] == pick) picked = i;
    }
    const double exec = median(times[picked]);
    const double fastest = median(times[best]);
    const double ratio = exec / fastest;
    ++compared;
    within3 += ratio <= 1.03;
    sum_tune += tuned.tune_ms;
    sum_exec += exec;
    max_tune = std::max(max_tune, tuned.tune_ms);
    auto avg = [&](double n) { return tuned.tune_ms / n + exec; };
    table.add({name, std::string(pick->name()), fixed(tuned.tune_ms, 1), fixed(exec), fixed(avg(1)), fixed(avg(10)),
               fixed(avg(1000)), std::string(all[best]->name()), fixed(fastest), fixed(ratio, 3)});
    rows.push_back({{"problem", name}, {"key", line.problem.key()}, {"pick", pick->name()},
                    {"tune_ms", tuned.tune_ms}, {"time_box_hit", tuned.time_box_hit}, {"exec_ms", exec},
                    {"fastest", all[best]->name()}, {"fastest_ms", fastest}, {"candidates", all.size()}});
  }

  // pick() on a hit: the in-process cache plus the solver's check(), batches of 1000 calls.
  const auto& probe = lines.front().problem;
  tuner.pick(probe, device);
  std::vector<double> per_call_ns;
  for (int batch = 0; batch < 200; ++batch) {
    const auto start = Clock::now();
    for (int i = 0; i < 1000; ++i) {
      const auto p = tuner.pick(probe, device);
      asm volatile("" : : "r"(p.solver) : "memory");
    }
    per_call_ns.push_back(ms_since(start) * 1e6 / 1000);
  }
  // The find-db behind the cache: a lookup of a stored problem (served by the per-identity snapshot
  // read at the process's first lookup) and a miss (queries every SQLite layer).
  std::vector<double> db_hit_us, db_miss_us;
  const auto id = tuning::DeviceIdentity::of(device);
  const std::string key = probe.key();
  for (int i = 0; i < 2000; ++i) {
    auto start = Clock::now();
    (void)tuner.db().lookup(key, id);
    db_hit_us.push_back(ms_since(start) * 1000);
    start = Clock::now();
    (void)tuner.db().lookup("conv-not-stored-" + std::to_string(i), id);
    db_miss_us.push_back(ms_since(start) * 1000);
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);

  const double box = options.find.time_box_ms;
  if (args.json) {
    std::printf("%s\n", nlohmann::json({{"device", device.name()},
                                        {"time_box_ms", box},
                                        {"problems", rows},
                                        {"hit_pick_ns_median", median(per_call_ns)},
                                        {"db_lookup_hit_us_median", median(db_hit_us)},
                                        {"db_lookup_miss_us_median", median(db_miss_us)}})
                            .dump(2)
                            .c_str());
    return 0;
  }
  table.print();
  std::printf("\nall %d problems: sum T_tune %.1f ms, sum T_exec %.3f ms; T_avg/T_exec: N=1 %.1fx, N=10 %.2fx, "
              "N=1000 %.4fx\n",
              compared, sum_tune, sum_exec, (sum_tune + sum_exec) / sum_exec, (sum_tune / 10 + sum_exec) / sum_exec,
              (sum_tune / 1000 + sum_exec) / sum_exec);
  std::printf("pick within 3%% of the fastest on %d/%d problems\n", within3, compared);
  std::printf("tuning per problem: max %.1f ms with a time box of %.0f ms\n", max_tune, box);
  std::printf("pick() on a hit: median %.1f ns per call (200 batches of 1000); find-db lookup: stored %.1f us, "
              "miss (SQLite queries) %.1f us (medians of 2000)\n",
              median(per_call_ns), median(db_hit_us), median(db_miss_us));
  return 0;
}

// Options that only mean something beside another are errors alone, never silently ignored.
void check_combinations(const CLI::App& cmd) {
  for (const char* option : {"--explicit", "--preload", "--sequence", "--passes"}) {
    require_with(cmd, option, "--first-call");
  }
  require_with(cmd, "--touch", "--first-call");
  require_with(cmd, "--touch", "--passes");
  for (const char* option : {"--explicit", "--sequence"}) {
    require_apart(cmd, "--passes", option, "--passes runs the tuner's picks in sequence already");
  }
  require_apart(cmd, "--explicit", "--preload", "--explicit bypasses the tuner that --preload warms up");
  require_apart(cmd, "--budget-ms", "--first-call", "the budget bounds the rounds of the figures mode only");
}

int run(const Args& args, const CLI::App& cmd) {
  check_combinations(cmd);
  const runtime::Device device = args.device.empty() ? runtime::default_device() : runtime::device(args.device);
  const auto lines = read_problem_file(args.file, {args.dtype, args.layout, args.batch});
  // Every problem alone must fit before any is tuned or timed.
  for (const Line& line : lines) {
    require_tensors_fit(device, line.problem,
                        args.file + ":" + std::to_string(line.line) + ": problem " + line.problem.key());
  }
  if (args.passes) return run_passes(args, lines, device);
  return args.first_call ? run_first_call(args, lines, device) : run_figures(args, lines, device);
}

const bool bench_tuner_registered = register_command([](CLI::App& root) {
  auto args = std::make_shared<Args>();
  CLI::App* cmd = bench_group(root).add_subcommand("tuner", "Tuner figures: T_tune vs T_exec, pick quality, hit cost");
  cmd->add_option("--file", args->file, "problem list (MIOpenDriver lines)")->required();
  cmd->add_option("--device", args->device, "device (default: GALLEY_DEVICE, else first GPU, else cpu)");
  cmd->add_option("--dtype", args->dtype, "override every line's dtype");
  cmd->add_option("--layout", args->layout, "override every line's layout");
  cmd->add_option("--batch", args->batch, "override every line's batch (-n)")->check(integer_in(1));
  cmd->add_option("--rounds", args->rounds, "timed calls per solver (median), at most")
      ->check(integer_in(1, kMaxRepeats));
  cmd->add_option("--budget-ms", args->budget_ms,
                  "per problem: no more rounds after this (at least 5 rounds)")
      ->check(number_in(0, false));
  cmd->add_flag("--first-call", args->first_call,
                "measure each problem's first call in this process against steady state (run after galley tune)");
  cmd->add_flag("--explicit", args->explicit_solver,
                "with --first-call: run the stored solver named explicitly (no tuner), the control");
  cmd->add_flag("--preload", args->preload,
                "with --first-call: Tuner::preload() the stored problems first (startup warm-up, timed apart)");
  cmd->add_flag("--sequence", args->sequence,
                "with --first-call: make every problem's tensors first, so each first call follows the previous "
                "problem's calls without a pause (as layers of a network do)");
  cmd->add_flag("--passes", args->passes,
                "with --first-call: run the list as a network's layers, the first pass against --rounds later passes, "
                "each call timed between its neighbours on the stream");
  cmd->add_flag("--touch", args->touch,
                "with --passes: read every x and w and write every y just before the first pass (the control for "
                "memory left untouched since setup)");
  cmd->add_flag("--json", args->json, "machine-readable output");
  cmd->callback([args, cmd] { set_exit_code(run(*args, *cmd)); });
});

}  // namespace
}  // namespace galley::cli
