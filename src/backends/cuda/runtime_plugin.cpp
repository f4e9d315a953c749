// The plugin's only exported symbol. libgalley dlopen()s libgalley_backend_cuda.so (or _hip) and
// calls it; it registers a Backend even when no driver or device is present, so `galley info`
// can say why the backend has no devices. Nothing here may throw or abort the process.
#include <cstdio>
#include <exception>
#include <memory>
#include <string>

#include "backends/cuda/runtime_device.hpp"
#include "backends/gpu/op_lists.hpp"

extern "C" int galley_plugin_register(int abi_version, char* error, std::size_t error_capacity) {
  namespace gpu = galley::backends::GALLEY_GPU_NS;
  const auto fail = [&](const std::string& why) {
    if (error != nullptr && error_capacity > 0) std::snprintf(error, error_capacity, "%s", why.c_str());
    return 1;
  };
  if (abi_version != galley::runtime::kBackendAbiVersion) {
    return fail(std::string(galley::backends::vendor::kBackend) + " plugin built for backend ABI " +
                std::to_string(galley::runtime::kBackendAbiVersion) + ", libgalley has ABI " +
                std::to_string(abi_version) + "; rebuild the plugin with this libgalley");
  }
  try {
    galley::runtime::register_backend(std::make_unique<gpu::GpuBackend>());
    galley::backends::gpu::register_op_lists();
    return 0;
  } catch (const std::exception& e) {
    return fail(e.what());
  } catch (...) {
    return fail("unknown exception while registering the backend");
  }
}
