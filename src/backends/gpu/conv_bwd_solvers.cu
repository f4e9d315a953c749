// The single-source backward conv solvers: thin check / workspace / run glue over the kernels of
// conv_bwd_*.cu, on every GPU backend. Their tensors: dnn/conv_backward_args.hpp.
//
// List ranks (the forward solvers refuse backward problems and these refuse the other directions,
// so the numbers only order solvers of one direction; cuda's cuDNN backward solvers sit at 21, 22
// and its cuBLAS ones at 41, 42):
//   12 gpu.conv.bwd_data_depthwise   13 gpu.conv.bwd_weights_depthwise
//   gpu.conv.bwd_data_via_<forward solver>: backward-data run by a forward solver (see the class)
//   51 gpu.conv.bwd_data_igemm       52 gpu.conv.bwd_weights_igemm
//   91 gpu.conv.bwd_data_direct      92 gpu.conv.bwd_weights_direct (each claims its whole direction)
#include <algorithm>
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>

#include "conv_bwd_kernels.hpp"
#include "conv_device.cuh"
#include "conv_igemm_tc_tuning.hpp"
#include "conv_kernel_detail.cuh"
#include "conv_solvers.hpp"
#include "core/config.hpp"
#include "dnn/conv_backward_args.hpp"
#include "galley/dnn/solver.hpp"
#include "galley/runtime/device.hpp"
#include "galley/runtime/stream.hpp"

