// The single-source GPU normalisation solvers: check / workspace / run glue over the kernels of
// norm_planes.cu and norm_rows.cu.
#include <functional>
#include <string>

#include "conv_device.cuh"
#include "galley/runtime/device.hpp"
#include "galley/runtime/stream.hpp"
#include "norm_kernels.hpp"
#include "norm_solvers.hpp"

namespace galley::backends::gpu {
namespace {

using dnn::Applicability;
using dnn::NormArgs;
using dnn::NormDirection;

template <class P>
class GpuNormSolver : public dnn::Solver<P> {
 public:
  GpuNormSolver(std::string name, std::string backend)
      : name_(std::move(name)), backend_(std::move(backend)) {}
  std::string_view name() const override { return name_; }

 protected:
  std::string common_no(DType dtype, const runtime::Device& device) const {
    if (device.backend() != backend_) return "runs on " + backend_ + " devices, not " + device.name();
    if (dtype != DType::f32 && dtype != DType::f16 && dtype != DType::bf16) {
      return std::string("dtype ") + to_string(dtype) + " (needs f32, f16 or bf16)";
    }
    return {};
  }
  void require_workspace(const NormArgs& a, std::size_t needed) const {
    if (needed > 0 && (a.workspace == nullptr || a.workspace_bytes < needed)) {
      throw Error(Status::invalid_argument, name_ + ": workspace of " + std::to_string(a.workspace_bytes) +
                                                " bytes, needs " + std::to_string(needed));
    }
  }
  void enqueue(runtime::Stream& stream, const std::function<void(void*)>& body) const {
    stream.launch(name_, [&] {
      ScopedDevice device(stream.device().index());
      body(stream.native_handle());
    });
  }

