// hip-only readiness lines for vendor libraries. The hip plugin links none yet (no MIOpen or
// rocBLAS in Debian's HIP 5.2 set), so there is nothing to check beyond the runtime.
#include "backends/cuda/runtime_device.hpp"

namespace galley::backends::hip {

std::vector<std::string> library_readiness() { return {}; }

}  // namespace galley::backends::hip
