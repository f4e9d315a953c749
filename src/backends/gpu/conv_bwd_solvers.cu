// The single-source backward conv solvers: thin check / workspace / run glue over the kernels of
// conv_bwd_*.cu, on every GPU backend. Their tensors: dnn/conv_backward_args.hpp.
//
// List ranks (the forward solvers refuse backward problems and these refuse the other directions,
// so the numbers only order solvers of one direction; cuda's cuDNN backward solvers sit at 21, 22
// and its cuBLAS ones at 41, 42):
//   12 gpu.conv.bwd_data_depthwise   13 gpu.conv.bwd_weights_depthwise
//   30 gpu.conv.bwd_data_tc (forward igemm_tc over dy)
//   51 gpu.conv.bwd_data_igemm       52 gpu.conv.bwd_weights_igemm
//   91 gpu.conv.bwd_data_direct      92 gpu.conv.bwd_weights_direct (each claims its whole direction)
#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <mutex>

#include "conv_bwd_kernels.hpp"
#include "conv_device.cuh"
#include "conv_igemm_tc_tuning.hpp"
#include "conv_kernel_detail.cuh"
#include "conv_solvers.hpp"
#include "dnn/conv_backward_args.hpp"
#include "galley/dnn/solver.hpp"
#include "galley/runtime/device.hpp"
#include "galley/runtime/stream.hpp"

namespace galley::backends::gpu {
namespace {

using dnn::Applicability;
using dnn::ConvArgs;
using dnn::ConvDirection;
using dnn::ConvProblem;

struct DeviceFacts {
  int sm_count = 1;
  int cuda_major = 0;  // compute capability major on CUDA (9 for sm_90), 0 elsewhere
};

// properties() may query the driver, and plans need the multiprocessor count on every call.
DeviceFacts facts(const runtime::Device& device) {
  static std::mutex mutex;
  static std::map<std::string, DeviceFacts> cache;
  std::lock_guard lock(mutex);
  auto it = cache.find(device.name());
  if (it != cache.end()) return it->second;
  const runtime::DeviceProperties props = device.properties();
  DeviceFacts f;
  f.sm_count = std::max(1, props.compute_units);
#if !GALLEY_GPU_HIP
  int major = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device.index()) == cudaSuccess)
    f.cuda_major = major;
  else
    (void)cudaGetLastError();
#endif
  cache.emplace(device.name(), f);
  return f;
}
int sm_count(const runtime::Device& device) { return facts(device).sm_count; }

template <typename Base>
class BwdSolverOf : public Base {
 public:
  BwdSolverOf(std::string name, std::string backend, ConvDirection direction)
      : name_(std::move(name)), backend_(std::move(backend)), direction_(direction) {}
  std::string_view name() const override { return name_; }

 protected:
  // What every backward solver needs; empty when fine, else the reason. `int32`: the kernels index
  // with 32-bit ints, so every tensor must have fewer than 2^31 elements.
  std::string common_no(const ConvProblem& p, const runtime::Device& device, bool int32) const {
    if (device.backend() != backend_) return "runs on " + backend_ + " devices, not " + device.name();
    if (p.direction != direction_)
      return std::string(dnn::to_string(direction_)) + " only, not " + dnn::to_string(p.direction);
    if (p.dtype != DType::f32 && p.dtype != DType::f16 && p.dtype != DType::bf16)
      return std::string("dtype ") + to_string(p.dtype) + " (needs f32, f16 or bf16)";
    try {
      const ConvParams cp = make_params(p);
      if (int32) return too_large_for_int32(cp);
    } catch (const Error& e) {
      return e.what();
    }
    return {};
  }
  void require_workspace(const ConvArgs& a, std::size_t needed) const {
    if (a.workspace_bytes < needed)
      throw Error(Status::invalid_argument, name_ + ": workspace of " + std::to_string(a.workspace_bytes) +
                                                " bytes, needs " + std::to_string(needed));
  }
  void enqueue(runtime::Stream& stream, const std::function<void(void*)>& body) const {
    stream.launch(name_, [&] {
      ScopedDevice device(stream.device().index());
      body(stream.native_handle());
    });
  }

