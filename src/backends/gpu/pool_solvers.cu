// The single-source GPU pooling solvers: check / workspace / run glue over pool_kernels.cu.
#include <functional>
#include <memory>
#include <string>

#include "conv_device.cuh"
#include "dnn/pool_geometry.hpp"
#include "galley/runtime/device.hpp"
#include "galley/runtime/stream.hpp"
#include "pool_kernels.hpp"
#include "pool_solvers.hpp"

namespace galley::backends::gpu {
namespace {

using dnn::Applicability;
using dnn::PoolArgs;
using dnn::PoolProblem;

class GpuPoolSolver : public dnn::PoolSolver {
 public:
  GpuPoolSolver(std::string name, std::string backend)
      : name_(std::move(name)), backend_(std::move(backend)) {}
  std::string_view name() const override { return name_; }

  // Max backward without kept indices finds the maxima again into the workspace first; the
  // forward pass's own workspace follows them.
  std::size_t workspace_bytes(const PoolProblem& p, const runtime::Device&) const override {
    return index_bytes(p) + forward_workspace_bytes(make_pool_params(p));
  }

  void run(runtime::Stream& stream, const PoolProblem& problem, const PoolArgs& a) const override {
    const PoolParams p = make_pool_params(problem);
    const std::size_t need = workspace_bytes(problem, stream.device());
    if (a.workspace_bytes < need) {
      throw Error(Status::invalid_argument, name_ + ": workspace of " + std::to_string(a.workspace_bytes) +
                                                " bytes, needs " + std::to_string(need));
    }
    stream.launch(name_, [&] {
      ScopedDevice device(stream.device().index());
      void* s = stream.native_handle();
      void* forward_ws = static_cast<char*>(a.workspace) + index_bytes(problem);
      if (problem.direction == dnn::PoolDirection::forward) {
        forward(p, a.src, a.dst, problem.keep_indices ? static_cast<std::int32_t*>(a.indices) : nullptr,
                forward_ws, s);
        return;
      }
      const std::int32_t* idx = nullptr;
      if (problem.mode == dnn::PoolMode::max) {
        if (problem.keep_indices) {
          idx = static_cast<const std::int32_t*>(a.indices);
        } else if (finds_maxima_by_taps(p)) {
          auto* taps = static_cast<std::uint8_t*>(a.workspace);
          const void* vec_ptrs[] = {a.src, a.diff_dst, a.diff_src, taps};
          launch_pool_backward_by_taps(p, a.src, a.diff_dst, taps, a.diff_src,
                                       pool_vector_width(p, vec_ptrs, 4), s);
          return;
        } else {
          auto* found = static_cast<std::int32_t*>(a.workspace);
          forward(p, a.src, nullptr, found, forward_ws, s);
          idx = found;
        }
      }
      backward(p, a.diff_dst, idx, a.diff_src, s);
    });
  }

 protected:
  std::string common_no(const PoolProblem& p, const runtime::Device& device) const {
    if (device.backend() != backend_) return "runs on " + backend_ + " devices, not " + device.name();
    if (p.dtype != DType::f32 && p.dtype != DType::f16 && p.dtype != DType::bf16)
      return std::string("dtype ") + to_string(p.dtype) + " (needs f32, f16 or bf16)";
    return {};
  }
  /// The forward pass into y and/or idx (either may be null), with forward_workspace_bytes at ws.
  virtual void forward(const PoolParams& p, const void* x, void* y, std::int32_t* idx, void* ws,
                       void* stream) const = 0;
  virtual std::size_t forward_workspace_bytes(const PoolParams&) const { return 0; }
  /// Whether max backward without kept indices finds the maxima as window tap numbers (in the
  /// index workspace, which is large enough) and gathers with them.
  virtual bool finds_maxima_by_taps(const PoolParams&) const { return false; }
  /// The backward pass (idx: the maxima's indices for max, else null).
  virtual void backward(const PoolParams& p, const void* dy, const std::int32_t* idx, void* dx,
                        void* stream) const {
    const void* vec_ptrs[] = {dy, dx, idx};
    launch_pool_backward(p, dy, idx, dx, pool_vector_width(p, vec_ptrs, 3), stream);
  }

  // Where backward without kept indices puts the maxima it finds (rounded up to keep what follows
  // 16-byte aligned).
  static std::size_t index_bytes(const PoolProblem& p) {
    if (p.direction != dnn::PoolDirection::backward || !p.recomputes_indices()) return 0;
    return (static_cast<std::size_t>(p.dst_desc().elements()) * sizeof(std::int32_t) + 15) / 16 * 16;
  }

  std::string name_, backend_;
};

// gpu.pool.direct: every window, layout and dtype; its kernels are also gpu.pool.strips' fallback.
class PoolDirect : public GpuPoolSolver {
 public:
  explicit PoolDirect(std::string backend) : PoolDirect("gpu.pool.direct", std::move(backend)) {}
  Applicability check(const PoolProblem& p, const runtime::Device& device) const override {
    if (auto why = common_no(p, device); !why.empty()) return Applicability::no(why);
    return Applicability::yes();
  }
  std::string detail(const PoolProblem& p, const runtime::Device&) const override {
    return p.layout == dnn::Layout::nhwc && p.c % 8 == 0 ? "8 channels per thread" : "one element per thread";
  }

 protected:
  PoolDirect(std::string name, std::string backend) : GpuPoolSolver(std::move(name), std::move(backend)) {}
  bool finds_maxima_by_taps(const PoolParams& p) const override { return pool_backward_by_taps_applies(p); }

