#include "galley/core/error.hpp"
#include "galley/runtime/device.hpp"
#include "runtime/backend.hpp"

namespace galley::runtime {

DeviceImpl& Device::impl() const {
  if (impl_ == nullptr) {
    // A default-constructed Device means "cpu": resolve it through the registry once.
    static DeviceImpl* cpu = &device("cpu").impl();
    return *cpu;
  }
  return *impl_;
}

DeviceProperties Device::properties() const { return impl().properties(); }

MemoryInfo Device::memory_info() const { return impl().memory_info(); }

void Device::synchronize() const { impl().synchronize(); }

}  // namespace galley::runtime
