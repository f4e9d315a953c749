// The single-source GPU conv solvers (check / workspace / run glue over the kernels in conv_*.cu),
// made by the factories of conv_solvers.hpp; each GPU backend's conv_list.cpp sets their order.
#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>

#include "conv_device.cuh"
#include "conv_epilogue.hpp"
#include "conv_gemm_1x1.hpp"
#include "conv_igemm_tc_tuning.hpp"
#include "conv_kernel_detail.cuh"
#include "conv_solvers.hpp"
#include "galley/dnn/conv_solver.hpp"
#include "galley/runtime/device.hpp"
#include "galley/runtime/stream.hpp"
#include "problem_key.hpp"

namespace galley::backends::gpu {
namespace {

using dnn::Applicability;
using dnn::ConvArgs;
using dnn::ConvProblem;

// The implicit GEMMs put groups x split-K (<= 16) in grid.z, which holds 65535.
constexpr int kMaxGemmGroups = 4095;

struct DeviceInfo {
  int sm_count = 1;
  int arch_major = 0;  // compute capability major on CUDA (9 for sm_90); 0 elsewhere
};

// properties() may query the driver; solvers ask on every check(), so cache per device name.
DeviceInfo device_info(const runtime::Device& device) {
  static std::mutex mutex;
  static std::map<std::string, DeviceInfo> cache;
  {
    std::lock_guard lock(mutex);
    auto it = cache.find(device.name());
    if (it != cache.end()) return it->second;
  }
  const runtime::DeviceProperties props = device.properties();
  DeviceInfo info;
  info.sm_count = std::max(1, props.compute_units);
  if (props.arch.rfind("sm_", 0) == 0 && props.arch.size() >= 4) info.arch_major = props.arch[3] - '0';
  if (props.arch.rfind("sm_1", 0) == 0 && props.arch.size() >= 5)
    info.arch_major = 10 + (props.arch[4] - '0');
  std::lock_guard lock(mutex);
  cache[device.name()] = info;
  return info;
}

// A solver's plan per (device, problem), made once. workspace_bytes() and run() both need the plan
// on every call; making it again each time (cost-model loops, the device-info map, igemm_tc's
// development overrides GALLEY_DEBUG_IGEMM_TC_PLAN / _TUNE) would cost microseconds of host time per
// call, twice, next to kernels of 10-20 us. Plans depend on nothing else.
template <class Plan>
class PlanMemo {
 public:
  using Planner = Plan (*)(const ConvParams&, int sm_count);
  explicit PlanMemo(Planner planner) : planner_(planner) {}

  Plan get(const ConvProblem& p, const runtime::Device& device) const {
    // The epilogue does not change the plan: a fused problem shares its plain problem's plan.
    const ProblemKey key{device.index(), p.plain()};
    {
      std::shared_lock lock(mutex_);
      if (auto it = plans_.find(key); it != plans_.end()) return it->second;
    }
    const Plan plan = planner_(make_params(p), device_info(device).sm_count);
    std::unique_lock lock(mutex_);
    return plans_.emplace(key, plan).first->second;
  }

 private:
  Planner planner_;
  mutable std::shared_mutex mutex_;
  mutable std::unordered_map<ProblemKey, Plan, ProblemKeyHash> plans_;
};

// The base of the single-source solvers: a plain ConvSolver, or a TunableSolver for those with inner
// choices (igemm_tc's tile plans).
template <class Base>
class GpuSolverOf : public Base {
 public:
  GpuSolverOf(std::string name, std::string backend) : name_(std::move(name)), backend_(std::move(backend)) {}
  std::string_view name() const override { return name_; }
  // Every forward solver here runs the fused epilogue after its kernels (enqueue_fused).
  bool implements_fused_parts() const final { return true; }

