// `galley bench alloc [--device D] [--sizes 4K,1M,64M,1G] [--json]`: the caching allocator's hit
// latency (memory::allocate + free of one size in a loop, what callers pay), the backend's raw
// alloc+free latency (a cache miss), their ratio and the hit rate, per size. Medians of repeats.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench_stats.hpp"
#include "command.hpp"
#include "galley/core/error.hpp"
#include "galley/core/units.hpp"
#include "galley/runtime/device.hpp"
#include "galley/runtime/stream.hpp"
#include "memory/caching_allocator.hpp"
#include "strict_options.hpp"
#include "table.hpp"

namespace galley::cli {
namespace {

struct AllocBenchArgs {
  std::string device;
  std::string sizes = "4K,1M,64M,1G";
  int repeats = 15;
  bool json = false;
};

struct SizeResult {
  std::size_t bytes = 0;
  bool skipped = false;
  std::string note;
  double hit_us = 0;   // median over repeats of (alloc + free) / iteration
  double miss_us = 0;  // median over repeats of raw_alloc + raw_free
  double hit_rate = 0;
  int hit_iterations = 0;
  int miss_iterations = 0;
};

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

SizeResult bench_size(const runtime::Device& device, runtime::Stream& stream, std::size_t bytes,
                      int repeats) {
  SizeResult r;
  r.bytes = bytes;
  const auto free_bytes = device.memory_info().free;
  if (bytes > free_bytes) {
    r.skipped = true;
    r.note = "skipped: more than the " + format_bytes(free_bytes) + " free";
    return r;
  }
  auto& allocator = memory::allocator_for(device);
  const auto before = allocator.stats();

  // Hit path: the first allocation may miss (warm-up); every later one is served from the cache.
  r.hit_iterations = 20000;
  { memory::Buffer warm = memory::allocate(stream, bytes); }
  std::vector<double> hit;
  for (int rep = 0; rep < repeats; ++rep) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < r.hit_iterations; ++i) {
      memory::Buffer b = memory::allocate(stream, bytes);
    }
    hit.push_back(seconds_since(start) * 1e6 / r.hit_iterations);
  }
  r.hit_us = median(hit);
  const auto after = allocator.stats();
  const auto hits = after.cache_hits - before.cache_hits;
  const auto misses = after.cache_misses - before.cache_misses;
  r.hit_rate = hits + misses == 0 ? 0.0 : static_cast<double>(hits) / static_cast<double>(hits + misses);
  // Give the cached segment back so the raw measurement sees the same free memory.
  stream.synchronize();
  allocator.empty_cache();

  // Miss path: what the allocator avoids, the backend's own alloc + free.
  r.miss_iterations = bytes >= (std::size_t{64} << 20) ? 5 : 200;
  auto& impl = device.impl();
  impl.raw_free(impl.raw_alloc(bytes));  // warm-up: first-touch costs of the backend
  std::vector<double> miss;
  const int miss_repeats = std::max(3, repeats / 2);
  for (int rep = 0; rep < miss_repeats; ++rep) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < r.miss_iterations; ++i) impl.raw_free(impl.raw_alloc(bytes));
    miss.push_back(seconds_since(start) * 1e6 / r.miss_iterations);
  }
  r.miss_us = median(miss);
  return r;
}

int run_alloc_bench(const AllocBenchArgs& args) {
  if (args.repeats < 1)
    throw Error(Status::invalid_argument, "--repeats must be >= 1, not " + std::to_string(args.repeats));
  const auto sizes = parse_size_list(args.sizes);
  const runtime::Device device =
      args.device.empty() ? runtime::default_device() : runtime::device(args.device);
  runtime::Stream stream(device);
  const auto& config = memory::allocator_for(device).config();

  std::vector<SizeResult> results;
  for (const auto bytes : sizes) results.push_back(bench_size(device, stream, bytes, args.repeats));

  if (args.json) {
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& r : results) {
      nlohmann::json row = {{"bytes", r.bytes}, {"size", format_bytes(r.bytes)}, {"skipped", r.skipped}};
      if (r.skipped) {
        row["note"] = r.note;
      } else {
        row["hit_us"] = r.hit_us;
        row["miss_us"] = r.miss_us;
        row["speedup"] = r.miss_us / r.hit_us;
        row["hit_rate"] = r.hit_rate;
        row["hit_iterations"] = r.hit_iterations;
        row["miss_iterations"] = r.miss_iterations;
      }
      rows.push_back(std::move(row));
    }
    const nlohmann::json out = {
        {"device", device.name()},   {"model", device.properties().name},
        {"caching", config.caching}, {"alloc_conf", config.to_string()},
        {"repeats", args.repeats},   {"statistic", "median over repeats of the mean per alloc+free"},
        {"results", std::move(rows)}};
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  std::printf("allocator on %s (%s)%s: median of %d repeats, host time per alloc+free\n",
              device.name().c_str(), device.properties().name.c_str(),
              config.caching ? "" : " with GALLEY_NO_CACHING=1", args.repeats);
  Table table({"size", "hit (us)", "raw alloc+free (us)", "speedup", "hit rate", "note"});
  for (const auto& r : results) {
    if (r.skipped) {
      table.add({format_bytes(r.bytes), "-", "-", "-", "-", r.note});
    } else {
      table.add({format_bytes(r.bytes), fixed(r.hit_us, 3), fixed(r.miss_us, 2),
                 fixed(r.miss_us / r.hit_us, r.miss_us / r.hit_us < 10 ? 1 : 0) + "x",
                 fixed(100 * r.hit_rate, 2) + "%", ""});
    }
  }
  table.print();
  return 0;
}

const bool bench_alloc_registered = register_command([](CLI::App& root) {
  auto args = std::make_shared<AllocBenchArgs>();
  CLI::App* cmd = bench_group(root).add_subcommand(
      "alloc", "Caching allocator: hit latency vs the backend's raw alloc+free, hit rate");
  cmd->add_option("--device", args->device,
                  "device (cpu, cuda:0, hip:0); default GALLEY_DEVICE or the first GPU");
  cmd->add_option("--sizes", args->sizes, "comma list of sizes (4K, 1M, 64M, 1G)")->capture_default_str();
  cmd->add_option("--repeats", args->repeats, "timed repeats; the median is reported")
      ->capture_default_str()
      ->check(integer_in(1, kMaxRepeats));
  cmd->add_flag("--json", args->json, "JSON for machines");
  cmd->callback([args] { set_exit_code(run_alloc_bench(*args)); });
});

}  // namespace
}  // namespace galley::cli
