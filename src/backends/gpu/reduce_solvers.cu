// gpu.reduce.direct: kernels and solver glue. The problem is coalesced into alternating kept and
// reduced groups (dnn::ReduceGroups); the innermost group is contiguous in memory.
// - Innermost reduced: each output sums contiguous rows. Small outputs: one 32-lane group each;
//   large ones: a block each, tree-reduced through shared memory.
// - Innermost kept: a thread per output element adds rows lane by lane (coalesced). Where there is
//   one reduced group and rows are whole 16-byte vectors (a sum over H and W of channels-last data),
//   the column kernel instead: threads across the row in 16-byte vectors, lanes down the reduced
//   rows, several loads in flight per thread, the lanes added in a fixed tree.
// When the outputs alone cannot fill the GPU, the reduced range is cut into chunks whose partial
// sums go to the workspace and a second kernel adds them in a fixed order: deterministic, no atomics.
#include <algorithm>
#include <string>

#include "column_sum_device.cuh"
#include "galley/runtime/device.hpp"
#include "galley/runtime/stream.hpp"
#include "softmax_reduce_device.cuh"
#include "softmax_reduce_solvers.hpp"

namespace galley::backends::gpu {
namespace {

using dnn::Applicability;
using dnn::ReduceArgs;
using dnn::ReduceProblem;
using softmax_device::group_sum;

constexpr int kThreads = 256;
constexpr long long kGroupWorkMax = 4096;  // per-output elements a 32-lane group takes alone
// The column kernel: the fewest reduced rows one lane takes per chunk, and the blocks it aims at.
constexpr long long kColumnRowsPerLane = 4;
constexpr long long kColumnBlocks = 512;

struct ReduceParams {
  long long row = 1;  // innermost group's length
  bool inner_reduced = true;
  long long out_rows = 1;  // product of the other kept groups
  long long reduced = 1;   // product of the other reduced groups
  int kept_n = 0, red_n = 0;
  long long kept_size[dnn::kMaxRank] = {}, kept_stride[dnn::kMaxRank] = {};
  long long red_size[dnn::kMaxRank] = {}, red_stride[dnn::kMaxRank] = {};
  // Backward: every group but the innermost, innermost first, with its stride in dst (0 if reduced).
  int all_n = 0;
  long long all_size[dnn::kMaxRank] = {}, all_dst_stride[dnn::kMaxRank] = {};
  float scale = 1.0f;
  int chunks = 1;  // split of the reduced range (1: no workspace)
  // The column kernel ([out_rows, reduced, row] in memory, row a whole number of vectors): its
  // block of block_cols vectors by block_rows lanes, col_blocks of them per output row, and its own
  // split of the reduced range into col_chunks parts of rows_per_chunk.
  bool columns = false;
  int block_cols = 1, block_rows = 1, col_blocks = 1, col_chunks = 1;
  long long rows_per_chunk = 1;

