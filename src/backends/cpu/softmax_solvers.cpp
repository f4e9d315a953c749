// cpu.softmax.rows and cpu.softmax.strided: the problem as [outer, axis, inner] in memory; f16 and
// bf16 are staged through f32 per row or column block, the loops are softmax_reduce_kernels'. f32
// along a strided axis on AVX-512 takes softmax_columns_avx512's L1-sized column blocks instead.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "backends/cpu/broadcast_fill.hpp"
#include "backends/cpu/conv_isa.hpp"
#include "backends/cpu/datamove_shares.hpp"
#include "backends/cpu/softmax_columns_avx512.hpp"
#include "backends/cpu/softmax_reduce_kernels.hpp"
#include "backends/cpu/softmax_reduce_solvers.hpp"
#include "backends/cpu/thread_pool.hpp"
#include "dnn/tensor_data.hpp"

namespace galley::backends::cpu {
namespace {

using dnn::Applicability;
using dnn::SoftmaxAlgorithm;
using dnn::SoftmaxArgs;
using dnn::SoftmaxProblem;

const std::byte* at(const void* base, std::int64_t index, std::size_t elem) {
  return static_cast<const std::byte*>(base) + static_cast<std::size_t>(index) * elem;
}
std::byte* at(void* base, std::int64_t index, std::size_t elem) {
  return static_cast<std::byte*>(base) + static_cast<std::size_t>(index) * elem;
}

class CpuSoftmaxSolver : public dnn::Solver<SoftmaxProblem> {
 public:
  Applicability check(const SoftmaxProblem& p, const runtime::Device& device) const override {
    if (!device.is_cpu()) return Applicability::no("runs on the cpu backend only, not " + device.name());
    return check_shape(p);
  }
  void run(runtime::Stream& stream, const SoftmaxProblem& problem, const SoftmaxArgs& args) const override {
    stream.launch(name(), [&] { stream.host_task([this, problem, args] { compute(problem, args); }); });
  }

 protected:
  virtual Applicability check_shape(const SoftmaxProblem& p) const = 0;
  virtual void compute(const SoftmaxProblem& p, const SoftmaxArgs& a) const = 0;
};

class SoftmaxRows final : public CpuSoftmaxSolver {
 public:
  std::string_view name() const override { return "cpu.softmax.rows"; }
  std::string detail(const SoftmaxProblem&, const runtime::Device&) const override {
    return "contiguous rows, vectorised, threaded over rows";
  }

 protected:
  Applicability check_shape(const SoftmaxProblem& p) const override {
    if (p.inner() != 1) {
      return Applicability::no("the axis has stride " + std::to_string(p.inner()) + " in memory, not 1");
    }
    return Applicability::yes();
  }

