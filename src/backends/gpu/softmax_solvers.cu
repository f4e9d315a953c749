// gpu.softmax.rows and gpu.softmax.strided: kernels and solver glue. The problem is [outer, axis,
// inner] in memory; every kernel accumulates in f32 whatever the storage type.
#include <climits>
#include <cstdint>
#include <functional>
#include <string>

#include "galley/runtime/device.hpp"
#include "galley/runtime/stream.hpp"
#include "softmax_reduce_device.cuh"
#include "softmax_reduce_solvers.hpp"

namespace galley::backends::gpu {
namespace {

using dnn::Applicability;
using dnn::SoftmaxAlgorithm;
using dnn::SoftmaxArgs;
using dnn::SoftmaxProblem;
using softmax_device::group_sum;
using softmax_device::MaxSum;

constexpr int kWarpRowsMax = 1024;  // 32 lanes x 32 registers
constexpr int kRowBlock = 512;

// Forward: a = x. Backward: a = dy, b = y. One 32-lane group per row, kPer elements per lane.
template <typename T, bool kBackward, int kPer>
__global__ void softmax_group_rows(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ out,
                                   long long rows, int len, bool log) {
  const int lane = threadIdx.x & 31;
  const long long row = (long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  if (row >= rows) return;  // a whole group leaves together, so the shuffles below stay full
  const T* ar = a + row * len;
  T* orow = out + row * len;
  float va[kPer];
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    const int i = lane + 32 * j;
    va[j] = i < len ? to_f32(ar[i]) : 0.0f;
  }
  if constexpr (!kBackward) {
    MaxSum ms;
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      if (lane + 32 * j < len) ms.add(va[j]);
    }
    ms.group_merge();
    const float log_sum = __logf(ms.s);
    const float inv = 1.0f / ms.s;
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      const int i = lane + 32 * j;
      if (i < len) orow[i] = from_f32<T>(log ? (va[j] - ms.m) - log_sum : __expf(va[j] - ms.m) * inv);
    }
  } else {
    const T* br = b + row * len;
    float vb[kPer];
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      const int i = lane + 32 * j;
      vb[j] = i < len ? to_f32(br[i]) : 0.0f;
      sum += log ? va[j] : va[j] * vb[j];
    }
    sum = group_sum(sum);
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      const int i = lane + 32 * j;
      if (i < len) orow[i] = from_f32<T>(log ? va[j] - __expf(vb[j]) * sum : vb[j] * (va[j] - sum));
    }
  }
}

// The same with 16-byte accesses: rows of a multiple of 8 elements, each lane owning kChunks runs
// of 8 (f16/bf16: one 16-byte load each; f32: two), so a group moves 512 bytes per instruction.
template <typename T, bool kBackward, int kChunks>
__global__ void softmax_group_rows_vec8(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ out,
                                        long long rows, int len, bool log) {
  const int lane = threadIdx.x & 31;
  const long long row = (long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  if (row >= rows) return;
  const T* ar = a + row * len;
  T* orow = out + row * len;
  float va[kChunks][8];
#pragma unroll
  for (int j = 0; j < kChunks; ++j) {
    const int i = (lane + 32 * j) * 8;
    if (i < len) {
      load8(ar + i, va[j]);
    }
  }
  if constexpr (!kBackward) {
    MaxSum ms;
#pragma unroll
    for (int j = 0; j < kChunks; ++j) {
      if ((lane + 32 * j) * 8 < len) {
#pragma unroll
        for (int e = 0; e < 8; ++e) ms.add(va[j][e]);
      }
    }
    ms.group_merge();
    const float log_sum = __logf(ms.s);
    const float inv = 1.0f / ms.s;
#pragma unroll
    for (int j = 0; j < kChunks; ++j) {
      const int i = (lane + 32 * j) * 8;
      if (i < len) {
        float o[8];
#pragma unroll
        for (int e = 0; e < 8; ++e) o[e] = log ? (va[j][e] - ms.m) - log_sum : __expf(va[j][e] - ms.m) * inv;
        store8(orow + i, o);
      }
    }
  } else {
    const T* br = b + row * len;
    float vb[kChunks][8];
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < kChunks; ++j) {
      const int i = (lane + 32 * j) * 8;
      if (i < len) {
        load8(br + i, vb[j]);
#pragma unroll
        for (int e = 0; e < 8; ++e) sum += log ? va[j][e] : va[j][e] * vb[j][e];
      }
    }
    sum = group_sum(sum);
#pragma unroll
    for (int j = 0; j < kChunks; ++j) {
      const int i = (lane + 32 * j) * 8;
      if (i < len) {
        float o[8];
#pragma unroll
        for (int e = 0; e < 8; ++e)
          o[e] = log ? va[j][e] - __expf(vb[j][e]) * sum : vb[j][e] * (va[j][e] - sum);
        store8(orow + i, o);
      }
    }
  }
}