 private:
  std::string name_, backend_;
  ConvDirection direction_;
};

using BwdSolver = BwdSolverOf<dnn::ConvSolver>;

class BwdDataDirectSolver final : public BwdSolver {
 public:
  explicit BwdDataDirectSolver(std::string backend)
      : BwdSolver("gpu.conv.bwd_data_direct", std::move(backend), ConvDirection::backward_data) {}
  bool is_fallback() const override { return true; }
  Applicability check(const ConvProblem& p, const runtime::Device& device) const override {
    if (auto why = common_no(p, device, false); !why.empty()) return Applicability::no(why);
    return Applicability::yes();
  }
  void run(runtime::Stream& stream, const ConvProblem& p, const ConvArgs& a) const override {
    const ConvParams cp = make_params(p);
    const dnn::BackwardDataArgs t = dnn::backward_data_args(a);
    enqueue(stream, [&](void* s) { launch_conv_bwd_data_direct(cp, t.dy, t.w, t.dx, s); });
  }
  std::string detail(const ConvProblem&, const runtime::Device&) const override {
    return "one thread per dx element, gathering dy taps, 64-bit indexing";
  }
};

class BwdWeightsDirectSolver final : public BwdSolver {
 public:
  explicit BwdWeightsDirectSolver(std::string backend)
      : BwdSolver("gpu.conv.bwd_weights_direct", std::move(backend), ConvDirection::backward_weights) {}
  bool is_fallback() const override { return true; }
  Applicability check(const ConvProblem& p, const runtime::Device& device) const override {
    if (auto why = common_no(p, device, false); !why.empty()) return Applicability::no(why);
    return Applicability::yes();
  }
  void run(runtime::Stream& stream, const ConvProblem& p, const ConvArgs& a) const override {
    const ConvParams cp = make_params(p);
    const dnn::BackwardWeightsArgs t = dnn::backward_weights_args(a);
    enqueue(stream, [&](void* s) { launch_conv_bwd_weights_direct(cp, t.x, t.dy, t.dw, s); });
  }
  std::string detail(const ConvProblem&, const runtime::Device&) const override {
    return "32 threads per dw element, fixed-order shared-memory sum, 64-bit indexing";
  }
};

std::string not_depthwise(const ConvProblem& p) {
  if (p.groups == p.c && p.groups > 1) return {};
  return "not depthwise (groups " + std::to_string(p.groups) + " != c " + std::to_string(p.c) + ")";
}

class BwdDataDepthwiseSolver final : public BwdSolver {
 public:
  explicit BwdDataDepthwiseSolver(std::string backend)
      : BwdSolver("gpu.conv.bwd_data_depthwise", std::move(backend), ConvDirection::backward_data) {}
  Applicability check(const ConvProblem& p, const runtime::Device& device) const override {
    if (auto why = common_no(p, device, false); !why.empty()) return Applicability::no(why);
    if (auto why = not_depthwise(p); !why.empty()) return Applicability::no(why);
    return Applicability::yes();
  }
  std::size_t workspace_bytes(const ConvProblem& p, const runtime::Device&) const override {
    return plan_conv_bwd_data_depthwise(make_params(p)).workspace_bytes;
  }
  void run(runtime::Stream& stream, const ConvProblem& p, const ConvArgs& a) const override {
    const ConvParams cp = make_params(p);
    const DepthwiseBwdDataPlan plan = plan_conv_bwd_data_depthwise(cp);
    require_workspace(a, plan.workspace_bytes);
    const dnn::BackwardDataArgs t = dnn::backward_data_args(a);
    enqueue(stream,
            [&](void* s) { launch_conv_bwd_data_depthwise(cp, plan, t.dy, t.w, t.dx, a.workspace, s); });
  }
  std::string detail(const ConvProblem& p, const runtime::Device&) const override {
    const ConvParams cp = make_params(p);
    if (plan_conv_bwd_data_depthwise(cp).flipped)
      return "forward depthwise kernel on the flipped filter: " +
             depthwise_detail(depthwise_bwd_data_as_forward(cp));
    return std::string("one thread per dx element") +
           (p.stride_h == 1 && p.stride_w == 1 ? ", unit stride" : ", strided gather");
  }
};