  void compute(const SoftmaxProblem& p, const SoftmaxArgs& a) const override {
    const auto& k = softmax_kernels::best();
    const std::int64_t len = p.axis_size();
    const bool log = p.algorithm == SoftmaxAlgorithm::log_softmax;
    const std::size_t elem = size_of(p.dtype);
    const bool f32 = p.dtype == DType::f32;
    // f16/bf16 rows are converted in batches of about 4096 elements, so short rows do not pay a
    // conversion call each.
    const std::int64_t batch = std::max<std::int64_t>(1, 4096 / len);
    parallel_for(0, p.outer(), [&](std::int64_t r0, std::int64_t r1) {
      std::vector<float> buf(f32 ? 0 : static_cast<std::size_t>(2 * batch * len));
      for (std::int64_t r = r0; r < r1;) {
        const std::int64_t off = r * len;
        if (f32) {
          if (!p.backward) {
            k.rows_forward(static_cast<const float*>(a.src) + off, static_cast<float*>(a.dst) + off, len,
                           r1 - r, log);
            r = r1;
          } else {
            k.row_backward(static_cast<const float*>(a.diff_dst) + off,
                           static_cast<const float*>(a.dst) + off, static_cast<float*>(a.diff_src) + off, len,
                           log);
            ++r;
          }
          continue;
        }
        const std::int64_t rows = std::min(batch, r1 - r), n = rows * len;
        float* x = buf.data();
        float* y = buf.data() + n;
        if (!p.backward) {
          k.load(p.dtype, at(a.src, off, elem), x, n);
          k.rows_forward(x, x, len, rows, log);
          k.store(p.dtype, x, at(a.dst, off, elem), n);
        } else {
          k.load(p.dtype, at(a.diff_dst, off, elem), x, n);
          k.load(p.dtype, at(a.dst, off, elem), y, n);
          for (std::int64_t i = 0; i < rows; ++i)
            k.row_backward(x + i * len, y + i * len, x + i * len, len, log);
          k.store(p.dtype, x, at(a.diff_src, off, elem), n);
        }
        r += rows;
      }
    });
  }
};

class SoftmaxStrided final : public CpuSoftmaxSolver {
 public:
  std::string_view name() const override { return "cpu.softmax.strided"; }
  std::string detail(const SoftmaxProblem& p, const runtime::Device&) const override {
    if (uses_avx512_columns(p)) {
      return "avx512, " + std::to_string(avx512::softmax_columns_block(p.axis_size())) +
             "-column blocks through L1";
    }
    return "vectorised across " + std::to_string(block_width(p)) + "-column blocks after the axis";
  }

 protected:
  Applicability check_shape(const SoftmaxProblem&) const override { return Applicability::yes(); }

  // Columns per block: the block's [axis][columns] slab (three of them in backward) stays in L2.
  static std::int64_t block_width(const SoftmaxProblem& p) {
    const std::int64_t fit = (64 * 1024) / std::max<std::int64_t>(1, p.axis_size());
    const std::int64_t width = std::clamp<std::int64_t>(fit / 16 * 16, 16, 1024);
    return std::min(width, p.inner());
  }

  static bool uses_avx512_columns(const SoftmaxProblem& p) {
    return p.dtype == DType::f32 && cpu_has_avx512();
  }

  // f32 on AVX-512: blocks of a few vectors of columns, each taken through all its rows while they
  // sit in L1; threaded over (outer index, block) as datamove_shares.hpp says, each thread's
  // consecutive blocks of one outer index in one kernel call so that it can fetch the next block
  // ahead.
  static void compute_avx512_columns(const SoftmaxProblem& p, const SoftmaxArgs& a) {
    const std::int64_t len = p.axis_size(), inner = p.inner(), outer = p.outer();
    const std::int64_t block = avx512::softmax_columns_block(len);
    const std::int64_t blocks = (inner + block - 1) / block;
    const bool log = p.algorithm == SoftmaxAlgorithm::log_softmax;
    void* out = p.backward ? a.diff_src : a.dst;
    // Outputs far beyond the caches are written around them (a plain store would first read each
    // line); the non-temporal stores need every block's rows to start 64-byte aligned.
    const bool bypass_cache = outer * len * inner * std::int64_t{4} >= kBypassCacheBytes && inner % 16 == 0 &&
                              reinterpret_cast<std::uintptr_t>(out) % 64 == 0;
    const std::int64_t staging = avx512::softmax_columns_staging(len);
    const std::int64_t units = outer * blocks;
    const std::int64_t shares = thread_shares(units, outer * len * inner * (p.backward ? 12 : 8));
    parallel_for(0, shares, [&](std::int64_t first_share, std::int64_t end_share) {
      // Written before it is read: no zero fill, which would cost a few percent of a 1 MB softmax.
      const std::unique_ptr<float[]> stage(p.backward ? nullptr
                                                      : new float[static_cast<std::size_t>(staging)]);
      for (std::int64_t t = share_begin(units, shares, first_share),
                        t1 = share_begin(units, shares, end_share);
           t < t1;) {
        const std::int64_t o = t / blocks, b0 = t % blocks;
        const std::int64_t b1 = std::min(blocks, b0 + (t1 - t));
        const std::int64_t c0 = b0 * block, width = std::min(inner, b1 * block) - c0;
        const std::int64_t base = o * len * inner + c0;
        if (!p.backward) {
          avx512::softmax_columns_forward(static_cast<const float*>(a.src) + base,
                                          static_cast<float*>(a.dst) + base, inner, len, width, log,
                                          stage.get(), bypass_cache);
        } else {
          avx512::softmax_columns_backward(
              static_cast<const float*>(a.diff_dst) + base, static_cast<const float*>(a.dst) + base,
              static_cast<float*>(a.diff_src) + base, inner, len, width, log, bypass_cache);
        }
        t += b1 - b0;
      }
    });
  }

