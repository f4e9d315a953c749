// The kernels of channel_pad.cuh.
#include <algorithm>

#include "channel_pad.cuh"

namespace galley::backends::gpu {
namespace {

constexpr int kThreads = 256;

int blocks_for(std::int64_t items) {
  return int(std::min<std::int64_t>((items + kThreads - 1) / kThreads, 65535));
}

/// One 16-byte output chunk per thread.
__global__ void __launch_bounds__(kThreads)
    pad_channels_kernel(const std::uint16_t* __restrict__ in, std::uint16_t* __restrict__ out,
                        std::int64_t rows, int c, int c8) {
  const int chunks_per_row = c8 / 8;
  const std::int64_t total = rows * chunks_per_row;
  for (std::int64_t idx = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t row = idx / chunks_per_row;
    const int c0 = int(idx - row * chunks_per_row) * 8;
    std::uint16_t v[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) v[e] = c0 + e < c ? in[row * c + c0 + e] : std::uint16_t(0);
    store_u16x8(out + row * c8 + c0, v);
  }
}

/// One output element per thread (the rows are short: a weight gradient's taps).
__global__ void __launch_bounds__(kThreads)
    unpad_channels_kernel(const std::uint16_t* __restrict__ in, std::uint16_t* __restrict__ out,
                          std::int64_t rows, int c8, int c) {
  const std::int64_t total = rows * c;
  for (std::int64_t idx = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t row = idx / c;
    out[idx] = in[row * c8 + (idx - row * c)];
  }
}

}  // namespace

void launch_pad_channels(const void* in, void* out, std::int64_t rows, int c, int c8, GpuStream stream) {
  pad_channels_kernel<<<blocks_for(rows * (c8 / 8)), kThreads, 0, stream>>>(
      static_cast<const std::uint16_t*>(in), static_cast<std::uint16_t*>(out), rows, c, c8);
  check_launch("channel padding");
}

void launch_unpad_channels(const void* in, void* out, std::int64_t rows, int c8, int c, GpuStream stream) {
  unpad_channels_kernel<<<blocks_for(rows * c), kThreads, 0, stream>>>(
      static_cast<const std::uint16_t*>(in), static_cast<std::uint16_t*>(out), rows, c8, c);
  check_launch("channel unpadding");
}

}  // namespace galley::backends::gpu
