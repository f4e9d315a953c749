// The NHWC epilogue of the tensor-core implicit GEMMs (igemm_tc's mma.sync kernel and the Hopper
// wgmma kernel): a block's BM x BN fp32 accumulator tile to y (or to split-K partials). Both
// kernels' fragments hold pairs of adjacent columns; `for_each_pair(f)` calls f(row, col, v0, v1)
// for each of this thread's pairs in tile coordinates, which is all the epilogue needs to know of
// the fragment layout.
#pragma once

#include "conv_device.cuh"

namespace galley::backends::gpu {

/// `smem` (kSmemBytes, the pipeline's buffers) is free to reuse once every warp is done with them.
template <typename T, int BM, int BN, int kThreads, int kSmemBytes, typename ForEachPair>
__device__ __forceinline__ void store_nhwc_tile(const ConvParams& cp, T* __restrict__ y, float* __restrict__ partial,
                                                int splits, int split, int m0, int n0, int g, unsigned char* smem,
                                                ForEachPair for_each_pair) {
  const int tid = threadIdx.x;
  const int pixels = cp.n * cp.p * cp.q;
  // Through shared memory when the tile can leave as 16-byte rows: each lane's fragments are
  // scattered 4-byte pieces, which would half-fill 32-byte sectors.
  if (splits == 1 && cp.kg % 8 == 0) {
    constexpr int kLd = BN + 8;  // halves; +16 bytes per row keeps the fragment writes conflict-free
    static_assert(BM * kLd * 2 <= kSmemBytes, "the epilogue tile must fit the pipeline buffers");
    __syncthreads();  // every warp is done reading the pipeline stages
    std::uint32_t* tile32 = reinterpret_cast<std::uint32_t*>(smem);
    for_each_pair([&](int row, int col, float v0, float v1) { tile32[(row * kLd + col) / 2] = pack2<T>(v0, v1); });
    __syncthreads();
    constexpr int kChunksPerRow = BN / 8;
    for (int idx = tid; idx < BM * kChunksPerRow; idx += kThreads) {
      const int row = idx / kChunksPerRow, cc = idx - row * kChunksPerRow;
      const int pix = m0 + row, col = n0 + cc * 8;
      if (pix < pixels && col < cp.kg)
        *reinterpret_cast<uint4*>(y + std::int64_t(pix) * cp.k + g * cp.kg + col) =
            *reinterpret_cast<const uint4*>(smem + (row * kLd + cc * 8) * 2);
    }
    return;
  }
  // Split-K partials (fp32, y's layout) or scattered pairs.
  const std::int64_t y_elems = std::int64_t(pixels) * cp.k;
  const bool pairs = cp.k % 2 == 0 && cp.kg % 2 == 0;
  for_each_pair([&](int row, int col_in_tile, float v0, float v1) {
    const int pix = m0 + row, col = n0 + col_in_tile;
    if (pix >= pixels || col >= cp.kg) return;
    const std::int64_t idx = std::int64_t(pix) * cp.k + g * cp.kg + col;
    const bool both = col + 1 < cp.kg;
    if (splits > 1) {
      float* dst = partial + split * y_elems + idx;
      dst[0] = v0;
      if (both) dst[1] = v1;
    } else if (pairs && both) {
      *reinterpret_cast<std::uint32_t*>(y + idx) = pack2<T>(v0, v1);
    } else {
      y[idx] = from_f32<T>(v0);
      if (both) y[idx + 1] = from_f32<T>(v1);
    }
  });
}

}  // namespace galley::backends::gpu
