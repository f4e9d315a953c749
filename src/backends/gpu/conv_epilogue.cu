#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "conv_device.cuh"
#include "conv_epilogue.hpp"
#include "dnn/activation_dispatch.hpp"

namespace galley::backends::gpu {
namespace {

struct Identity {
  __host__ __device__ float forward(float v) const { return v; }
};

// kVec consecutive elements of y (and of the residual), loaded and stored as one access.
template <typename T, int kVec>
struct alignas(sizeof(T) * kVec) Lanes {
  T v[kVec];
};

// One thread per kVec consecutive elements, grid-stride, with Index (32- or 64-bit) arithmetic.
// The kVec elements share one channel: in NCHW kVec divides the plane, in NHWC the channel count,
// so the channel, (i / pixels) % k or i % k, is worked out once per access.
template <typename T, typename Index, int kVec, bool kNhwc, bool kBias, bool kResidual, typename Act>
__global__ void conv_epilogue_kernel(T* __restrict__ y, const T* __restrict__ bias,
                                     const T* __restrict__ residual, Index vectors, Index pixels, Index k,
                                     Act act) {
  const Index stride = Index(gridDim.x) * blockDim.x;
  for (Index v = Index(blockIdx.x) * blockDim.x + threadIdx.x; v < vectors; v += stride) {
    const Index first = v * kVec;
    Lanes<T, kVec> out = reinterpret_cast<const Lanes<T, kVec>*>(y)[v];
    float b[kVec] = {};
    if constexpr (kBias) {
      if constexpr (kNhwc) {
        const Index c = first % k;
#pragma unroll
        for (int j = 0; j < kVec; ++j) b[j] = to_f32(bias[c + j]);
      } else {
        const float same = to_f32(bias[(first / pixels) % k]);
#pragma unroll
        for (int j = 0; j < kVec; ++j) b[j] = same;
      }
    }
    Lanes<T, kVec> res{};
    if constexpr (kResidual) res = reinterpret_cast<const Lanes<T, kVec>*>(residual)[v];
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      float x = to_f32(out.v[j]) + b[j];
      if constexpr (kResidual) x += to_f32(res.v[j]);
      out.v[j] = from_f32<T>(act.forward(x));
    }
    reinterpret_cast<Lanes<T, kVec>*>(y)[v] = out;
  }
}

template <typename T, int kVec>
bool aligned_for(const void* ptr) {
  return ptr == nullptr || reinterpret_cast<std::uintptr_t>(ptr) % (sizeof(T) * kVec) == 0;
}

template <typename T, typename Act>
void launch_typed(const dnn::ConvProblem& p, T* y, const T* bias, const T* residual, Act act, void* stream) {
  const std::int64_t pixels = p.out_h() * p.out_w();
  const std::int64_t total = p.n * p.k * pixels;
  const bool nhwc = p.layout == dnn::Layout::nhwc;
  const bool has_bias = p.epilogue.bias, has_res = p.epilogue.residual;
  // Four elements an access where they share a channel, both tensors are aligned for it (a 16-byte
  // access in f32) and every index fits 32-bit arithmetic (a 64-bit division costs more than the
  // memory traffic of its element); else one element an access with 64-bit indices.
  const std::int64_t run = nhwc ? p.k : pixels;
  const bool wide = run % 4 == 0 && aligned_for<T, 4>(y) && aligned_for<T, 4>(residual);
  const bool narrow_index = total <= std::int64_t(std::numeric_limits<std::uint32_t>::max()) - 4;
  constexpr int kThreads = 256;
  auto go = [&](auto vec_c, auto index_tag, auto nhwc_c, auto bias_c, auto res_c) {
    constexpr int kVec = decltype(vec_c)::value;
    using Index = std::remove_pointer_t<decltype(index_tag)>;
    const std::int64_t vectors = total / kVec;
    const std::int64_t blocks = std::min<std::int64_t>((vectors + kThreads - 1) / kThreads, 65535LL * 32);
    conv_epilogue_kernel<T, Index, kVec, decltype(nhwc_c)::value, decltype(bias_c)::value,
                         decltype(res_c)::value, Act><<<unsigned(blocks), kThreads, 0, as_stream(stream)>>>(
        y, bias, residual, Index(vectors), Index(pixels), Index(p.k), act);
  };
  // Each combination its own kernel, so the loop has no branch on what the epilogue holds.
  auto with_flags = [&](auto vec_c, auto index_tag) {
    using F = std::false_type;
    using Tr = std::true_type;
    auto by_content = [&](auto nhwc_c) {
      if (has_bias && has_res)
        go(vec_c, index_tag, nhwc_c, Tr{}, Tr{});
      else if (has_bias)
        go(vec_c, index_tag, nhwc_c, Tr{}, F{});
      else if (has_res)
        go(vec_c, index_tag, nhwc_c, F{}, Tr{});
      else
        go(vec_c, index_tag, nhwc_c, F{}, F{});
    };
    if (nhwc)
      by_content(Tr{});
    else
      by_content(F{});
  };
  using Four = std::integral_constant<int, 4>;
  using One = std::integral_constant<int, 1>;
  if (wide && narrow_index) {
    with_flags(Four{}, static_cast<std::uint32_t*>(nullptr));
  } else {
    with_flags(One{}, static_cast<std::uint64_t*>(nullptr));
  }
  check_launch("gpu conv epilogue");
}

}  // namespace

void launch_conv_epilogue(const dnn::ConvProblem& p, void* y, const void* bias, const void* residual,
                          void* stream) {
  if (p.epilogue.empty()) return;
  dispatch_dtype(p.dtype, "gpu conv epilogue", [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    T* yt = static_cast<T*>(y);
    const T* bt = static_cast<const T*>(bias);
    const T* rt = static_cast<const T*>(residual);
    if (p.epilogue.activation) {
      dnn::with_activation<float>(*p.epilogue.activation, p.epilogue.alpha, p.epilogue.beta,
                                  [&](auto act) { launch_typed(p, yt, bt, rt, act, stream); });
    } else {
      launch_typed(p, yt, bt, rt, Identity{}, stream);
    }
  });
}

}  // namespace galley::backends::gpu