 protected:
  // What every single-source solver needs; empty when fine, else the reason.
  std::string common_no(const ConvProblem& p, const runtime::Device& device, bool int32) const {
    if (device.backend() != backend_) return "runs on " + backend_ + " devices, not " + device.name();
    if (p.direction != dnn::ConvDirection::forward)
      return std::string("forward only, not ") + dnn::to_string(p.direction);
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
  // A plan's workspace against what the caller passed: too little is the caller's error, named.
  void require_workspace(const ConvArgs& a, std::size_t needed) const {
    if (a.workspace_bytes < needed)
      throw Error(Status::invalid_argument, name_ + ": workspace of " + std::to_string(a.workspace_bytes) +
                                                " bytes, needs " + std::to_string(needed));
  }
  // The solver's kernels (`body`), then the problem's fused epilogue, if any, as one pass over y on
  // the same stream (conv_epilogue.hpp), unless the body's kernel applied it in its store.
  void enqueue_fused(runtime::Stream& stream, const ConvProblem& p, const ConvArgs& a,
                     const std::function<void(void*)>& body, bool body_applies_epilogue = false) const {
    stream.launch(name_, [&] {
      ScopedDevice device(stream.device().index());
      body(stream.native_handle());
      if (!body_applies_epilogue) launch_conv_epilogue(p, a.y, a.bias, a.residual, stream.native_handle());
    });
  }

  std::string name_, backend_;
};

using GpuSolver = GpuSolverOf<dnn::ConvSolver>;

class DirectSolver final : public GpuSolver {
 public:
  explicit DirectSolver(std::string backend) : GpuSolver("gpu.conv.direct", std::move(backend)) {}
  bool is_fallback() const override { return true; }
  Applicability check(const ConvProblem& p, const runtime::Device& device) const override {
    if (auto why = common_no(p, device, false); !why.empty()) return Applicability::no(why);
    return Applicability::yes();
  }
  void run(runtime::Stream& stream, const ConvProblem& p, const ConvArgs& a) const override {
    const ConvParams cp = make_params(p);
    enqueue_fused(stream, p, a, [&](void* s) { launch_conv_direct(cp, a.x, a.w, a.y, s); });
  }
  std::string detail(const ConvProblem&, const runtime::Device&) const override {
    return "one thread per output, 64-bit indexing";
  }
};

class DepthwiseSolver final : public GpuSolver {
 public:
  explicit DepthwiseSolver(std::string backend) : GpuSolver("gpu.conv.depthwise", std::move(backend)) {}
  Applicability check(const ConvProblem& p, const runtime::Device& device) const override {
    if (auto why = common_no(p, device, true); !why.empty()) return Applicability::no(why);
    if (!(p.groups == p.c && p.groups > 1))
      return Applicability::no("not depthwise (groups " + std::to_string(p.groups) + " != c " +
                               std::to_string(p.c) + ")");
    return Applicability::yes();
  }
  void run(runtime::Stream& stream, const ConvProblem& p, const ConvArgs& a) const override {
    const ConvParams cp = make_params(p);
    enqueue_fused(stream, p, a, [&](void* s) { launch_conv_depthwise(cp, a.x, a.w, a.y, s); });
  }
  std::string detail(const ConvProblem& p, const runtime::Device&) const override {
    return depthwise_detail(make_params(p));
  }
};

class GroupedSolver final : public GpuSolver {
 public:
  explicit GroupedSolver(std::string backend) : GpuSolver("gpu.conv.grouped", std::move(backend)) {}
  Applicability check(const ConvProblem& p, const runtime::Device& device) const override {
    if (auto why = common_no(p, device, true); !why.empty()) return Applicability::no(why);
    if (p.groups < 2) return Applicability::no("groups == 1 (not grouped)");
    const ConvParams cp = make_params(p);
    if (grouped_uses_mma(cp)) {
      if (device_info(device).arch_major < 8)
        return Applicability::no("tensor-core path needs sm_80 or newer");
      return Applicability::yes();
    }
    if (!grouped_simt_fits(cp))
      return Applicability::no("a group's weights (" + std::to_string(cp.kg) + "x" + std::to_string(cp.cg) +
                               "x" + std::to_string(cp.r) + "x" + std::to_string(cp.s) +
                               ") exceed 48 KiB as fp32, or n * groups > 65535");
    return Applicability::yes();
  }
  void run(runtime::Stream& stream, const ConvProblem& p, const ConvArgs& a) const override {
    const ConvParams cp = make_params(p);
    enqueue_fused(stream, p, a, [&](void* s) { launch_conv_grouped(cp, a.x, a.w, a.y, s); });
  }
  std::string detail(const ConvProblem& p, const runtime::Device&) const override {
    return grouped_detail(make_params(p));
  }
};

class IgemmF32Solver final : public GpuSolver {
 public:
  explicit IgemmF32Solver(std::string backend) : GpuSolver("gpu.conv.igemm_f32", std::move(backend)) {}
  Applicability check(const ConvProblem& p, const runtime::Device& device) const override {
    if (auto why = common_no(p, device, true); !why.empty()) return Applicability::no(why);
    if (p.groups > kMaxGemmGroups)
      return Applicability::no("groups > " + std::to_string(kMaxGemmGroups) + " (grid.z)");
    return Applicability::yes();
  }
  std::size_t workspace_bytes(const ConvProblem& p, const runtime::Device& device) const override {
    return plans_.get(p, device).workspace_bytes;
  }
  void run(runtime::Stream& stream, const ConvProblem& p, const ConvArgs& a) const override {
    const ConvParams cp = make_params(p);
    const IgemmPlan plan = plans_.get(p, stream.device());
    require_workspace(a, plan.workspace_bytes);
    enqueue_fused(stream, p, a,
                  [&](void* s) { launch_conv_igemm_f32(cp, plan, a.x, a.w, a.y, a.workspace, s); });
  }
  std::string detail(const ConvProblem& p, const runtime::Device& device) const override {
    const ConvParams cp = make_params(p);
    return "fp32 SIMT, " + plans_.get(p, device).describe() +
           (cp.cg % 8 == 0 ? ", tap-major reduction" : ", flat reduction");
  }