template <int kLanes>
__device__ __forceinline__ float lanes_max(float v) {
#pragma unroll
  for (int m = kLanes / 2; m > 0; m >>= 1) v = fmaxf(v, shfl_xor_lanes<kLanes>(v, m));
  return v;
}

// Forward over rows of a multiple of 8 elements that fit in registers: kLanes lanes per row (a warp
// holds 32 / kLanes rows), each lane loading its kChunks runs of 8 before using any, so a lane has
// kChunks 16-byte loads in flight rather than one. Then the row's maximum, the sum of exp against
// it (each exp computed once and kept for the write), and the write from registers: one read and
// one write of the row, log2(kLanes) shuffle rounds per statistic. Chunks past the row's end and
// rows past the last one hold -inf and are never written; every lane of a warp runs every shuffle.
template <typename T, int kLanes, int kChunks>
__global__ void softmax_forward_lanes_vec8(const T* __restrict__ x, T* __restrict__ y, long long rows,
                                           int len, bool log) {
  const int sub = threadIdx.x % kLanes;
  const long long rows_per_block = blockDim.x / kLanes;
  // The loop bound is the same for the whole block, so a warp's lanes stay together for the shuffles.
  for (long long first = blockIdx.x * rows_per_block; first < rows; first += gridDim.x * rows_per_block) {
    const long long row = first + threadIdx.x / kLanes;
    const bool live = row < rows;
    const T* xr = x + (live ? row : 0) * len;
    T* yr = y + (live ? row : 0) * len;
    float v[kChunks][8];
#pragma unroll
    for (int j = 0; j < kChunks; ++j) {
      const int i = (sub + kLanes * j) * 8;
      if (live && i < len) {
        load8(xr + i, v[j]);
      } else {
#pragma unroll
        for (int e = 0; e < 8; ++e) v[j][e] = -INFINITY;
      }
    }
    // fmaxf passes over NaN, but a NaN's exp below makes the sum NaN, poisoning the row as it should.
    float m = -INFINITY;
#pragma unroll
    for (int j = 0; j < kChunks; ++j) {
#pragma unroll
      for (int e = 0; e < 8; ++e) m = fmaxf(m, v[j][e]);
    }
    m = lanes_max<kLanes>(m);
    float s = 0.0f;
#pragma unroll
    for (int j = 0; j < kChunks; ++j) {
      if ((sub + kLanes * j) * 8 < len) {
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          const float d = v[j][e] - m;
          const float ex = __expf(d);
          s += ex;
          v[j][e] = log ? d : ex;
        }
      }
    }
    s = lanes_sum<kLanes>(s);
    const float log_sum = __logf(s);
    const float inv = 1.0f / s;
#pragma unroll
    for (int j = 0; j < kChunks; ++j) {
      const int i = (sub + kLanes * j) * 8;
      if (live && i < len) {
        float o[8];
#pragma unroll
        for (int e = 0; e < 8; ++e) o[e] = log ? v[j][e] - log_sum : v[j][e] * inv;
        store8(yr + i, o);
      }
    }
  }
}

// One block of kRowBlock threads per row of any length: the statistics pass, then the write pass
// (which re-reads the row, mostly from L2).
template <typename T, bool kBackward>
__global__ void softmax_block_rows(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ out,
                                   long long rows, long long len, bool log) {
  __shared__ float sm[kRowBlock / 32], ss[kRowBlock / 32];
  __shared__ float stat_m, stat_s;
  const int lane = threadIdx.x & 31, group = threadIdx.x / 32;
  for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* ar = a + row * len;
    const T* br = kBackward ? b + row * len : nullptr;
    T* orow = out + row * len;
    MaxSum ms;
    float sum = 0.0f;
    for (long long i = threadIdx.x; i < len; i += kRowBlock) {
      if constexpr (kBackward) {
        sum += log ? to_f32(ar[i]) : to_f32(ar[i]) * to_f32(br[i]);
      } else {
        ms.add(to_f32(ar[i]));
      }
    }
    if constexpr (kBackward) {
      sum = group_sum(sum);
      if (lane == 0) ss[group] = sum;
    } else {
      ms.group_merge();
      if (lane == 0) {
        sm[group] = ms.m;
        ss[group] = ms.s;
      }
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      MaxSum all;
      float total = 0.0f;
      for (int g = 0; g < kRowBlock / 32; ++g) {
        if constexpr (kBackward) {
          total += ss[g];
        } else {
          all.merge(sm[g], ss[g]);
        }
      }
      stat_m = all.m;
      stat_s = kBackward ? total : all.s;
    }
    __syncthreads();
    const float m = stat_m, s = stat_s;
    const float log_sum = __logf(s), inv = 1.0f / s;
    for (long long i = threadIdx.x; i < len; i += kRowBlock) {
      const float v = to_f32(ar[i]);
      if constexpr (kBackward) {
        const float y = to_f32(br[i]);
        orow[i] = from_f32<T>(log ? v - __expf(y) * s : y * (v - s));
      } else {
        orow[i] = from_f32<T>(log ? (v - m) - log_sum : __expf(v - m) * inv);
      }
    }
    __syncthreads();  // stat_m / stat_s are rewritten by the next row
  }
}