class BwdWeightsDepthwiseSolver final : public BwdSolver {
 public:
  explicit BwdWeightsDepthwiseSolver(std::string backend)
      : BwdSolver("gpu.conv.bwd_weights_depthwise", std::move(backend), ConvDirection::backward_weights) {}
  Applicability check(const ConvProblem& p, const runtime::Device& device) const override {
    if (auto why = common_no(p, device, false); !why.empty()) return Applicability::no(why);
    if (auto why = not_depthwise(p); !why.empty()) return Applicability::no(why);
    return Applicability::yes();
  }
  std::size_t workspace_bytes(const ConvProblem& p, const runtime::Device& device) const override {
    return plan_conv_bwd_weights_depthwise(make_params(p), sm_count(device)).workspace_bytes;
  }
  void run(runtime::Stream& stream, const ConvProblem& p, const ConvArgs& a) const override {
    const ConvParams cp = make_params(p);
    const DepthwiseBwdWeightsPlan plan = plan_conv_bwd_weights_depthwise(cp, sm_count(stream.device()));
    require_workspace(a, plan.workspace_bytes);
    const dnn::BackwardWeightsArgs t = dnn::backward_weights_args(a);
    enqueue(stream,
            [&](void* s) { launch_conv_bwd_weights_depthwise(cp, plan, t.x, t.dy, t.dw, a.workspace, s); });
  }
  std::string detail(const ConvProblem& p, const runtime::Device& device) const override {
    const ConvParams cp = make_params(p);
    return plan_conv_bwd_weights_depthwise(cp, sm_count(device)).describe(cp);
  }
};

// The implicit GEMMs run f16/bf16 on mma.sync in the cuda build, which needs sm_80 or newer.
std::string tensor_cores_missing(const ConvProblem& p, const runtime::Device& device) {
  if (!bwd_igemm_uses_tensor_cores(p.dtype) || facts(device).cuda_major >= 8) return {};
  return std::string(to_string(p.dtype)) + " runs on tensor cores (mma.sync), which need sm_80 or newer";
}

std::string main_loop(DType dtype) {
  return bwd_igemm_uses_tensor_cores(dtype) ? "mma.sync m16n8k16" : "fp32 SIMT";
}

class BwdDataIgemmSolver final : public BwdSolver {
 public:
  explicit BwdDataIgemmSolver(std::string backend)
      : BwdSolver("gpu.conv.bwd_data_igemm", std::move(backend), ConvDirection::backward_data) {}
  Applicability check(const ConvProblem& p, const runtime::Device& device) const override {
    if (auto why = common_no(p, device, true); !why.empty()) return Applicability::no(why);
    if (auto why = tensor_cores_missing(p, device); !why.empty()) return Applicability::no(why);
    if (bwd_data_igemm_phases(make_params(p)) == 0)
      return Applicability::no("groups x stride phases (" + std::to_string(p.groups) + " x " +
                               std::to_string(p.stride_h * p.stride_w) + ") > 65535 (grid.z)");
    return Applicability::yes();
  }
  std::size_t workspace_bytes(const ConvProblem& p, const runtime::Device& device) const override {
    return plan_conv_bwd_data_igemm(make_params(p), sm_count(device)).workspace_bytes;
  }
  void run(runtime::Stream& stream, const ConvProblem& p, const ConvArgs& a) const override {
    const ConvParams cp = make_params(p);
    const BwdIgemmPlan plan = plan_conv_bwd_data_igemm(cp, sm_count(stream.device()));
    require_workspace(a, plan.workspace_bytes);
    const dnn::BackwardDataArgs t = dnn::backward_data_args(a);
    enqueue(stream, [&](void* s) { launch_conv_bwd_data_igemm(cp, plan, t.dy, t.w, t.dx, a.workspace, s); });
  }
  std::string detail(const ConvProblem& p, const runtime::Device& device) const override {
    const ConvParams cp = make_params(p);
    const int phases = cp.stride_h * cp.stride_w;
    return main_loop(cp.dtype) + ", " + plan_conv_bwd_data_igemm(cp, sm_count(device)).describe() +
           (phases > 1 ? ", " + std::to_string(phases) + " stride phases" : std::string()) +
           (cp.kg % (bwd_igemm_uses_tensor_cores(cp.dtype) ? 16 : 8) == 0 ? ", tap-major reduction"
                                                                          : ", flat reduction");
  }
};

