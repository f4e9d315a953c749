// What a device is and how much memory it has: the plain data Device::properties() and
// Device::memory_info() return.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace galley::runtime {

/// What a device is and what it can do, as `galley info` shows it.
struct DeviceProperties {
  std::string name;                       ///< "NVIDIA H200", "AMD Instinct MI210", CPU model name
  std::string backend;                    ///< "cpu", "cuda", "hip"
  std::string arch;                       ///< "sm_90", "gfx90a", "avx2"
  int compute_units = 0;                  ///< SMs, CUs, or hardware threads on cpu
  std::size_t memory_total = 0;           ///< bytes
  std::size_t memory_free = 0;            ///< bytes, when the properties were read
  int clock_mhz = 0;                      ///< core clock; 0 when unknown
  int memory_clock_mhz = 0;               ///< 0 when unknown
  std::size_t l2_bytes = 0;               ///< last-level cache; 0 when unknown
  std::string driver_version;             ///< "13.0" (CUDA driver API), "5.2" (HIP), kernel version on cpu
  std::string runtime_version;            ///< the runtime the plugin was built against
  std::vector<std::string> built_for;     ///< arches whose machine code the plugin carries
  std::vector<std::string> isa_features;  ///< cpu: "avx2", "fma", "avx512f"...
};

/// Free/total memory right now.
struct MemoryInfo {
  std::size_t free = 0;
  std::size_t total = 0;
};

}  // namespace galley::runtime
