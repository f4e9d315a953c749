#include "backends/cpu/cpu_backend.hpp"

#include <sys/sysinfo.h>
#include <sys/utsname.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "backends/cpu/conv_isa.hpp"
#include "backends/cpu/cpu_stream.hpp"
#include "backends/cpu/thread_pool.hpp"
#include "galley/core/error.hpp"
#include "galley/core/units.hpp"

namespace galley::backends::cpu {
namespace {

// Device memory on the cpu is host memory aligned for the widest vector loads.
constexpr std::size_t kAlignment = 64;

std::string cpu_model_name() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(" \t", colon + 1));
    }
  }
  return "CPU";
}

// MemAvailable is what a new allocation can get without swapping; sysinfo's freeram is lower.
runtime::MemoryInfo read_memory_info() {
  runtime::MemoryInfo info;
  struct sysinfo si {};
  if (sysinfo(&si) == 0) {
    info.total = static_cast<std::size_t>(si.totalram) * si.mem_unit;
    info.free = static_cast<std::size_t>(si.freeram) * si.mem_unit;
  }
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  std::size_t kib = 0;
  std::string unit;
  while (meminfo >> key >> kib >> unit) {
    if (key == "MemAvailable:") info.free = kib * 1024;
  }
  return info;
}

void* aligned_allocation(std::size_t bytes, const char* what) {
  if (bytes == 0) bytes = 1;
  if (bytes > (std::size_t{1} << 62)) {
    throw Error(Status::out_of_memory, std::string(what) + ": cannot allocate " + std::to_string(bytes) +
                                           " bytes on cpu (larger than any address space)");
  }
  const std::size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  void* ptr = std::aligned_alloc(kAlignment, rounded);
  if (ptr == nullptr) {
    const auto mem = read_memory_info();
    throw Error(Status::out_of_memory, std::string(what) + ": cannot allocate " + format_bytes(bytes) +
                                           " on cpu (available " + format_bytes(mem.free) + " of " +
                                           format_bytes(mem.total) + ")");
  }
  return ptr;
}

class CpuDevice final : public runtime::DeviceImpl {
 public:
  runtime::DeviceProperties properties() override {
    runtime::DeviceProperties p;
    p.name = cpu_model_name();
    p.backend = "cpu";
    p.arch = best_isa();
    // The find-db keys rows by arch: a process whose kernels are capped below what the CPU has
    // (GALLEY_CPU_ISA, set_cpu_isa_cap) must not reuse rows tuned without the cap, nor write over them.
    try {
      if (cpu_isa() < cpu_isa_supported()) p.arch += std::string(" kernels<=") + std::string(to_string(cpu_isa()));
    } catch (const Error&) {
      // A malformed GALLEY_CPU_ISA: reported, naming the value, by the first convolution.
    }
    p.compute_units = pool_size();
    const auto mem = read_memory_info();
    p.memory_total = mem.total;
    p.memory_free = mem.free;
    struct utsname uts {};
    if (uname(&uts) == 0) p.driver_version = std::string(uts.sysname) + " " + uts.release;
    p.runtime_version = "galley cpu";
    p.built_for = {"x86-64", "avx2, avx512 (runtime dispatch)"};
    // __builtin_cpu_supports needs literals, hence no loop.
    if (__builtin_cpu_supports("sse4.2")) p.isa_features.emplace_back("sse4.2");
    if (__builtin_cpu_supports("avx")) p.isa_features.emplace_back("avx");
    if (__builtin_cpu_supports("avx2")) p.isa_features.emplace_back("avx2");
    if (__builtin_cpu_supports("fma")) p.isa_features.emplace_back("fma");
    if (cpu_reports_f16c()) p.isa_features.emplace_back("f16c");
    if (__builtin_cpu_supports("avx512f")) p.isa_features.emplace_back("avx512f");
    return p;
  }
  runtime::MemoryInfo memory_info() override { return read_memory_info(); }
  void* raw_alloc(std::size_t bytes) override { return aligned_allocation(bytes, "raw_alloc"); }
  void raw_free(void* ptr) noexcept override { std::free(ptr); }
  void* pinned_alloc(std::size_t bytes) override { return aligned_allocation(bytes, "pinned_alloc"); }
  void pinned_free(void* ptr) noexcept override { std::free(ptr); }
  std::unique_ptr<runtime::StreamImpl> create_stream() override { return std::make_unique<CpuStream>(&streams_); }
  std::unique_ptr<runtime::EventImpl> create_event(bool) override { return std::make_unique<CpuEvent>(); }
  // Waits for every live stream, as cudaDeviceSynchronize does; the allocator's empty_cache() and
  // out-of-memory retry rely on it before handing memory back.
  void synchronize() override { streams_.wait_all_idle(); }
  std::vector<std::string> readiness() override {
    std::vector<std::string> lines;
    lines.push_back(std::string("cpu ISA ") + best_isa() + ", " + std::to_string(pool_size()) + " threads: ok");
    const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    lines.push_back(std::string("AVX2+FMA kernels: ") + (avx2 ? "ok" : "ok (not supported here; scalar paths used)"));
    return lines;
  }

 private:
  StreamSet streams_;
};

class CpuBackend final : public runtime::Backend {
 public:
  std::string name() const override { return "cpu"; }
  int device_count() override { return 1; }
  std::string unavailable_reason() override { return {}; }
  runtime::DeviceImpl& device(int index) override {
    if (index != 0) throw Error(Status::not_found, "cpu has one device (index 0), not " + std::to_string(index));
    return device_;
  }

 private:
  CpuDevice device_;
};

}  // namespace

const char* best_isa() {
  if (__builtin_cpu_supports("avx512f")) return "avx512f";
  if (__builtin_cpu_supports("avx2")) return "avx2";
  if (__builtin_cpu_supports("sse4.2")) return "sse4.2";
  return "x86-64";
}

std::unique_ptr<runtime::Backend> make_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace galley::backends::cpu