  std::string name_, backend_;
};

PlaneGeometry geometry_of(const dnn::BatchNormProblem& p) {
  return plane_geometry(p.n, p.c, p.h * p.w, 0, p.layout == dnn::Layout::nhwc, p.dtype);
}
PlaneGeometry geometry_of(const dnn::GroupNormProblem& p) {
  return plane_geometry(p.n, p.c, p.h * p.w, p.groups, p.layout == dnn::Layout::nhwc, p.dtype);
}
std::string describe(const PlaneGeometry& g) {
  if (g.nhwc) {
    return std::to_string(g.segments) + " segment(s) of channel rows, " + std::to_string(g.splits) +
           " range(s) each, deterministic merges";
  }
  return std::to_string(g.splits) + " range(s) per plane, deterministic merges";
}
RowGeometry geometry_of(const dnn::LayerNormProblem& p) {
  return row_geometry(p.outer(), p.inner(), p.dtype);
}

class BnormPlanes final : public GpuNormSolver<dnn::BatchNormProblem> {
 public:
  explicit BnormPlanes(std::string backend) : GpuNormSolver("gpu.bnorm.planes", std::move(backend)) {}
  Applicability check(const dnn::BatchNormProblem& p, const runtime::Device& device) const override {
    if (auto why = common_no(p.dtype, device); !why.empty()) return Applicability::no(why);
    if (const char* why = plane_geometry_limit(geometry_of(p))) return Applicability::no(why);
    return Applicability::yes();
  }
  std::size_t workspace_bytes(const dnn::BatchNormProblem& p, const runtime::Device&) const override {
    return plane_workspace_bytes(geometry_of(p));
  }
  void run(runtime::Stream& stream, const dnn::BatchNormProblem& p, const NormArgs& a) const override {
    const PlaneGeometry g = geometry_of(p);
    require_workspace(a, plane_workspace_bytes(g));
    enqueue(stream, [&](void* s) {
      if (p.direction == NormDirection::backward) {
        launch_plane_backward(g, a, s, name_.c_str());
      } else if (p.mode == dnn::BatchNormMode::inference) {
        launch_plane_forward_inference(g, a, p.epsilon, s, name_.c_str());
      } else {
        launch_plane_forward_training(g, a, p.epsilon, true, p.momentum, s, name_.c_str());
      }
    });
  }
  std::string detail(const dnn::BatchNormProblem& p, const runtime::Device&) const override {
    return describe(geometry_of(p));
  }
};

class GnormPlanes final : public GpuNormSolver<dnn::GroupNormProblem> {
 public:
  explicit GnormPlanes(std::string backend) : GpuNormSolver("gpu.gnorm.planes", std::move(backend)) {}
  Applicability check(const dnn::GroupNormProblem& p, const runtime::Device& device) const override {
    if (auto why = common_no(p.dtype, device); !why.empty()) return Applicability::no(why);
    if (const char* why = plane_geometry_limit(geometry_of(p))) return Applicability::no(why);
    return Applicability::yes();
  }
  std::size_t workspace_bytes(const dnn::GroupNormProblem& p, const runtime::Device&) const override {
    return plane_workspace_bytes(geometry_of(p));
  }
  void run(runtime::Stream& stream, const dnn::GroupNormProblem& p, const NormArgs& a) const override {
    const PlaneGeometry g = geometry_of(p);
    require_workspace(a, plane_workspace_bytes(g));
    enqueue(stream, [&](void* s) {
      if (p.direction == NormDirection::backward) {
        launch_plane_backward(g, a, s, name_.c_str());
      } else {
        launch_plane_forward_training(g, a, p.epsilon, false, 0, s, name_.c_str());
      }
    });
  }
  std::string detail(const dnn::GroupNormProblem& p, const runtime::Device&) const override {
    return describe(geometry_of(p));
  }
};

class LnormRows final : public GpuNormSolver<dnn::LayerNormProblem> {
 public:
  explicit LnormRows(std::string backend) : GpuNormSolver("gpu.lnorm.rows", std::move(backend)) {}
  Applicability check(const dnn::LayerNormProblem& p, const runtime::Device& device) const override {
    if (auto why = common_no(p.dtype, device); !why.empty()) return Applicability::no(why);
    if (const char* why = row_geometry_limit(geometry_of(p))) return Applicability::no(why);
    return Applicability::yes();
  }
  std::size_t workspace_bytes(const dnn::LayerNormProblem& p, const runtime::Device&) const override {
    return row_workspace_bytes(geometry_of(p), p.direction == NormDirection::backward);
  }
  void run(runtime::Stream& stream, const dnn::LayerNormProblem& p, const NormArgs& a) const override {
    const RowGeometry g = geometry_of(p);
    require_workspace(a, row_workspace_bytes(g, p.direction == NormDirection::backward));
    enqueue(stream, [&](void* s) {
      if (p.direction == NormDirection::backward) {
        launch_row_backward(g, a, s, name_.c_str());
      } else {
        launch_row_forward(g, a, p.epsilon, s, name_.c_str());
      }
    });
  }
  std::string detail(const dnn::LayerNormProblem& p, const runtime::Device&) const override {
    const RowGeometry g = geometry_of(p);
    const bool registers =
        g.lanes > 0 && (p.direction != NormDirection::backward || g.lane_vectors <= kMaxBackwardLaneVectors);
    if (!registers) return "a thread group per row, rows read twice, deterministic column sums";
    return "rows in registers, " + std::to_string(g.lanes) + " lane(s) a row, deterministic column sums";
  }
};

}  // namespace

std::unique_ptr<dnn::BatchNormSolver> make_bnorm_planes(std::string_view backend) {
  return std::make_unique<BnormPlanes>(std::string(backend));
}
std::unique_ptr<dnn::GroupNormSolver> make_gnorm_planes(std::string_view backend) {
  return std::make_unique<GnormPlanes>(std::string(backend));
}
std::unique_ptr<dnn::LayerNormSolver> make_lnorm_rows(std::string_view backend) {
  return std::make_unique<LnormRows>(std::string(backend));
}

}  // namespace galley::backends::gpu