class BwdWeightsIgemmSolver final : public BwdSolver {
 public:
  explicit BwdWeightsIgemmSolver(std::string backend)
      : BwdSolver("gpu.conv.bwd_weights_igemm", std::move(backend), ConvDirection::backward_weights) {}
  Applicability check(const ConvProblem& p, const runtime::Device& device) const override {
    if (auto why = common_no(p, device, true); !why.empty()) return Applicability::no(why);
    if (auto why = tensor_cores_missing(p, device); !why.empty()) return Applicability::no(why);
    if (p.groups > 65535)
      return Applicability::no("groups " + std::to_string(p.groups) + " > 65535 (grid.z)");
    return Applicability::yes();
  }
  std::size_t workspace_bytes(const ConvProblem& p, const runtime::Device& device) const override {
    return plan_conv_bwd_weights_igemm(make_params(p), sm_count(device)).workspace_bytes;
  }
  void run(runtime::Stream& stream, const ConvProblem& p, const ConvArgs& a) const override {
    const ConvParams cp = make_params(p);
    const BwdIgemmPlan plan = plan_conv_bwd_weights_igemm(cp, sm_count(stream.device()));
    require_workspace(a, plan.workspace_bytes);
    const dnn::BackwardWeightsArgs t = dnn::backward_weights_args(a);
    enqueue(stream,
            [&](void* s) { launch_conv_bwd_weights_igemm(cp, plan, t.x, t.dy, t.dw, a.workspace, s); });
  }
  std::string detail(const ConvProblem& p, const runtime::Device& device) const override {
    return main_loop(p.dtype) + ", " +
           plan_conv_bwd_weights_igemm(make_params(p), sm_count(device)).describe();
  }
};

