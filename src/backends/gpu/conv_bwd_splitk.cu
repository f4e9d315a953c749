// The second pass of the split backward reductions: fp32 slices summed in slice order, so a split
// run gives the same bits every time (atomics would not).
#include "conv_bwd_kernels.hpp"
#include "conv_device.cuh"

namespace galley::backends::gpu {
namespace {

template <typename T>
__global__ void bwd_splitk_sum_kernel(const float* __restrict__ partial, T* __restrict__ out,
                                      std::int64_t elems, int splits) {
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < elems;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    float s = 0.f;
    for (int k = 0; k < splits; ++k) s += partial[k * elems + i];
    out[i] = from_f32<T>(s);
  }
}

}  // namespace

void launch_bwd_splitk_sum(DType dtype, std::int64_t elems, int splits, const float* partial, void* out,
                           void* stream) {
  const int blocks = int(std::clamp<std::int64_t>((elems + 255) / 256, 1, 65535));
  dispatch_dtype(dtype, "backward split-k sum", [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    bwd_splitk_sum_kernel<T>
        <<<blocks, 256, 0, as_stream(stream)>>>(partial, static_cast<T*>(out), elems, splits);
  });
  check_launch("gpu.conv backward split-k sum");
}

}  // namespace galley::backends::gpu
