#include "bench_op.hpp"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <deque>
#include <exception>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>

#include "bench_stats.hpp"
#include "command.hpp"
#include "dnn/op_verify.hpp"
#include "galley/core/error.hpp"
#include "galley/core/units.hpp"
#include "galley/memory/buffer.hpp"
#include "galley/runtime/device.hpp"
#include "galley/tuning/tuner.hpp"
#include "memory_budget.hpp"
#include "strict_options.hpp"
#include "table.hpp"

namespace galley::cli {
namespace {

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

std::string number(double value, int digits = 4) {
  char text[32];
  std::snprintf(text, sizeof text, "%.*g", digits, value);
  return text;
}

// `batch` calls of `run` captured into one device graph. A solver whose call cannot be captured
// (it synchronises or allocates) is an Error naming the capture; the stream stays usable.
runtime::Graph capture_batch(runtime::Stream& stream, const std::function<void()>& run, int batch) {
  stream.synchronize();
  stream.begin_capture();
  try {
    for (int b = 0; b < batch; ++b) run();
  } catch (...) {
    try {
      (void)stream.end_capture();  // discarded: nothing of it ran
    } catch (const std::exception&) {
      // The original error says more than the failed end of a broken capture.
    }
    throw;
  }
  try {
    return stream.end_capture();
  } catch (const Error& e) {
    throw Error(e.status(), "--graph: capturing " + std::to_string(batch) + " calls failed: " + e.what());
  }
}

void measure(runtime::Stream& stream, dnn::ProblemRef problem, const dnn::Choice& choice, dnn::OpTensors& t,
             const std::vector<std::vector<std::byte>>* ref, const OpBenchOptions& options, OpBenchResult& result) {
  const runtime::Device& device = stream.device();
  result.workspace_bytes = choice.solver->workspace_bytes_any(problem, device, choice.config.get());
  result.detail = choice.solver->detail_any(problem, device);
  MemoryBudget(device).device("workspace of " + result.solver, result.workspace_bytes).check("problem " + problem.key());
  const memory::Buffer ws = memory::allocate(stream, result.workspace_bytes);
  dnn::OpArgs args = t.op_args;
  args.workspace = ws.data();
  args.workspace_bytes = result.workspace_bytes;
  const auto run = [&] { choice.solver->run_any(stream, problem, args, choice.config.get()); };

  if (ref != nullptr) {
    const dnn::OpVerification v = dnn::verify_op(stream, problem, choice, t, *ref,
                                                 options.tolerance > 0 ? options.tolerance : problem.tolerance());
    result.verified = v.passed;
    result.max_rel_err = v.max_rel_err;
    result.verify_summary = v.summary;
  }
  for (int i = 0; i < options.warmup; ++i) run();
  runtime::Event sizing_start(device), sizing_stop(device);
  sizing_start.record(stream);
  run();
  sizing_stop.record(stream);
  sizing_stop.synchronize();
  result.batch = batch_for(sizing_stop.elapsed_ms_since(sizing_start));
  // At most kPending samples in flight, so memory stays bounded however many iterations are asked.
  constexpr std::size_t kPending = 64;
  std::deque<std::pair<runtime::Event, runtime::Event>> pending;
  std::vector<double> times;
  auto read_oldest = [&] {
    auto& [start, stop] = pending.front();
    stop.synchronize();
    times.push_back(stop.elapsed_ms_since(start) / result.batch);
    pending.pop_front();
  };
  std::optional<runtime::Graph> graph;
  if (options.graph) graph = capture_batch(stream, run, result.batch);
  result.graph = graph.has_value();
  for (int i = 0; i < options.iterations; ++i) {
    if (pending.size() == kPending) read_oldest();
    auto& [start, stop] = pending.emplace_back(runtime::Event(device), runtime::Event(device));
    start.record(stream);
    if (graph) {
      graph->replay(stream);
    } else {
      for (int b = 0; b < result.batch; ++b) run();
    }
    stop.record(stream);
  }
  while (!pending.empty()) read_oldest();
  stream.synchronize();
  result.ms = median(times);
  const double seconds = result.ms * 1e-3;
  result.tflops = seconds > 0 ? problem.flops() / seconds / 1e12 : 0;
  result.gbps = seconds > 0 ? problem.min_bytes() / seconds / 1e9 : 0;
}

// The choices to time on `device`: one named solver, all but the references, or the tuner's pick.
std::vector<dnn::Choice> chosen(const OpBenchFlags& flags, const runtime::Device& device, dnn::ProblemRef problem,
                                std::string& tuner_note) {
  const dnn::OpKind kind = problem.kind();
  const auto list = dnn::solvers_of(device.backend(), kind);
  if (!flags.solver.empty()) {
    if (const dnn::SolverBase* s = dnn::find_solver(device.backend(), kind, flags.solver)) return {{s, nullptr}};
    std::vector<std::string> here;
    for (const dnn::SolverBase* s : list) here.emplace_back(s->name());
    throw Error(Status::not_found, "--solver " + flags.solver + " is not a " + dnn::to_string(kind) +
                                       " solver of device " + device.name() + " (its solvers: " + join(here) +
                                       "; all: " + join(dnn::solver_names(kind)) + ")");
  }
  if (flags.all_solvers) {
    std::vector<dnn::Choice> out;
    for (const dnn::SolverBase* s : list) {
      if (!s->is_reference()) out.push_back({s, nullptr});
    }
    return out;
  }
  const tuning::AnyPick pick = tuning::default_tuner().pick(problem, device);
  tuner_note = std::string(pick.solver->name()) + (pick.config.empty() ? "" : " [" + pick.config + "]") +
               (pick.hit ? " (find-db hit, " : " (no hit: ") + tuning::to_string(pick.source) + ")";
  return {{pick.solver, pick.config_handle}};
}

std::string verify_cell(const OpBenchResult& r) {
  if (!r.error.empty()) return "ERROR";
  if (!r.verified) return "-";
  return std::string(*r.verified ? "ok " : "FAIL ") + number(*r.max_rel_err, 2);
}

nlohmann::json to_json(const std::vector<OpBenchProblem>& problems, const std::vector<std::string>& notes,
                       const runtime::Device& device, const OpBenchOptions& options) {
  nlohmann::json out;
  out["device"] = device.name();
  out["device_model"] = device.properties().name;
  out["iterations"] = options.iterations;
  out["warmup"] = options.warmup;
  out["verify"] = options.verify;
  out["problems"] = nlohmann::json::array();
  for (std::size_t i = 0; i < problems.size(); ++i) {
    const OpBenchProblem& p = problems[i];
    const dnn::ProblemRef ref = p.problem.ref();
    nlohmann::json results = nlohmann::json::array();
    for (const auto& r : p.results) {
      nlohmann::json j = {{"solver", r.solver},
                          {"ms", r.ms},
                          {"batch", r.batch},
                          {"graph", r.graph},
                          {"tflops", r.tflops},
                          {"gbps", r.gbps},
                          {"workspace_bytes", r.workspace_bytes},
                          {"verified", r.verified ? nlohmann::json(*r.verified) : nlohmann::json(nullptr)},
                          {"max_rel_err", r.max_rel_err && std::isfinite(*r.max_rel_err)
                                              ? nlohmann::json(*r.max_rel_err)
                                              : nlohmann::json(nullptr)},
                          {"detail", r.detail}};
      if (!r.verify_summary.empty()) j["verify_summary"] = r.verify_summary;
      if (!r.error.empty()) j["error"] = r.error;
      results.push_back(std::move(j));
    }
    nlohmann::json skipped = nlohmann::json::array();
    for (const auto& [solver, reason] : p.skipped) skipped.push_back({{"solver", solver}, {"reason", reason}});
    out["problems"].push_back({{"key", ref.key()},
                               {"tag", p.tag},
                               {"command", ref.bench_command(device, "")},
                               {"flops", ref.flops()},
                               {"bytes", ref.min_bytes()},
                               {"tuner", notes[i].empty() ? nlohmann::json(nullptr) : nlohmann::json(notes[i])},
                               {"results", std::move(results)},
                               {"skipped", std::move(skipped)}});
  }
  return out;
}

void print_table(const std::vector<OpBenchProblem>& problems, const std::vector<std::string>& notes,
                 const runtime::Device& device, const OpBenchOptions& options) {
  std::printf("device %s (%s), median of %d samples (each a batch of back-to-back calls lasting ~1 ms, "
              "divided by its size) after %d warm-up%s\n",
              device.name().c_str(), device.properties().name.c_str(), options.iterations, options.warmup,
              options.verify ? ", every output verified against the cpu reference" : "");
  Table table({"problem", "solver", "ms", "GB/s", "TFLOP/s", "workspace", "verify", "detail"});
  for (const auto& p : problems) {
    const std::string name = p.tag.empty() ? p.problem.ref().key() : p.tag;
    for (const auto& r : p.results) {
      if (!r.error.empty()) {
        table.add({name, r.solver, "-", "-", "-", "-", "ERROR", r.error});
        continue;
      }
      table.add({name, r.solver, number(r.ms), number(r.gbps, 4), number(r.tflops, 3), format_bytes(r.workspace_bytes),
                 verify_cell(r), r.verified && !*r.verified ? r.verify_summary : r.detail});
    }
    if (p.results.empty()) {
      for (const auto& [solver, reason] : p.skipped) table.add({name, solver, "-", "-", "-", "-", "n/a", reason});
    }
  }
  table.print();
  for (std::size_t i = 0; i < problems.size(); ++i) {
    if (notes[i].empty()) continue;
    const OpBenchProblem& p = problems[i];
    std::printf("tuner pick for %s: %s\n", (p.tag.empty() ? p.problem.ref().key() : p.tag).c_str(), notes[i].c_str());
  }
}

}  // namespace

void add_op_bench_flags(CLI::App* cmd, OpBenchFlags& flags, bool with_layout, bool with_direction) {
  cmd->add_option("-V", flags.verify, "1: verify every output against the cpu reference")->check(integer_in(0, 1));
  cmd->add_option("-i", flags.iterations, "timed iterations; the median is reported (default 10)")
      ->check(integer_in(1, kMaxRepeats));
  cmd->add_option("--warmup", flags.warmup, "untimed runs before timing (default 1)")->check(integer_in(0, kMaxRepeats));
  cmd->add_option("--tolerance", flags.tolerance,
                  "with -V 1: passes when max|got-ref| / max|ref| <= this (default: the op's, by dtype)")
      ->check(number_in(0, true));
  cmd->add_option("--dtype", flags.dtype, "f32, f16 or bf16 (default f32)");
  if (with_layout) cmd->add_option("--layout", flags.layout, "nchw or nhwc (default nchw)");
  if (with_direction) {
    cmd->add_option("-F", flags.direction, "1 forward (default), 2 backward, 0 both")->check(integer_in(0, 2));
  }
  cmd->add_option("--device", flags.device, "cpu, cuda:0, hip:0 (default GALLEY_DEVICE, else the first GPU)");
  cmd->add_option("--solver", flags.solver, "time only this solver");
  cmd->add_flag("--all-solvers", flags.all_solvers, "time every applicable solver except the references");
  cmd->add_flag("--json", flags.json, "machine-readable output");
  cmd->add_flag("--graph", flags.graph,
                "time replays of a device graph of each sample's calls (the kernels' pace, without launch gaps)");
}

std::vector<bool> directions(const OpBenchFlags& flags) {
  switch (flags.direction) {
    case 0: return {false, true};
    case 2: return {true};
    default: return {false};
  }
}

OpBenchProblem bench_op_problem(runtime::Stream& stream, dnn::ProblemRef problem, std::string tag,
                                const std::vector<dnn::Choice>& choices, const OpBenchOptions& options) {
  if (options.iterations < 1) {
    throw Error(Status::invalid_argument, "-i " + std::to_string(options.iterations) + ": need at least 1 iteration");
  }
  problem.validate();
  OpBenchProblem out{dnn::AnyProblem::copy_of(problem), std::move(tag), {}, {}};
  const runtime::Device& device = stream.device();
  std::vector<dnn::Choice> runnable;
  for (const dnn::Choice& c : choices) {
    const dnn::Applicability a = c.solver->check_any(problem, device);
    if (a) {
      runnable.push_back(c);
    } else {
      out.skipped.emplace_back(std::string(c.solver->name()), a.reason);
    }
  }
  if (runnable.empty()) return out;

  MemoryBudget budget(device);
  for (const dnn::TensorArg& t : problem.tensors()) {
    budget.device(std::string(t.name), t.desc.bytes()).host("host " + std::string(t.name), t.desc.bytes());
    if (options.verify) budget.host("reference " + std::string(t.name), t.desc.bytes());
  }
  budget.check("problem " + problem.key());
  const std::uint64_t seed = dnn::default_op_seed(problem);
  dnn::OpTensors t = dnn::make_op_tensors(stream, problem, seed);
  dnn::load_op_tensors(stream, t);
  std::vector<std::vector<std::byte>> ref;
  if (options.verify) ref = dnn::reference_op_outputs(problem, seed);
  stream.synchronize();

  for (const dnn::Choice& c : runnable) {
    OpBenchResult result;
    result.solver = std::string(c.solver->name());
    try {
      measure(stream, problem, c, t, options.verify ? &ref : nullptr, options, result);
    } catch (const std::exception& e) {
      result.error = e.what();
      try {
        stream.synchronize();
      } catch (const std::exception&) {
        // Already reported as this solver's error.
      }
    }
    out.results.push_back(std::move(result));
  }
  return out;
}

int run_op_bench(const OpBenchFlags& flags, const CLI::App& cmd, const std::vector<OpBenchLine>& lines) {
  require_apart(cmd, "--solver", "--all-solvers");
  if (cmd.count("--tolerance") > 0 && flags.verify != 1) {
    throw Error(Status::invalid_argument, "--tolerance needs -V 1: it is the pass mark of the verification");
  }
  const runtime::Device device = flags.device.empty() ? runtime::default_device() : runtime::device(flags.device);
  const OpBenchOptions options{flags.iterations, flags.warmup, flags.verify == 1, flags.tolerance, flags.graph};
  runtime::Stream stream(device);
  const bool progress = !flags.json && lines.size() > 1 && ::isatty(STDERR_FILENO);
  std::vector<OpBenchProblem> results;
  std::vector<std::string> notes;
  bool failed = false;
  int measured = 0;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const dnn::ProblemRef problem = lines[i].problem.ref();
    if (progress) {
      std::fprintf(stderr, "[%zu/%zu] %s\n", i + 1, lines.size(),
                   (lines[i].tag.empty() ? problem.key() : lines[i].tag).c_str());
    }
    problem.validate();
    std::string note;
    std::vector<dnn::Choice> choices;
    try {
      choices = chosen(flags, device, problem, note);
    } catch (const Error& e) {
      if (e.status() != Status::unsupported) throw;
      results.push_back({lines[i].problem, lines[i].tag, {}, {{"(none)", e.what()}}});
      notes.emplace_back();
      continue;
    }
    results.push_back(bench_op_problem(stream, problem, lines[i].tag, choices, options));
    notes.push_back(note);
    for (auto& r : results.back().results) {
      failed = failed || r.failed();
      if (r.error.empty()) ++measured;
    }
  }
  if (flags.json) {
    std::printf("%s\n", to_json(results, notes, device, options).dump(2).c_str());
  } else {
    print_table(results, notes, device, options);
  }
  if (measured == 0) {
    std::string why;
    for (const auto& p : results) {
      for (const auto& [solver, reason] : p.skipped) why += "\n  " + p.problem.ref().key() + ": " + solver + ": " + reason;
    }
    throw Error(Status::unsupported, "no solver ran on " + device.name() + why);
  }
  return failed ? 1 : 0;
}

}  // namespace galley::cli
