// The cuda/hip Backend and its devices (the same source serves both plugins).
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backends/gpu/vendor.hpp"
#include "runtime/backend.hpp"

namespace galley::backends::GALLEY_GPU_NS {

class StagingPool;

class GpuDevice final : public runtime::DeviceImpl {
 public:
  explicit GpuDevice(int index);
  ~GpuDevice() override;

  runtime::DeviceProperties properties() override;
  runtime::MemoryInfo memory_info() override;
  void* raw_alloc(std::size_t bytes) override;
  void raw_free(void* ptr) noexcept override;
  void* pinned_alloc(std::size_t bytes) override;
  void pinned_free(void* ptr) noexcept override;
  std::unique_ptr<runtime::StreamImpl> create_stream() override;
  std::unique_ptr<runtime::EventImpl> create_event(bool enable_timing) override;
  void synchronize() override;
  std::vector<std::string> readiness() override;

  int index() const { return index_; }
  const std::string& name() const { return name_; }
  /// The pinned chunks and threads that stage pageable copies; created on first use.
  StagingPool& staging();
  /// Frees the staging pool (at exit, before the vendor runtime tears down its context).
  void release_staging() noexcept;

 private:
  int index_;
  std::string name_;
  std::mutex staging_mutex_;
  std::unique_ptr<StagingPool> staging_;
};

class GpuBackend final : public runtime::Backend {
 public:
  /// Counts the devices; never throws. With none, unavailable_reason() says why.
  GpuBackend();
  std::string name() const override { return vendor::kBackend; }
  int device_count() override { return static_cast<int>(devices_.size()); }
  std::string unavailable_reason() override { return reason_; }
  runtime::DeviceImpl& device(int index) override;

 private:
  std::vector<std::unique_ptr<GpuDevice>> devices_;
  std::string reason_;
};

/// Architectures whose machine code this plugin carries ("sm_80", "sm_90" / "gfx90a"), from the
/// build's GALLEY_GPU_ARCHS definition.
std::vector<std::string> built_for();

/// cudaSuccess when the plugin's probe kernel has an image loadable on the current device, else
/// the error (cudaErrorNoKernelImageForDevice...). Defined in runtime_probe.cu.
cudaError_t probe_kernel_image();

/// Readiness lines of the vendor libraries this plugin links (cuBLAS, cuDNN...), each ending in
/// ": ok" or ": FAIL (...)". Defined per vendor (cuda/vendor_libraries.cpp, hip/vendor_libraries.cpp).
std::vector<std::string> library_readiness();

}  // namespace galley::backends::GALLEY_GPU_NS
