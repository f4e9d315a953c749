// cpu.reduce.direct: the problem coalesced into alternating kept and reduced groups (ReduceGroups).
// The innermost group is contiguous: when it is reduced, each output is the sum of contiguous
// rows; when it is kept, each output row is the sum of contiguous rows added lane by lane. Sums
// run in f32 over short blocks that are added in double, so long reductions keep their accuracy,
// and the work split depends on the problem only, so results are the same on every run.
#include <algorithm>
#include <cstddef>
#include <vector>

#include "backends/cpu/broadcast_fill.hpp"
#include "backends/cpu/conv_isa.hpp"
#include "backends/cpu/datamove_shares.hpp"
#include "backends/cpu/reduce_fill_avx512.hpp"
#include "backends/cpu/softmax_reduce_kernels.hpp"
#include "backends/cpu/softmax_reduce_solvers.hpp"
#include "backends/cpu/thread_pool.hpp"
#include "dnn/tensor_data.hpp"

namespace galley::backends::cpu {
namespace {

using dnn::Applicability;
using dnn::ReduceArgs;
using dnn::ReduceProblem;

constexpr std::int64_t kSegment = 16384;  // floats of a row one work item handles

// Source rows of the innermost group's length, addressed by (output row, reduced index).
struct RowMap {
  std::int64_t row = 1;       // length of the innermost group
  bool inner_reduced = true;  // the innermost group is reduced (each output a scalar)
  std::int64_t out_rows = 1;  // product of the other kept groups
  std::int64_t reduced = 1;   // product of the other reduced groups
  int kept_n = 0, red_n = 0;
  std::int64_t kept_size[dnn::kMaxRank] = {}, kept_stride[dnn::kMaxRank] = {};
  std::int64_t red_size[dnn::kMaxRank] = {}, red_stride[dnn::kMaxRank] = {};

  static RowMap of(const ReduceProblem& p) {
    const dnn::ReduceGroups g = dnn::ReduceGroups::of(p);
    RowMap m;
    if (g.count == 0) return m;  // one element: a reduction of size 1
    m.row = g.size[g.count - 1];
    m.inner_reduced = g.reduced[g.count - 1];
    std::int64_t stride = m.row;
    for (int i = g.count - 2; i >= 0; --i) {
      if (g.reduced[i]) {
        m.red_size[m.red_n] = g.size[i];
        m.red_stride[m.red_n++] = stride;
        m.reduced *= g.size[i];
      } else {
        m.kept_size[m.kept_n] = g.size[i];
        m.kept_stride[m.kept_n++] = stride;
        m.out_rows *= g.size[i];
      }
      stride *= g.size[i];
    }
    return m;
  }
  // Element offset in src of row (r, j); the groups were stored innermost first.
  std::int64_t offset(std::int64_t r, std::int64_t j) const {
    std::int64_t off = 0;
    for (int i = 0; i < kept_n; ++i) {
      off += (r % kept_size[i]) * kept_stride[i];
      r /= kept_size[i];
    }
    for (int i = 0; i < red_n; ++i) {
      off += (j % red_size[i]) * red_stride[i];
      j /= red_size[i];
    }
    return off;
  }
};

const float* load(DType dtype, const void* base, std::int64_t off, std::int64_t n, std::vector<float>& buf) {
  if (dtype == DType::f32) return static_cast<const float*>(base) + off;
  if (buf.size() < static_cast<std::size_t>(n)) buf.resize(static_cast<std::size_t>(n));
  softmax_kernels::best().load(
      dtype, static_cast<const std::byte*>(base) + static_cast<std::size_t>(off) * size_of(dtype), buf.data(),
      n);
  return buf.data();
}

void store(DType dtype, const float* v, void* base, std::int64_t off, std::int64_t n) {
  softmax_kernels::best().store(
      dtype, v, static_cast<std::byte*>(base) + static_cast<std::size_t>(off) * size_of(dtype), n);
}

class ReduceDirect final : public dnn::Solver<ReduceProblem> {
 public:
  std::string_view name() const override { return "cpu.reduce.direct"; }
  Applicability check(const ReduceProblem&, const runtime::Device& device) const override {
    if (!device.is_cpu()) return Applicability::no("runs on the cpu backend only, not " + device.name());
    return Applicability::yes();
  }
  std::string detail(const ReduceProblem& p, const runtime::Device&) const override {
    const RowMap m = RowMap::of(p);
    return std::string(m.inner_reduced ? "row sums" : "row adds") + " of " + std::to_string(m.row) + " x " +
           std::to_string(m.reduced) + " into " + std::to_string(m.out_rows);
  }
  void run(runtime::Stream& stream, const ReduceProblem& problem, const ReduceArgs& args) const override {
    stream.launch(name(), [&] {
      stream.host_task([problem, args] {
        if (problem.backward) {
          backward(problem, args);
        } else {
          forward(problem, args);
        }
      });
    });
  }