// Blocks of 32 adjacent columns x kSplit thread rows that share the axis: coalesced along the
// columns, and parallel along the axis when there are few columns. With kCache > 0 (an axis of at
// most kSplit * kCache) each thread keeps its values in registers between the statistics pass and
// the write pass, so the input is read once; longer axes read it twice (the second time mostly
// from L2).
constexpr int kSplit = 8;
template <typename T, bool kBackward, int kCache>
__global__ void softmax_strided(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ out,
                                long long outer, long long len, long long inner, bool log) {
  __shared__ float sm[kSplit][32], ss[kSplit][32];
  constexpr int kRegs = kCache > 0 ? kCache : 1;
  const int tx = threadIdx.x, ty = threadIdx.y;
  const long long col = (long long)blockIdx.x * 32 + tx;
  for (long long o = blockIdx.y; o < outer; o += gridDim.y) {
    const long long base = o * len * inner + col;
    MaxSum ms;
    float sum = 0.0f;
    float va[kRegs], vb[kRegs];
    if (col < inner) {
      if constexpr (kCache > 0) {
#pragma unroll
        for (int c = 0; c < kCache; ++c) {
          const long long k = ty + (long long)c * kSplit;
          if (k < len) {
            va[c] = to_f32(a[base + k * inner]);
            if constexpr (kBackward) vb[c] = to_f32(b[base + k * inner]);
          }
        }
#pragma unroll
        for (int c = 0; c < kCache; ++c) {
          if (ty + (long long)c * kSplit < len) {
            if constexpr (kBackward) {
              sum += log ? va[c] : va[c] * vb[c];
            } else {
              ms.add(va[c]);
            }
          }
        }
      } else {
        for (long long k = ty; k < len; k += kSplit) {
          const float v = to_f32(a[base + k * inner]);
          if constexpr (kBackward) {
            sum += log ? v : v * to_f32(b[base + k * inner]);
          } else {
            ms.add(v);
          }
        }
      }
    }
    sm[ty][tx] = ms.m;
    ss[ty][tx] = kBackward ? sum : ms.s;
    __syncthreads();
    MaxSum all;
    float total = 0.0f;
    for (int r = 0; r < kSplit; ++r) {
      if constexpr (kBackward) {
        total += ss[r][tx];
      } else {
        all.merge(sm[r][tx], ss[r][tx]);
      }
    }
    __syncthreads();  // the shared rows are rewritten for the next outer index
    if (col >= inner) continue;
    const float m = all.m, s = kBackward ? total : all.s;
    const float log_sum = __logf(s), inv = 1.0f / s;
    const auto result = [&](float v, float y) {
      if constexpr (kBackward) return log ? v - __expf(y) * s : y * (v - s);
      return log ? (v - m) - log_sum : __expf(v - m) * inv;
    };
    if constexpr (kCache > 0) {
#pragma unroll
      for (int c = 0; c < kCache; ++c) {
        const long long k = ty + (long long)c * kSplit;
        if (k < len) out[base + k * inner] = from_f32<T>(result(va[c], kBackward ? vb[c] : 0.0f));
      }
    } else {
      for (long long k = ty; k < len; k += kSplit) {
        const long long idx = base + k * inner;
        out[idx] = from_f32<T>(result(to_f32(a[idx]), kBackward ? to_f32(b[idx]) : 0.0f));
      }
    }
  }
}

struct Launch {
  const void* a;
  const void* b;
  void* out;
  long long outer, len, inner;
  bool log, backward;
  DType dtype;
};

