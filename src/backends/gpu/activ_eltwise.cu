// gpu.activ.eltwise: an activation as one pass over memory, forward or backward, with the formulas
// of dnn/activation_math.hpp compiled into the kernel (one instantiation per activation, dtype and
// direction, so the inner loop never branches on the activation). When every pointer is 16-byte
// aligned, each thread takes a few vectors of 8 elements per tensor at a time (64 bytes of each
// tensor): it issues all their loads before computing any, so several loads are in flight per thread
// while the activation's arithmetic runs. A block walks tiles of kUnroll * blockDim vectors; the
// last partial tile goes vector by vector, the last n % 8 elements (or a misaligned call) through
// the scalar path. Loads are plain (no read-only cache path), because in-place calls write what they
// read; each thread loads all of its elements before storing any, so in place stays correct.
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
// Not below 8: block 0's first threads take the last n % 8 elements.
constexpr int kMinThreads = 64;
// Tiles a vector launch wants before it shrinks its blocks.
constexpr std::int64_t kMinTiles = 512;
constexpr int kVec = 8;
// Grid-stride: enough blocks to fill any current GPU many times over, few enough for every vendor's
// gridDim.x limit.
constexpr std::int64_t kMaxBlocks = 65535LL * 16;

// 16-byte words per vector of 8 elements.
template <typename T>
constexpr int kWords = int(sizeof(T)) * kVec / 16;
// Vectors per thread per step: 64 bytes of each tensor in flight per thread.
template <typename T>
constexpr int kUnroll = 4 / kWords<T>;

template <typename T>
struct RawVec {
  uint4 w[kWords<T>];
};

template <typename T>
__device__ __forceinline__ RawVec<T> load_raw(const T* ptr) {
  RawVec<T> r;
#pragma unroll
  for (int i = 0; i < kWords<T>; ++i) r.w[i] = reinterpret_cast<const uint4*>(ptr)[i];
  return r;
}

template <typename T>
__device__ __forceinline__ void unpack(const RawVec<T>& r, float (&out)[kVec]) {
  if constexpr (sizeof(T) == 4) {
#pragma unroll
    for (int i = 0; i < kWords<T>; ++i) {
      out[4 * i] = __uint_as_float(r.w[i].x), out[4 * i + 1] = __uint_as_float(r.w[i].y);
      out[4 * i + 2] = __uint_as_float(r.w[i].z), out[4 * i + 3] = __uint_as_float(r.w[i].w);
    }
  } else {
    const std::uint32_t words[4] = {r.w[0].x, r.w[0].y, r.w[0].z, r.w[0].w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 f = unpack2(words[i], static_cast<T*>(nullptr));
      out[2 * i] = f.x;
      out[2 * i + 1] = f.y;
    }
  }
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

// kU vectors of 8 at vector indices first, first + spacing, ...: every load, then every store.
template <int kU, bool kBackward, typename T, class F>
__device__ __forceinline__ void vectors(const F& f, const T* a, const T* b, T* out, std::int64_t first,
                                        std::int64_t spacing) {
  RawVec<T> ra[kU], rb[kBackward ? kU : 1];
#pragma unroll
  for (int u = 0; u < kU; ++u) ra[u] = load_raw(a + (first + u * spacing) * kVec);
  if constexpr (kBackward) {
#pragma unroll
    for (int u = 0; u < kU; ++u) rb[u] = load_raw(b + (first + u * spacing) * kVec);
  }
#pragma unroll
  for (int u = 0; u < kU; ++u) {
    float va[kVec], r[kVec];
    unpack(ra[u], va);
    if constexpr (kBackward) {
      float vb[kVec];
      unpack(rb[u], vb);
#pragma unroll
      for (int k = 0; k < kVec; ++k) r[k] = f.backward(va[k], vb[k]);
    } else {
#pragma unroll
      for (int k = 0; k < kVec; ++k) r[k] = f.forward(va[k]);
    }
    store8(out + (first + u * spacing) * kVec, r);
  }
}

// Forward: a = x, out = y. Backward: a = dy, b = x or y, out = dx. `vecs` groups of 8 go through
// vector loads, in tiles of kUnroll * blockDim (consecutive threads on consecutive vectors, so each
// warp-wide load is contiguous); the partial last tile by the block next in turn; elements
// [vecs * 8, n) through block 0's first threads.
template <bool kBackward, typename T, class F>
__global__ void activ_vec_kernel(F f, const T* a, const T* b, T* out, std::int64_t vecs, std::int64_t n) {
  constexpr int kU = kUnroll<T>;
  const std::int64_t tile = std::int64_t(kU) * blockDim.x;
  const std::int64_t full_tiles = vecs / tile;
  for (std::int64_t t = blockIdx.x; t < full_tiles; t += gridDim.x) {
    vectors<kU, kBackward>(f, a, b, out, t * tile + threadIdx.x, blockDim.x);
  }
  if (blockIdx.x == full_tiles % gridDim.x) {
    for (std::int64_t v = full_tiles * tile + threadIdx.x; v < vecs; v += blockDim.x) {
      vectors<1, kBackward>(f, a, b, out, v, 0);
    }
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
    // Small tensors take smaller blocks, so that they still spread over many SMs.
    int threads = kThreads;
    while (threads > kMinThreads && vecs < std::int64_t(threads) * kUnroll<T> * kMinTiles) threads /= 2;
    const std::int64_t tile = std::int64_t(threads) * kUnroll<T>;
    const auto blocks = unsigned(std::clamp<std::int64_t>((vecs + tile - 1) / tile, 1, kMaxBlocks));
    activ_vec_kernel<kBackward, T, F><<<blocks, threads, 0, stream>>>(f, ta, tb, to, vecs, n);
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
    return "tiles of 4 x 16-byte vectors per thread (2 x 32 for f32), loads before compute, when aligned";
  }

 private:
  std::string backend_;
};

}  // namespace

std::unique_ptr<dnn::ActivSolver> make_activ_eltwise(std::string_view backend) {
  return std::make_unique<ActivEltwise>(std::string(backend));
}

}  // namespace galley::backends::gpu
