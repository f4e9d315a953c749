// `galley bench transfer [--device D] [--sizes 64M,256M,1G] [--repeats N] [--json]`: copy bandwidth
// H2D and D2H from pageable and pinned host memory, and D2D. Each copy is timed on the host clock
// around copy + synchronize, so BW = bytes / (T_copy + T_sync) is what a caller waiting for its
// data sees; the figure is the median of the repeats after warm-up. On the cpu device the same run
// also times plain memcpy between pageable buffers and reports each copy's ratio to it.
// Every size ends with a round trip through all five paths whose bytes are compared.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "bench_stats.hpp"
#include "command.hpp"
#include "galley/core/error.hpp"
#include "galley/core/units.hpp"
#include "galley/runtime/device.hpp"
#include "galley/runtime/stream.hpp"
#include "runtime/backend.hpp"
#include "table.hpp"

namespace galley::cli {
namespace {

struct TransferArgs {
  std::string device;
  std::string sizes = "64M,256M,1G";
  int repeats = 10;
  int warmup = 2;
  bool json = false;
};

struct Timing {
  std::string copy;         // h2d, d2h, d2d, memcpy
  std::string host_memory;  // pageable, pinned, "" (d2d)
  std::size_t bytes = 0;
  double median_s = 0;
  double min_s = 0;
  double max_s = 0;
  int repeats = 0;
  double gbps() const { return static_cast<double>(bytes) / median_s / 1e9; }
};

struct SizeReport {
  std::size_t bytes = 0;
  std::string skipped;  // why, when the size did not fit
  std::vector<Timing> timings;
  bool verified = false;
};

// Device memory straight from the backend: this benchmark measures copies, not the allocator.
class DeviceMemory {
 public:
  DeviceMemory(const runtime::Device& device, std::size_t bytes)
      : device_(device), ptr_(device.impl().raw_alloc(bytes)) {}
  ~DeviceMemory() { device_.impl().raw_free(ptr_); }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  void* get() const { return ptr_; }

