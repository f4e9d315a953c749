// gpu.activ.eltwise: an activation as one pass over memory, forward or backward, with the formulas
// of dnn/activation_math.hpp compiled into the kernel (one instantiation per activation, dtype and
// direction, so the inner loop never branches on the activation). Each thread of a grid-stride
// loop moves 8 elements per tensor at a time with 16-byte loads and stores (two for f32) when every
// pointer is 16-byte aligned; the last n % 8 elements, or a misaligned call, take the scalar path.
// Loads are plain (no read-only cache path), because in-place calls write what they read.
#include <algorithm>
#include <cstdint>
#include <string>

#include "activ_solvers.hpp"
#include "conv_device.cuh"
#include "dnn/activation_dispatch.hpp"
#include "galley/runtime/device.hpp"
#include "galley/runtime/stream.hpp"

namespace galley::backends::gpu {
namespace {

using dnn::ActivArgs;
using dnn::ActivProblem;
using dnn::Applicability;

constexpr int kThreads = 256;
constexpr int kVec = 8;
// Grid-stride: enough blocks to fill any current GPU many times over, few enough for every vendor's
// gridDim.x limit.
constexpr std::int64_t kMaxBlocks = 65535LL * 16;

template <typename T>
__device__ __forceinline__ void load8_plain(const T* ptr, float (&out)[8]) {
  const uint4 v = *reinterpret_cast<const uint4*>(ptr);
  const std::uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = unpack2(words[i], static_cast<T*>(nullptr));
    out[2 * i] = f.x;
    out[2 * i + 1] = f.y;
  }
}
template <>
__device__ __forceinline__ void load8_plain<float>(const float* ptr, float (&out)[8]) {
  const float4 a = reinterpret_cast<const float4*>(ptr)[0];
  const float4 b = reinterpret_cast<const float4*>(ptr)[1];
  out[0] = a.x, out[1] = a.y, out[2] = a.z, out[3] = a.w;
  out[4] = b.x, out[5] = b.y, out[6] = b.z, out[7] = b.w;
}

template <bool kBackward, typename T, class F>
__device__ __forceinline__ void one(const F& f, const T* a, const T* b, T* out, std::int64_t i) {
  const float va = to_f32(a[i]);
  if constexpr (kBackward) {
    out[i] = from_f32<T>(f.backward(va, to_f32(b[i])));
  } else {
    out[i] = from_f32<T>(f.forward(va));
  }
}

// Forward: a = x, out = y. Backward: a = dy, b = x or y, out = dx. `vecs` groups of 8 go through
// vector loads; elements [vecs * 8, n) through block 0's first threads.
template <bool kBackward, typename T, class F>
__global__ void activ_vec_kernel(F f, const T* a, const T* b, T* out, std::int64_t vecs, std::int64_t n) {
  const std::int64_t stride = std::int64_t(gridDim.x) * blockDim.x;
  for (std::int64_t v = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; v < vecs; v += stride) {
    const std::int64_t base = v * kVec;
    float va[kVec], r[kVec];
    load8_plain(a + base, va);
    if constexpr (kBackward) {
      float vb[kVec];
      load8_plain(b + base, vb);
#pragma unroll
      for (int k = 0; k < kVec; ++k) r[k] = f.backward(va[k], vb[k]);
    } else {
#pragma unroll
      for (int k = 0; k < kVec; ++k) r[k] = f.forward(va[k]);
    }
    store8(out + base, r);
  }
  if (blockIdx.x == 0) {
    const std::int64_t i = vecs * kVec + threadIdx.x;
    if (i < n) one<kBackward>(f, a, b, out, i);
  }
}

template <bool kBackward, typename T, class F>
__global__ void activ_scalar_kernel(F f, const T* a, const T* b, T* out, std::int64_t n) {
  const std::int64_t stride = std::int64_t(gridDim.x) * blockDim.x;
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    one<kBackward>(f, a, b, out, i);
  }
}

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

unsigned blocks_for(std::int64_t work) {
  return unsigned(std::clamp<std::int64_t>((work + kThreads - 1) / kThreads, 1, kMaxBlocks));
}

template <bool kBackward, typename T, class F>
void launch_typed(const F& f, const void* a, const void* b, void* out, std::int64_t n, GpuStream stream) {
  const T* ta = static_cast<const T*>(a);
  const T* tb = static_cast<const T*>(b);
  T* to = static_cast<T*>(out);
  const bool vector = aligned16(a) && aligned16(out) && (!kBackward || aligned16(b));
  if (vector) {
    const std::int64_t vecs = n / kVec;
    activ_vec_kernel<kBackward, T, F><<<blocks_for(vecs), kThreads, 0, stream>>>(f, ta, tb, to, vecs, n);
  } else {
    activ_scalar_kernel<kBackward, T, F><<<blocks_for(n), kThreads, 0, stream>>>(f, ta, tb, to, n);
  }
}

void launch_activ(const ActivProblem& p, const ActivArgs& args, GpuStream stream) {
  const bool backward = p.direction == dnn::ActivDirection::backward;
  const void* a = backward ? args.dy : args.x;
  const void* b = backward ? (p.reads_dst() ? static_cast<const void*>(args.y) : args.x) : nullptr;
  void* out = backward ? args.dx : args.y;
  const std::int64_t n = p.elements();
  dispatch_dtype(p.dtype, "gpu.activ.eltwise", [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    dnn::with_activation<float>(p.activation, p.alpha, p.beta, [&](auto f) {
      if (backward) {
        launch_typed<true, T>(f, a, b, out, n, stream);
      } else {
        launch_typed<false, T>(f, a, b, out, n, stream);
      }
    });
  });
  check_launch("gpu.activ.eltwise");
}

class ActivEltwise final : public dnn::ActivSolver {
 public:
  explicit ActivEltwise(std::string backend) : backend_(std::move(backend)) {}
  std::string_view name() const override { return "gpu.activ.eltwise"; }

  Applicability check(const ActivProblem& p, const runtime::Device& device) const override {
    if (device.backend() != backend_) return Applicability::no("runs on " + backend_ + " devices, not " + device.name());
    (void)p;
    return Applicability::yes();
  }

  void run(runtime::Stream& stream, const ActivProblem& p, const ActivArgs& args) const override {
    stream.launch(name(), [&] {
      ScopedDevice device(stream.device().index());
      launch_activ(p, args, as_stream(stream.native_handle()));
    });
  }

  std::string detail(const ActivProblem&, const runtime::Device&) const override {
    return "grid-stride, 8 elements per thread, 16-byte loads when aligned";
  }

 private:
  std::string backend_;
};

}  // namespace

std::unique_ptr<dnn::ActivSolver> make_activ_eltwise(std::string_view backend) {
  return std::make_unique<ActivEltwise>(std::string(backend));
}

}  // namespace galley::backends::gpu