 private:
  PlanMemo<IgemmPlan> plans_{plan_igemm_f32};
};

// gpu.conv.gemm_1x1 and gpu.conv.igemm_f32_nchw run one kernel (conv_gemm_1x1.cu), planned by
// plan_gemm_1x1(); they differ in the problems they take and in how they describe themselves.
class Gemm1x1KernelSolver : public GpuSolver {
 public:
  using GpuSolver::GpuSolver;
  std::size_t workspace_bytes(const ConvProblem& p, const runtime::Device& device) const override {
    return plans_.get(p, device).workspace_bytes;
  }
  void run(runtime::Stream& stream, const ConvProblem& p, const ConvArgs& a) const override {
    const ConvParams cp = make_params(p);
    const Gemm1x1Plan plan = plans_.get(p, stream.device());
    require_workspace(a, plan.workspace_bytes);
    const bool in_store = !p.epilogue.empty() && fused_in_store(p, plan);
    Gemm1x1StoreEpilogue epilogue;
    if (in_store) {
      epilogue.bias = p.epilogue.bias ? static_cast<const float*>(a.bias) : nullptr;
      epilogue.residual = p.epilogue.residual ? static_cast<const float*>(a.residual) : nullptr;
      epilogue.relu = p.epilogue.activation == dnn::Activation::relu;
    }
    enqueue_fused(
        stream, p, a,
        [&](void* s) { launch_conv_gemm_1x1(cp, plan, a.x, a.w, a.y, a.workspace, s, epilogue); }, in_store);
  }

