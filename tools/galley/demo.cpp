// `galley demo [--device D]`: the main job on the default device. It shows what the device is,
// proves a round trip of data through it, measures transfers, and shows the caching allocator
// at work. Each check prints ok or FAIL; any FAIL makes the exit code non-zero.
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
#include "galley/dnn/convolution.hpp"
#include "dnn/ref_conv_direct.hpp"
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

// A ResNet-50 bottleneck (layer 1, batch 1) through the public entry point: whatever solver the
// library picks for this device must agree with the reference.
void resnet_bottleneck(runtime::Stream& stream, Checklist& checks) {
  const dnn::ConvProblem layers[] = {
      {.n = 1, .c = 256, .h = 56, .w = 56, .k = 64, .y = 1, .x = 1},
      {.n = 1, .c = 64, .h = 56, .w = 56, .k = 64, .y = 3, .x = 3, .pad_h = 1, .pad_w = 1},
      {.n = 1, .c = 64, .h = 56, .w = 56, .k = 256, .y = 1, .x = 1},
  };
  std::uint64_t seed = 7;
  for (const auto& problem : layers) {
    const auto x_count = problem.x_desc().elements();
    const auto w_count = problem.w_desc().elements();
    const auto y_count = problem.y_desc().elements();
    const auto host_x = dnn::random_tensor(problem.dtype, x_count, seed++);
    const auto host_w = dnn::random_tensor(problem.dtype, w_count, seed++);
    auto x = memory::allocate(stream, problem.x_desc().bytes());
    auto w = memory::allocate(stream, problem.w_desc().bytes());
    auto y = memory::allocate(stream, problem.y_desc().bytes());
    std::vector<std::byte> got(problem.y_desc().bytes()), want(problem.y_desc().bytes());
    runtime::SynchronizeOnExit stream_done(stream);  // before the host vectors above are freed
    memory::copy_from_host(stream, x, host_x.data(), host_x.size());
    memory::copy_from_host(stream, w, host_w.data(), host_w.size());
    const auto& solver = dnn::convolution_forward(stream, problem, x.data(), w.data(), y.data());  // warm-up
    runtime::Event start(stream.device()), stop(stream.device());
    constexpr int kRepeats = 5;
    start.record(stream);
    for (int i = 0; i < kRepeats; ++i) dnn::convolution_forward(stream, problem, x.data(), w.data(), y.data());
    stop.record(stream);
    stop.synchronize();
    const double ms = stop.elapsed_ms_since(start) / kRepeats;
    memory::copy_to_host(stream, got.data(), y, got.size());
    stream.synchronize();
    dnn::reference_conv_forward(problem, host_x.data(), host_w.data(), want.data());
    const auto cmp = dnn::compare_outputs(problem.dtype, got.data(), want.data(), y_count,
                                          dnn::conv_tolerance(problem.dtype));
    char detail[200];
    std::snprintf(detail, sizeof detail, "%s, %.3f ms, %.1f GFLOP/s, max rel err %.1e", std::string(solver.name()).c_str(),
                  ms, problem.flops() / ms / 1e6, cmp.max_rel_err);
    checks.report("conv " + problem.driver_flags().substr(0, 40) + "... matches the reference", cmp.passed, detail);
  }
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
  resnet_bottleneck(stream, checks);
  bad_input_is_an_error(stream, checks);
  std::printf("%s\n", checks.failures() == 0 ? "demo: all checks passed" : "demo: some checks FAILED");
  return checks.failures() == 0 ? 0 : 1;
}

const bool registered = register_command([](CLI::App& root) {
  auto options = std::make_shared<DemoOptions>();
  CLI::App* cmd = root.add_subcommand("demo", "The main job on the default device (or --device)");
  cmd->add_option("--device", options->device, "Device to use (cpu, cuda:0, hip:0); default: GALLEY_DEVICE, else first GPU, else cpu");
  cmd->callback([options] { set_exit_code(run_demo(*options)); });
});

}  // namespace
}  // namespace galley::cli
