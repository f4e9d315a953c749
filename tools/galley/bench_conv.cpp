// `galley bench conv`: MIOpenDriver's flags (or --file with one problem per line), every chosen
// solver timed with device events, optional verification against ref.conv.direct, an aligned
// table or --json. Exit code 1 when any verification fails or a solver throws.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench_conv_run.hpp"
#include "command.hpp"
#include "core/quoted_input.hpp"
#include "galley/core/error.hpp"
#include "galley/core/units.hpp"
#include "galley/dnn/convolution.hpp"
#include "galley/runtime/device.hpp"
#include "galley/tuning/tuner.hpp"
#include "problem_file.hpp"
#include "strict_options.hpp"
#include "table.hpp"

namespace galley::cli {
namespace {

// MIOpenDriver's problem flags, in its order: the option name, its least valid value and where
// CLI11 stores the value.
struct DriverFlag {
  const char* name;
  const char* help;
  std::int64_t minimum = 1;
  std::int64_t value = 0;
};

struct ConvBenchArgs {
  std::vector<DriverFlag> flags = {
      {"-n", "batch size (MIOpenDriver default 100)"},
      {"-c", "input channels (3)"},
      {"-H", "input height (32)"},
      {"-W", "input width (32)"},
      {"-k", "output channels (32)"},
      {"-y", "filter height (3)"},
      {"-x", "filter width (3)"},
      {"-p", "zero padding height (0)", 0},
      {"-q", "zero padding width (0)", 0},
      {"-u", "stride height (1)"},
      {"-v", "stride width (1)"},
      {"-l", "dilation height (1)"},
      {"-j", "dilation width (1)"},
      {"-g", "groups (1)"},
  };
  int direction = 1;
  int verify = 0;
  int iterations = 10;
  int warmup = 1;
  int timing = 1;
  double tolerance = 0;
  std::string mode = "conv";
  std::string dtype, layout, device, solver, file;
  bool all_solvers = false;
  bool json = false;
  bool prepared = false;
  // The fused epilogue (forward only): y = activ(conv + bias + residual).
  bool bias = false;
  bool residual = false;
  std::string activ;
  double alpha = 0, beta = 0;
};

// The epilogue the flags ask for; empty without --bias, --residual and --activ. --alpha/--beta
// default to the activation's PyTorch parameters.
dnn::ConvEpilogue epilogue_from(const ConvBenchArgs& args, const CLI::App& cmd) {
  dnn::ConvEpilogue e;
  e.bias = args.bias;
  e.residual = args.residual;
  const bool given_alpha = cmd.count("--alpha") > 0, given_beta = cmd.count("--beta") > 0;
  if (args.activ.empty()) {
    if (given_alpha || given_beta) {
      throw Error(Status::invalid_argument, "--alpha and --beta are parameters of --activ, which is not given");
    }
    return e;
  }
  if (args.activ.size() > kQuotedInputChars) {
    throw Error(Status::invalid_argument, "--activ " + quoted_input(args.activ) + " is not an activation");
  }
  const dnn::Activation a = dnn::parse_activation(args.activ);
  e.activation = a;
  e.alpha = given_alpha ? args.alpha : dnn::default_alpha(a);
  e.beta = given_beta ? args.beta : dnn::default_beta(a);
  return e;
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

std::vector<ProblemLine> problems_from(const ConvBenchArgs& args, const CLI::App& cmd) {
  std::string given;
  for (const DriverFlag& f : args.flags) {
    if (cmd.count(f.name) > 0)
      given += std::string(given.empty() ? "" : " ") + f.name + " " + std::to_string(f.value);
  }
  if (!args.file.empty()) {
    if (!given.empty()) {
      throw Error(Status::invalid_argument,
                  "give the problem as flags or as --file, not both (flags: " + given + ")");
    }
    return read_problem_file(args.file, {args.dtype, args.layout, 0});
  }
  // The flags go through the same parser as a file line: MIOpenDriver's defaults, one validation.
  ProblemLine p{dnn::ConvProblem::parse_driver_line("conv " + given), "", 0};
  // An explicit --dtype/--layout wins over MIOpenDriver's default.
  if (!args.dtype.empty()) p.problem.dtype = parse_dtype(args.dtype);
  if (!args.layout.empty()) p.problem.layout = dnn::parse_layout(args.layout);
  p.problem.validate();
  return {std::move(p)};
}

// The tuner's picks of this run, by problem key (the default, no --solver / --all-solvers).
std::map<std::string, tuning::Pick>& tuner_picks() {
  static std::map<std::string, tuning::Pick> picks;
  return picks;
}

// Why the tuner's result for a problem tuned in this run did not reach the find-db file, by key.
std::map<std::string, std::string>& unsaved_picks() {
  static std::map<std::string, std::string> reasons;
  return reasons;
}

// The solvers to time on `device`: one named, all but the reference, or the one the library picks.
std::vector<const dnn::ConvSolver*> chosen_solvers(const ConvBenchArgs& args, const runtime::Device& device,
                                                   const dnn::ConvProblem& problem) {
  const auto list = dnn::conv_solvers(device.backend());
  if (!args.solver.empty()) {
    if (const dnn::ConvSolver* s = dnn::find_conv_solver(device.backend(), args.solver)) return {s};
    std::vector<std::string> here;
    for (const dnn::ConvSolver* s : list) here.emplace_back(s->name());
    if (dnn::find_conv_solver(args.solver) != nullptr) {
      throw Error(Status::invalid_argument, "--solver " + args.solver + " is not a solver of device " +
                                                device.name() + " (its solvers: " + join(here) + ")");
    }
    throw Error(Status::not_found, "unknown conv solver '" + args.solver + "' (valid on " + device.name() +
                                       ": " + join(here) + "; all: " + join(dnn::conv_solver_names()) + ")");
  }
  if (args.all_solvers) {
    std::vector<const dnn::ConvSolver*> out;
    for (const dnn::ConvSolver* s : list) {
      if (!s->is_reference()) out.push_back(s);
    }
    return out;
  }
  // The library's own choice: the tuner (a find-db hit, or tuned now), reported under the results.
  const tuning::Pick pick = tuning::default_tuner().pick(problem, device);
  tuner_picks()[problem.key()] = pick;
  if (pick.source == tuning::PickSource::tuned) {
    static std::size_t unsaved_seen = 0;
    if (const auto unsaved = tuning::default_tuner().db().unsaved_stores(); unsaved.count > unsaved_seen) {
      unsaved_seen = unsaved.count;
      unsaved_picks()[problem.key()] = unsaved.last_reason;
    }
  }
  return {pick.solver};
}

// "tuner: <solver> (find-db hit, user find-db)" for a problem benchmarked with the tuner's pick.
std::string tuner_note(const dnn::ConvProblem& problem) {
  const auto it = tuner_picks().find(problem.key());
  if (it == tuner_picks().end()) return {};
  const tuning::Pick& p = it->second;
  const auto unsaved = unsaved_picks().find(problem.key());
  return std::string(p.solver->name()) + (p.hit ? " (find-db hit, " : " (no hit: ") +
         tuning::to_string(p.source) +
         (unsaved == unsaved_picks().end() ? "" : "; not saved: " + unsaved->second) + ")";
}

// {"solver", "hit", "source"} of the tuner's pick, or null when the solvers were named by flags.
nlohmann::json tuner_json(const dnn::ConvProblem& problem) {
  const auto it = tuner_picks().find(problem.key());
  if (it == tuner_picks().end()) return nullptr;
  const auto unsaved = unsaved_picks().find(problem.key());
  return {{"solver", it->second.solver->name()},
          {"hit", it->second.hit},
          {"source", tuning::to_string(it->second.source)},
          {"not_saved",
           unsaved == unsaved_picks().end() ? nlohmann::json(nullptr) : nlohmann::json(unsaved->second)}};
}

std::string number(double value, int digits = 4) {
  char text[32];
  std::snprintf(text, sizeof text, "%.*g", digits, value);
  return text;
}

std::string verify_cell(const ConvBenchResult& r) {
  if (!r.error.empty()) return "ERROR";
  if (!r.verified) return "-";
  return std::string(*r.verified ? "ok " : "FAIL ") + number(*r.max_rel_err, 2);
}

nlohmann::json to_json(const std::vector<ConvBenchProblem>& problems, const runtime::Device& device,
                       const ConvBenchOptions& options, double geomean) {
  nlohmann::json out;
  out["device"] = device.name();
  out["device_model"] = device.properties().name;
  out["iterations"] = options.iterations;
  out["warmup"] = options.warmup;
  out["verify"] = options.verify;
  out["prepared"] = options.prepared;
  out["problems"] = nlohmann::json::array();
  for (const auto& p : problems) {
    nlohmann::json results = nlohmann::json::array();
    for (const auto& r : p.results) {
      nlohmann::json j = {
          {"solver", r.solver},
          {"ms", r.ms},
          {"batch", r.batch},
          {"tflops", r.tflops},
          {"gbps", r.gbps},
          {"workspace_bytes", r.workspace_bytes},
          {"verified", r.verified ? nlohmann::json(*r.verified) : nlohmann::json(nullptr)},
          {"max_rel_err", r.max_rel_err && std::isfinite(*r.max_rel_err) ? nlohmann::json(*r.max_rel_err)
                                                                         : nlohmann::json(nullptr)},
          {"detail", r.detail}};
      if (!r.verify_summary.empty()) j["verify_summary"] = r.verify_summary;
      if (!r.error.empty()) j["error"] = r.error;
      results.push_back(std::move(j));
    }
    nlohmann::json skipped = nlohmann::json::array();
    for (const auto& s : p.skipped) skipped.push_back({{"solver", s.solver}, {"reason", s.reason}});
    out["problems"].push_back({{"key", p.problem.key()},
                               {"tag", p.tag},
                               {"command", p.problem.bench_command(device)},
                               {"flops", p.problem.flops()},
                               {"tuner", tuner_json(p.problem)},
                               {"results", std::move(results)},
                               {"skipped", std::move(skipped)}});
  }
  out["geomean_best_tflops"] = geomean > 0 ? nlohmann::json(geomean) : nlohmann::json(nullptr);
  return out;
}

void print_table(const std::vector<ConvBenchProblem>& problems, const runtime::Device& device,
                 const ConvBenchOptions& options, double geomean, int measured) {
  std::printf(
      "device %s (%s), median of %d samples (each a batch of back-to-back calls lasting ~1 ms, "
      "divided by its size) after %d warm-up%s%s\n",
      device.name().c_str(), device.properties().name.c_str(), options.iterations, options.warmup,
      options.verify ? ", verified against the reference of its direction" : "",
      options.prepared ? ", weights prepared once per solver" : "");
  Table table({"problem", "solver", "ms", "TFLOP/s", "GB/s", "workspace", "verify", "detail"});
  for (const auto& p : problems) {
    const std::string name = p.tag.empty() ? p.problem.key() : p.tag;
    for (const auto& r : p.results) {
      if (!r.error.empty()) {
        table.add({name, r.solver, "-", "-", "-", "-", "ERROR", r.error});
        continue;
      }
      table.add({name, r.solver, number(r.ms), number(r.tflops), number(r.gbps, 3),
                 format_bytes(r.workspace_bytes), verify_cell(r),
                 r.verified && !*r.verified ? r.verify_summary : r.detail});
    }
    if (p.results.empty()) {
      for (const auto& s : p.skipped) table.add({name, s.solver, "-", "-", "-", "-", "n/a", s.reason});
    }
  }
  table.print();
  for (const auto& p : problems) {
    const std::string note = tuner_note(p.problem);
    const std::string name = p.tag.empty() ? p.problem.key() : p.tag;
    if (!note.empty()) std::printf("tuner pick for %s: %s\n", name.c_str(), note.c_str());
  }
  if (problems.size() > 1 && geomean > 0) {
    std::printf("geomean of the best TFLOP/s per problem over %d problems: %s\n", measured,
                number(geomean).c_str());
  }
}

// The directions -F asks for, as MIOpenDriver reads it: 0 all three, 1 forward, 2 backward data,
// 4 backward weights. Without -F each problem keeps its own (a file line's -F, else forward).
std::vector<ProblemLine> with_directions(std::vector<ProblemLine> lines, int direction, bool given) {
  if (!given) return lines;
  std::vector<dnn::ConvDirection> wanted;
  switch (direction) {
    case 0: wanted = {dnn::ConvDirection::forward, dnn::ConvDirection::backward_data,
                      dnn::ConvDirection::backward_weights}; break;
    case 1: wanted = {dnn::ConvDirection::forward}; break;
    case 2: wanted = {dnn::ConvDirection::backward_data}; break;
    case 4: wanted = {dnn::ConvDirection::backward_weights}; break;
    default:
      throw Error(Status::invalid_argument, "-F '" + std::to_string(direction) + "'" +
                                                ": not a direction (valid: 0 all, 1 forward, 2 backward data, 4 backward weights)");
  }
  std::vector<ProblemLine> out;
  for (const ProblemLine& line : lines) {
    for (const dnn::ConvDirection d : wanted) {
      ProblemLine l = line;
      l.problem.direction = d;
      out.push_back(std::move(l));
    }
  }
  return out;
}

int run_bench_conv(const ConvBenchArgs& args, const CLI::App& cmd) {
  if (args.mode != "conv") {
    throw Error(Status::invalid_argument, "-m " + quoted_input(args.mode) + ": only conv is supported");
  }
  require_apart(cmd, "--solver", "--all-solvers");
  // Ranges are checked as the options are parsed (strict_options.hpp); what an option means
  // beside another is checked here.
  if (cmd.count("--tolerance") > 0 && args.verify != 1) {
    throw Error(Status::invalid_argument, "--tolerance needs -V 1: it is the pass mark of the verification");
  }
  auto problems = with_directions(problems_from(args, cmd), args.direction, cmd.count("-F") > 0);
  if (const dnn::ConvEpilogue e = epilogue_from(args, cmd); !e.empty()) {
    for (ProblemLine& line : problems) {
      line.problem.epilogue = e;
      line.problem.validate();  // a backward direction, or parameters the activation does not take
    }
  }
  const runtime::Device device =
      args.device.empty() ? runtime::default_device() : runtime::device(args.device);
  const ConvBenchOptions options{args.iterations, args.warmup, args.verify == 1, args.tolerance,
                                 args.prepared};
  runtime::Stream stream(device);
  const bool progress = !args.json && problems.size() > 1 && ::isatty(STDERR_FILENO);

  std::vector<ConvBenchProblem> results;
  bool failed = false;
  double log_sum = 0;
  int measured = 0;
  for (std::size_t i = 0; i < problems.size(); ++i) {
    const ProblemLine& line = problems[i];
    if (progress) {
      std::fprintf(stderr, "[%zu/%zu] %s\n", i + 1, problems.size(),
                   (line.tag.empty() ? line.problem.key() : line.tag).c_str());
    }
    // Before the tuner's pick too, which may tune the problem (and allocate its tensors).
    check_conv_bench_memory(device, line.problem, options);
    std::vector<const dnn::ConvSolver*> solvers;
    try {
      solvers = chosen_solvers(args, device, line.problem);
    } catch (const Error& e) {
      if (e.status() != Status::unsupported) throw;
      ConvBenchProblem none{line.problem, line.tag, {}, {{"(none)", e.what()}}};
      results.push_back(std::move(none));
      continue;
    }
    results.push_back(bench_conv_problem(stream, line.problem, line.tag, solvers, options));
    double best = 0;
    for (const auto& r : results.back().results) {
      failed = failed || r.failed();
      if (r.error.empty()) best = std::max(best, r.tflops);
    }
    if (best > 0) {
      log_sum += std::log(best);
      ++measured;
    }
  }
  const double geomean = measured > 0 ? std::exp(log_sum / measured) : 0;
  if (args.json) {
    std::printf("%s\n", to_json(results, device, options, geomean).dump(2).c_str());
  } else {
    print_table(results, device, options, geomean, measured);
  }
  if (measured == 0) {
    std::string why;
    for (const auto& p : results) {
      for (const auto& s : p.skipped) why += "\n  " + p.problem.key() + ": " + s.solver + ": " + s.reason;
    }
    throw Error(Status::unsupported, "no solver ran on " + device.name() + why);
  }
  return failed ? 1 : 0;
}

const bool bench_conv_registered = register_command([](CLI::App& root) {
  auto args = std::make_shared<ConvBenchArgs>();
  CLI::App* cmd = bench_group(root).add_subcommand(
      "conv", "Time convolution solvers on MIOpenDriver-style problems (-n -c -H -W -k -y -x ...)");
  for (DriverFlag& f : args->flags) cmd->add_option(f.name, f.value, f.help)->check(integer_in(f.minimum));
  cmd->add_option("-F", args->direction,
                  "direction: 0 all three, 1 forward, 2 backward data, 4 backward weights (default: each "
                  "problem's own, else 1)")
      ->check(integer_in(0, 4));
  cmd->add_option("-V", args->verify, "1: verify every solver against the reference of its direction (slow on big problems)")
      ->check(integer_in(0, 1));
  cmd->add_option("-i", args->iterations, "timed iterations; the median is reported (default 10)")
      ->check(integer_in(1, kMaxRepeats));
  cmd->add_option("-t", args->timing, "accepted for MIOpenDriver compatibility: timing is always on")
      ->check(integer_in(0, 1));
  cmd->add_option("-m", args->mode, "accepted for MIOpenDriver compatibility: conv");
  cmd->add_option("--warmup", args->warmup, "untimed runs before timing (default 1)")
      ->check(integer_in(0, kMaxRepeats));
  cmd->add_option(
         "--tolerance", args->tolerance,
         "with -V 1: passes when max|got-ref| / max|ref| <= this (default 1e-5 for f32, 1e-2 for f16/bf16)")
      ->check(number_in(0, true));
  cmd->add_option("--dtype", args->dtype, "f32, f16 or bf16 (default f32, or the line's convfp16/convbfp16)");
  cmd->add_option("--layout", args->layout, "nchw or nhwc (default nchw)");
  cmd->add_option("--device", args->device, "cpu, cuda:0, hip:0 (default GALLEY_DEVICE, else the first GPU)");
  cmd->add_option("--solver", args->solver,
                  "time only this solver (e.g. cpu.conv.im2col_gemm, ref.conv.direct)");
  cmd->add_flag("--all-solvers", args->all_solvers, "time every applicable solver except the reference");
  cmd->add_option("--file", args->file, "problem list, one MIOpenDriver line per problem, '# tag' kept");
  cmd->add_flag("--json", args->json, "machine-readable output");
  cmd->add_flag(
      "--prepared", args->prepared,
      "forward: each solver keeps w in its own form across calls, as for a model's constant weights");
  cmd->add_flag("--bias", args->bias, "fused epilogue: add a bias per output channel (forward only)");
  cmd->add_flag("--residual", args->residual, "fused epilogue: add a tensor shaped as y (forward only)");
  cmd->add_option("--activ", args->activ,
                  "fused epilogue: apply this activation last (relu, leaky_relu, clip, elu, sigmoid, tanh, "
                  "gelu_erf, gelu_tanh, silu, hardswish, hardsigmoid)");
  cmd->add_option("--alpha", args->alpha,
                  "the activation's alpha (leaky_relu's slope, clip's lower bound, elu's alpha; default PyTorch's)")
      ->check(number_in(-1e30, false, 1e30));
  cmd->add_option("--beta", args->beta, "the activation's beta (clip's upper bound; default PyTorch's)")
      ->check(number_in(-1e30, false, 1e30));
  cmd->callback([args, cmd] { set_exit_code(run_bench_conv(*args, *cmd)); });
});

}  // namespace
}  // namespace galley::cli