  void compute(const SoftmaxProblem& p, const SoftmaxArgs& a) const override {
    if (uses_avx512_columns(p)) return compute_avx512_columns(p, a);
    const auto& k = softmax_kernels::best();
    const std::int64_t len = p.axis_size(), inner = p.inner(), outer = p.outer();
    const std::int64_t width = block_width(p);
    const std::int64_t blocks = (inner + width - 1) / width;
    const bool log = p.algorithm == SoftmaxAlgorithm::log_softmax;
    const std::size_t elem = size_of(p.dtype);
    const bool f32 = p.dtype == DType::f32;
    parallel_for(0, outer * blocks, [&](std::int64_t t0, std::int64_t t1) {
      std::vector<float> scratch(static_cast<std::size_t>(2 * width));
      std::vector<float> slab(f32 ? 0 : static_cast<std::size_t>((p.backward ? 2 : 1) * len * width));
      for (std::int64_t t = t0; t < t1; ++t) {
        const std::int64_t o = t / blocks, i0 = (t % blocks) * width;
        const std::int64_t w = std::min(width, inner - i0);
        const std::int64_t base = o * len * inner + i0;
        // f16/bf16: the block's columns gathered into a dense [len][w] f32 slab, computed in place.
        const auto gather = [&](const void* src, float* out) {
          for (std::int64_t r = 0; r < len; ++r)
            k.load(p.dtype, at(src, base + r * inner, elem), out + r * w, w);
        };
        const auto scatter = [&](const float* in, void* dst) {
          for (std::int64_t r = 0; r < len; ++r)
            k.store(p.dtype, in + r * w, at(dst, base + r * inner, elem), w);
        };
        if (!p.backward) {
          if (f32) {
            k.cols_forward(static_cast<const float*>(a.src) + base, inner, static_cast<float*>(a.dst) + base,
                           inner, len, w, log, scratch.data(), scratch.data() + width);
          } else {
            gather(a.src, slab.data());
            k.cols_forward(slab.data(), w, slab.data(), w, len, w, log, scratch.data(),
                           scratch.data() + width);
            scatter(slab.data(), a.dst);
          }
        } else if (f32) {
          // The backward loops take one leading dimension for all three tensors: inner.
          k.cols_backward(static_cast<const float*>(a.diff_dst) + base,
                          static_cast<const float*>(a.dst) + base, static_cast<float*>(a.diff_src) + base,
                          inner, len, w, log, scratch.data());
        } else {
          float* dy = slab.data();
          float* y = slab.data() + len * w;
          gather(a.diff_dst, dy);
          gather(a.dst, y);
          k.cols_backward(dy, y, dy, w, len, w, log, scratch.data());
          scatter(dy, a.diff_src);
        }
      }
    });
  }
};

}  // namespace

std::unique_ptr<dnn::Solver<SoftmaxProblem>> make_softmax_rows() { return std::make_unique<SoftmaxRows>(); }
std::unique_ptr<dnn::Solver<SoftmaxProblem>> make_softmax_strided() {
  return std::make_unique<SoftmaxStrided>();
}

}  // namespace galley::backends::cpu