 private:
  static double scale_of(const ReduceProblem& p) {
    return p.op == dnn::ReduceOp::mean ? 1.0 / static_cast<double>(p.reduced_count()) : 1.0;
  }

  // Chunks of the reduced index per output row: more only when the output rows alone cannot keep
  // the pool busy; a function of the problem, not of the thread count.
  static std::int64_t split_of(const RowMap& m, std::int64_t tasks) {
    if (tasks >= 64) return 1;
    return std::clamp<std::int64_t>(m.reduced * m.row / (4 * kSegment), 1,
                                    std::min<std::int64_t>(m.reduced, 64));
  }

  static void forward(const ReduceProblem& p, const ReduceArgs& a) {
    const auto& k = softmax_kernels::best();
    const RowMap m = RowMap::of(p);
    const double scale = scale_of(p);
    if (m.inner_reduced) {
      // Work items of one output: (reduced index, segment of the row).
      const std::int64_t segs = (m.row + kSegment - 1) / kSegment;
      const std::int64_t items = m.reduced * segs;
      // A single long row per output (a full reduction) is split by its segments instead.
      const std::int64_t split =
          m.reduced == 1 && m.out_rows < 64 ? std::min<std::int64_t>(segs, 64) : split_of(m, m.out_rows);
      const std::int64_t chunks = std::min(split, items);
      std::vector<double> partial(static_cast<std::size_t>(m.out_rows * chunks));
      parallel_for(0, m.out_rows * chunks, [&](std::int64_t t0, std::int64_t t1) {
        std::vector<float> buf;
        for (std::int64_t t = t0; t < t1; ++t) {
          const std::int64_t r = t / chunks, c = t % chunks;
          const std::int64_t q0 = items * c / chunks, q1 = items * (c + 1) / chunks;
          double total = 0;
          for (std::int64_t q = q0; q < q1; ++q) {
            const std::int64_t j = q / segs, s0 = (q % segs) * kSegment;
            const std::int64_t n = std::min(kSegment, m.row - s0);
            total += k.row_sum(load(p.dtype, a.src, m.offset(r, j) + s0, n, buf), n);
          }
          partial[static_cast<std::size_t>(t)] = total;
        }
      });
      std::vector<float> out(static_cast<std::size_t>(m.out_rows));
      for (std::int64_t r = 0; r < m.out_rows; ++r) {
        double total = 0;
        for (std::int64_t c = 0; c < chunks; ++c) total += partial[static_cast<std::size_t>(r * chunks + c)];
        out[static_cast<std::size_t>(r)] = static_cast<float>(total * scale);
      }
      store(p.dtype, out.data(), a.dst, 0, m.out_rows);
      return;
    }
    // Innermost kept: tasks are (output row, column segment, chunk of the reduced index).
    const std::int64_t segs = (m.row + kSegment - 1) / kSegment;
    const std::int64_t chunks = split_of(m, m.out_rows * segs);
    std::vector<double> partial(static_cast<std::size_t>(chunks * m.out_rows * m.row));
    parallel_for(0, m.out_rows * segs * chunks, [&](std::int64_t t0, std::int64_t t1) {
      std::vector<float> buf, acc;
      for (std::int64_t t = t0; t < t1; ++t) {
        const std::int64_t c = t % chunks, rs = t / chunks;
        const std::int64_t r = rs / segs, s0 = (rs % segs) * kSegment;
        const std::int64_t n = std::min(kSegment, m.row - s0);
        const std::int64_t j0 = m.reduced * c / chunks, j1 = m.reduced * (c + 1) / chunks;
        double* out = partial.data() + (c * m.out_rows + r) * m.row + s0;
        std::fill(out, out + n, 0.0);
        acc.assign(static_cast<std::size_t>(n), 0.0f);
        // f32 blocks of 256 rows, added in double.
        for (std::int64_t j = j0; j < j1; ++j) {
          k.row_add(acc.data(), load(p.dtype, a.src, m.offset(r, j) + s0, n, buf), n);
          if ((j - j0) % 256 == 255 || j + 1 == j1) {
            for (std::int64_t i = 0; i < n; ++i) out[i] += acc[static_cast<std::size_t>(i)];
            std::fill(acc.begin(), acc.end(), 0.0f);
          }
        }
      }
    });
    const std::int64_t total_out = m.out_rows * m.row;
    std::vector<float> out(static_cast<std::size_t>(total_out));
    for (std::int64_t i = 0; i < total_out; ++i) {
      double v = 0;
      for (std::int64_t c = 0; c < chunks; ++c) v += partial[static_cast<std::size_t>(c * total_out + i)];
      out[static_cast<std::size_t>(i)] = static_cast<float>(v * scale);
    }
    store(p.dtype, out.data(), a.dst, 0, total_out);
  }