Launch launch_of(const SoftmaxProblem& p, const SoftmaxArgs& args) {
  Launch l{};
  l.a = p.backward ? args.diff_dst : args.src;
  l.b = p.backward ? args.dst : nullptr;
  l.out = p.backward ? args.diff_src : args.dst;
  l.outer = p.outer();
  l.len = p.axis_size();
  l.inner = p.inner();
  l.log = p.algorithm == SoftmaxAlgorithm::log_softmax;
  l.backward = p.backward;
  l.dtype = p.dtype;
  return l;
}

template <typename T, bool kBackward, int kPer>
void group_rows(const Launch& l, GpuStream s) {
  constexpr int kThreads = 256;
  const long long blocks = (l.outer + kThreads / 32 - 1) / (kThreads / 32);
  softmax_group_rows<T, kBackward, kPer>
      <<<unsigned(blocks), kThreads, 0, s>>>(static_cast<const T*>(l.a), static_cast<const T*>(l.b),
                                             static_cast<T*>(l.out), l.outer, int(l.len), l.log);
}

template <typename T, bool kBackward, int kChunks>
void group_rows_vec8(const Launch& l, GpuStream s) {
  constexpr int kThreads = 256;
  const long long blocks = (l.outer + kThreads / 32 - 1) / (kThreads / 32);
  softmax_group_rows_vec8<T, kBackward, kChunks>
      <<<unsigned(blocks), kThreads, 0, s>>>(static_cast<const T*>(l.a), static_cast<const T*>(l.b),
                                             static_cast<T*>(l.out), l.outer, int(l.len), l.log);
}