 private:
  void forward(const PoolParams& p, const void* x, void* y, std::int32_t* idx, void*,
               void* stream) const override {
    const void* vec_ptrs[] = {x, y, idx};
    launch_pool_forward(p, x, y, idx, pool_vector_width(p, vec_ptrs, 3), stream);
  }
};

// gpu.pool.strips: the strip walkers of pool_strips.cu where pool_strips_apply holds and every
// pointer is 16-byte aligned; views that are not fall back to gpu.pool.direct's kernels. Max
// backward without kept indices finds the maxima as tap numbers with the forward walker, into the
// index workspace every GPU pooling solver asks for, then gathers with them as with kept indices.
class PoolStrips final : public PoolDirect {
 public:
  explicit PoolStrips(std::string backend) : PoolDirect("gpu.pool.strips", std::move(backend)) {}
  Applicability check(const PoolProblem& p, const runtime::Device& device) const override {
    if (auto why = common_no(p, device); !why.empty()) return Applicability::no(why);
    std::string why;
    if (!pool_strips_apply(make_pool_params(p), p.direction == dnn::PoolDirection::backward, &why)) {
      return Applicability::no(why);
    }
    return Applicability::yes();
  }
  std::string detail(const PoolProblem& p, const runtime::Device&) const override {
    if (p.direction == dnn::PoolDirection::forward)
      return "a thread per 8 channels walks a strip of output rows";
    return p.keep_indices
               ? "a block walks a strip of rows, each gradient and index read once"
               : "the forward walker finds the maxima as tap numbers, then the block walker gathers";
  }

  void run(runtime::Stream& stream, const PoolProblem& problem, const PoolArgs& a) const override {
    const PoolParams p = make_pool_params(problem);
    const bool forward = problem.direction == dnn::PoolDirection::forward;
    void* idx = problem.keep_indices ? a.indices : nullptr;
    const bool aligned =
        forward ? aligned16(a.src) && aligned16(a.dst) && (idx == nullptr || aligned16(idx))
                : (idx != nullptr ? aligned16(idx) : aligned16(a.src) && aligned16(a.workspace)) &&
                      aligned16(a.diff_dst) && aligned16(a.diff_src);
    const std::size_t need = workspace_bytes(problem, stream.device());
    if (!aligned || a.workspace_bytes < need) {
      PoolDirect::run(stream, problem, a);  // names a short workspace, or takes the unaligned views
      return;
    }
    stream.launch(name_, [&] {
      ScopedDevice device(stream.device().index());
      void* s = stream.native_handle();
      if (forward) {
        launch_pool_strips_forward(p, a.src, a.dst, static_cast<std::int32_t*>(idx), s);
      } else if (idx != nullptr) {
        launch_pool_strips_kept_backward(p, static_cast<const std::int32_t*>(idx), a.diff_dst, a.diff_src, s);
      } else {
        auto* taps = static_cast<std::uint8_t*>(a.workspace);
        launch_pool_strips_find_taps(p, a.src, taps, s);
        launch_pool_strips_taps_backward(p, taps, a.diff_dst, a.diff_src, s);
      }
    });
  }
};

class PoolGlobal final : public GpuPoolSolver {
 public:
  explicit PoolGlobal(std::string backend) : GpuPoolSolver("gpu.pool.global", std::move(backend)) {}
  Applicability check(const PoolProblem& p, const runtime::Device& device) const override {
    if (auto why = common_no(p, device); !why.empty()) return Applicability::no(why);
    if (p.out_h() != 1 || p.out_w() != 1) {
      return Applicability::no("output " + std::to_string(p.out_h()) + "x" + std::to_string(p.out_w()) +
                               " is not 1x1");
    }
    const dnn::PoolAxis::Span sh = dnn::pool_axis_h(p).span(0), sw = dnn::pool_axis_w(p).span(0);
    const bool whole = sh.begin == 0 && sh.end == p.h && sw.begin == 0 && sw.end == p.w;
    const bool padded = sh.padded_extent != p.h || sw.padded_extent != p.w;
    if (!whole || (p.mode == dnn::PoolMode::avg_include_pad && padded)) {
      return Applicability::no("the window is not exactly the input plane");
    }
    if (p.layout == dnn::Layout::nhwc && p.n > 65535) {
      return Applicability::no("nhwc batch " + std::to_string(p.n) + " over 65535 (one grid row per image)");
    }
    return Applicability::yes();
  }
  std::string detail(const PoolProblem& p, const runtime::Device&) const override {
    if (p.direction == dnn::PoolDirection::backward) return "a broadcast write of each plane's gradient";
    return p.layout == dnn::Layout::nhwc ? "plane shares over blocks, then a merge" : "one warp per plane";
  }

 private:
  void forward(const PoolParams& p, const void* x, void* y, std::int32_t* idx, void* ws,
               void* stream) const override {
    launch_pool_global_forward(p, x, y, idx, ws, stream);
  }
  std::size_t forward_workspace_bytes(const PoolParams& p) const override {
    return pool_global_workspace_bytes(p);
  }
  void backward(const PoolParams& p, const void* dy, const std::int32_t* idx, void* dx,
                void* stream) const override {
    launch_pool_global_backward(p, dy, idx, dx, stream);
  }
};

}  // namespace

std::unique_ptr<dnn::PoolSolver> make_pool_global(std::string_view backend) {
  return std::make_unique<PoolGlobal>(std::string(backend));
}
std::unique_ptr<dnn::PoolSolver> make_pool_strips(std::string_view backend) {
  return std::make_unique<PoolStrips>(std::string(backend));
}
std::unique_ptr<dnn::PoolSolver> make_pool_direct(std::string_view backend) {
  return std::make_unique<PoolDirect>(std::string(backend));
}

}  // namespace galley::backends::gpu