  static void backward(const ReduceProblem& p, const ReduceArgs& a) {
    const RowMap m = RowMap::of(p);
    const float scale = static_cast<float>(scale_of(p));
    std::vector<float> dy(static_cast<std::size_t>(p.dst_elements()));
    softmax_kernels::best().load(p.dtype, a.diff_dst, dy.data(), p.dst_elements());
    for (float& v : dy) v *= scale;
    const std::int64_t segs = (m.row + kSegment - 1) / kSegment;
    const bool bypass_cache =
        p.src_elements() * static_cast<std::int64_t>(size_of(p.dtype)) >= kBypassCacheBytes;
    const bool avx512 = cpu_has_avx512();
    const std::int64_t units = m.out_rows * m.reduced * segs;
    const std::int64_t shares = thread_shares(
        units, (p.src_elements() + p.dst_elements()) * static_cast<std::int64_t>(size_of(p.dtype)));
    parallel_for(0, shares, [&](std::int64_t first_share, std::int64_t end_share) {
      std::vector<float> row;
      for (std::int64_t t = share_begin(units, shares, first_share),
                        t1 = share_begin(units, shares, end_share);
           t < t1; ++t) {
        const std::int64_t s0 = (t % segs) * kSegment, rj = t / segs;
        const std::int64_t r = rj / m.reduced, j = rj % m.reduced;
        const std::int64_t n = std::min(kSegment, m.row - s0);
        const float* from = nullptr;
        if (m.inner_reduced && p.dtype == DType::f32) {
          // The broadcast written in place: a staging row would write every element twice.
          float* out = static_cast<float*>(a.diff_src) + m.offset(r, j) + s0;
          const float value = dy[static_cast<std::size_t>(r)];
          if (avx512) {
            avx512::fill_f32(out, n, value, bypass_cache);
          } else {
            fill_f32(out, n, value, bypass_cache);
          }
          continue;
        }
        if (m.inner_reduced) {
          row.assign(static_cast<std::size_t>(n), dy[static_cast<std::size_t>(r)]);
          from = row.data();
        } else {
          from = dy.data() + r * m.row + s0;
        }
        store(p.dtype, from, a.diff_src, m.offset(r, j) + s0, n);
      }
    });
  }
};

}  // namespace

std::unique_ptr<dnn::Solver<ReduceProblem>> make_reduce_direct() { return std::make_unique<ReduceDirect>(); }

}  // namespace galley::backends::cpu