namespace galley::backends::gpu {
namespace {

using dnn::Applicability;
using dnn::ConfigHandle;
using dnn::ConvArgs;
using dnn::ConvDirection;
using dnn::ConvProblem;
using dnn::ProblemRef;

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

class BwdWeightsWinogradSolver final : public BwdSolver {
 public:
  explicit BwdWeightsWinogradSolver(std::string backend)
      : BwdSolver("gpu.conv.bwd_weights_winograd", std::move(backend), ConvDirection::backward_weights) {}
  Applicability check(const ConvProblem& p, const runtime::Device& device) const override {
    if (auto why = common_no(p, device, true); !why.empty()) return Applicability::no(why);
    if (auto why = winograd_refusal(make_params(p)); !why.empty()) return Applicability::no(why);
    return Applicability::yes();
  }
  std::size_t workspace_bytes(const ConvProblem& p, const runtime::Device& device) const override {
    return plan_bwd_weights_winograd(make_params(p), sm_count(device)).workspace_bytes;
  }
  void run(runtime::Stream& stream, const ConvProblem& p, const ConvArgs& a) const override {
    const ConvParams cp = make_params(p);
    const WinogradPlan plan = plan_bwd_weights_winograd(cp, sm_count(stream.device()));
    require_workspace(a, plan.workspace_bytes);
    const dnn::BackwardWeightsArgs t = dnn::backward_weights_args(a);
    enqueue(stream,
            [&](void* s) { launch_conv_bwd_weights_winograd(cp, plan, t.x, t.dy, t.dw, a.workspace, s); });
  }
  std::string detail(const ConvProblem& p, const runtime::Device& device) const override {
    const WinogradPlan plan = plan_bwd_weights_winograd(make_params(p), sm_count(device));
    return "F(3x3,4x4) over dy's 4x4 tiles, " + std::to_string(plan.gemm.cg) +
           " tiles, 36 GEMMs as grouped 1x1 igemm_f32 (" + plan.gemm_plan.describe() + ")";
  }
};

// The implicit GEMMs run f16/bf16 on mma.sync in the cuda build, which needs sm_80 or newer.
std::string tensor_cores_missing(const ConvProblem& p, const runtime::Device& device) {
  if (!bwd_igemm_uses_tensor_cores(p.dtype) || facts(device).cuda_major >= 8) return {};
  return std::string(to_string(p.dtype)) + " runs on tensor cores (mma.sync), which need sm_80 or newer";
}

std::string main_loop(DType dtype) {
  if (!bwd_igemm_uses_tensor_cores(dtype)) return "fp32 SIMT";
  return dtype == DType::f32 ? "3xTF32 mma.sync m16n8k8" : "mma.sync m16n8k16";
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

// Tunable: its configs are bwd_weights_igemm_plans() as "tile=T,splits=S" (the forward implicit
// GEMM's text form), timed by the tuner; without one it runs the model's plan.
class BwdWeightsIgemmSolver final : public BwdSolverOf<dnn::TunableSolver<ConvProblem, IgemmTcConfig>> {
 public:
  using dnn::TunableSolver<ConvProblem, IgemmTcConfig>::run;
  using dnn::TunableSolver<ConvProblem, IgemmTcConfig>::workspace_bytes;
  explicit BwdWeightsIgemmSolver(std::string backend)
      : BwdSolverOf("gpu.conv.bwd_weights_igemm", std::move(backend), ConvDirection::backward_weights) {}
  Applicability check(const ConvProblem& p, const runtime::Device& device) const override {
    if (auto why = common_no(p, device, true); !why.empty()) return Applicability::no(why);
    if (auto why = tensor_cores_missing(p, device); !why.empty()) return Applicability::no(why);
    if (p.groups > 65535)
      return Applicability::no("groups " + std::to_string(p.groups) + " > 65535 (grid.z)");
    return Applicability::yes();
  }
  std::vector<IgemmTcConfig> candidates(const ConvProblem& p, const runtime::Device& device) const override {
    std::vector<IgemmTcConfig> out;
    for (const BwdIgemmPlan& plan : bwd_weights_igemm_plans(make_params(p), sm_count(device)))
      out.push_back({plan.tile, plan.splits});
    return out;
  }
  std::size_t workspace_bytes(const ConvProblem& p, const runtime::Device& device,
                              const IgemmTcConfig& config) const override {
    return plan_of(p, device, config).workspace_bytes;
  }
  void run(runtime::Stream& stream, const ConvProblem& p, const ConvArgs& a,
           const IgemmTcConfig& config) const override {
    const ConvParams cp = make_params(p);
    const BwdIgemmPlan plan = plan_of(p, stream.device(), config);
    require_workspace(a, plan.workspace_bytes);
    const dnn::BackwardWeightsArgs t = dnn::backward_weights_args(a);
    enqueue(stream,
            [&](void* s) { launch_conv_bwd_weights_igemm(cp, plan, t.x, t.dy, t.dw, a.workspace, s); });
  }
  std::string detail(const ConvProblem& p, const runtime::Device& device) const override {
    const BwdIgemmPlan plan = plan_conv_bwd_weights_igemm(make_params(p), sm_count(device));
    return (plan.wgmma ? std::string("wgmma m64nNk16") : main_loop(p.dtype)) + ", " + plan.describe();
  }

 private:
  BwdIgemmPlan plan_of(const ConvProblem& p, const runtime::Device& device,
                       const IgemmTcConfig& config) const {
    const std::optional<BwdIgemmPlan> plan =
        bwd_weights_igemm_plan_for(make_params(p), sm_count(device), config.tile, config.splits);
    if (!plan)
      throw Error(Status::invalid_argument,
                  std::string(name()) + ": config '" + config.to_string() + "' does not run " + p.key());
    return *plan;
  }
};

// The inner choice of a backward-data solver that runs a forward solver: that solver's own config
// text, or "default" when it has none.
struct ForwardChoice {
  std::string text;
  std::string to_string() const { return text; }
  static std::optional<ForwardChoice> parse(std::string_view text) {
    if (text.empty()) return std::nullopt;
    return ForwardChoice{std::string(text)};
  }
  friend bool operator==(const ForwardChoice&, const ForwardChoice&) = default;
};
constexpr std::string_view kForwardDefault = "default";

std::size_t aligned(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

// A backward solver that computes its direction as one forward convolution of a view of its
// tensors, run by the forward solver `forward_name` of the same backend: its kernels, its refusals
// and its tile plans (the tuner's configs here as there). The subclass says what the view is, what
// its own part of the workspace holds (before the forward solver's part) and which extra plans to
// offer.
class ViaForwardSolver : public BwdSolverOf<dnn::TunableSolver<ConvProblem, ForwardChoice>> {
 public:
  using dnn::TunableSolver<ConvProblem, ForwardChoice>::run;
  using dnn::TunableSolver<ConvProblem, ForwardChoice>::workspace_bytes;
  ViaForwardSolver(std::string name, std::string backend, ConvDirection direction, std::string forward_name)
      : BwdSolverOf(std::move(name), backend, direction),
        backend_(std::move(backend)),
        forward_name_(std::move(forward_name)) {}

  std::vector<ForwardChoice> candidates(const ConvProblem& p, const runtime::Device& device) const override {
    const ConvProblem view = forward_view(p);
    const ProblemRef ref = ProblemRef::of(view);
    std::vector<ForwardChoice> out;
    // The forward solver's own texts for the view need no parse: a call without a tuned choice
    // builds this list, and a parse (with its validity check) of each would be host work per call.
    auto add = [&](std::string text, bool listed) {
      for (const ForwardChoice& c : out)
        if (c.text == text) return;
      if (listed || forward()->parse_config_any(ref, device, text))
        out.push_back(ForwardChoice{std::move(text)});
    };
    for (std::string& text : extra_plans(p)) add(std::move(text), false);
    for (std::string& text : forward()->configs_any(ref, device)) add(std::move(text), true);
    if (out.empty()) out.push_back(ForwardChoice{std::string(kForwardDefault)});
    return out;
  }
  bool valid(const ConvProblem& p, const runtime::Device& device,
             const ForwardChoice& choice) const override {
    const ConvProblem view = forward_view(p);
    if (choice.text == kForwardDefault) return forward()->configs_any(ProblemRef::of(view), device).empty();
    return forward()->parse_config_any(ProblemRef::of(view), device, choice.text).has_value();
  }
  std::size_t workspace_bytes(const ConvProblem& p, const runtime::Device& device,
                              const ForwardChoice& choice) const override {
    const ConvProblem view = forward_view(p);
    const std::optional<ConfigHandle> config = forward_config(view, device, choice);
    return own_workspace(p) +
           forward()->workspace_bytes_any(ProblemRef::of(view), device, config ? config->get() : nullptr);
  }

 protected:
  virtual ConvProblem forward_view(const ConvProblem& p) const = 0;
  /// Bytes of the workspace before the forward solver's part (256-byte aligned).
  virtual std::size_t own_workspace(const ConvProblem& p) const = 0;
  /// Plans worth timing beyond the forward solver's own list, as its config texts.
  virtual std::vector<std::string> extra_plans(const ConvProblem&) const { return {}; }

  /// Empty when the forward solver exists and takes the view, else why not.
  std::string forward_refusal(const ConvProblem& p, const runtime::Device& device) const {
    try {
      (void)forward();
    } catch (const Error&) {
      return forward_name_ + " is not registered on " + backend_;
    }
    return forward_refuses(forward_view(p), device);
  }
  /// The forward solver's run of the view on `src` and `wei` into `dst`, with its part of the
  /// workspace (checked against `a` first).
  void run_forward(runtime::Stream& stream, const ConvProblem& p, const ConvArgs& a,
                   const ForwardChoice& choice, const void* src, const void* wei, void* dst) const {
    const ConvProblem view = forward_view(p);
    const std::optional<ConfigHandle> config = forward_config(view, stream.device(), choice);
    run_forward_view(stream, view, config ? config->get() : nullptr, a, own_workspace(p), src, wei, dst);
  }
  std::string forward_detail(const ConvProblem& p, const runtime::Device& device) const {
    return forward_name_ + ": " + forward()->detail(forward_view(p), device);
  }
  const std::string& forward_name() const { return forward_name_; }
  std::string forward_detail_of(const ConvProblem& view, const runtime::Device& device) const {
    return forward()->detail(view, device);
  }
  /// The forward solver's workspace for `view` with its default plan.
  std::size_t forward_workspace(const ConvProblem& view, const runtime::Device& device) const {
    return forward()->workspace_bytes_any(ProblemRef::of(view), device, nullptr);
  }
  /// Empty when the forward solver takes `view`, else why not.
  std::string forward_refuses(const ConvProblem& view, const runtime::Device& device) const {
    const Applicability a = forward()->check(view, device);
    return a ? std::string() : forward_name_ + " refuses the forward view " + view.key() + ": " + a.reason;
  }
  /// The forward solver's run of `view` with `config` (null: its default plan), its workspace from
  /// byte `own` of a's (checked against `a` first).
  void run_forward_view(runtime::Stream& stream, const ConvProblem& view, const void* config,
                        const ConvArgs& a, std::size_t own, const void* src, const void* wei,
                        void* dst) const {
    const std::size_t forward_ws =
        forward()->workspace_bytes_any(ProblemRef::of(view), stream.device(), config);
    require_workspace(a, own + forward_ws);
    dnn::OpArgs fa;
    fa.set(dnn::ArgId::src, src);
    fa.set(dnn::ArgId::wei, wei);
    fa.set(dnn::ArgId::dst, dst);
    fa.workspace = forward_ws > 0 ? static_cast<unsigned char*>(a.workspace) + own : nullptr;
    fa.workspace_bytes = forward_ws;
    forward()->run_any(stream, ProblemRef::of(view), fa, config);
  }

 private:
  std::optional<ConfigHandle> forward_config(const ConvProblem& view, const runtime::Device& device,
                                             const ForwardChoice& choice) const {
    if (choice.text == kForwardDefault) return std::nullopt;
    std::optional<ConfigHandle> config =
        forward()->parse_config_any(ProblemRef::of(view), device, choice.text);
    if (!config)
      throw Error(Status::invalid_argument, std::string(name()) + ": '" + choice.text +
                                                "' is not a config of " + forward_name_ + " for " +
                                                view.key());
    return config;
  }
  // Looked up once: registered solvers are never removed, and every call of this solver asks for it
  // several times (check, workspace, each stride phase's run).
  const dnn::ConvSolver* forward() const {
    if (const dnn::ConvSolver* f = forward_.load(std::memory_order_acquire)) return f;
    const dnn::ConvSolver* f = dnn::find_conv_solver(backend_, forward_name_);
    if (f == nullptr) throw Error(Status::not_found, forward_name_ + " is not registered on " + backend_);
    forward_.store(f, std::memory_order_release);
    return f;
  }

  std::string backend_, forward_name_;
  mutable std::atomic<const dnn::ConvSolver*> forward_{nullptr};
};

// Backward-data as a forward convolution of dy (conv_bwd_data_as_forward.cu), k and c swapped within
// each group (so a grouped layer runs on gpu.conv.grouped), padding within the filter's dilated extent. Unit
// stride: a forward convolution of dy itself. A 1x1 filter with a stride and no padding: the stride grid of
// dx as a 1x1 product, scattered. Any other stride: dy spread onto the stride grid of a zero plane (as a
// transposed convolution does), then the unit-stride view of that plane; it costs stride_h x stride_w the
// product, the price of running the strided layers on the forward solvers' kernels. With dilation 1 (and
// unless GALLEY_DEBUG_BWD_DATA_PHASES=0) they run as stride phases instead: one unit-stride convolution of dy
// per phase with only that phase's taps, each scattered onto its pixels (no product of the spread's zeros).
// Workspace: the flipped filter, then the compact product (1x1) or the spread dy.
class BwdDataAsForwardSolver final : public ViaForwardSolver {
 public:
  using ViaForwardSolver::run;
  using ViaForwardSolver::workspace_bytes;
  BwdDataAsForwardSolver(std::string name, std::string backend, std::string forward_name)
      : ViaForwardSolver(std::move(name), std::move(backend), ConvDirection::backward_data,
                         std::move(forward_name)) {}

  Applicability check(const ConvProblem& p, const runtime::Device& device) const override {
    if (auto why = common_no(p, device, true); !why.empty()) return Applicability::no(why);
    if (auto why = view_refusal(p); !why.empty()) return Applicability::no(why);
    if (path(p) == Path::phases) {
      for (const Phase& ph : phases(p))
        if (ph.runs())
          if (auto why = forward_refuses(ph.view, device); !why.empty()) return Applicability::no(why);
      return Applicability::yes();
    }
    if (auto why = forward_refusal(p, device); !why.empty()) return Applicability::no(why);
    return Applicability::yes();
  }
  // The phases run the forward solver's default plan each (their views differ), so the only
  // choice is "default".
  std::vector<ForwardChoice> candidates(const ConvProblem& p, const runtime::Device& device) const override {
    if (path(p) == Path::phases) return {ForwardChoice{std::string(kForwardDefault)}};
    return ViaForwardSolver::candidates(p, device);
  }
  bool valid(const ConvProblem& p, const runtime::Device& device,
             const ForwardChoice& choice) const override {
    if (path(p) == Path::phases) return choice.text == kForwardDefault;
    return ViaForwardSolver::valid(p, device, choice);
  }
  std::size_t workspace_bytes(const ConvProblem& p, const runtime::Device& device,
                              const ForwardChoice& choice) const override {
    if (path(p) != Path::phases) return ViaForwardSolver::workspace_bytes(p, device, choice);
    std::size_t forward = 0;
    for (const Phase& ph : phases(p))
      if (ph.runs()) forward = std::max(forward, forward_workspace(ph.view, device));
    return own_workspace(p) + forward;
  }
  void run(runtime::Stream& stream, const ConvProblem& p, const ConvArgs& a,
           const ForwardChoice& choice) const override {
    require_workspace(a, own_workspace(p));
    if (path(p) == Path::phases) {
      run_phases(stream, p, a);
      return;
    }
    const dnn::BackwardDataArgs t = dnn::backward_data_args(a);
    const ConvParams cp = make_params(p);
    auto* base = static_cast<unsigned char*>(a.workspace);
    void* flipped = base;
    void* staged = base + staged_offset(p);
    enqueue(stream, [&](void* s) { launch_flip_filter(cp, t.w, flipped, s); });
    switch (path(p)) {
      case Path::unit_stride:
        run_forward(stream, p, a, choice, t.dy, flipped, t.dx);
        break;
      case Path::stride_grid_1x1:
        run_forward(stream, p, a, choice, t.dy, flipped, staged);
        enqueue(stream, [&](void* s) { launch_scatter_stride_grid(cp, staged, t.dx, s); });
        break;
      case Path::spread_dy: {
        // The scatter kernel's view: a "dx" of dy's channels and the spread plane's size, whose
        // stride grid is dy.
        ConvParams spread = cp;
        spread.c = cp.k;
        spread.h = int(spread_rows(p));
        spread.w = int(spread_cols(p));
        enqueue(stream, [&](void* s) { launch_scatter_stride_grid(spread, t.dy, staged, s); });
        run_forward(stream, p, a, choice, staged, flipped, t.dx);
        break;
      }
      case Path::phases:  // run_phases() above
        break;
    }
  }
  std::string detail(const ConvProblem& p, const runtime::Device& device) const override {
    const char* how = "forward convolution of dy with the flipped filter; ";
    if (path(p) == Path::stride_grid_1x1) how = "stride grid as a forward 1x1 convolution of dy, scattered; ";
    if (path(p) == Path::spread_dy)
      how = "dy spread onto the stride grid, then a unit-stride forward convolution; ";
    if (path(p) == Path::phases) {
      const std::vector<Phase> all = phases(p);
      const auto first = std::find_if(all.begin(), all.end(), [](const Phase& ph) { return ph.runs(); });
      return std::to_string(all.size()) +
             " stride phases, each a unit-stride forward convolution of dy with its taps, " + "scattered; " +
             forward_name() + ": " +
             (first != all.end() ? forward_detail_of(first->view, device)
                                 : std::string("no phase has a tap"));
    }
    return how + forward_detail(p, device);
  }

 protected:
  // The forward problem whose output is dx (unit stride, spread dy) or dx's stride grid (1x1).
  ConvProblem forward_view(const ConvProblem& p) const override {
    ConvProblem v = p;
    v.direction = ConvDirection::forward;
    v.epilogue = {};
    v.c = p.k;
    v.k = p.c;
    v.h = p.out_h();
    v.w = p.out_w();
    v.stride_h = v.stride_w = 1;
    if (path(p) == Path::stride_grid_1x1) {
      v.pad_h = v.pad_w = 0;
      v.dilation_h = v.dilation_w = 1;
      return v;
    }
    if (path(p) == Path::spread_dy) {
      v.h = spread_rows(p);
      v.w = spread_cols(p);
    }
    v.pad_h = p.dilation_h * (p.y - 1) - p.pad_h;
    v.pad_w = p.dilation_w * (p.x - 1) - p.pad_w;
    return v;
  }
  std::size_t own_workspace(const ConvProblem& p) const override {
    if (path(p) == Path::phases) {
      std::size_t bytes = 0;
      for (const Phase& ph : phases(p)) bytes += ph.filter_bytes + ph.out_bytes;
      return bytes;
    }
    std::size_t staged = 0;
    if (path(p) == Path::stride_grid_1x1) {
      staged = std::size_t(p.n * p.out_h() * p.out_w() * p.c) * size_of(p.dtype);
    } else if (path(p) == Path::spread_dy) {
      staged = std::size_t(spread_elements(p)) * size_of(p.dtype);
    }
    return staged_offset(p) + aligned(staged);
  }

 private:
  enum class Path { unit_stride, stride_grid_1x1, spread_dy, phases };
  static Path path(const ConvProblem& p) {
    if (p.stride_h == 1 && p.stride_w == 1) return Path::unit_stride;
    if (p.y == 1 && p.x == 1 && p.pad_h == 0 && p.pad_w == 0) return Path::stride_grid_1x1;
    // Stride phases do no multiply by the spread's zeros; GALLEY_DEBUG_BWD_DATA_PHASES=0 keeps the
    // spread, for comparison.
    if (p.dilation_h == 1 && p.dilation_w == 1 && env::config().debug_bwd_data_phases) return Path::phases;
    return Path::spread_dy;
  }

  // One stride phase (ah, aw): its axes, its forward view (when it has taps) and its parts of the
  // workspace, which hold every phase's filter and output one after another (256-byte aligned).
  struct Phase {
    int ah = 0, aw = 0;
    StridePhaseAxis h, w;
    ConvProblem view;
    std::size_t filter_at = 0, filter_bytes = 0, out_at = 0, out_bytes = 0;
    bool runs() const { return h.taps > 0 && w.taps > 0 && h.rows > 0 && w.rows > 0; }
  };
  static std::vector<Phase> phases(const ConvProblem& p) {
    std::vector<Phase> out;
    std::size_t at = 0;
    for (int ah = 0; ah < int(p.stride_h); ++ah) {
      for (int aw = 0; aw < int(p.stride_w); ++aw) {
        Phase ph;
        ph.ah = ah, ph.aw = aw;
        ph.h = stride_phase_axis(ah, int(p.stride_h), int(p.pad_h), int(p.y), int(p.h), int(p.out_h()));
        ph.w = stride_phase_axis(aw, int(p.stride_w), int(p.pad_w), int(p.x), int(p.w), int(p.out_w()));
        if (ph.runs()) {
          ConvProblem& v = ph.view;
          v = p;
          v.direction = ConvDirection::forward;
          v.epilogue = {};
          v.c = p.k, v.k = p.c;
          v.h = p.out_h(), v.w = p.out_w();
          v.y = ph.h.taps, v.x = ph.w.taps;
          v.pad_h = ph.h.pad, v.pad_w = ph.w.pad;
          v.stride_h = v.stride_w = 1;
          ph.filter_at = at;
          ph.filter_bytes =
              aligned(std::size_t(p.c * (p.k / p.groups)) * ph.h.taps * ph.w.taps * size_of(p.dtype));
          ph.out_at = at + ph.filter_bytes;
          ph.out_bytes = aligned(std::size_t(p.n * p.c) * ph.h.view * ph.w.view * size_of(p.dtype));
          at += ph.filter_bytes + ph.out_bytes;
        }
        out.push_back(ph);
      }
    }
    return out;
  }
  void run_phases(runtime::Stream& stream, const ConvProblem& p, const ConvArgs& a) const {
    const dnn::BackwardDataArgs t = dnn::backward_data_args(a);
    const ConvParams cp = make_params(p);
    auto* base = static_cast<unsigned char*>(a.workspace);
    const std::size_t own = own_workspace(p);
    const std::vector<Phase> all = phases(p);
    // Up to kMaxStridePhases phases at a time: their filters in one launch, their forward
    // convolutions, then their scatters in one launch.
    for (std::size_t first = 0; first < all.size(); first += kMaxStridePhases) {
      const std::size_t end = std::min(all.size(), first + kMaxStridePhases);
      StridePhaseSet set;
      for (std::size_t i = first; i < end; ++i) {
        const Phase& ph = all[i];
        StridePhaseSet::Phase& sp = set.phase[set.count++];
        sp.ah = ph.ah, sp.aw = ph.aw, sp.h = ph.h, sp.w = ph.w;
        if (ph.runs()) sp.filter = base + ph.filter_at, sp.out = base + ph.out_at;
      }
      enqueue(stream, [&](void* s) { launch_phase_filters(cp, t.w, set, s); });
      for (std::size_t i = first; i < end; ++i)
        if (all[i].runs())
          run_forward_view(stream, all[i].view, nullptr, a, own, t.dy, base + all[i].filter_at,
                           base + all[i].out_at);
      enqueue(stream, [&](void* s) { launch_phase_scatters(cp, set, t.dx, s); });
    }
  }
  // Rows (or columns) of the spread plane: those a unit-stride convolution padded by
  // dil * (r - 1) - pad needs to give `extent` outputs. Its row i * stride holds dy's row i; the
  // rest, the bottom rows the forward windows never reached included, are zero.
  static std::int64_t spread_extent(std::int64_t extent, std::int64_t pad, std::int64_t dil, std::int64_t r) {
    return extent + 2 * pad - dil * (r - 1);
  }
  static std::int64_t spread_rows(const ConvProblem& p) {
    return spread_extent(p.h, p.pad_h, p.dilation_h, p.y);
  }
  static std::int64_t spread_cols(const ConvProblem& p) {
    return spread_extent(p.w, p.pad_w, p.dilation_w, p.x);
  }
  /// Elements of the spread dy: dy's images and channels over the spread plane.
  static std::int64_t spread_elements(const ConvProblem& p) {
    return p.n * p.k * spread_rows(p) * spread_cols(p);
  }
  static std::size_t staged_offset(const ConvProblem& p) {
    return aligned(std::size_t(p.w_desc().elements()) * size_of(p.dtype));
  }
  static std::string view_refusal(const ConvProblem& p) {
    // The flip's grid holds groups x taps blocks in grid.z.
    if (p.groups * p.y * p.x > 65535)
      return "groups x filter taps " + std::to_string(p.groups * p.y * p.x) + " > 65535 (the flip's grid.z)";
    if (path(p) == Path::stride_grid_1x1) return {};
    if (p.pad_h > p.dilation_h * (p.y - 1) || p.pad_w > p.dilation_w * (p.x - 1))
      return "padding " + std::to_string(p.pad_h) + "x" + std::to_string(p.pad_w) +
             " beyond the filter's dilated extent less one (the flipped filter would need a negative pad)";
    if (path(p) == Path::spread_dy) {
      const std::int64_t spread = spread_elements(p);
      if (spread > std::numeric_limits<int>::max())
        return "spread dy of " + std::to_string(spread) + " elements (beyond the kernels' 32-bit indexing)";
    }
    if (path(p) == Path::phases) {
      if (p.x_desc().elements() > std::numeric_limits<int>::max())
        return "dx of " + std::to_string(p.x_desc().elements()) +
               " elements (beyond the kernels' 32-bit indexing)";
      for (const Phase& ph : phases(p))
        if (ph.runs() && ph.view.y_desc().elements() > std::numeric_limits<int>::max())
          return "a stride phase's output of " + std::to_string(ph.view.y_desc().elements()) +
                 " elements (beyond the kernels' 32-bit indexing)";
    }
    return {};
  }
};

// Backward-weights as one forward convolution on gpu.conv.igemm_tc's kernel, unit stride and
// dilation, groups 1: dw[k][c][r][s] = sum over n, p, q of x[n][c][r + p - pad][s + q - pad] dy[n][k][p][q]
// is a forward convolution whose images are x's channels (C of them), whose input channels are the
// batch (N), whose filter is dy (K x P x Q x N) and whose output is C x R x S x K. The workspace holds
// x and dy with the batch moved innermost and that output, transposed into dw after. The product
// reduces over N * P * Q for few outputs, so the plans add split-K counts far beyond the forward
// list's (up to 64).
class BwdWeightsViaIgemmTcSolver final : public ViaForwardSolver {
 public:
  using ViaForwardSolver::run;
  explicit BwdWeightsViaIgemmTcSolver(std::string backend)
      : ViaForwardSolver("gpu.conv.bwd_weights_via_igemm_tc", std::move(backend),
                         ConvDirection::backward_weights, "gpu.conv.igemm_tc") {}

  Applicability check(const ConvProblem& p, const runtime::Device& device) const override {
    if (auto why = common_no(p, device, true); !why.empty()) return Applicability::no(why);
    if (p.groups != 1) return Applicability::no("groups " + std::to_string(p.groups) + " (needs 1)");
    if (p.stride_h != 1 || p.stride_w != 1 || p.dilation_h != 1 || p.dilation_w != 1)
      return Applicability::no("stride " + std::to_string(p.stride_h) + "x" + std::to_string(p.stride_w) +
                               ", dilation " + std::to_string(p.dilation_h) + "x" +
                               std::to_string(p.dilation_w) + " (needs unit stride and dilation)");
    if (p.out_h() * p.out_w() > 65535)
      return Applicability::no("dy's plane of " + std::to_string(p.out_h() * p.out_w()) +
                               " pixels exceeds the transpose's grid (65535)");
    if (auto why = forward_refusal(p, device); !why.empty()) return Applicability::no(why);
    return Applicability::yes();
  }
  void run(runtime::Stream& stream, const ConvProblem& p, const ConvArgs& a,
           const ForwardChoice& choice) const override {
    require_workspace(a, own_workspace(p));
    const dnn::BackwardWeightsArgs t = dnn::backward_weights_args(a);
    auto* base = static_cast<unsigned char*>(a.workspace);
    void* xv = base;
    void* dyv = base + dy_offset(p);
    void* product = base + product_offset(p);
    const bool nhwc = p.layout == dnn::Layout::nhwc;
    const std::int64_t hw = p.h * p.w, pq = p.out_h() * p.out_w(), rs = p.y * p.x;
    enqueue(stream, [&](void* s) {
      // x: (N, HW, C) or (N, 1, CHW) -> (C, H, W, N); dy: (N, PQ, K) or (N, 1, KPQ) -> (K, P, Q, N).
      launch_swap_outer_inner(p.dtype, t.x, xv, p.n, nhwc ? hw : 1, nhwc ? p.c : p.c * hw, s);
      launch_swap_outer_inner(p.dtype, t.dy, dyv, p.n, nhwc ? pq : 1, nhwc ? p.k : p.k * pq, s);
    });
    run_forward(stream, p, a, choice, xv, dyv, product);
    enqueue(stream, [&](void* s) {
      // (C, RS, K) -> KRSC (K, RS, C), or as (CRS, 1, K) -> KCRS (K, 1, CRS).
      launch_swap_outer_inner(p.dtype, product, t.dw, nhwc ? p.c : p.c * rs, nhwc ? rs : 1, p.k, s);
    });
  }
  std::string detail(const ConvProblem& p, const runtime::Device& device) const override {
    return "x and dy with the batch innermost, one forward product over it, transposed into dw; " +
           forward_detail(p, device);
  }

 protected:
  ConvProblem forward_view(const ConvProblem& p) const override {
    ConvProblem v;
    v.n = p.c;
    v.c = p.n;
    v.h = p.h;
    v.w = p.w;
    v.k = p.k;
    v.y = p.out_h();
    v.x = p.out_w();
    v.pad_h = p.pad_h;
    v.pad_w = p.pad_w;
    v.dtype = p.dtype;
    v.layout = dnn::Layout::nhwc;
    v.direction = ConvDirection::forward;
    return v;
  }
  std::size_t own_workspace(const ConvProblem& p) const override {
    return product_offset(p) + aligned(std::size_t(p.w_desc().elements()) * size_of(p.dtype));
  }
  // Long reductions: each split keeps at least 8 steps of 64 products.
  std::vector<std::string> extra_plans(const ConvProblem& p) const override {
    std::vector<std::string> out;
    const std::int64_t steps = (p.n * p.out_h() * p.out_w() + 63) / 64;
    for (int splits : {16, 32, 64, 8})
      if (steps / splits >= 8)
        for (int tile : {1, 5, 2})
          out.push_back("tile=" + std::to_string(tile) + ",splits=" + std::to_string(splits));
    return out;
  }

 private:
  static std::size_t dy_offset(const ConvProblem& p) {
    return aligned(std::size_t(p.x_desc().elements()) * size_of(p.dtype));
  }
  static std::size_t product_offset(const ConvProblem& p) {
    return dy_offset(p) + aligned(std::size_t(p.y_desc().elements()) * size_of(p.dtype));
  }
};

}  // namespace

std::unique_ptr<dnn::ConvSolver> make_conv_bwd_data_as_forward(std::string_view backend,
                                                               std::string_view forward) {
  std::string name(forward);
  const std::string prefix = "gpu.conv.";
  if (name.rfind(prefix, 0) == 0) name = name.substr(prefix.size());
  return std::make_unique<BwdDataAsForwardSolver>("gpu.conv.bwd_data_via_" + name, std::string(backend),
                                                  std::string(forward));
}
std::unique_ptr<dnn::ConvSolver> make_conv_bwd_weights_via_igemm_tc(std::string_view backend) {
  return std::make_unique<BwdWeightsViaIgemmTcSolver>(std::string(backend));
}
std::unique_ptr<dnn::ConvSolver> make_conv_bwd_data_depthwise(std::string_view backend) {
  return std::make_unique<BwdDataDepthwiseSolver>(std::string(backend));
}
std::unique_ptr<dnn::ConvSolver> make_conv_bwd_weights_depthwise(std::string_view backend) {
  return std::make_unique<BwdWeightsDepthwiseSolver>(std::string(backend));
}
std::unique_ptr<dnn::ConvSolver> make_conv_bwd_weights_winograd(std::string_view backend) {
  return std::make_unique<BwdWeightsWinogradSolver>(std::string(backend));
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