 protected:
  // Bias, residual and relu go into the kernel's store where there is one store of y (no split-K);
  // other activations, and split-K's partial sums, take the separate pass after it.
  static bool fused_in_store(const ConvProblem& p, const Gemm1x1Plan& plan) {
    return plan.splits == 1 && (!p.epilogue.activation || *p.epilogue.activation == dnn::Activation::relu);
  }
  std::string epilogue_detail(const ConvProblem& p, const Gemm1x1Plan& plan) const {
    if (p.epilogue.empty()) return {};
    return fused_in_store(p, plan) ? ", epilogue in the store" : ", epilogue as a pass after";
  }
  PlanMemo<Gemm1x1Plan> plans_{plan_gemm_1x1};
};

class Gemm1x1Solver final : public Gemm1x1KernelSolver {
 public:
  explicit Gemm1x1Solver(std::string backend)
      : Gemm1x1KernelSolver("gpu.conv.gemm_1x1", std::move(backend)) {}
  Applicability check(const ConvProblem& p, const runtime::Device& device) const override {
    if (auto why = common_no(p, device, false); !why.empty()) return Applicability::no(why);
    if (auto why = gemm_1x1_refusal(make_params(p)); !why.empty()) return Applicability::no(why);
    return Applicability::yes();
  }
  std::string detail(const ConvProblem& p, const runtime::Device& device) const override {
    const ConvParams cp = make_params(p);
    const bool vec_x = cp.stride_h == 1 && cp.stride_w == 1 && (cp.p * cp.q) % 4 == 0;
    const Gemm1x1Plan plan = plans_.get(p, device);
    return "fp32 SIMT SGEMM per image, " + plan.describe() +
           (vec_x ? ", float4 pixels" : ", scalar pixel gather") + epilogue_detail(p, plan);
  }
};

class IgemmF32NchwSolver final : public Gemm1x1KernelSolver {
 public:
  explicit IgemmF32NchwSolver(std::string backend)
      : Gemm1x1KernelSolver("gpu.conv.igemm_f32_nchw", std::move(backend)) {}
  Applicability check(const ConvProblem& p, const runtime::Device& device) const override {
    if (auto why = common_no(p, device, false); !why.empty()) return Applicability::no(why);
    if (auto why = igemm_f32_nchw_refusal(make_params(p)); !why.empty()) return Applicability::no(why);
    return Applicability::yes();
  }
  std::string detail(const ConvProblem& p, const runtime::Device& device) const override {
    const Gemm1x1Plan plan = plans_.get(p, device);
    return "fp32 SIMT implicit GEMM, tap by tap, weights to [tap][K][C] in the workspace, " +
           plan.describe() + epilogue_detail(p, plan);
  }
};

// The two tensor-core solvers (NHWC, and NCHW through transposed copies) take the same problems
// but for the layout. Their tile plans are the tuner's configs (conv_igemm_tc_tuning.hpp), listed on
// the NHWC view of the problem; each solver makes a config its own plan (plan_for: the NCHW one maps
// wgmma tiles to their stand-in and adds the transposed copies to the workspace).
using IgemmPlanFor = IgemmPlan (*)(const ConvParams&, int tile, int splits);

// igemm_tc_candidates() of the problem's NHWC view (the GEMM's shape does not depend on the layout) as
// the plans `plan_for` runs, each once.
std::vector<IgemmTcConfig> configs_run_by(IgemmPlanFor plan_for, const ConvParams& cp, int sm_count) {
  ConvParams view = cp;
  view.nhwc = true;
  std::vector<IgemmTcConfig> out;
  for (const IgemmTcConfig& c : igemm_tc_candidates(view, sm_count)) {
    const IgemmPlan plan = plan_for(cp, c.tile, c.splits);
    const IgemmTcConfig runs{plan.tile, plan.splits};
    if (std::find(out.begin(), out.end(), runs) == out.end()) out.push_back(runs);
  }
  return out;
}
std::vector<IgemmTcConfig> nhwc_configs(const ConvParams& cp, int sm_count) {
  return configs_run_by(igemm_tc_plan_for, cp, sm_count);
}
std::vector<IgemmTcConfig> nchw_configs(const ConvParams& cp, int sm_count) {
  return configs_run_by(igemm_tc_nchw_plan_for, cp, sm_count);
}

class IgemmTcSolverBase : public GpuSolverOf<dnn::TunableSolver<ConvProblem, IgemmTcConfig>> {
 public:
  using PlanFor = IgemmPlanFor;
  using Lister = std::vector<IgemmTcConfig> (*)(const ConvParams&, int sm_count);
  using Launcher = void (*)(const ConvParams&, const IgemmPlan&, const void* x, const void* w, void* y,
                            void* workspace, void* stream);
  using dnn::TunableSolver<ConvProblem, IgemmTcConfig>::run;
  using dnn::TunableSolver<ConvProblem, IgemmTcConfig>::workspace_bytes;
  /// `layout_refusal`: why a problem of the other layout is refused, naming the solver that takes it.
  IgemmTcSolverBase(std::string name, std::string backend, dnn::Layout layout, std::string layout_refusal,
                    Lister lister, PlanFor plan_for, Launcher launcher)
      : GpuSolverOf(std::move(name), std::move(backend)),
        layout_(layout),
        layout_refusal_(std::move(layout_refusal)),
        configs_(lister),
        plan_for_(plan_for),
        launcher_(launcher) {}

