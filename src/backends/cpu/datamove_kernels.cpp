#include "backends/cpu/datamove_kernels.hpp"

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "backends/cpu/broadcast_fill.hpp"
#include "backends/cpu/conv_isa.hpp"
#include "backends/cpu/datamove_shares.hpp"
#include "backends/cpu/thread_pool.hpp"
#include "backends/cpu/transpose_avx512.hpp"
#include "galley/core/error.hpp"

namespace galley::backends::cpu {
namespace {

using dnn::CopyPlan;

// Element types: raw unsigned words for pure moves (any dtype of that size), tagged 16-bit words
// for conversions.
struct Half {
  std::uint16_t bits;
};
struct BFloat {
  std::uint16_t bits;
};

inline float widen(float v) { return v; }
inline float widen(Half v) { return half_to_float(v.bits); }
inline float widen(BFloat v) { return bfloat16_to_float(v.bits); }
template <class T>
inline T narrow(float v);
template <>
inline float narrow<float>(float v) {
  return v;
}
template <>
inline Half narrow<Half>(float v) {
  return {float_to_half(v)};
}
template <>
inline BFloat narrow<BFloat>(float v) {
  return {float_to_bfloat16(v)};
}

template <class S, class D>
inline D cast(S v) {
  if constexpr (std::is_same_v<S, D>) {
    return v;
  } else {
    return narrow<D>(widen(v));
  }
}

// Calls f(S*, D*) with the element types of a plan.
template <class F>
void dispatch_types(DType src, DType dst, F&& f) {
  if (src == dst) {
    switch (size_of(src)) {
      case 1:
        return f(static_cast<std::uint8_t*>(nullptr), static_cast<std::uint8_t*>(nullptr));
      case 2:
        return f(static_cast<std::uint16_t*>(nullptr), static_cast<std::uint16_t*>(nullptr));
      case 4:
        return f(static_cast<std::uint32_t*>(nullptr), static_cast<std::uint32_t*>(nullptr));
      default:
        break;
    }
  }
  const auto with_dst = [&](auto* s) {
    switch (dst) {
      case DType::f32:
        return f(s, static_cast<float*>(nullptr));
      case DType::f16:
        return f(s, static_cast<Half*>(nullptr));
      case DType::bf16:
        return f(s, static_cast<BFloat*>(nullptr));
      default:
        throw Error(Status::unsupported, std::string("cpu data movement: dtype ") + to_string(dst));
    }
  };
  switch (src) {
    case DType::f32:
      return with_dst(static_cast<float*>(nullptr));
    case DType::f16:
      return with_dst(static_cast<Half*>(nullptr));
    case DType::bf16:
      return with_dst(static_cast<BFloat*>(nullptr));
    default:
      throw Error(Status::unsupported, std::string("cpu data movement: dtype ") + to_string(src));
  }
}

// n contiguous elements.
template <class S, class D>
inline void copy_run(const S* src, D* dst, std::int64_t n) {
  if constexpr (std::is_same_v<S, D>) {
    std::memcpy(dst, src, static_cast<std::size_t>(n) * sizeof(S));
  } else {
    for (std::int64_t i = 0; i < n; ++i) dst[i] = cast<S, D>(src[i]);
  }
}

// Enough work per pool task that scheduling costs nothing next to it.
constexpr std::int64_t kGrainBytes = 64 << 10;

std::int64_t grain_of(std::int64_t elements_per_unit, std::size_t element_bytes) {
  const std::int64_t unit_bytes =
      std::max<std::int64_t>(1, elements_per_unit * static_cast<std::int64_t>(element_bytes));
  return std::max<std::int64_t>(1, kGrainBytes / unit_bytes);
}

// Runs body(first, last) over [0, units) in chunks of about `grain` units; a tensor whose `bytes`
// (read and written) fit the cores' caches in one share per thread (datamove_shares.hpp).
template <class Body>
void parallel_units(std::int64_t units, std::int64_t grain, std::int64_t bytes, Body&& body) {
  if (bytes <= kThreadShareBytes) {
    parallel_for_shares(units, bytes, body);
    return;
  }
  const std::int64_t chunks = (units + grain - 1) / grain;
  parallel_for(0, chunks,
               [&](std::int64_t lo, std::int64_t hi) { body(lo * grain, std::min(units, hi * grain)); });
}

// Bytes a copy plan reads and writes.
template <class S, class D>
std::int64_t moved_bytes(const CopyPlan& p) {
  return p.elements() * static_cast<std::int64_t>(sizeof(S) + sizeof(D));
}

// Src offset of the `row`-th row of dims[0..rank-1), last dim excluded.
std::int64_t row_offset(const CopyPlan& p, std::int64_t row, int dims_before) {
  std::int64_t off = p.src_offset;
  for (int k = dims_before - 1; k >= 0; --k) {
    off += (row % p.dims[k]) * p.src_strides[k];
    row /= p.dims[k];
  }
  return off;
}

template <class S, class D>
void copy_rows(const CopyPlan& p, const S* src, D* dst) {
  const int last = p.rank - 1;
  const std::int64_t len = p.dims[last], stride = p.src_strides[last];
  const std::int64_t rows = p.elements() / len;
  parallel_units(rows, grain_of(len, sizeof(D)), moved_bytes<S, D>(p),
                 [&](std::int64_t first, std::int64_t end) {
                   for (std::int64_t r = first; r < end; ++r) {
                     const S* s = src + row_offset(p, r, last);
                     D* d = dst + r * len;
                     if (stride == 1) {
                       copy_run(s, d, len);
                     } else {
                       for (std::int64_t i = 0; i < len; ++i) d[i] = cast<S, D>(s[i * stride]);
                     }
                   }
                 });
}

// The unit-stride dim `a` and the last dim swap: both tensors are read and written a cache-sized
// tile at a time, so the strided side touches each cache line once per tile instead of once per
// element; on AVX-512 CPUs 4-byte moves transpose a tile in 16 x 16 register blocks.
template <class S, class D>
void copy_tiled(const CopyPlan& p, int a, const S* src, D* dst) {
  constexpr std::int64_t kTile = 32;
  // 4-byte moves transpose each tile as 2 x 2 blocks of 16 x 16 in AVX-512 registers.
  const bool avx512 = sizeof(S) == 4 && std::is_same_v<S, D> && cpu_has_avx512();
  const int last = p.rank - 1;
  const std::int64_t la = p.dims[a], lb = p.dims[last], sb = p.src_strides[last];
  // dst stride of dim a: the product of the dims after it.
  std::int64_t da = 1;
  for (int k = a + 1; k < p.rank; ++k) da *= p.dims[k];
  // Batch: every dim but a and last, outermost first.
  int bdims[dnn::kMaxRank];
  int nb = 0;
  for (int k = 0; k < last; ++k) {
    if (k != a) bdims[nb++] = k;
  }
  std::int64_t batches = 1;
  for (int i = 0; i < nb; ++i) batches *= p.dims[bdims[i]];
  const std::int64_t ta = (la + kTile - 1) / kTile, tb = (lb + kTile - 1) / kTile;
  const std::int64_t units = batches * ta * tb;
  // Tensors from memory: each tile asks for the next tile's src lines as it goes (its rows lie
  // sb apart, in runs of a tile's width, too short for the hardware prefetchers), and dst far
  // beyond the caches is written around them (a plain store would first read each line).
  const std::int64_t bytes = moved_bytes<S, D>(p);
  const bool prefetch = avx512 && bytes > kThreadShareBytes;
  const bool stream = avx512 && p.elements() * static_cast<std::int64_t>(sizeof(D)) >= kBypassCacheBytes;
  struct Tile {
    std::int64_t soff, doff, a0, a1, b0, b1;
  };
  const auto tile = [&](std::int64_t u) {
    std::int64_t t = u;
    const std::int64_t ib = t % tb;
    t /= tb;
    const std::int64_t ia = t % ta;
    std::int64_t batch = t / ta;
    std::int64_t soff = p.src_offset, doff = 0;
    for (int i = nb - 1; i >= 0; --i) {
      const int k = bdims[i];
      const std::int64_t idx = batch % p.dims[k];
      batch /= p.dims[k];
      soff += idx * p.src_strides[k];
      std::int64_t dstride = 1;
      for (int j = k + 1; j < p.rank; ++j) dstride *= p.dims[j];
      doff += idx * dstride;
    }
    const std::int64_t a0 = ia * kTile, b0 = ib * kTile;
    return Tile{soff, doff, a0, std::min(la, a0 + kTile), b0, std::min(lb, b0 + kTile)};
  };
  parallel_units(units, std::max<std::int64_t>(1, grain_of(kTile * kTile, sizeof(D))), bytes,
                 [&](std::int64_t first, std::int64_t end) {
                   // The next tile's place, worked out one unit ahead where it is prefetched.
                   Tile next = prefetch ? tile(first) : Tile{};
                   for (std::int64_t u = first; u < end; ++u) {
                     const Tile cur = prefetch ? next : tile(u);
                     if (prefetch && u + 1 < end) next = tile(u + 1);
                     const std::int64_t a0 = cur.a0, a1 = cur.a1, b0 = cur.b0, b1 = cur.b1;
                     const std::int64_t soff = cur.soff, doff = cur.doff;
                     if constexpr (std::is_same_v<S, std::uint32_t> && std::is_same_v<D, std::uint32_t>) {
                       if (avx512) {
                         const bool ahead = prefetch && u + 1 < end;
                         avx512::transpose_32bit(src + soff + a0 + b0 * sb, sb, dst + doff + a0 * da + b0, da,
                                                 b1 - b0, a1 - a0,
                                                 ahead ? src + next.soff + next.a0 + next.b0 * sb : nullptr,
                                                 ahead ? next.b1 - next.b0 : 0, stream);
                         continue;
                       }
                     }
                     for (std::int64_t x = a0; x < a1; ++x) {
                       const S* s = src + soff + x;
                       D* d = dst + doff + x * da;
                       for (std::int64_t y = b0; y < b1; ++y) d[y] = cast<S, D>(s[y * sb]);
                     }
                   }
                   if (stream) avx512::stream_fence();
                 });
}

template <class S, class D>
void copy_typed(const CopyPlan& p, const S* src, D* dst) {
  if (p.rank == 1 && p.src_strides[0] == 1) {
    const std::int64_t n = p.dims[0];
    parallel_units(n, grain_of(1, sizeof(D)), moved_bytes<S, D>(p),
                   [&](std::int64_t first, std::int64_t end) {
                     copy_run(src + p.src_offset + first, dst + first, end - first);
                   });
    return;
  }
  const int a = p.unit_stride_dim();
  if (p.src_strides[p.rank - 1] != 1 && a >= 0) {
    copy_tiled(p, a, src, dst);
    return;
  }
  copy_rows(p, src, dst);
}

}  // namespace

void run_copy_plan(const CopyPlan& plan, const void* src, void* dst) {
  dispatch_types(plan.src_dtype, plan.dst_dtype, [&](auto* s, auto* d) {
    using S = std::remove_pointer_t<decltype(s)>;
    using D = std::remove_pointer_t<decltype(d)>;
    copy_typed(plan, static_cast<const S*>(src), static_cast<D*>(dst));
  });
}

void run_parts(const dnn::PartsPlan& plan, bool concat, void* whole, void* const* parts) {
  const auto e = static_cast<std::int64_t>(size_of(plan.dtype));
  const auto n = static_cast<std::int64_t>(plan.inner.size());
  // One unit is one part's run in one row; a wide part's run is cut into pieces of the grain.
  std::vector<std::int64_t> pieces(static_cast<std::size_t>(n)),
      first_unit(static_cast<std::size_t>(n) + 1, 0);
  const std::int64_t grain = kGrainBytes / e;
  for (std::int64_t i = 0; i < n; ++i) {
    pieces[static_cast<std::size_t>(i)] =
        std::max<std::int64_t>(1, (plan.inner[static_cast<std::size_t>(i)] + grain - 1) / grain);
  }
  // Units run row by row, parts in order, so consecutive units write neighbouring memory.
  std::int64_t per_row = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    first_unit[static_cast<std::size_t>(i)] = per_row;
    per_row += pieces[static_cast<std::size_t>(i)];
  }
  first_unit[static_cast<std::size_t>(n)] = per_row;
  std::byte* w = static_cast<std::byte*>(whole);
  const std::int64_t row_bytes = plan.row * e;
  std::int64_t avg_bytes = std::max<std::int64_t>(1, row_bytes / per_row);
  parallel_units(plan.outer * per_row, std::max<std::int64_t>(1, kGrainBytes / avg_bytes),
                 2 * plan.outer * row_bytes, [&](std::int64_t first, std::int64_t end) {
                   std::int64_t row = first / per_row, k = first % per_row;
                   std::size_t part = static_cast<std::size_t>(
                       std::upper_bound(first_unit.begin(), first_unit.end(), k) - first_unit.begin() - 1);
                   for (std::int64_t u = first; u < end; ++u) {
                     const std::int64_t piece = k - first_unit[part];
                     const std::int64_t len = plan.inner[part];
                     const std::int64_t lo = piece * grain, hi = std::min(len, lo + grain);
                     std::byte* wp = w + (row * plan.row + plan.offset[part] + lo) * e;
                     std::byte* pp = static_cast<std::byte*>(parts[part]) + (row * len + lo) * e;
                     const auto bytes = static_cast<std::size_t>((hi - lo) * e);
                     if (concat) {
                       std::memcpy(wp, pp, bytes);
                     } else {
                       std::memcpy(pp, wp, bytes);
                     }
                     if (++k == per_row) {
                       k = 0;
                       part = 0;
                       ++row;
                     } else if (k == first_unit[part + 1]) {
                       ++part;
                     }
                   }
                 });
}

