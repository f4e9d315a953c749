// A kernel that does nothing but prove the plugin carries machine code the device can run:
// cudaFuncGetAttributes fails with cudaErrorNoKernelImageForDevice when no image fits.
#include "backends/gpu/vendor.hpp"

namespace galley::backends::GALLEY_GPU_NS {

namespace {
__global__ void probe_kernel(int* flag) {
  if (flag != nullptr) *flag = 1;
}
}  // namespace

cudaError_t probe_kernel_image() {
  cudaFuncAttributes attributes{};
  return cudaFuncGetAttributes(&attributes, reinterpret_cast<const void*>(probe_kernel));
}

}  // namespace galley::backends::GALLEY_GPU_NS