  Applicability check(const ConvProblem& p, const runtime::Device& device) const override {
    if (auto why = common_no(p, device, true); !why.empty()) return Applicability::no(why);
    if (p.dtype == DType::f32) return Applicability::no("needs f16 or bf16 (tensor cores)");
    if (p.layout != layout_) return Applicability::no(layout_refusal_);
    if (p.groups > kMaxGemmGroups)
      return Applicability::no("groups > " + std::to_string(kMaxGemmGroups) + " (grid.z)");
    if (igemm_tc_has_mma() && device_info(device).arch_major < 8)
      return Applicability::no("needs sm_80 or newer for mma.sync");
    return Applicability::yes();
  }
  std::vector<IgemmTcConfig> candidates(const ConvProblem& p, const runtime::Device& device) const override {
    return configs_.get(p, device);
  }
  bool valid(const ConvProblem& p, const runtime::Device& device,
             const IgemmTcConfig& config) const override {
    const ConvParams cp = make_params(p);
    ConvParams view = cp;
    view.nhwc = true;
    if (!igemm_tc_config_usable(view, device_info(device).sm_count, config)) return false;
    // A config this solver would run as another plan (a wgmma tile on NCHW) is not its own.
    const IgemmPlan plan = plan_for_(cp, config.tile, config.splits);
    return plan.tile == config.tile && plan.splits == config.splits;
  }
  std::size_t workspace_bytes(const ConvProblem& p, const runtime::Device&,
                              const IgemmTcConfig& config) const override {
    return plan_for_(make_params(p), config.tile, config.splits).workspace_bytes;
  }
  void run(runtime::Stream& stream, const ConvProblem& p, const ConvArgs& a,
           const IgemmTcConfig& config) const override {
    const ConvParams cp = make_params(p);
    const IgemmPlan plan = plan_for_(cp, config.tile, config.splits);
    require_workspace(a, plan.workspace_bytes);
    enqueue_fused(stream, p, a, [&](void* s) { launcher_(cp, plan, a.x, a.w, a.y, a.workspace, s); });
  }

 protected:
  /// The plan a call without a tuned choice runs, for detail().
  IgemmPlan default_plan(const ConvProblem& p, const runtime::Device& device) const {
    const IgemmTcConfig first = candidates(p, device).front();
    return plan_for_(make_params(p), first.tile, first.splits);
  }

