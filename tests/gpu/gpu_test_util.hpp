// Shared helpers of the gpu tests: find a device of a GPU backend or skip with the registry's
// reason, device buffers straight from the backend, seeded random bytes.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "galley/runtime/device.hpp"
#include "galley/runtime/stream.hpp"
#include "runtime/backend.hpp"

namespace galley::testing {

/// The first device of `backend`, or nullopt with `why` set from the backend's report.
inline std::optional<runtime::Device> first_device(const std::string& backend, std::string& why) {
  for (const auto& d : runtime::devices()) {
    if (d.backend() == backend) return d;
  }
  why = backend + " backend: not reported";
  for (const auto& r : runtime::backend_reports()) {
    if (r.name == backend)
      why = backend + " backend: " + (r.reason.empty() ? "no visible devices" : r.reason);
  }
  return std::nullopt;
}

/// Device memory from the backend's raw allocator (these tests exercise the runtime, not the cache).
class DeviceMemory {
 public:
  DeviceMemory(const runtime::Device& device, std::size_t bytes)
      : device_(device), ptr_(static_cast<unsigned char*>(device.impl().raw_alloc(bytes))) {}
  ~DeviceMemory() { device_.impl().raw_free(ptr_); }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  unsigned char* get() const { return ptr_; }

 private:
  runtime::Device device_;
  unsigned char* ptr_;
};

inline std::vector<unsigned char> random_bytes(std::size_t n, std::uint32_t seed) {
  std::vector<unsigned char> bytes(n);
  std::mt19937 rng(seed);
  std::size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const std::uint32_t v = rng();
    std::memcpy(bytes.data() + i, &v, 4);
  }
  for (; i < n; ++i) bytes[i] = static_cast<unsigned char>(rng());
  return bytes;
}

}  // namespace galley::testing