 private:
  runtime::Device device_;
  void* ptr_;
};

// Distinct, non-zero bytes, so a copy that moved nothing or the wrong range cannot pass.
void fill_pattern(void* data, std::size_t bytes, std::uint64_t seed) {
  auto* out = static_cast<unsigned char*>(data);
  std::uint64_t state = seed;
  std::size_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    state += 0x9E3779B97F4A7C15ull;  // splitmix64
    std::uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    std::memcpy(out + i, &z, 8);
  }
  for (; i < bytes; ++i) out[i] = static_cast<unsigned char>(i * 131 + 7);
}

Timing time_copy(const std::string& copy, const std::string& host_memory, std::size_t bytes,
                 const TransferArgs& args, const std::function<void()>& run_and_wait) {
  for (int i = 0; i < args.warmup; ++i) run_and_wait();
  std::vector<double> seconds;
  for (int i = 0; i < args.repeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    run_and_wait();
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(seconds.begin(), seconds.end());
  const std::size_t n = seconds.size();
  Timing t{copy, host_memory, bytes};
  t.median_s = n % 2 == 1 ? seconds[n / 2] : (seconds[n / 2 - 1] + seconds[n / 2]) / 2;
  t.min_s = seconds.front();
  t.max_s = seconds.back();
  t.repeats = args.repeats;
  return t;
}

SizeReport bench_size(const runtime::Device& device, runtime::Stream& stream, std::size_t bytes,
                      const TransferArgs& args) {
  SizeReport report;
  report.bytes = bytes;
  const auto memory = device.memory_info();
  // Two device buffers (plus the host buffers, which on cpu share the same memory).
  const std::size_t buffers = device.is_cpu() ? 6 : 2;
  if (bytes > memory.free / buffers) {
    report.skipped = "needs " + std::to_string(buffers) + " x " + format_bytes(bytes) + ", " +
                     format_bytes(memory.free) + " free";
    return report;
  }
  std::vector<unsigned char> pageable_src(bytes);
  std::vector<unsigned char> pageable_dst(bytes);
  runtime::PinnedBuffer pinned_src(device, bytes);
  runtime::PinnedBuffer pinned_dst(device, bytes);
  DeviceMemory a(device, bytes);
  DeviceMemory b(device, bytes);
  // Destroyed first: on every way out, an Error included, the stream is done with the buffers above.
  runtime::SynchronizeOnExit stream_done(stream);
  // Touch every page first: a first-touch page fault is not part of a copy's cost.
  fill_pattern(pageable_src.data(), bytes, 1);
  fill_pattern(pinned_src.data(), bytes, 2);
  std::memset(pageable_dst.data(), 0xA5, bytes);
  std::memset(pinned_dst.data(), 0xA5, bytes);
  stream.memset(a.get(), 0, bytes);
  stream.memset(b.get(), 0, bytes);
  stream.synchronize();

  const auto timed = [&](const std::string& copy, const std::string& host, const std::function<void()>& op) {
    report.timings.push_back(time_copy(copy, host, bytes, args, [&] {
      op();
      stream.synchronize();
    }));
  };
  timed("h2d", "pageable", [&] { stream.copy_h2d(a.get(), pageable_src.data(), bytes); });
  timed("h2d", "pinned", [&] { stream.copy_h2d(a.get(), pinned_src.data(), bytes); });
  timed("d2h", "pageable", [&] { stream.copy_d2h(pageable_dst.data(), a.get(), bytes); });
  timed("d2h", "pinned", [&] { stream.copy_d2h(pinned_dst.data(), a.get(), bytes); });
  timed("d2d", "", [&] { stream.copy_d2d(b.get(), a.get(), bytes); });
  if (device.is_cpu()) {
    report.timings.push_back(time_copy("memcpy", "pageable", bytes, args, [&] {
      std::memcpy(pageable_dst.data(), pageable_src.data(), bytes);
    }));
  }

  // Round trip through every path: pageable -> a -> b -> pinned, pinned -> a -> pageable.
  std::memset(pinned_dst.data(), 0x5A, bytes);
  stream.copy_h2d(a.get(), pageable_src.data(), bytes);
  stream.copy_d2d(b.get(), a.get(), bytes);
  stream.copy_d2h(pinned_dst.data(), b.get(), bytes);
  stream.synchronize();
  bool ok = std::memcmp(pinned_dst.data(), pageable_src.data(), bytes) == 0;
  std::memset(pageable_dst.data(), 0x5A, bytes);
  stream.copy_h2d(a.get(), pinned_src.data(), bytes);
  stream.copy_d2h(pageable_dst.data(), a.get(), bytes);
  stream.synchronize();
  ok = ok && std::memcmp(pageable_dst.data(), pinned_src.data(), bytes) == 0;
  report.verified = ok;
  return report;
}

const Timing* find(const SizeReport& r, const std::string& copy, const std::string& host) {
  for (const auto& t : r.timings) {
    if (t.copy == copy && t.host_memory == host) return &t;
  }
  return nullptr;
}

int run_transfer(const TransferArgs& args) {
  if (args.repeats < 1)
    throw Error(Status::invalid_argument, "--repeats must be >= 1, got " + std::to_string(args.repeats));
  if (args.warmup < 0)
    throw Error(Status::invalid_argument, "--warmup must be >= 0, got " + std::to_string(args.warmup));
  const auto sizes = parse_size_list(args.sizes);
  const runtime::Device device =
      args.device.empty() ? runtime::default_device() : runtime::device(args.device);
  const auto props = device.properties();
  runtime::Stream stream(device);
  std::vector<SizeReport> reports;
  for (std::size_t bytes : sizes) reports.push_back(bench_size(device, stream, bytes, args));
  bool all_verified = true;
  for (const auto& r : reports) all_verified = all_verified && (r.skipped.empty() ? r.verified : true);

  if (args.json) {
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& r : reports) {
      nlohmann::json row = {{"bytes", r.bytes}, {"size", format_bytes(r.bytes)}};
      if (!r.skipped.empty()) {
        row["skipped"] = r.skipped;
        rows.push_back(row);
        continue;
      }
      row["verified"] = r.verified;
      const Timing* memcpy_timing = find(r, "memcpy", "pageable");
      nlohmann::json copies = nlohmann::json::array();
      for (const auto& t : r.timings) {
        nlohmann::json c = {
            {"copy", t.copy},   {"host_memory", t.host_memory}, {"median_s", t.median_s}, {"min_s", t.min_s},
            {"max_s", t.max_s}, {"repeats", t.repeats},         {"GBps", t.gbps()}};
        if (t.copy == "d2d") c["read_write_GBps"] = 2 * t.gbps();
        if (memcpy_timing != nullptr && t.copy != "memcpy") c["vs_memcpy"] = t.gbps() / memcpy_timing->gbps();
        copies.push_back(c);
      }
      row["copies"] = copies;
      rows.push_back(row);
    }
    const nlohmann::json out = {
        {"device", device.name()},
        {"model", props.name},
        {"arch", props.arch},
        {"method",
         "BW = bytes / (T_copy + T_sync): host steady_clock around copy + stream.synchronize(); median of "
         "repeats after warm-up; GB = 1e9 bytes"},
        {"warmup", args.warmup},
        {"repeats", args.repeats},
        {"verified", all_verified},
        {"sizes", rows}};
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    std::printf(
        "galley bench transfer on %s (%s, %s): median of %d after %d warm-up, BW = bytes / (T_copy + "
        "T_sync)\n",
        device.name().c_str(), props.name.c_str(), props.arch.c_str(), args.repeats, args.warmup);
    const bool cpu = device.is_cpu();
    std::vector<std::string> headers = {"size", "copy", "host memory", "median ms", "GB/s", "min-max GB/s"};
    if (cpu) headers.push_back("vs memcpy");
    Table table(headers);
    for (const auto& r : reports) {
      if (!r.skipped.empty()) {
        std::vector<std::string> row = {format_bytes(r.bytes), "-", "-", "-", "-", "skipped: " + r.skipped};
        if (cpu) row.push_back("");
        table.add(row);
        continue;
      }
      const Timing* memcpy_timing = find(r, "memcpy", "pageable");
      for (const auto& t : r.timings) {
        std::string gbps = fixed(t.gbps(), 1);
        if (t.copy == "d2d") gbps += " (" + fixed(2 * t.gbps(), 1) + " r+w)";
        std::vector<std::string> row = {format_bytes(r.bytes),
                                        t.copy,
                                        t.host_memory.empty() ? "-" : t.host_memory,
                                        fixed(t.median_s * 1e3, 3),
                                        gbps,
                                        fixed(static_cast<double>(t.bytes) / t.max_s / 1e9, 1) + "-" +
                                            fixed(static_cast<double>(t.bytes) / t.min_s / 1e9, 1)};
        if (cpu)
          row.push_back(memcpy_timing != nullptr && t.copy != "memcpy"
                            ? fixed(t.gbps() / memcpy_timing->gbps(), 2) + "x"
                            : "");
        table.add(row);
      }
    }
    table.print();
    std::printf("round trips through all paths: %s\n", all_verified ? "bit-exact" : "MISMATCH");
  }
  return all_verified ? 0 : 1;
}

const bool bench_transfer_registered = register_command([](CLI::App& root) {
  auto args = std::make_shared<TransferArgs>();
  CLI::App* cmd = bench_group(root).add_subcommand(
      "transfer", "Copy bandwidth: H2D/D2H from pageable and pinned memory, D2D (and memcpy on cpu)");
  cmd->add_option("--device", args->device,
                  "device (cpu, cuda:0, hip:0); default GALLEY_DEVICE or the first GPU");
  cmd->add_option("--sizes", args->sizes, "comma list of copy sizes (64M, 256M, 1G)")->capture_default_str();
  cmd->add_option("--repeats", args->repeats, "timed repeats per copy; the median is reported")
      ->capture_default_str();
  cmd->add_option("--warmup", args->warmup, "untimed runs before the repeats")->capture_default_str();
  cmd->add_flag("--json", args->json, "JSON for machines");
  cmd->callback([args] { set_exit_code(run_transfer(*args)); });
});

}  // namespace
}  // namespace galley::cli
