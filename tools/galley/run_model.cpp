// `galley run MODEL.onnx`: imports the model, lowers it for the device and either checks it against
// ONNX test data (--inputs DIR --check: every output within the dtype's tolerance, exit 1 otherwise)
// or runs it on random inputs and reports throughput (images/s, median and p90 ms per iteration,
// peak memory); --verbose adds each layer's op, solver and time. The graph passes (passes.hpp) run
// before the executor is built; --no-pass NAME turns one off, --dtype f16|bf16 converts the graph.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench_stats.hpp"
#include "command.hpp"
#include "dnn/tensor_data.hpp"
#include "galley/core/error.hpp"
#include "galley/core/units.hpp"
#include "galley/model/builder.hpp"
#include "galley/model/executor.hpp"
#include "galley/model/onnx.hpp"
#include "galley/model/passes.hpp"
#include "galley/runtime/device.hpp"
#include "run_passes.hpp"
#include "strict_options.hpp"
#include "table.hpp"

namespace galley::cli {
namespace {

struct RunArgs {
  std::string model, zoo, inputs, device;
  std::int64_t size = 224;
  bool check = false;
  std::int64_t batch = 0;
  int iterations = 20;
  int warmup = 3;
  bool json = false;
  bool verbose = false;
  PassFlags passes;
  bool graph = false;
};

// What the graph passes were asked and did, for the check's tolerance and the reports.
struct PassRun {
  model::PassOptions options;
  model::PassReport report;
};

namespace fs = std::filesystem;

// Max |got - want| / max(1, max|want|).
double max_error(const model::HostTensor& got, const model::HostTensor& want) {
  const auto g = got.as_double(), w = want.as_double();
  double scale = 1, err = 0;
  for (const double v : w) scale = std::max(scale, std::abs(v));
  for (std::size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(g[i]) != std::isnan(w[i])) return INFINITY;
    if (!std::isnan(g[i])) err = std::max(err, std::abs(g[i] - w[i]));
  }
  return err / scale;
}

// Seeded uniform [-1, 1) data for each graph input.
std::map<std::string, Tensor> random_inputs(runtime::Stream& stream, const model::Graph& g) {
  std::map<std::string, Tensor> out;
  std::uint64_t seed = 2026;
  for (const std::string& name : g.inputs) {
    const model::ValueInfo& v = g.value(name);
    const auto dtype = v.type == model::ElemType::f16 ? DType::f16 : v.type == model::ElemType::bf16 ? DType::bf16 : DType::f32;
    if (v.type != model::ElemType::f32 && v.type != model::ElemType::f16 && v.type != model::ElemType::bf16) {
      throw Error(Status::unsupported, "graph input '" + name + "' is " + model::to_string(v.type) + "; random inputs are floats only (give --inputs)");
    }
    const dnn::TensorDesc desc = dnn::TensorDesc::contiguous(dtype, v.shape.data(), static_cast<int>(v.shape.size()));
    const auto bytes = dnn::random_tensor(dtype, desc.elements(), seed++);
    Tensor t = Tensor::empty(stream, desc);
    t.copy_from_host(stream, bytes.data(), bytes.size());
    out[name] = t;
  }
  return out;
}

int check_against(model::Executor& exec, runtime::Stream& stream, const RunArgs& args, const PassRun& passes) {
  const fs::path dir(args.inputs);
  if (!fs::is_directory(dir)) throw Error(Status::not_found, "--inputs '" + args.inputs + "' is not a directory");
  const model::Graph& g = exec.graph();
  std::map<std::string, Tensor> inputs;
  for (std::size_t i = 0; i < g.inputs.size(); ++i) {
    inputs[g.inputs[i]] = model::to_device(stream, model::read_onnx_tensor((dir / ("input_" + std::to_string(i) + ".pb")).string()));
  }
  if (args.graph) exec.run(stream, inputs);  // eager; the checked run below captures and replays
  const auto outputs = exec.run(stream, inputs);
  int bad = 0;
  nlohmann::json rows = nlohmann::json::array();
  for (std::size_t i = 0; i < g.outputs.size(); ++i) {
    const fs::path file = dir / ("output_" + std::to_string(i) + ".pb");
    if (!fs::exists(file)) throw Error(Status::not_found, "--inputs: missing " + file.string());
    const model::HostTensor want = model::read_onnx_tensor(file.string());
    const model::HostTensor got = model::to_host(stream, outputs.at(g.outputs[i]));
    const double err = max_error(got, want);
    const double tol = check_tolerance(passes.options, want.type);
    const bool ok = got.shape == want.shape && err <= tol;
    bad += ok ? 0 : 1;
    rows.push_back({{"output", g.outputs[i]}, {"max_error", std::isfinite(err) ? nlohmann::json(err) : nlohmann::json(nullptr)},
                    {"tolerance", tol}, {"passed", ok}});
    if (!args.json) {
      std::printf("  [%s] output %s %s: max error %.3g (tolerance %.0e)\n", ok ? " ok " : "FAIL", g.outputs[i].c_str(),
                  model::to_string(got.shape).c_str(), err, tol);
    }
  }
  if (args.json) {
    std::printf("%s\n", nlohmann::json{{"model", args.model}, {"device", exec.device().name()}, {"dtype", args.passes.dtype},
                                       {"passes", passes_json(passes.report)}, {"outputs", rows}}.dump(2).c_str());
  }
  return bad == 0 ? 0 : 1;
}

int throughput(model::Executor& exec, runtime::Stream& stream, const RunArgs& args, const PassRun& passes) {
  const model::Graph& g = exec.graph();
  const auto inputs = random_inputs(stream, g);
  const std::int64_t batch = g.inputs.empty() ? 1 : std::max<std::int64_t>(1, g.value(g.inputs[0]).shape.empty() ? 1 : g.value(g.inputs[0]).shape[0]);
  const bool progress = !args.json && ::isatty(STDERR_FILENO);
  // The first iteration of the process: it tunes each layer's problem on a find-db miss, so its time
  // and its tuned/hit counts say what a new process pays before the steady state.
  model::RunReport first;
  double first_ms = 0;
  for (int i = 0; i < args.warmup; ++i) {
    const auto start = std::chrono::steady_clock::now();
    exec.run(stream, inputs, {}, i == 0 ? &first : nullptr);
    if (i == 0) first_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  }
  std::vector<double> ms;
  model::RunReport report;
  for (int i = 0; i < args.iterations; ++i) {
    const auto start = std::chrono::steady_clock::now();
    // In graph mode the last iteration's report: with --warmup 0 the first runs eagerly.
    exec.run(stream, inputs, {}, i == (args.graph ? args.iterations - 1 : 0) ? &report : nullptr);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    if (progress) std::fprintf(stderr, "\r[%d/%d] %.3f ms", i + 1, args.iterations, ms.back());
  }
  if (progress) std::fprintf(stderr, "\n");
  std::vector<double> sorted = ms;
  std::sort(sorted.begin(), sorted.end());
  const double med = median(ms);
  const double p90 = sorted[std::min(sorted.size() - 1, static_cast<std::size_t>(std::ceil(0.9 * sorted.size())) - 1)];
  model::RunReport layers;
  if (args.verbose) exec.run(stream, inputs, {.time_layers = true}, &layers);
  if (args.json) {
    nlohmann::json j = {{"model", args.model}, {"device", exec.device().name()}, {"batch", batch},
                        {"iterations", args.iterations}, {"median_ms", med}, {"p90_ms", p90},
                        {"images_per_s", batch * 1000.0 / med}, {"peak_bytes", report.peak_bytes},
                        {"dtype", args.passes.dtype}, {"passes", passes_json(passes.report)},
                        {"mode", model::to_string(report.mode)}, {"graph_nodes", report.graph_nodes},
                        {"first_iteration_ms", first_ms}, {"first_iteration_tuned", first.tuned},
                        {"first_iteration_hits", first.hits}};
    if (args.verbose) {
      nlohmann::json l = nlohmann::json::array();
      for (const auto& t : layers.layers) {
        l.push_back({{"node", t.node}, {"op", t.op_type}, {"solver", t.solver}, {"source", t.source}, {"tuner_hit", t.tuner_hit}, {"ms", t.ms}});
      }
      j["layers"] = l;
    }
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  const std::string mode = report.mode == model::RunMode::graph_replay
                               ? ", graph replay of " + std::to_string(report.graph_nodes) + " nodes"
                               : "";
  std::printf("%s on %s, batch %lld: median %.3f ms, p90 %.3f ms per iteration (%d iterations after %d warm-up), "
              "%.1f images/s, peak memory %s%s\n",
              (args.model.empty() ? args.zoo : args.model).c_str(), exec.device().name().c_str(), static_cast<long long>(batch), med, p90, args.iterations,
              args.warmup, batch * 1000.0 / med, format_bytes(report.peak_bytes).c_str(), mode.c_str());
  if (args.verbose) {
    Table table({"node", "op", "solver", "chosen by", "ms"});
    for (const auto& t : layers.layers) table.add({t.node, t.op_type, t.solver.empty() ? "-" : t.solver, t.source, fixed(t.ms, 4)});
    table.print();
  }
  return 0;
}

int run_model(const RunArgs& args, const CLI::App& cmd) {
  if (args.check && args.inputs.empty()) throw Error(Status::invalid_argument, "--check needs --inputs DIR (ONNX test data)");
  if (!args.inputs.empty() && !args.check) throw Error(Status::invalid_argument, "--inputs needs --check: the given inputs are compared with their outputs");
  if (args.model.empty() == args.zoo.empty()) {
    throw Error(Status::invalid_argument, "give a model file or --model NAME, not " + std::string(args.model.empty() ? "neither" : "both"));
  }
  if (!args.zoo.empty() && args.check) throw Error(Status::invalid_argument, "--check needs an ONNX model file with test data");
  model::OnnxImportOptions import;
  if (cmd.count("--batch") > 0) import.batch = args.batch;
  const runtime::Device device = args.device.empty() ? runtime::default_device() : runtime::device(args.device);
  PassRun passes;
  passes.options = pass_options(args.passes, device);
  model::Graph graph = args.zoo.empty() ? model::import_onnx(args.model, import)
                                        : model::build_model(args.zoo, import.batch.value_or(1), args.size);
  passes.report = model::run_passes(graph, passes.options);
  if (args.verbose && !args.json) print_passes(passes.report);
  model::Executor exec(std::move(graph), device, model::ExecutorOptions{.capture = args.graph});
  runtime::Stream stream(device);
  return args.check ? check_against(exec, stream, args, passes) : throughput(exec, stream, args, passes);
}

const bool run_model_registered = register_command([](CLI::App& root) {
  auto args = std::make_shared<RunArgs>();
  CLI::App* cmd = root.add_subcommand("run", "Run an ONNX model: check it against test data, or time it on random inputs");
  cmd->add_option("model", args->model, "the .onnx file");
  cmd->add_option("--model", args->zoo, "a network built in C++ instead of a file: resnet18, resnet50, mobilenet_v2, tiny_cnn");
  cmd->add_option("--size", args->size, "image size of --model (default 224)")->check(integer_in(32, 4096));
  cmd->add_option("--inputs", args->inputs, "ONNX test-data folder with input_*.pb and output_*.pb (with --check)");
  cmd->add_flag("--check", args->check, "compare the outputs with output_*.pb; exit 1 on a mismatch");
  cmd->add_option("--device", args->device, "cpu, cuda:0, hip:0 (default GALLEY_DEVICE, else the first GPU)");
  cmd->add_option("--batch", args->batch, "batch size: replaces every input's first dim")->check(integer_in(1, 1 << 20));
  cmd->add_option("--iters", args->iterations, "timed iterations (default 20)")->check(integer_in(1, kMaxRepeats));
  cmd->add_option("--warmup", args->warmup, "untimed iterations first (default 3)")->check(integer_in(0, kMaxRepeats));
  cmd->add_flag("--json", args->json, "machine-readable output");
  cmd->add_flag("--verbose", args->verbose, "the graph passes, and per layer: op, solver and time");
  cmd->add_flag("--graph", args->graph, "capture one whole run into a graph after the first and replay it (static shapes)");
  add_pass_flags(*cmd, args->passes);
  cmd->callback([args, cmd] { set_exit_code(run_model(*args, *cmd)); });
});

}  // namespace
}  // namespace galley::cli