  __host__ __device__ long long outputs() const { return inner_reduced ? out_rows : out_rows * row; }
};

ReduceParams params_of(const ReduceProblem& p) {
  const dnn::ReduceGroups g = dnn::ReduceGroups::of(p);
  ReduceParams m;
  m.scale = p.op == dnn::ReduceOp::mean ? float(1.0 / double(p.reduced_count())) : 1.0f;
  if (g.count == 0) return m;
  m.row = g.size[g.count - 1];
  m.inner_reduced = g.reduced[g.count - 1];
  long long stride = m.row, dst_stride = m.inner_reduced ? 1 : m.row;
  for (int i = g.count - 2; i >= 0; --i) {
    m.all_size[m.all_n] = g.size[i];
    if (g.reduced[i]) {
      m.red_size[m.red_n] = g.size[i];
      m.red_stride[m.red_n++] = stride;
      m.reduced *= g.size[i];
      m.all_dst_stride[m.all_n++] = 0;
    } else {
      m.kept_size[m.kept_n] = g.size[i];
      m.kept_stride[m.kept_n++] = stride;
      m.out_rows *= g.size[i];
      m.all_dst_stride[m.all_n++] = dst_stride;
      dst_stride *= g.size[i];
    }
    stride *= g.size[i];
  }
  // Enough independent work to fill a large GPU (about 132 SMs x 2048 resident threads) before splitting.
  if (m.inner_reduced) {
    const long long per_output = m.reduced * m.row;
    if (per_output > kGroupWorkMax && m.out_rows < 1024) {
      m.chunks =
          int(std::clamp<long long>(std::min<long long>(2048 / m.out_rows, per_output / 8192), 1, 256));
    }
  } else if (m.outputs() < 262144) {
    m.chunks = int(std::clamp<long long>(std::min<long long>(262144 / m.outputs(), m.reduced / 16), 1, 1024));
  }
  const long long width = 16 / (long long)size_of(p.dtype);
  if (!m.inner_reduced && m.red_n == 1 && m.row % width == 0) {
    const long long vectors = m.row / width;
    m.block_cols = int(std::min<long long>(vectors, 32));
    m.block_rows = kThreads / m.block_cols;
    m.col_blocks = int((vectors + m.block_cols - 1) / m.block_cols);
    const long long blocks = m.out_rows * m.col_blocks;
    if (blocks <= 0x7fffffffLL) {
      m.columns = true;
      const long long most =
          (m.reduced + m.block_rows * kColumnRowsPerLane - 1) / (m.block_rows * kColumnRowsPerLane);
      const long long wanted = (kColumnBlocks + blocks - 1) / blocks;
      const long long chunks = std::clamp<long long>(std::min(most, wanted), 1, 65535);
      m.rows_per_chunk = (m.reduced + chunks - 1) / chunks;
      m.col_chunks = int((m.reduced + m.rows_per_chunk - 1) / m.rows_per_chunk);
    }
  }
  return m;
}

__device__ __forceinline__ long long kept_offset(const ReduceParams& p, long long r) {
  long long off = 0;
  for (int i = 0; i < p.kept_n; ++i) {
    off += (r % p.kept_size[i]) * p.kept_stride[i];
    r /= p.kept_size[i];
  }
  return off;
}

// Walks the reduced index j from j0 upwards, keeping its src offset without divisions.
struct ReducedWalk {
  long long coord[dnn::kMaxRank];
  long long off = 0;
  __device__ ReducedWalk(const ReduceParams& p, long long j) {
    for (int i = 0; i < p.red_n; ++i) {
      coord[i] = j % p.red_size[i];
      off += coord[i] * p.red_stride[i];
      j /= p.red_size[i];
    }
  }
  __device__ __forceinline__ void next(const ReduceParams& p) {
    for (int i = 0; i < p.red_n; ++i) {
      off += p.red_stride[i];
      if (++coord[i] < p.red_size[i]) return;
      off -= coord[i] * p.red_stride[i];
      coord[i] = 0;
    }
  }
};

template <typename T>
__device__ __forceinline__ void emit(const ReduceParams& p, float sum, long long output, int chunk, T* out,
                                     float* partial) {
  if (p.chunks == 1) {
    out[output] = from_f32<T>(sum * p.scale);
  } else {
    partial[(long long)chunk * p.outputs() + output] = sum;
  }
}

// Innermost reduced, small outputs: a 32-lane group per output.
template <typename T>
__global__ void reduce_rows_group(ReduceParams p, const T* __restrict__ x, T* __restrict__ out) {
  const int lane = threadIdx.x & 31;
  const long long r = (long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  if (r >= p.out_rows) return;
  const long long base = kept_offset(p, r);
  ReducedWalk walk(p, 0);
  float sum = 0.0f;
  for (long long j = 0; j < p.reduced; ++j, walk.next(p)) {
    const T* row = x + base + walk.off;
    for (long long l = lane; l < p.row; l += 32) sum += to_f32(row[l]);
  }
  sum = group_sum(sum);
  if (lane == 0) out[r] = from_f32<T>(sum * p.scale);
}

// Innermost reduced, large outputs: a block per (output, chunk). Chunks split the reduced index
// when it has enough entries, else the row.
template <typename T>
__global__ void reduce_rows_block(ReduceParams p, const T* __restrict__ x, T* __restrict__ out,
                                  float* __restrict__ partial) {
  __shared__ float part[kThreads / 32];
  const long long r = blockIdx.x;
  const int c = blockIdx.y;
  long long j0 = 0, j1 = p.reduced, l0 = 0, l1 = p.row;
  if (p.reduced >= p.chunks) {
    j0 = p.reduced * c / p.chunks;
    j1 = p.reduced * (c + 1) / p.chunks;
  } else {
    l0 = p.row * c / p.chunks;
    l1 = p.row * (c + 1) / p.chunks;
  }
  const long long base = kept_offset(p, r);
  ReducedWalk walk(p, j0);
  float sum = 0.0f;
  for (long long j = j0; j < j1; ++j, walk.next(p)) {
    const T* row = x + base + walk.off;
#pragma unroll 4
    for (long long l = l0 + threadIdx.x; l < l1; l += kThreads) sum += to_f32(row[l]);
  }
  sum = group_sum(sum);
  if ((threadIdx.x & 31) == 0) part[threadIdx.x / 32] = sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    float total = 0.0f;
    for (int g = 0; g < kThreads / 32; ++g) total += part[g];
    emit(p, total, r, c, out, partial);
  }
}

// Innermost kept: a thread per output element, adding one row element per reduced index.
template <typename T>
__global__ void reduce_cols(ReduceParams p, const T* __restrict__ x, T* __restrict__ out,
                            float* __restrict__ partial) {
  const long long m = (long long)blockIdx.x * kThreads + threadIdx.x;
  if (m >= p.outputs()) return;
  const int c = blockIdx.y;
  const long long r = m / p.row, l = m % p.row;
  const long long j0 = p.reduced * c / p.chunks, j1 = p.reduced * (c + 1) / p.chunks;
  const T* base = x + kept_offset(p, r) + l;
  float sum = 0.0f;
  if (p.red_n == 1) {
    // One reduced group (global pooling, a bias gradient): a fixed stride, unrolled so several
    // loads are in flight per thread.
    const long long stride = p.red_stride[0];
    const T* at = base + j0 * stride;
    long long j = j0;
    float s4[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (; j + 4 <= j1; j += 4, at += 4 * stride) {
#pragma unroll
      for (int u = 0; u < 4; ++u) s4[u] += to_f32(at[u * stride]);
    }
    for (; j < j1; ++j, at += stride) s4[0] += to_f32(*at);
    sum = (s4[0] + s4[1]) + (s4[2] + s4[3]);
  } else {
    ReducedWalk walk(p, j0);
    for (long long j = j0; j < j1; ++j, walk.next(p)) sum += to_f32(base[walk.off]);
  }
  emit(p, sum, m, c, out, partial);
}

// The column kernel: block (output row * col_blocks + column block, chunk); lane (x, y) sums the
// 16-byte vector of columns x over rows y, y + block_rows, ... of the chunk, four loads at a time,
// in order; the lanes are added in a fixed tree through shared memory.
template <typename T>
__global__ void reduce_columns_vec(ReduceParams p, const T* __restrict__ x, T* __restrict__ out,
                                   float* __restrict__ partial) {
  constexpr int kV = 16 / int(sizeof(T));
  constexpr int kUnroll = 4;
  __shared__ float sums[kThreads * 8];
  const long long o = blockIdx.x / p.col_blocks;
  const long long cv = (long long)(blockIdx.x % p.col_blocks) * p.block_cols + threadIdx.x;
  const long long col = cv * kV;
  const bool valid = col < p.row;
  const int c = blockIdx.y;
  const long long j0 = (long long)c * p.rows_per_chunk, j1 = min(p.reduced, j0 + p.rows_per_chunk);
  float acc[kV] = {};
  const auto add = [&](const uint4& raw) {
    const T* v = reinterpret_cast<const T*>(&raw);
#pragma unroll
    for (int i = 0; i < kV; ++i) acc[i] += to_f32(v[i]);
  };
  if (valid) {
    const T* base = x + (p.kept_n > 0 ? o * p.kept_stride[0] : 0) + col;
    const long long stride = p.red_stride[0], step = p.block_rows;
    long long j = j0 + threadIdx.y;
    for (; j + (kUnroll - 1) * step < j1; j += kUnroll * step) {
      uint4 raw[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        raw[u] = __ldg(reinterpret_cast<const uint4*>(base + (j + u * step) * stride));
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) add(raw[u]);
    }
    for (; j < j1; j += step) add(__ldg(reinterpret_cast<const uint4*>(base + j * stride)));
  }
  column_tree_sum(sums, acc, p.block_cols, p.block_rows);
  if (threadIdx.y == 0 && valid) {
    const long long m = o * p.row + col;
#pragma unroll
    for (int i = 0; i < kV; ++i) {
      if (p.col_chunks == 1) {
        out[m + i] = from_f32<T>(acc[i] * p.scale);
      } else {
        partial[(long long)c * p.outputs() + m + i] = acc[i];
      }
    }
  }
}

template <typename T>
__global__ void reduce_finish(ReduceParams p, const float* __restrict__ partial, T* __restrict__ out) {
  const long long n = p.outputs();
  for (long long m = (long long)blockIdx.x * kThreads + threadIdx.x; m < n;
       m += (long long)gridDim.x * kThreads) {
    float sum = 0.0f;
#pragma unroll 8
    for (int c = 0; c < p.chunks; ++c) sum += partial[(long long)c * n + m];
    out[m] = from_f32<T>(sum * p.scale);
  }
}

// Backward: diff_src[q] = diff_dst[the output q was summed into] * scale.
template <typename T>
__global__ void reduce_broadcast(ReduceParams p, const T* __restrict__ dy, T* __restrict__ dx,
                                 long long total) {
  for (long long q = (long long)blockIdx.x * kThreads + threadIdx.x; q < total;
       q += (long long)gridDim.x * kThreads) {
    const long long l = q % p.row;
    long long rest = q / p.row;
    long long d = p.inner_reduced ? 0 : l;
    for (int i = 0; i < p.all_n; ++i) {
      d += (rest % p.all_size[i]) * p.all_dst_stride[i];
      rest /= p.all_size[i];
    }
    dx[q] = from_f32<T>(to_f32(dy[d]) * p.scale);
  }
}

unsigned grid_for(long long items) {
  return unsigned(std::clamp<long long>((items + kThreads - 1) / kThreads, 1, 65535LL * 32));
}

class ReduceDirect final : public dnn::Solver<ReduceProblem> {
 public:
  explicit ReduceDirect(std::string backend) : backend_(std::move(backend)) {}
  std::string_view name() const override { return "gpu.reduce.direct"; }

  Applicability check(const ReduceProblem& p, const runtime::Device& device) const override {
    if (device.backend() != backend_)
      return Applicability::no("runs on " + backend_ + " devices, not " + device.name());
    const ReduceParams m = params_of(p);
    if (m.inner_reduced && m.out_rows > 0x7fffffffLL)
      return Applicability::no("more than 2^31 - 1 outputs (one block each)");
    if ((m.outputs() + kThreads - 1) / kThreads > 0x7fffffffLL)
      return Applicability::no("more than 2^39 outputs");
    return Applicability::yes();
  }

  std::size_t workspace_bytes(const ReduceProblem& p, const runtime::Device&) const override {
    if (p.backward) return 0;
    const ReduceParams m = params_of(p);
    // The column kernel falls back to reduce_cols for a misaligned src: room for either.
    const int chunks = std::max(m.chunks, m.columns ? m.col_chunks : 1);
    return chunks > 1 ? std::size_t(chunks) * std::size_t(m.outputs()) * sizeof(float) : 0;
  }

  std::string detail(const ReduceProblem& p, const runtime::Device&) const override {
    const ReduceParams m = params_of(p);
    if (p.backward) return "broadcast, a thread per element";
    std::string out = m.inner_reduced
                          ? (m.reduced * m.row <= kGroupWorkMax && m.out_rows >= 1024 ? "32 lanes per output"
                                                                                      : "a block per output")
                          : "a thread per output";
    if (m.columns) {
      out = "16-byte vectors of columns by " + std::to_string(m.block_rows) +
            " lanes of rows (a thread per output when misaligned)";
      if (m.col_chunks > 1) out += ", " + std::to_string(m.col_chunks) + " chunks added in a second pass";
      return out;
    }
    if (m.chunks > 1) out += ", " + std::to_string(m.chunks) + " chunks added in a second pass";
    return out;
  }

  void run(runtime::Stream& stream, const ReduceProblem& p, const ReduceArgs& a) const override {
    const ReduceParams m = params_of(p);
    const std::size_t need = workspace_bytes(p, stream.device());
    if (a.workspace_bytes < need) {
      throw Error(Status::invalid_argument, "gpu.reduce.direct: workspace of " +
                                                std::to_string(a.workspace_bytes) + " bytes, needs " +
                                                std::to_string(need));
    }
    stream.launch(name(), [&] {
      ScopedDevice device(stream.device().index());
      const GpuStream s = as_stream(stream.native_handle());
      dispatch_dtype(p.dtype, "gpu.reduce.direct", [&](auto* tag) {
        using T = std::remove_pointer_t<decltype(tag)>;
        if (p.backward) {
          const long long total = p.src_elements();
          reduce_broadcast<T><<<grid_for(total), kThreads, 0, s>>>(m, static_cast<const T*>(a.diff_dst),
                                                                   static_cast<T*>(a.diff_src), total);
          return;
        }
        const T* x = static_cast<const T*>(a.src);
        T* y = static_cast<T*>(a.dst);
        float* partial = static_cast<float*>(a.workspace);
        if (m.inner_reduced) {
          if (m.chunks == 1 && m.reduced * m.row <= kGroupWorkMax) {
            const long long blocks = (m.out_rows + kThreads / 32 - 1) / (kThreads / 32);
            reduce_rows_group<T><<<unsigned(blocks), kThreads, 0, s>>>(m, x, y);
          } else {
            reduce_rows_block<T>
                <<<dim3(unsigned(m.out_rows), unsigned(m.chunks)), kThreads, 0, s>>>(m, x, y, partial);
          }
        } else if (m.columns && aligned16(x)) {
          ReduceParams c = m;
          c.chunks = m.col_chunks;
          const dim3 grid(unsigned(m.out_rows * m.col_blocks), unsigned(m.col_chunks));
          reduce_columns_vec<T><<<grid, dim3(m.block_cols, m.block_rows), 0, s>>>(c, x, y, partial);
          if (c.chunks > 1) reduce_finish<T><<<grid_for(c.outputs()), kThreads, 0, s>>>(c, partial, y);
          return;
        } else {
          const long long blocks = (m.outputs() + kThreads - 1) / kThreads;
          reduce_cols<T><<<dim3(unsigned(blocks), unsigned(m.chunks)), kThreads, 0, s>>>(m, x, y, partial);
        }
        if (m.chunks > 1) reduce_finish<T><<<grid_for(m.outputs()), kThreads, 0, s>>>(m, partial, y);
      });
      check_launch("gpu.reduce.direct");
    });
  }

 private:
  std::string backend_;
};

}  // namespace

std::unique_ptr<dnn::Solver<ReduceProblem>> make_reduce_direct(std::string_view backend) {
  return std::make_unique<ReduceDirect>(std::string(backend));
}

}  // namespace galley::backends::gpu
