// Devices by name ("cpu", "cuda:0", "hip:1"), the registry of backends, and plugin load reports.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "galley/runtime/device_properties.hpp"

namespace galley::runtime {

/// The backend's device object (plugin ABI, internal: src/runtime/backend.hpp).
class DeviceImpl;

/// A cheap, copyable handle to one device. Compare by name.
class Device {
 public:
  Device() = default;
  /// "cpu", "cuda:0", ...
  const std::string& name() const { return name_; }
  const std::string& backend() const { return backend_; }
  int index() const { return index_; }
  bool is_cpu() const { return backend_ == "cpu"; }
  DeviceProperties properties() const;
  MemoryInfo memory_info() const;
  /// The backend object; for runtime/memory internals and backend code, which include the
  /// internal header that defines it.
  DeviceImpl& impl() const;
  void synchronize() const;

  friend bool operator==(const Device& a, const Device& b) { return a.name_ == b.name_; }

 private:
  friend class Registry;
  Device(std::string backend, int index, DeviceImpl* impl);
  std::string name_ = "cpu";
  std::string backend_ = "cpu";
  int index_ = 0;
  DeviceImpl* impl_ = nullptr;
};

/// What happened when Galley looked for a backend: loaded with N devices, or why not.
struct BackendReport {
  std::string name;        ///< "cpu", "cuda", "hip"
  std::string library;     ///< plugin path tried, or "built in"
  bool loaded = false;
  int device_count = 0;
  std::string reason;      ///< why not loaded, or why it has no devices; empty when fine
};

/// All visible devices, cpu first, then each GPU backend's in index order. Loads plugins on
/// first use (from $GALLEY_PLUGIN_PATH, then next to libgalley). Honors GALLEY_VISIBLE_DEVICES.
std::vector<Device> devices();

/// Parses "cpu", "cuda", "cuda:0", "hip:1". An unknown backend ("tpu:0"), a missing index
/// ("cuda:7"), a hidden device or malformed text throws Error naming the text and listing the
/// devices that exist.
Device device(std::string_view name);

/// GALLEY_DEVICE if set, else the first GPU, else cpu.
Device default_device();

/// One report per backend looked for (cpu, cuda, hip), in that order.
std::vector<BackendReport> backend_reports();

}  // namespace galley::runtime
