// `galley demo [--device D]`: the main job on the default device. It shows what the device is,
// proves a round trip of data through it, measures transfers, shows the caching allocator at
// work, and runs a network (tuned once, remembered in the find-db, checked against the reference). Each check prints ok or FAIL; any FAIL makes the exit code non-zero.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "command.hpp"
#include "galley/core/error.hpp"
#include "galley/core/units.hpp"
#include "galley/memory/buffer.hpp"
#include "memory/caching_allocator.hpp"
#include "galley/model/builder.hpp"
#include "galley/model/executor.hpp"
#include "galley/tensor.hpp"
#include "dnn/tensor_data.hpp"
#include "galley/runtime/device.hpp"
#include "galley/runtime/stream.hpp"
#include "runtime/backend.hpp"

namespace galley::cli {
namespace {

struct DemoOptions {
  std::string device;
};

class Checklist {
 public:
  void report(const std::string& what, bool ok, const std::string& detail = "") {
    std::printf("  [%s] %s%s%s\n", ok ? " ok " : "FAIL", what.c_str(), detail.empty() ? "" : ": ", detail.c_str());
    failures_ += ok ? 0 : 1;
  }
  int failures() const { return failures_; }

 private:
  int failures_ = 0;
};

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Median-free quick figure: the demo shows orders of magnitude; `galley bench transfer` measures.
std::string bandwidth(std::size_t bytes, double seconds) {
  char text[64];
  std::snprintf(text, sizeof text, "%.1f GB/s", static_cast<double>(bytes) / seconds / 1e9);
  return text;
}

void round_trip(runtime::Stream& stream, Checklist& checks) {
  constexpr std::size_t kBytes = std::size_t{64} << 20;
  std::vector<std::uint32_t> host(kBytes / 4), back(kBytes / 4, 0);
  std::mt19937 rng(2026);
  for (auto& v : host) v = rng();
  auto a = memory::allocate(stream, kBytes);
  auto b = memory::allocate(stream, kBytes);
  // Destroyed before the host vectors: on every way out, an Error included, the stream is done
  // with them (the buffers are stream-ordered and safe either way).
  runtime::SynchronizeOnExit stream_done(stream);
  // One untimed pass first: fresh memory pays page faults (cpu) or lazy mapping (GPU) once.
  memory::copy_from_host(stream, a, back.data(), kBytes);
  memory::copy(stream, b, a, kBytes);
  memory::copy_to_host(stream, back.data(), b, kBytes);
  stream.synchronize();

  auto start = std::chrono::steady_clock::now();
  memory::copy_from_host(stream, a, host.data(), kBytes);
  stream.synchronize();
  const double h2d = seconds_since(start);
  start = std::chrono::steady_clock::now();
  memory::copy(stream, b, a, kBytes);
  stream.synchronize();
  const double d2d = seconds_since(start);
  start = std::chrono::steady_clock::now();
  memory::copy_to_host(stream, back.data(), b, kBytes);
  stream.synchronize();
  const double d2h = seconds_since(start);
  checks.report("64 MiB host -> device -> device -> host round trip is bit-exact",
                std::memcmp(host.data(), back.data(), kBytes) == 0,
                "H2D " + bandwidth(kBytes, h2d) + ", D2D " + bandwidth(2 * kBytes, d2d) + " (read+write), D2H " +
                    bandwidth(kBytes, d2h));

  runtime::PinnedBuffer pinned(stream.device(), kBytes);
  std::memcpy(pinned.data(), host.data(), kBytes);
  memory::memset(stream, a, 0, kBytes);
  start = std::chrono::steady_clock::now();
  memory::copy_from_host(stream, a, pinned.data(), kBytes);
  stream.synchronize();
  const double pinned_h2d = seconds_since(start);
  std::fill(back.begin(), back.end(), 0u);
  memory::copy_to_host(stream, back.data(), a, kBytes);
  stream.synchronize();
  checks.report("pinned host -> device copy is bit-exact", std::memcmp(host.data(), back.data(), kBytes) == 0,
                "H2D " + bandwidth(kBytes, pinned_h2d));
}

void allocator_at_work(runtime::Stream& stream, Checklist& checks) {
  auto& allocator = memory::allocator_for(stream.device());
  const auto before = allocator.stats();
  // A training-loop-like pattern: the same sizes every iteration, so all but the first are hits.
  const std::size_t sizes[] = {4096, 1 << 20, 3 << 20, 16 << 20, 100 << 10};
  for (int iteration = 0; iteration < 50; ++iteration) {
    std::vector<memory::Buffer> live;
    for (std::size_t s : sizes) live.push_back(memory::allocate(stream, s));
  }
  stream.synchronize();
  const auto after = allocator.stats();
  const auto hits = after.cache_hits - before.cache_hits;
  const auto misses = after.cache_misses - before.cache_misses;
  const double rate = static_cast<double>(hits) / static_cast<double>(hits + misses);
  char detail[160];
  std::snprintf(detail, sizeof detail, "%llu hits, %llu misses, hit rate %.1f%%, %s reserved",
                static_cast<unsigned long long>(hits), static_cast<unsigned long long>(misses), rate * 100.0,
                format_bytes(static_cast<std::size_t>(after.reserved_bytes.all.current)).c_str());
  checks.report("caching allocator reuses memory across iterations", rate > 0.9, detail);
  checks.report("no allocation outlives its buffer",
                after.allocated_bytes.all.current == before.allocated_bytes.all.current);
  allocator.empty_cache();
}

// A whole network through the model layer: ResNet-18 on a GPU, a small CNN on the CPU (which the
// reference path checks in seconds). Its first run tunes each layer's problem (or finds it in the
// find-db, as a second `galley demo` does); then it is timed, and its output compared with the same
// graph run by the reference solvers on the CPU.
void network(runtime::Stream& stream, Checklist& checks) {
  const runtime::Device& device = stream.device();
  const bool gpu = !device.is_cpu();
  const std::string name = gpu ? "resnet18" : "tiny_cnn";
  const std::int64_t batch = gpu ? 8 : 2, size = gpu ? 224 : 64;
  model::Executor exec(model::build_model(name, batch, size), device);
  const model::Graph& g = exec.graph();
  const model::ValueInfo& in = g.value(g.inputs[0]);
  const auto elements = model::element_count(in.shape);
  const auto host_input = dnn::random_tensor(DType::f32, elements, 11);
  Tensor x = Tensor::empty(stream, dnn::TensorDesc::contiguous(DType::f32, in.shape.data(), static_cast<int>(in.shape.size())));
  x.copy_from_host(stream, host_input.data(), host_input.size());

  const bool tty = ::isatty(STDOUT_FILENO);
  model::RunOptions first;
  first.on_node = [&](std::size_t done, std::size_t total, const model::Node& node) {
    if (tty) std::printf("\r  tuning %s [%zu/%zu] %-40s", name.c_str(), done, total, node.name.substr(0, 40).c_str());
    if (tty && done == total) std::printf("\r%100s\r", "");
    std::fflush(stdout);
  };
  model::RunReport report;
  auto start = std::chrono::steady_clock::now();
  auto outputs = exec.run(stream, {{g.inputs[0], x}}, first, &report);
  const double first_s = seconds_since(start);
  char detail[256];
  std::snprintf(detail, sizeof detail, "%zu layers: %d tuned now, %d from the find-db or this process's cache, first run %.2f s",
                report.layers.size(), report.tuned, report.hits, first_s);
  checks.report("built " + name + " (batch " + std::to_string(batch) + ", " + std::to_string(size) + "x" + std::to_string(size) +
                    ") and ran it once",
                true, detail);

  auto& allocator = memory::allocator_for(device);
  const auto before = allocator.stats();
  constexpr int kRuns = 5;
  std::vector<double> ms;
  model::RunReport steady;
  for (int i = 0; i < kRuns; ++i) {
    start = std::chrono::steady_clock::now();
    outputs = exec.run(stream, {{g.inputs[0], x}}, {}, i == 0 ? &steady : nullptr);
    ms.push_back(seconds_since(start) * 1e3);
  }
  std::sort(ms.begin(), ms.end());
  const auto after = allocator.stats();
  const auto hits = after.cache_hits - before.cache_hits, misses = after.cache_misses - before.cache_misses;
  std::snprintf(detail, sizeof detail, "median %.2f ms per batch, %.1f images/s, peak memory %s, allocator hit rate %.1f%%",
                ms[kRuns / 2], static_cast<double>(batch) * 1e3 / ms[kRuns / 2], format_bytes(steady.peak_bytes).c_str(),
                hits + misses == 0 ? 100.0 : 100.0 * static_cast<double>(hits) / static_cast<double>(hits + misses));
  checks.report("later runs reuse every tuned choice (no tuning)", steady.tuned == 0, detail);

  // The same graph and input through the reference solvers on the CPU.
  const runtime::Device cpu = runtime::device("cpu");
  runtime::Stream cpu_stream(cpu);
  model::Executor reference(model::build_model(name, batch, size), cpu, {.reference = true});
  Tensor cx = Tensor::empty(cpu_stream, x.desc());
  cx.copy_from_host(cpu_stream, host_input.data(), host_input.size());
  const auto want_t = reference.run(cpu_stream, {{g.inputs[0], cx}});
  const auto got = outputs.at(g.outputs[0]).to_host<float>(stream);
  const auto want = want_t.at(g.outputs[0]).to_host<float>(cpu_stream);
  const auto cmp = dnn::compare_outputs(DType::f32, got.data(), want.data(), static_cast<std::int64_t>(got.size()), 1e-3);
  checks.report("its output matches the reference path", cmp.passed, cmp.summary);
}

void bad_input_is_an_error(runtime::Stream& stream, Checklist& checks) {
  try {
    // 1 PiB: a well-formed request no device of today can satisfy.
    auto huge = memory::allocate(stream, std::size_t{1} << 50);
    checks.report("an impossible allocation is refused", false, "it succeeded");
  } catch (const Error& e) {
    checks.report("an impossible allocation is refused with out_of_memory", e.status() == Status::out_of_memory,
                  std::string(e.what()).substr(0, 90) + "...");
  }
}

int run_demo(const DemoOptions& options) {
  const runtime::Device device = options.device.empty() ? runtime::default_device() : runtime::device(options.device);
  const auto p = device.properties();
  std::printf("galley demo on %s: %s (%s, %d compute units, %s)\n", device.name().c_str(), p.name.c_str(),
              p.arch.c_str(), p.compute_units, format_bytes(p.memory_total).c_str());
  Checklist checks;
  for (const auto& line : device.impl().readiness()) {
    const auto verdict = line.rfind(": ");
    checks.report(line.substr(0, verdict), line.find(": FAIL") == std::string::npos,
                  line.find(": FAIL") == std::string::npos ? "" : line.substr(verdict + 2));
  }
  runtime::Stream stream(device);
  round_trip(stream, checks);
  allocator_at_work(stream, checks);
  network(stream, checks);
  bad_input_is_an_error(stream, checks);
  std::printf("%s\n", checks.failures() == 0 ? "demo: all checks passed" : "demo: some checks FAILED");
  return checks.failures() == 0 ? 0 : 1;
}

const bool demo_registered = register_command([](CLI::App& root) {
  auto options = std::make_shared<DemoOptions>();
  CLI::App* cmd = root.add_subcommand("demo", "The main job on the default device (or --device)");
  cmd->add_option("--device", options->device, "Device to use (cpu, cuda:0, hip:0); default: GALLEY_DEVICE, else first GPU, else cpu");
  cmd->callback([options] { set_exit_code(run_demo(*options)); });
});

}  // namespace
}  // namespace galley::cli
