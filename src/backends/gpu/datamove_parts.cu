// Concat and split in one launch for all parts (blocks shared out by size, 16-byte vectors when
// every run allows), and pad's forward (one thread per output vector, inside or padding).
#include <algorithm>
#include <cstring>

#include "datamove_device.cuh"
#include "datamove_kernels.hpp"
#include "galley/dnn/op.hpp"

namespace galley::backends::gpu {
namespace {

using namespace datamove;

// Every part's pointer and place in a row, and the first block of the grid that works on it, as
// one kernel argument (about 3.1 KB of the 4 KB parameter space at kMaxMultiArgs parts). Blocks
// are handed out in proportion to each part's size, so one large part among small ones still
// gets the whole device and no block starts without work.
struct Parts {
  void* ptr[dnn::kMaxMultiArgs];
  std::int64_t inner[dnn::kMaxMultiArgs];
  std::int64_t offset[dnn::kMaxMultiArgs];
  std::uint32_t first_block[dnn::kMaxMultiArgs + 1];
  std::int64_t row;
  std::int64_t outer;
  int count;
};

constexpr int kPartsThreads = 256;
constexpr int kUnitsPerThread = 4;

// Lengths are in units of T (a vector of N elements, or one element).
template <class T, bool kConcat, class I>
__global__ void parts_kernel(Parts parts, T* whole) {
  // The part of this block: the last whose first block is at or before it.
  int lo = 0, hi = parts.count - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (parts.first_block[mid] <= blockIdx.x) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  const int part = lo;
  const I inner = static_cast<I>(parts.inner[part]);
  const I units = static_cast<I>(parts.outer) * inner;
  const I row = static_cast<I>(parts.row), offset = static_cast<I>(parts.offset[part]);
  T* piece = static_cast<T*>(parts.ptr[part]);
  const I base =
      static_cast<I>(blockIdx.x - parts.first_block[part]) * (kPartsThreads * kUnitsPerThread) + threadIdx.x;
#pragma unroll
  for (int j = 0; j < kUnitsPerThread; ++j) {
    const I u = base + static_cast<I>(j) * kPartsThreads;
    if (u >= units) break;
    const I o = u / inner, k = u - o * inner;
    const I w = o * row + offset + k;
    if (kConcat) {
      whole[w] = piece[u];
    } else {
      piece[u] = whole[w];
    }
  }
}

template <class T>
void launch_parts_as(const dnn::PartsPlan& plan, bool concat, void* whole, void* const* ptrs,
                     std::int64_t scale, GpuStream stream) {
  constexpr std::int64_t kPerBlock = kPartsThreads * kUnitsPerThread;
  Parts parts{};
  const std::size_t count = plan.inner.size();
  std::int64_t blocks = 0;
  for (std::size_t i = 0; i < count; ++i) {
    parts.ptr[i] = ptrs[i];
    parts.inner[i] = plan.inner[i] / scale;
    parts.offset[i] = plan.offset[i] / scale;
    parts.first_block[i] = static_cast<std::uint32_t>(blocks);
    blocks += (plan.outer * parts.inner[i] + kPerBlock - 1) / kPerBlock;
    if (blocks > 0x7fffffff)
      throw Error(Status::unsupported, "gpu concat/split: more than 2^31 blocks of work");
  }
  parts.first_block[count] = static_cast<std::uint32_t>(blocks);
  parts.row = plan.row / scale;
  parts.outer = plan.outer;
  parts.count = static_cast<int>(count);
  const bool small = plan.outer * parts.row < (std::int64_t(1) << 31);
  const auto grid = static_cast<unsigned>(blocks);
  T* w = static_cast<T*>(whole);
  if (concat) {
    if (small) {
      parts_kernel<T, true, std::uint32_t><<<grid, kPartsThreads, 0, stream>>>(parts, w);
    } else {
      parts_kernel<T, true, std::int64_t><<<grid, kPartsThreads, 0, stream>>>(parts, w);
    }
  } else if (small) {
    parts_kernel<T, false, std::uint32_t><<<grid, kPartsThreads, 0, stream>>>(parts, w);
  } else {
    parts_kernel<T, false, std::int64_t><<<grid, kPartsThreads, 0, stream>>>(parts, w);
  }
}

// The widest unit (bytes, a power of two up to 16) that divides every run and aligns every pointer.
std::int64_t unit_bytes(const dnn::PartsPlan& plan, const void* whole, void* const* parts) {
  const auto e = static_cast<std::int64_t>(size_of(plan.dtype));
  for (std::int64_t unit = 16; unit > e; unit /= 2) {
    const std::int64_t n = unit / e;
    bool ok = plan.row % n == 0 && aligned(whole, static_cast<std::size_t>(unit));
    for (std::size_t i = 0; ok && i < plan.inner.size(); ++i) {
      ok = plan.inner[i] % n == 0 && plan.offset[i] % n == 0 &&
           aligned(parts[i], static_cast<std::size_t>(unit));
    }
    if (ok) return unit;
  }
  return e;
}

// Pad in memory order (PadPlan), in units of N elements: every unit of the output is wholly
// inside the source or wholly padding, because the last dim's sizes are multiples of N.
struct PadGeometry {
  int rank;
  std::int64_t small[dnn::kMaxRank];
  std::int64_t padded[dnn::kMaxRank];
  std::int64_t before[dnn::kMaxRank];
};

template <class T, class I>
__global__ void pad_kernel(PadGeometry g, const T* __restrict__ src, T* __restrict__ dst, T value, I units) {
  const I step = static_cast<I>(gridDim.x) * blockDim.x;
  for (I u = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; u < units; u += step) {
    I t = u;
    std::int64_t s = 0, scale = 1;
    bool inside = true;
    for (int k = g.rank - 1; k >= 0; --k) {
      const I d = static_cast<I>(g.padded[k]);
      const std::int64_t idx = static_cast<std::int64_t>(t % d) - g.before[k];
      t /= d;
      inside = inside && idx >= 0 && idx < g.small[k];
      s += idx * scale;
      scale *= g.small[k];
    }
    dst[u] = inside ? src[s] : value;
  }
}

template <class W>
void launch_pad_as(const dnn::PadPlan& plan, const void* src, void* dst, W value_bits, GpuStream stream) {
  constexpr int kThreads = 256;
  // Widest vector (up to 16 bytes) the last dim's sizes and the pointers allow.
  int n = 16 / static_cast<int>(sizeof(W));
  const int last = plan.rank - 1;
  while (n > 1 && !(plan.small[last] % n == 0 && plan.padded[last] % n == 0 && plan.before[last] % n == 0 &&
                    aligned(src, sizeof(W) * n) && aligned(dst, sizeof(W) * n))) {
    n /= 2;
  }
  PadGeometry g{};
  g.rank = plan.rank;
  std::int64_t units = 1;
  for (int k = 0; k < plan.rank; ++k) {
    const std::int64_t div = k == last ? n : 1;
    g.small[k] = plan.small[k] / div;
    g.padded[k] = plan.padded[k] / div;
    g.before[k] = plan.before[k] / div;
    units *= g.padded[k];
  }
  const auto go = [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    T v;
    for (std::size_t j = 0; j < sizeof(T) / sizeof(W); ++j)
      std::memcpy(reinterpret_cast<char*>(&v) + j * sizeof(W), &value_bits, sizeof(W));
    const T* s = static_cast<const T*>(src);
    T* d = static_cast<T*>(dst);
    if (units < (std::int64_t(1) << 31)) {
      pad_kernel<T, std::uint32_t>
          <<<grid_for(units, kThreads), kThreads, 0, stream>>>(g, s, d, v, static_cast<std::uint32_t>(units));
    } else {
      pad_kernel<T, std::int64_t><<<grid_for(units, kThreads), kThreads, 0, stream>>>(g, s, d, v, units);
    }
  };
  switch (n * static_cast<int>(sizeof(W))) {
    case 16:
      go(static_cast<Vec<W, 16 / sizeof(W)>*>(nullptr));
      break;
    case 8:
      go(static_cast<Vec<W, 8 / sizeof(W)>*>(nullptr));
      break;
    case 4:
      go(static_cast<Vec<W, (4 / sizeof(W) > 0 ? 4 / sizeof(W) : 1)>*>(nullptr));
      break;
    default:
      go(static_cast<W*>(nullptr));
      break;
  }
}

}  // namespace

void launch_parts(const dnn::PartsPlan& plan, bool concat, void* whole, void* const* parts, void* stream) {
  const std::int64_t unit = unit_bytes(plan, whole, parts);
  const std::int64_t scale = unit / static_cast<std::int64_t>(size_of(plan.dtype));
  const GpuStream s = as_stream(stream);
  switch (unit) {
    case 16:
      launch_parts_as<Vec<std::uint32_t, 4>>(plan, concat, whole, parts, scale, s);
      break;
    case 8:
      launch_parts_as<Vec<std::uint32_t, 2>>(plan, concat, whole, parts, scale, s);
      break;
    case 4:
      launch_parts_as<std::uint32_t>(plan, concat, whole, parts, scale, s);
      break;
    case 2:
      launch_parts_as<std::uint16_t>(plan, concat, whole, parts, scale, s);
      break;
    default:
      launch_parts_as<std::uint8_t>(plan, concat, whole, parts, scale, s);
      break;
  }
  check_launch(concat ? "gpu.concat" : "gpu.split");
}

void launch_pad(const dnn::PadPlan& plan, const void* src, void* dst, void* stream) {
  const float v = static_cast<float>(plan.value);
  const GpuStream s = as_stream(stream);
  switch (plan.dtype) {
    case DType::f32: {
      std::uint32_t bits = 0;
      std::memcpy(&bits, &v, sizeof bits);
      launch_pad_as<std::uint32_t>(plan, src, dst, bits, s);
      break;
    }
    case DType::f16:
      launch_pad_as<std::uint16_t>(plan, src, dst, float_to_half(v), s);
      break;
    case DType::bf16:
      launch_pad_as<std::uint16_t>(plan, src, dst, float_to_bfloat16(v), s);
      break;
    default:
      throw Error(Status::unsupported, std::string("gpu.pad: dtype ") + to_string(plan.dtype));
  }
  check_launch("gpu.pad");
}

}  // namespace galley::backends::gpu
