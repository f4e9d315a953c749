#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "conv_device.cuh"
#include "conv_epilogue.hpp"
#include "dnn/activation_dispatch.hpp"

namespace galley::backends::gpu {
namespace {

struct Identity {
  __host__ __device__ float forward(float v) const { return v; }
};

// One thread per element, grid-stride, 64-bit indices; the channel of element i is
// (i / pixels) % k in NCHW and i % k in NHWC.
template <typename T, bool kNhwc, bool kBias, bool kResidual, typename Act>
__global__ void conv_epilogue_kernel(T* __restrict__ y, const T* __restrict__ bias,
                                     const T* __restrict__ residual, std::int64_t total, std::int64_t pixels,
                                     std::int64_t k, Act act) {
  const std::int64_t stride = std::int64_t(gridDim.x) * blockDim.x;
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    float v = to_f32(y[i]);
    if constexpr (kBias) v += to_f32(bias[kNhwc ? i % k : (i / pixels) % k]);
    if constexpr (kResidual) v += to_f32(residual[i]);
    y[i] = from_f32<T>(act.forward(v));
  }
}

template <typename T, typename Act>
void launch_typed(const dnn::ConvProblem& p, T* y, const T* bias, const T* residual, Act act, void* stream) {
  const std::int64_t pixels = p.out_h() * p.out_w();
  const std::int64_t total = p.n * p.k * pixels;
  constexpr int kThreads = 256;
  const std::int64_t blocks = std::min<std::int64_t>((total + kThreads - 1) / kThreads, 65535LL * 32);
  const bool nhwc = p.layout == dnn::Layout::nhwc;
  const bool has_bias = p.epilogue.bias, has_res = p.epilogue.residual;
  // Each combination its own kernel, so the loop has no branch on what the epilogue holds.
  auto go = [&](auto nhwc_c, auto bias_c, auto res_c) {
    conv_epilogue_kernel<T, decltype(nhwc_c)::value, decltype(bias_c)::value, decltype(res_c)::value, Act>
        <<<unsigned(blocks), kThreads, 0, as_stream(stream)>>>(y, bias, residual, total, pixels, p.k, act);
  };
  using F = std::false_type;
  using Tr = std::true_type;
  if (nhwc) {
    if (has_bias && has_res)
      go(Tr{}, Tr{}, Tr{});
    else if (has_bias)
      go(Tr{}, Tr{}, F{});
    else if (has_res)
      go(Tr{}, F{}, Tr{});
    else
      go(Tr{}, F{}, F{});
  } else {
    if (has_bias && has_res)
      go(F{}, Tr{}, Tr{});
    else if (has_bias)
      go(F{}, Tr{}, F{});
    else if (has_res)
      go(F{}, F{}, Tr{});
    else
      go(F{}, F{}, F{});
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