 private:
  dnn::Layout layout_;
  std::string layout_refusal_;
  PlanMemo<std::vector<IgemmTcConfig>> configs_;
  PlanFor plan_for_;
  Launcher launcher_;
};

class IgemmTcSolver final : public IgemmTcSolverBase {
 public:
  explicit IgemmTcSolver(std::string backend)
      : IgemmTcSolverBase("gpu.conv.igemm_tc", std::move(backend), dnn::Layout::nhwc, "needs nhwc layout",
                          nhwc_configs, igemm_tc_plan_for, launch_conv_igemm_tc) {}
  std::string detail(const ConvProblem& p, const runtime::Device& device) const override {
    const ConvParams cp = make_params(p);
    IgemmPlan plan = default_plan(p, device);
    if (!igemm_tc_has_mma()) return "SIMT fp32 fallback (no MFMA path yet), " + plan.describe();
    // What launch_conv_igemm_tc runs: ungrouped channels not a multiple of 8 are padded to 8 (or
    // folded) in the workspace; grouped ones take the scalar gather, which has no wgmma tiles.
    const bool scalar = cp.cg % 8 != 0 && cp.groups != 1;
    if (scalar) plan = igemm_tc_without_wgmma(cp, plan);
    const std::string note = igemm_tc_channel_note(cp);
    return std::string(plan.wgmma ? "wgmma m64nNk16" : "mma.sync m16n8k16") + ", cp.async pipeline, " +
           plan.describe() + (note.empty() ? "" : ", " + note);
  }
};

class IgemmTcNchwSolver final : public IgemmTcSolverBase {
 public:
  explicit IgemmTcNchwSolver(std::string backend)
      : IgemmTcSolverBase("gpu.conv.igemm_tc_nchw", std::move(backend), dnn::Layout::nchw,
                          "needs nchw layout (nhwc: gpu.conv.igemm_tc)", nchw_configs, igemm_tc_nchw_plan_for,
                          launch_conv_igemm_tc_nchw) {}
  std::string detail(const ConvProblem& p, const runtime::Device& device) const override {
    const ConvParams cp = make_params(p);
    const IgemmPlan plan = default_plan(p, device);
    if (!igemm_tc_has_mma()) return "SIMT fp32 fallback on nchw (no MFMA path yet), " + plan.describe();
    return std::string("x to nhwc") + (cp.r * cp.s > 1 ? ", w to krsc" : "") +
           " in the workspace, mma.sync m16n8k16, nchw epilogue, " + plan.describe() +
           (cp.cg % 8 == 0 ? "" : ", scalar gather");
  }
};

class WinogradSolver final : public GpuSolver {
 public:
  explicit WinogradSolver(std::string backend) : GpuSolver("gpu.conv.winograd", std::move(backend)) {}
  Applicability check(const ConvProblem& p, const runtime::Device& device) const override {
    if (auto why = common_no(p, device, true); !why.empty()) return Applicability::no(why);
    if (auto why = winograd_refusal(make_params(p)); !why.empty()) return Applicability::no(why);
    return Applicability::yes();
  }
  std::size_t workspace_bytes(const ConvProblem& p, const runtime::Device& device) const override {
    return plans_.get(p, device).workspace_bytes;
  }
  void run(runtime::Stream& stream, const ConvProblem& p, const ConvArgs& a) const override {
    const ConvParams cp = make_params(p);
    const WinogradPlan plan = plans_.get(p, stream.device());
    require_workspace(a, plan.workspace_bytes);
    enqueue_fused(stream, p, a,
                  [&](void* s) { launch_conv_winograd(cp, plan, a.x, a.w, a.y, a.workspace, s); });
  }
  std::string detail(const ConvProblem& p, const runtime::Device& device) const override {
    const WinogradPlan plan = plans_.get(p, device);
    return "F(4x4,3x3), " + std::to_string(plan.gemm.q) + " tiles, 36 GEMMs as grouped 1x1 igemm_f32 (" +
           plan.gemm_plan.describe() + ")";
  }

 private:
  PlanMemo<WinogradPlan> plans_{plan_winograd};
};

}  // namespace
}  // namespace galley::backends::gpu

namespace galley::backends::gpu {

std::unique_ptr<dnn::ConvSolver> make_conv_depthwise(std::string_view backend) {
  return std::make_unique<DepthwiseSolver>(std::string(backend));
}
std::unique_ptr<dnn::ConvSolver> make_conv_grouped(std::string_view backend) {
  return std::make_unique<GroupedSolver>(std::string(backend));
}
std::unique_ptr<dnn::ConvSolver> make_conv_igemm_tc(std::string_view backend) {
  return std::make_unique<IgemmTcSolver>(std::string(backend));
}
std::unique_ptr<dnn::ConvSolver> make_conv_igemm_tc_nchw(std::string_view backend) {
  return std::make_unique<IgemmTcNchwSolver>(std::string(backend));
}
std::unique_ptr<dnn::ConvSolver> make_conv_winograd(std::string_view backend) {
  return std::make_unique<WinogradSolver>(std::string(backend));
}
std::unique_ptr<dnn::ConvSolver> make_conv_gemm_1x1(std::string_view backend) {
  return std::make_unique<Gemm1x1Solver>(std::string(backend));
}
std::unique_ptr<dnn::ConvSolver> make_conv_igemm_f32_nchw(std::string_view backend) {
  return std::make_unique<IgemmF32NchwSolver>(std::string(backend));
}
std::unique_ptr<dnn::ConvSolver> make_conv_igemm_f32(std::string_view backend) {
  return std::make_unique<IgemmF32Solver>(std::string(backend));
}
std::unique_ptr<dnn::ConvSolver> make_conv_direct(std::string_view backend) {
  return std::make_unique<DirectSolver>(std::string(backend));
}

}  // namespace galley::backends::gpu
