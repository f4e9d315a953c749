#include "backends/cuda/runtime_device.hpp"

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "backends/cuda/runtime_check.hpp"
#include "backends/cuda/runtime_staging.hpp"
#include "backends/cuda/runtime_stream.hpp"
#include "galley/core/log.hpp"
#include "galley/core/units.hpp"

#ifndef GALLEY_GPU_ARCHS
#error "the build must define GALLEY_GPU_ARCHS, e.g. \"sm_80,sm_90\""
#endif

namespace galley::backends::GALLEY_GPU_NS {

namespace {

std::string join(const std::vector<std::string>& items, const char* separator) {
  std::string text;
  for (const auto& item : items) text += (text.empty() ? "" : separator) + item;
  return text;
}

int attribute(cudaDeviceAttr which, int device) {
  int value = 0;
  // Clocks are informational: a runtime that lacks an attribute leaves 0 ("unknown").
  if (cudaDeviceGetAttribute(&value, which, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return value;
}

std::string version_text(cudaError_t (*get)(int*)) {
  int version = 0;
  if (get(&version) != cudaSuccess) {
    (void)cudaGetLastError();
    return "unknown";
  }
  return vendor::format_version(version);
}

// Every GpuDevice alive, so the exit handler can reach their staging pools.
std::mutex& live_mutex() {
  static std::mutex mutex;
  return mutex;
}
std::vector<GpuDevice*>& live_devices() {
  static std::vector<GpuDevice*> devices;
  return devices;
}

void release_staging_at_exit() {
  std::lock_guard lock(live_mutex());
  for (GpuDevice* device : live_devices()) device->release_staging();
}

}  // namespace

std::vector<std::string> built_for() {
  std::vector<std::string> arches;
  std::stringstream list(GALLEY_GPU_ARCHS);
  for (std::string arch; std::getline(list, arch, ',');) {
    if (!arch.empty()) arches.push_back(arch);
  }
  return arches;
}

// ---- GpuDevice ------------------------------------------------------------------------------

GpuDevice::GpuDevice(int index) : index_(index), name_(device_name(index)) {
  std::lock_guard lock(live_mutex());
  live_devices().push_back(this);
}

GpuDevice::~GpuDevice() {
  std::lock_guard lock(live_mutex());
  std::erase(live_devices(), this);
}

runtime::DeviceProperties GpuDevice::properties() {
  DeviceGuard guard(index_);
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, index_), "GetDeviceProperties", name_);
  runtime::DeviceProperties p;
  p.name = prop.name;
  p.backend = vendor::kBackend;
  p.arch = vendor::arch_name(prop);
  p.compute_units = prop.multiProcessorCount;
  const runtime::MemoryInfo memory = memory_info();
  p.memory_total = memory.total;
  p.memory_free = memory.free;
  p.clock_mhz = attribute(cudaDevAttrClockRate, index_) / 1000;  // kHz
  p.memory_clock_mhz = attribute(cudaDevAttrMemoryClockRate, index_) / 1000;
  p.l2_bytes = static_cast<std::size_t>(prop.l2CacheSize);
  p.driver_version = version_text(cudaDriverGetVersion);
  if (const std::string detail = vendor::driver_detail(); !detail.empty())
    p.driver_version += " (" + detail + ")";
  p.runtime_version = version_text(cudaRuntimeGetVersion);
  p.built_for = built_for();
  return p;
}

runtime::MemoryInfo GpuDevice::memory_info() {
  DeviceGuard guard(index_);
  runtime::MemoryInfo info;
  check(cudaMemGetInfo(&info.free, &info.total), "MemGetInfo", name_);
  return info;
}

void* GpuDevice::raw_alloc(std::size_t bytes) {
  DeviceGuard guard(index_);
  void* ptr = nullptr;
  check(cudaMalloc(&ptr, bytes), "Malloc",
        name_ + ", " + std::to_string(bytes) + " bytes (" + format_bytes(bytes) + ")");
  return ptr;
}

void GpuDevice::raw_free(void* ptr) noexcept {
  if (ptr == nullptr) return;
  const cudaError_t error = cudaFree(ptr);
  // At process exit the runtime may already be unloaded; nothing is left to free then.
  if (error != cudaSuccess && error != cudaErrorCudartUnloading) {
    log::error(std::string(vendor::kApi) + "Free (" + name_ + "): " + error_text(error));
  }
}

void* GpuDevice::pinned_alloc(std::size_t bytes) {
  DeviceGuard guard(index_);
  void* ptr = nullptr;
  // Portable: the buffer is pinned for every device of the process, not only this one.
  check(cudaHostAlloc(&ptr, bytes, cudaHostAllocPortable), "HostAlloc",
        name_ + ", " + std::to_string(bytes) + " bytes (" + format_bytes(bytes) + ") of pinned host memory");
  return ptr;
}

void GpuDevice::pinned_free(void* ptr) noexcept {
  if (ptr == nullptr) return;
  const cudaError_t error = cudaFreeHost(ptr);
  if (error != cudaSuccess && error != cudaErrorCudartUnloading) {
    log::error(std::string(vendor::kApi) + "FreeHost (" + name_ + "): " + error_text(error));
  }
}

std::unique_ptr<runtime::StreamImpl> GpuDevice::create_stream() { return std::make_unique<GpuStream>(*this); }

std::unique_ptr<runtime::EventImpl> GpuDevice::create_event(bool enable_timing) {
  return std::make_unique<GpuEvent>(index_, enable_timing);
}

void GpuDevice::synchronize() {
  DeviceGuard guard(index_);
  check(cudaDeviceSynchronize(), "DeviceSynchronize", name_);
}

StagingPool& GpuDevice::staging() {
  std::lock_guard lock(staging_mutex_);
  if (!staging_) {
    staging_ = std::make_unique<StagingPool>(index_);
    // The backend lives until static destruction, which runs after the vendor runtime's own exit
    // handler has destroyed the context. A handler registered now (after the runtime initialised)
    // runs before that one, so the pinned chunks are freed while they still can be, and memory
    // checkers see no leak.
    static std::once_flag once;
    std::call_once(once, [] { std::atexit(release_staging_at_exit); });
  }
  return *staging_;
}

void GpuDevice::release_staging() noexcept {
  std::lock_guard lock(staging_mutex_);
  staging_.reset();
}

std::vector<std::string> GpuDevice::readiness() {
  std::vector<std::string> lines;
  const auto verdict = [](bool ok, const std::string& why) {
    return ok ? std::string(": ok") : ": FAIL (" + why + ")";
  };

  // Runtime: a context can be made on the device (fails on a busy exclusive-mode or faulty GPU).
  int previous = 0;
  cudaError_t context = cudaGetDevice(&previous);
  if (context == cudaSuccess) context = cudaSetDevice(index_);
  if (context == cudaSuccess) context = cudaFree(nullptr);
  lines.push_back("context on " + name_ + verdict(context == cudaSuccess, error_text(context)));
  if (context != cudaSuccess) {
    (void)cudaGetLastError();
    return lines;
  }
  (void)cudaSetDevice(previous);
  DeviceGuard guard(index_);

  // Code: the plugin carries machine code this device runs; the probe kernel proves it.
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, index_), "GetDeviceProperties", name_);
  const std::string arch = vendor::arch_name(prop);
  const auto arches = built_for();
  bool covered = false;
  for (const auto& built : arches) covered = covered || vendor::arch_runs_on(built, arch);
  const cudaError_t probe = probe_kernel_image();
  if (probe != cudaSuccess) (void)cudaGetLastError();
  std::string why;
  if (!covered) why = "no machine code for " + arch + "; rebuild with it in the plugin's arch list";
  if (probe != cudaSuccess)
    why += (why.empty() ? "" : "; ") + std::string("probe kernel: ") + error_text(probe);
  lines.push_back("built for " + join(arches, ",") + ", device " + arch + verdict(why.empty(), why));

  // Driver: the runtime works with any driver of its major version or newer.
  int driver = 0;
  int runtime = 0;
  (void)cudaDriverGetVersion(&driver);
  (void)cudaRuntimeGetVersion(&runtime);
  const bool driver_ok = vendor::version_major(driver) >= vendor::version_major(runtime);
  lines.push_back(std::string(vendor::kRuntimeName) + " runtime " + vendor::format_version(runtime) +
                  " needs driver >= " + std::to_string(vendor::version_major(runtime)) + ".0, driver " +
                  vendor::format_version(driver) +
                  verdict(driver_ok, "update the " + std::string(vendor::kVendor) + " driver"));

  // Libraries the plugin links (cuBLAS, cuDNN...).
  for (auto& line : library_readiness()) lines.push_back(std::move(line));
  return lines;
}

// ---- GpuBackend -----------------------------------------------------------------------------

GpuBackend::GpuBackend() {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess || count <= 0) {
    int driver = 0;
    int runtime = 0;
    (void)cudaDriverGetVersion(&driver);
    (void)cudaRuntimeGetVersion(&runtime);
    reason_ = vendor::no_device_summary(error, driver, runtime) + " (" + vendor::kApi + "GetDeviceCount: " +
              (error != cudaSuccess ? error_text(error) : std::string("returned 0 devices")) + ")";
    (void)cudaGetLastError();
    return;
  }
  for (int i = 0; i < count; ++i) devices_.push_back(std::make_unique<GpuDevice>(i));
}

runtime::DeviceImpl& GpuBackend::device(int index) {
  if (index < 0 || index >= device_count()) {
    throw Error(Status::not_found, std::string(vendor::kBackend) + ":" + std::to_string(index) +
                                       " does not exist (" + std::to_string(device_count()) + " " +
                                       vendor::kBackend + " devices)");
  }
  return *devices_[static_cast<std::size_t>(index)];
}

}  // namespace galley::backends::GALLEY_GPU_NS
