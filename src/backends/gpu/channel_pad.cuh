// Channel padding for the tensor-core paths that read 16-byte runs of 8 channels: a tensor whose
// rows hold c 16-bit channels copied to rows of c8 (a multiple of 8, zeros after c), and back.
#pragma once

#include <cstdint>

#include "conv_device.cuh"

namespace galley::backends::gpu {

/// Eight 16-bit values as one 16-byte store (the padding and folding kernels' output chunk).
__device__ __forceinline__ void store_u16x8(std::uint16_t* out, const std::uint16_t (&v)[8]) {
  *reinterpret_cast<uint4*>(out) = make_uint4(v[0] | (unsigned(v[1]) << 16), v[2] | (unsigned(v[3]) << 16),
                                              v[4] | (unsigned(v[5]) << 16), v[6] | (unsigned(v[7]) << 16));
}

/// out[row][0..c8) = in[row][0..c) then zeros, for `rows` rows of 16-bit elements; out 16-byte aligned.
void launch_pad_channels(const void* in, void* out, std::int64_t rows, int c, int c8, GpuStream stream);
/// out[row][0..c) = in[row][0..c): the first c of each row of c8 16-bit elements.
void launch_unpad_channels(const void* in, void* out, std::int64_t rows, int c8, int c, GpuStream stream);

}  // namespace galley::backends::gpu