// Rows of a multiple of 8 elements on 16-byte aligned tensors start 16-byte aligned.
bool vec8_fits(const Launch& l) {
  const auto aligned = [](const void* p) { return (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0; };
  return l.len % 8 == 0 && aligned(l.a) && aligned(l.out) && (l.b == nullptr || aligned(l.b));
}

// Up to four 16-byte chunks per lane, as few lanes per row as that allows (at least 4, so short
// rows still spread over a few lanes); blocks shrink from 256 threads while there would be fewer
// than 512 of them, so small problems still reach every multiprocessor.
template <typename T, int kLanes>
void forward_lanes_vec8(const Launch& l, GpuStream s) {
  constexpr int kChunks = 4;
  int threads = 256;
  const auto blocks_for = [&](int t) { return (l.outer + t / kLanes - 1) / (t / kLanes); };
  while (threads > 64 && blocks_for(threads) < 512) threads /= 2;
  const long long blocks = std::min<long long>(blocks_for(threads), 65535LL * 32);
  softmax_forward_lanes_vec8<T, kLanes, kChunks><<<unsigned(blocks), threads, 0, s>>>(
      static_cast<const T*>(l.a), static_cast<T*>(l.out), l.outer, int(l.len), l.log);
}

template <typename T, bool kBackward>
void launch_rows(const Launch& l, GpuStream s) {
  if (!kBackward && l.len <= kWarpRowsMax && vec8_fits(l)) {
    if (l.len <= 4 * 4 * 8) return forward_lanes_vec8<T, 4>(l, s);
    if (l.len <= 8 * 4 * 8) return forward_lanes_vec8<T, 8>(l, s);
    if (l.len <= 16 * 4 * 8) return forward_lanes_vec8<T, 16>(l, s);
    return forward_lanes_vec8<T, 32>(l, s);
  }
  if (l.len <= kWarpRowsMax && vec8_fits(l)) {
    if (l.len <= 256) return group_rows_vec8<T, kBackward, 1>(l, s);
    if (l.len <= 512) return group_rows_vec8<T, kBackward, 2>(l, s);
    return group_rows_vec8<T, kBackward, 4>(l, s);
  }
  if (l.len <= kWarpRowsMax) {
    if (l.len <= 32) return group_rows<T, kBackward, 1>(l, s);
    if (l.len <= 64) return group_rows<T, kBackward, 2>(l, s);
    if (l.len <= 128) return group_rows<T, kBackward, 4>(l, s);
    if (l.len <= 256) return group_rows<T, kBackward, 8>(l, s);
    if (l.len <= 512) return group_rows<T, kBackward, 16>(l, s);
    return group_rows<T, kBackward, 32>(l, s);
  }
  const long long blocks = std::min<long long>(l.outer, 65535LL * 16);
  softmax_block_rows<T, kBackward><<<unsigned(blocks), kRowBlock, 0, s>>>(
      static_cast<const T*>(l.a), static_cast<const T*>(l.b), static_cast<T*>(l.out), l.outer, l.len, l.log);
}

template <typename T, bool kBackward, int kCache>
void strided(const Launch& l, GpuStream s) {
  const dim3 block(32, kSplit);
  const dim3 grid(unsigned((l.inner + 31) / 32), unsigned(std::min<long long>(l.outer, 65535)));
  softmax_strided<T, kBackward, kCache>
      <<<grid, block, 0, s>>>(static_cast<const T*>(l.a), static_cast<const T*>(l.b), static_cast<T*>(l.out),
                              l.outer, l.len, l.inner, l.log);
}

template <typename T, bool kBackward>
void launch_strided(const Launch& l, GpuStream s) {
  if (l.len <= kSplit * 8) return strided<T, kBackward, 8>(l, s);
  if (l.len <= kSplit * 32) return strided<T, kBackward, 32>(l, s);
  strided<T, kBackward, 0>(l, s);
}

class GpuSoftmaxSolver : public dnn::Solver<SoftmaxProblem> {
 public:
  GpuSoftmaxSolver(std::string name, std::string backend)
      : name_(std::move(name)), backend_(std::move(backend)) {}
  std::string_view name() const override { return name_; }

  Applicability check(const SoftmaxProblem& p, const runtime::Device& device) const override {
    if (device.backend() != backend_)
      return Applicability::no("runs on " + backend_ + " devices, not " + device.name());
    if ((p.inner() + 31) / 32 > INT_MAX) return Applicability::no("more than 2^36 columns after the axis");
    return check_shape(p);
  }

  void run(runtime::Stream& stream, const SoftmaxProblem& p, const SoftmaxArgs& a) const override {
    const Launch l = launch_of(p, a);
    stream.launch(name_, [&] {
      ScopedDevice device(stream.device().index());
      const GpuStream s = as_stream(stream.native_handle());
      dispatch_dtype(p.dtype, name_.c_str(), [&](auto* tag) {
        using T = std::remove_pointer_t<decltype(tag)>;
        if (p.backward) {
          launch<T, true>(l, s);
        } else {
          launch<T, false>(l, s);
        }
      });
      check_launch(name_.c_str());
    });
  }

 protected:
  virtual Applicability check_shape(const SoftmaxProblem& p) const = 0;
  template <typename T, bool kBackward>
  void launch(const Launch& l, GpuStream s) const {
    if (strided()) {
      launch_strided<T, kBackward>(l, s);
    } else {
      launch_rows<T, kBackward>(l, s);
    }
  }
  virtual bool strided() const = 0;

  std::string name_, backend_;
};

class RowsSolver final : public GpuSoftmaxSolver {
 public:
  explicit RowsSolver(std::string backend) : GpuSoftmaxSolver("gpu.softmax.rows", std::move(backend)) {}
  std::string detail(const SoftmaxProblem& p, const runtime::Device&) const override {
    return p.axis_size() <= kWarpRowsMax ? "row in the registers of 4 to 32 lanes"
                                         : "a block per row, two passes";
  }

 protected:
  Applicability check_shape(const SoftmaxProblem& p) const override {
    if (p.inner() != 1)
      return Applicability::no("the axis has stride " + std::to_string(p.inner()) + ", not 1");
    if (p.axis_size() <= kWarpRowsMax && p.outer() > (long long)UINT_MAX / 8 * 8) {
      return Applicability::no("more than 2^35 rows");
    }
    return Applicability::yes();
  }
  bool strided() const override { return false; }
};

class StridedSolver final : public GpuSoftmaxSolver {
 public:
  explicit StridedSolver(std::string backend) : GpuSoftmaxSolver("gpu.softmax.strided", std::move(backend)) {}
  std::string detail(const SoftmaxProblem& p, const runtime::Device&) const override {
    return p.axis_size() <= kSplit * 32 ? "32 columns x 8 axis slices per block, axis in registers"
                                        : "32 columns x 8 axis slices per block, two passes";
  }

 protected:
  Applicability check_shape(const SoftmaxProblem&) const override { return Applicability::yes(); }
  bool strided() const override { return true; }
};

}  // namespace

std::unique_ptr<dnn::Solver<SoftmaxProblem>> make_softmax_rows(std::string_view backend) {
  return std::make_unique<RowsSolver>(std::string(backend));
}
std::unique_ptr<dnn::Solver<SoftmaxProblem>> make_softmax_strided(std::string_view backend) {
  return std::make_unique<StridedSolver>(std::string(backend));
}

}  // namespace galley::backends::gpu