// Backward-data on gpu.conv.igemm_tc's kernel (conv_bwd_data_tc.cu): its tile plans of the forward
// view are this solver's configs, timed by the tuner as the forward solver's are.
class BwdDataTcSolver final : public BwdSolverOf<dnn::TunableSolver<ConvProblem, IgemmTcConfig>> {
 public:
  using dnn::TunableSolver<ConvProblem, IgemmTcConfig>::run;
  using dnn::TunableSolver<ConvProblem, IgemmTcConfig>::workspace_bytes;
  explicit BwdDataTcSolver(std::string backend)
      : BwdSolverOf("gpu.conv.bwd_data_tc", std::move(backend), ConvDirection::backward_data) {}
  Applicability check(const ConvProblem& p, const runtime::Device& device) const override {
    if (auto why = common_no(p, device, true); !why.empty()) return Applicability::no(why);
    if (auto why = bwd_data_tc_refusal(make_params(p)); !why.empty()) return Applicability::no(why);
    if (igemm_tc_has_mma() && facts(device).cuda_major < 8)
      return Applicability::no("needs sm_80 or newer for mma.sync");
    return Applicability::yes();
  }
  std::vector<IgemmTcConfig> candidates(const ConvProblem& p, const runtime::Device& device) const override {
    const ConvParams view = bwd_data_tc_view(make_params(p));
    std::vector<IgemmTcConfig> out;
    for (const IgemmTcConfig& c : igemm_tc_candidates(view, sm_count(device))) {
      const IgemmPlan plan = igemm_tc_plan_for(view, c.tile, c.splits);
      const IgemmTcConfig runs{plan.tile, plan.splits};
      if (std::find(out.begin(), out.end(), runs) == out.end()) out.push_back(runs);
    }
    return out;
  }
  bool valid(const ConvProblem& p, const runtime::Device& device,
             const IgemmTcConfig& config) const override {
    const ConvParams view = bwd_data_tc_view(make_params(p));
    if (!igemm_tc_config_usable(view, sm_count(device), config)) return false;
    const IgemmPlan plan = igemm_tc_plan_for(view, config.tile, config.splits);
    return plan.tile == config.tile && plan.splits == config.splits;
  }
  std::size_t workspace_bytes(const ConvProblem& p, const runtime::Device&,
                              const IgemmTcConfig& config) const override {
    const ConvParams cp = make_params(p);
    return bwd_data_tc_layout(cp, igemm_tc_plan_for(bwd_data_tc_view(cp), config.tile, config.splits))
        .workspace_bytes;
  }
  void run(runtime::Stream& stream, const ConvProblem& p, const ConvArgs& a,
           const IgemmTcConfig& config) const override {
    const ConvParams cp = make_params(p);
    const IgemmPlan plan = igemm_tc_plan_for(bwd_data_tc_view(cp), config.tile, config.splits);
    require_workspace(a, bwd_data_tc_layout(cp, plan).workspace_bytes);
    const dnn::BackwardDataArgs t = dnn::backward_data_args(a);
    enqueue(stream, [&](void* s) { launch_conv_bwd_data_tc(cp, plan, t.dy, t.w, t.dx, a.workspace, s); });
  }
  std::string detail(const ConvProblem& p, const runtime::Device& device) const override {
    const ConvParams cp = make_params(p);
    const ConvParams view = bwd_data_tc_view(cp);
    const IgemmTcConfig first = candidates(p, device).front();
    const IgemmPlan plan = igemm_tc_plan_for(view, first.tile, first.splits);
    const std::string note = igemm_tc_channel_note(view);
    return std::string(cp.stride_h == 1 && cp.stride_w == 1
                           ? "forward igemm_tc over dy, filter flipped"
                           : "forward 1x1 igemm_tc on the stride grid, scattered") +
           ", " + (plan.wgmma ? "wgmma m64nNk16, " : "mma.sync m16n8k16, ") + plan.describe() +
           (note.empty() ? "" : ", " + note);
  }
};

}  // namespace

std::unique_ptr<dnn::ConvSolver> make_conv_bwd_data_tc(std::string_view backend) {
  return std::make_unique<BwdDataTcSolver>(std::string(backend));
}
std::unique_ptr<dnn::ConvSolver> make_conv_bwd_data_depthwise(std::string_view backend) {
  return std::make_unique<BwdDataDepthwiseSolver>(std::string(backend));
}
std::unique_ptr<dnn::ConvSolver> make_conv_bwd_weights_depthwise(std::string_view backend) {
  return std::make_unique<BwdWeightsDepthwiseSolver>(std::string(backend));
}
std::unique_ptr<dnn::ConvSolver> make_conv_bwd_data_igemm(std::string_view backend) {
  return std::make_unique<BwdDataIgemmSolver>(std::string(backend));
}
std::unique_ptr<dnn::ConvSolver> make_conv_bwd_weights_igemm(std::string_view backend) {
  return std::make_unique<BwdWeightsIgemmSolver>(std::string(backend));
}
std::unique_ptr<dnn::ConvSolver> make_conv_bwd_data_direct(std::string_view backend) {
  return std::make_unique<BwdDataDirectSolver>(std::string(backend));
}
std::unique_ptr<dnn::ConvSolver> make_conv_bwd_weights_direct(std::string_view backend) {
  return std::make_unique<BwdWeightsDirectSolver>(std::string(backend));
}

}  // namespace galley::backends::gpu