namespace {

template <class T>
void pad_typed(const dnn::PadPlan& p, const T* src, T* dst, T value) {
  const int last = p.rank - 1;
  const std::int64_t len = p.padded[last], inner = p.small[last], before = p.before[last];
  std::int64_t rows = 1;
  for (int k = 0; k < last; ++k) rows *= p.padded[k];
  // The padded tensor is written and at most as much read.
  const std::int64_t bytes = 2 * rows * len * static_cast<std::int64_t>(sizeof(T));
  parallel_units(rows, grain_of(len, sizeof(T)), bytes, [&](std::int64_t first, std::int64_t end) {
    for (std::int64_t r = first; r < end; ++r) {
      T* d = dst + r * len;
      // The src row of this dst row, or none when it lies in an outer dim's padding.
      std::int64_t t = r, srow = 0, scale = 1;
      bool inside = true;
      for (int k = last - 1; k >= 0; --k) {
        const std::int64_t idx = t % p.padded[k] - p.before[k];
        t /= p.padded[k];
        if (idx < 0 || idx >= p.small[k]) {
          inside = false;
          break;
        }
        srow += idx * scale;
        scale *= p.small[k];
      }
      if (!inside) {
        std::fill(d, d + len, value);
        continue;
      }
      std::fill(d, d + before, value);
      std::memcpy(d + before, src + srow * inner, static_cast<std::size_t>(inner) * sizeof(T));
      std::fill(d + before + inner, d + len, value);
    }
  });
}

}  // namespace

void run_pad(const dnn::PadPlan& plan, const void* src, void* dst) {
  const float v = static_cast<float>(plan.value);
  switch (plan.dtype) {
    case DType::f32: {
      std::uint32_t bits = 0;
      std::memcpy(&bits, &v, 4);
      return pad_typed(plan, static_cast<const std::uint32_t*>(src), static_cast<std::uint32_t*>(dst), bits);
    }
    case DType::f16:
      return pad_typed(plan, static_cast<const std::uint16_t*>(src), static_cast<std::uint16_t*>(dst),
                       float_to_half(v));
    case DType::bf16:
      return pad_typed(plan, static_cast<const std::uint16_t*>(src), static_cast<std::uint16_t*>(dst),
                       float_to_bfloat16(v));
    default:
      throw Error(Status::unsupported, std::string("cpu.pad: dtype ") + to_string(plan.dtype));
  }
}

}  // namespace galley::backends::cpu
