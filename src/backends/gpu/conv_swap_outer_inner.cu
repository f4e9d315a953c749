// (A, M, B) -> (B, M, A): the first and last axes of a packed tensor swapped, the middle one kept.
// It moves a convolution's batch axis innermost (NHWC x as (N, HW, C) -> (C, HW, N); NCHW as
// (N, 1, CHW)) and turns a product laid out (C, RS, K) into KRSC or KCRS weights. A block moves one
// 32 x 32 tile of (A, B) at one middle index through shared memory, so both the reads (along B) and
// the writes (along A) are contiguous.
#include "conv_bwd_kernels.hpp"
#include "conv_device.cuh"

namespace galley::backends::gpu {
namespace {

constexpr int kTile = 32;
constexpr int kRows = 8;  // threads per tile column: each thread moves kTile / kRows elements

template <typename T>
__global__ void __launch_bounds__(kTile* kRows)
    swap_outer_inner_kernel(const T* __restrict__ in, T* __restrict__ out, int A, int M, int B) {
  __shared__ T tile[kTile][kTile + 1];  // +1: the transposed reads hit 32 different banks
  const int b0 = blockIdx.x * kTile, a0 = blockIdx.y * kTile;
  const std::int64_t m = blockIdx.z;
  const int tx = threadIdx.x, ty = threadIdx.y;
  for (int i = ty; i < kTile; i += kRows) {
    const int a = a0 + i, b = b0 + tx;
    if (a < A && b < B) tile[i][tx] = in[(std::int64_t(a) * M + m) * B + b];
  }
  __syncthreads();
  for (int i = ty; i < kTile; i += kRows) {
    const int b = b0 + i, a = a0 + tx;
    if (a < A && b < B) out[(std::int64_t(b) * M + m) * A + a] = tile[tx][i];
  }
}

}  // namespace

void launch_swap_outer_inner(DType dtype, const void* in, void* out, std::int64_t A, std::int64_t M,
                             std::int64_t B, void* stream) {
  if (A <= 0 || M <= 0 || B <= 0) return;
  if (M > 65535 || A > (std::int64_t(1) << 30) || B > (std::int64_t(1) << 30))
    throw Error(Status::invalid_argument, "swap_outer_inner: " + std::to_string(A) + " x " +
                                              std::to_string(M) + " x " + std::to_string(B) +
                                              " exceeds the grid");
  const dim3 grid(ceil_div(B, kTile), ceil_div(A, kTile), unsigned(M));
  const dim3 block(kTile, kRows);
  dispatch_dtype(dtype, "swap_outer_inner", [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    swap_outer_inner_kernel<T><<<grid, block, 0, as_stream(stream)>>>(
        static_cast<const T*>(in), static_cast<T*>(out), int(A), int(M), int(B));
  });
  check_launch("swap_outer_inner");
}

}  // namespace galley::backends::gpu
