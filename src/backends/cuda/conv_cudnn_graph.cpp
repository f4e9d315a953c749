// cuda.conv.cudnn_graph: cuDNN 9's backend (graph) API, called directly. The legacy API behind
// cuda.conv.cudnn does not reach the engines PyTorch reaches through this API, which win by a wide
// margin on many f16/bf16 problems. One class serves the three directions under three names
// (cuda.conv.cudnn_graph, _bwd_data, _bwd_weights): the graph's node is cuDNN's operation of the
// direction (backward ones take no epilogue); the engine configs as the tuner's candidates, the plan
// cache, variant packs and graph replay are the same.
//
// Its inner choice is an engine config ("eng<global index>{k<knob type>=<value>,...}",
// cudnn_engine_config.hpp), listed as a TunableSolver's configs: the tuner times them beside every
// other solver and the find-db keeps the winner's text, so the solver never times anything itself.
// Per (device, problem key), once: a one-node operation graph (conv forward; NCHW or NHWC is only a
// matter of strides); the candidates are the engine configs of heuristics mode A (the first
// kMaxHeuristic usable ones) and of the fallback list (kMaxFallback more; for f16/bf16 only when mode
// A gives few, kMinHeuristicForTensorCores), filtered by their notes,
// each finalized into an execution plan, the only way to learn that cuDNN runs it. The fallback list
// holds the classic engines (Winograd, FFT, precomputed implicit GEMM) that mode A ranks low but that
// win some problems (a first layer of 3 channels, fp32 3x3 layers): mode A's top configs alone would
// lose there to the legacy API's algorithms. Every engine of the graph at its default knobs (at most
// kMaxSwept plans) is tried only when those lists give no plan: the sweep finalizes some 10 more plans
// a problem, which tripled the search for a win of a few percent on one problem of the benchmark list.
// That keeps the search about PyTorch's (cudnn.benchmark times the first 10 configs of the same
// lists), which `galley tune` is measured against. A call without a tuned choice (immediate mode, no
// find-db row) runs the first candidate, heuristics mode A's best usable config.
//
// A config from a find-db row is valid when it still finalizes into a plan that passes the notes
// filter: valid() builds that one plan, so a find-db hit costs one plan and no enumeration (check()
// answers yes once any plan of the problem is finalized). Plans are cached per (device, problem key,
// config), at most kPlansKept per problem, which the candidates fill to less than half; workspace_bytes()
// is the plan's own workspace, so it is exact for what run() executes.
//
// Variant packs (the data pointers) are kept per plan for the 16 most recent pointer sets and built
// only for a new one: building one on every call would add host time to calls of tens of microseconds,
// and layers of one shape in a network share the plan with tensors of their own. From a pointer
// set's third call on, the call is a CUDA graph launch (graph_replay.hpp): cuDNN's own host work per
// call is as long as the small layers' kernels.
//
// The backend API's descriptor wrapper, engine notes and helpers live in cudnn_backend_desc.{hpp,cpp};
// this file is the solver.
//
// Notes filter: f32 refuses tensor-core / down-converting engines (TF32 would make comparisons with
// TF32-off peers unfair); every dtype refuses reduced-precision reduction (the issue wants fp32
// accumulation) and, for plain graphs, runtime-compiled engines (an NVRTC compile per problem costs
// seconds).
//
// A forward problem with an epilogue (ConvEpilogue: y = act(conv(x, w) + bias[k] + residual)) is one
// operation graph: conv (f32 compute) -> pointwise ADD of the 1xKx1x1 bias, broadcast -> pointwise
// ADD of the residual -> the activation's pointwise node (pointwise_activation() says which
// activations cuDNN expresses exactly; the others are refused with the reason), the intermediates
// virtual in f32 and only the last node writing y, in the reference's order. The residual is added
// unscaled (ConvEpilogue's alpha and beta are the activation's parameters, not residual scales).
// cuDNN fuses such graphs with runtime fusion engines, compiled when their plan is finalized, so
// runtime compilation is allowed for fused graphs: the enumeration finalizes at most
// kMaxRuntimeCompiled such plans per problem (failed ones count: a machine without NVRTC fails each
// after a while), and a stored runtime-compiled config is compiled when valid() builds it. What cuDNN
// cannot build or has no engine for (often f32 NCHW) is a refusal carrying its status text, never a
// wrong answer; the tuner times the fused plans against cuda.conv.unfused and the own kernels with
// their epilogue pass. GALLEY_LOG_LEVEL=debug logs every failed build step, heuristics query and plan
// finalization of a fused graph with its cuDNN status.
#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "backends/cuda/cudnn_backend_desc.hpp"
#include "backends/cuda/cudnn_engine_config.hpp"
#include "backends/cuda/cudnn_handle.hpp"
#include "backends/cuda/graph_replay.hpp"
#include "backends/cuda/runtime_check.hpp"
#include "backends/cuda/vendor_conv_solvers.hpp"
#include "backends/cuda/vendor_dtypes.hpp"
#include "backends/gpu/conv_params.hpp"
#include "backends/gpu/problem_key.hpp"
#include "backends/gpu/recent_cache.hpp"
#include "galley/core/log.hpp"
#include "galley/dnn/conv_solver.hpp"
#include "galley/runtime/device.hpp"
#include "galley/runtime/stream.hpp"

namespace galley::backends::cuda {
namespace {

using dnn::Applicability;
using dnn::ConvDirection;
using dnn::ConvProblem;

constexpr std::size_t kWorkspaceCap = std::size_t(1) << 30;  // 1 GiB, as cuda.conv.cudnn
// cudnn.benchmark's count: PyTorch times the first 10 usable configs of mode A.
constexpr int kMaxHeuristic = 10;
constexpr int kMaxFallback = 4;
// For f16 and bf16 the fallback list is consulted only when mode A gives fewer usable configs than
// this: over the benchmark list's 24 cudnn_graph problems in f16 NHWC the winner always came from
// mode A (tensor-core engines), while the fallback list's generic engine ran each at 15 ms against
// the winners' 0.02-0.2 ms and cost a third of `galley tune`'s time. PyTorch reaches the same set:
// cudnn.benchmark times the first 10 configs of mode A's list followed by the fallback's.
constexpr std::size_t kMinHeuristicForTensorCores = 4;
constexpr int kMaxSwept =
    kMaxHeuristic + kMaxFallback;  // the sweep's candidates, at most as many as the lists'
constexpr std::int64_t kMaxGlobalEngines =
    128;  // bound on the graph's global engine count (cuDNN reports it)
// Finalized plans kept per problem: every candidate, with room for configs of find-db rows.
constexpr std::size_t kPlansKept = 32;
static_assert(kPlansKept >= 2 * std::size_t(kMaxSwept),
              "the candidates must stay cached while the tuner walks them");
// A fused graph compiles each runtime fusion plan it finalizes (up to seconds each), inside the
// tuner's time box (GALLEY_FIND_TIME_MS, 2 s by default), which a second compile could use up before
// the other solvers are timed: one attempt per problem, the heuristics' best ranked config.
constexpr int kMaxRuntimeCompiled = 1;
// The graph's x, w and y tensors by forward's names: backward-data writes x (dx) and reads y (dy),
// backward-weights writes w (dw) and reads y (dy).
constexpr std::int64_t kUidX = 1, kUidW = 2, kUidY = 3, kUidBias = 4, kUidResidual = 5;
constexpr std::int64_t kUidVirtual = 100;              // the fused graph's intermediates: 100, 101, ...
constexpr std::int64_t kAlignment = kTensorAlignment;  // bytes; run() checks the pointers

/// What differs between the directions: the solver's name, cuDNN's operation node and its
/// attributes for the graph's x, w and y tensors (by forward's names, see kUidX), the convolution
/// descriptor and the scales, and the names of a call's pointers in GraphPointers' order.
struct ConvOperation {
  const char* solver;
  cudnnBackendDescriptorType_t type;
  cudnnBackendAttributeName_t x, w, y, conv, alpha, beta;
  const char* what;
  std::array<const char*, 6> pointers;
};

ConvOperation conv_operation(ConvDirection direction) {
  switch (direction) {
    case ConvDirection::backward_data:
      return {"cuda.conv.cudnn_graph_bwd_data",
              CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA,
              "conv backward-data operation",
              {"dx", "w", "dy", "workspace", "bias", "residual"}};
    case ConvDirection::backward_weights:
      return {"cuda.conv.cudnn_graph_bwd_weights",
              CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA,
              "conv backward-weights operation",
              {"x", "dw", "dy", "workspace", "bias", "residual"}};
    case ConvDirection::forward:
      break;
  }
  return {kGraphSolverName,
          CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
          CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
          CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
          CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y,
          CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
          CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
          CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA,
          "conv forward operation",
          {"x", "w", "y", "workspace", "bias", "residual"}};
}

std::string status_text(cudnnStatus_t status) { return cudnnGetErrorString(status); }

void check_cudnn(cudnnStatus_t status, const std::string& call) { check_backend(status, call); }

/// Prints "cuda.conv.cudnn_graph <key>: <what>" at debug level.
void debug_log(const ConvProblem& p, const std::string& what) {
  if (log::enabled(log::Level::debug))
    log::debug(std::string(conv_operation(p.direction).solver) + " " + p.key() + ": " + what);
}

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

/// A call's pointers: x, w, y (by forward's names, see kUidX), workspace, bias, residual (the last
/// two null unless the epilogue reads them). What a variant pack and a graph captured from a call hold.
using GraphPointers = std::array<const void*, 6>;

GraphPointers call_pointers(const ConvProblem& p, const dnn::ConvArgs& a, void* workspace) {
  switch (p.direction) {
    case ConvDirection::backward_data:
      return {a.dx, a.w, a.dy, workspace, nullptr, nullptr};
    case ConvDirection::backward_weights:
      return {a.x, a.dw, a.dy, workspace, nullptr, nullptr};
    case ConvDirection::forward:
      break;
  }
  return {a.x,
          a.w,
          a.y,
          workspace,
          p.epilogue.bias ? a.bias : nullptr,
          p.epilogue.residual ? a.residual : nullptr};
}

/// What a plan's calls on one set of pointers reuse: the variant pack (cuDNN's table of the
/// pointers) and the CUDA graph the calls are replayed from once the set has repeated.
struct PointerSet {
  Desc pack;
  GraphReplay replay;
};

/// One finalized execution plan of one engine config.
struct Plan {
  EngineConfig choice;  // the config it was built for: its key in Entry::plans
  Desc config, plan;
  EngineInfo info;
  std::int64_t workspace = 0;
  // Recent calls' pointer sets (GraphPointers), used under the handle's mutex. More than one:
  // layers of one shape share this plan with their own tensors (ResNet-50 repeats its blocks 3-6
  // times per stage), and a single cached pack would be rebuilt on each of their calls.
  gpu::RecentCache<GraphPointers, PointerSet> pointer_sets{kPointerSetsKept};

  /// Gives up the plan and its pointer sets without destroying them (at process exit, when the
  /// context that owns their device code and memory may be gone).
  void release() {
    plan.release();
    pointer_sets.for_each_value([](PointerSet& set) {
      set.pack.release();
      set.replay.release();
    });
  }
};

/// Everything for one (device, problem): the graph, its candidates and the plans finalized so far.
/// The graph is built at once; the candidates on the first check(), candidates() or config-less
/// call, unless a config's plan (valid(), from a find-db row) answered check() first.
struct Entry {
  Desc x, w, y, conv, op, graph;
  // A fused graph's bias and residual tensors, and its virtual tensors, pointwise descriptors and
  // operations (a deque: the operations refer to the tensors by address).
  Desc bias, residual;
  std::deque<Desc> fused;
  std::string fused_graph;  // "conv -> add bias -> relu_fwd(...)"; empty for a plain graph
  std::mutex mutex;         // guards the members below
  bool enumerated = false;
  std::vector<EngineConfig> candidates;  // preferred first: mode A's, the fallback list's, or the sweep's
  std::string none_reason;               // why there are no candidates
  int heuristic_configs = 0, fallback_configs = 0, global_engines = 0;
  // Shared: a call keeps its plan alive should a later config push it out while it runs.
  gpu::RecentCache<EngineConfig, std::shared_ptr<Plan>> plans{kPlansKept};
};

/// The state of `plan`'s calls on these pointers, its variant pack built on first use; nullptr with
/// `status` set when cuDNN refused the pack. The pack holds x, w and y, and bias and residual where
/// `pointers` has them (call_pointers() leaves them null for a graph without them). The caller
/// holds the handle's mutex.
PointerSet* pointer_set(Plan& plan, const GraphPointers& pointers, cudnnStatus_t& status) {
  status = CUDNN_STATUS_SUCCESS;
  if (PointerSet* known = plan.pointer_sets.find(pointers)) return known;
  cudnnBackendDescriptor_t vp = nullptr;
  status = cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &vp);
  if (status != CUDNN_STATUS_SUCCESS) return nullptr;
  std::int64_t uids[5] = {kUidX, kUidW, kUidY};
  void* ptrs[5] = {const_cast<void*>(pointers[0]), const_cast<void*>(pointers[1]),
                   const_cast<void*>(pointers[2])};
  std::int64_t count = 3;
  for (const auto& [uid, ptr] : {std::pair{kUidBias, pointers[4]}, std::pair{kUidResidual, pointers[5]}}) {
    if (ptr == nullptr) continue;
    uids[count] = uid;
    ptrs[count++] = const_cast<void*>(ptr);
  }
  void* workspace = const_cast<void*>(pointers[3]);
  status = cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, count, uids);
  if (status == CUDNN_STATUS_SUCCESS)
    status =
        cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, count, ptrs);
  if (status == CUDNN_STATUS_SUCCESS)
    status =
        cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace);
  if (status == CUDNN_STATUS_SUCCESS) status = cudnnBackendFinalize(vp);
  if (status != CUDNN_STATUS_SUCCESS) {
    (void)cudnnBackendDestroyDescriptor(vp);
    return nullptr;
  }
  return &plan.pointer_sets.insert(pointers, PointerSet{Desc::adopt(vp), GraphReplay{}});
}

class GraphSolver final : public dnn::TunableSolver<ConvProblem, EngineConfig> {
 public:
  explicit GraphSolver(ConvDirection direction)
      : direction_(direction), name_(conv_operation(direction).solver) {}

  // The config-less forms (list order, a named solver) run the first candidate.
  using dnn::TunableSolver<ConvProblem, EngineConfig>::run;
  using dnn::TunableSolver<ConvProblem, EngineConfig>::workspace_bytes;

  ~GraphSolver() override {
    // Plans may own device code and memory of a context that is gone at process exit: leak them.
    for (auto& [key, e] : entries_)
      e->plans.for_each_value([](std::shared_ptr<Plan>& plan) { plan->release(); });
  }

  std::string_view name() const override { return name_; }
  /// Forward epilogues are built into the operation graph (see the top of this file).
  bool implements_fused_parts() const override { return direction_ == ConvDirection::forward; }

  Applicability check(const ConvProblem& p, const runtime::Device& device) const override {
    if (Applicability a = can_take(p, device); !a) return a;
    if (const auto& act = p.epilogue.activation) {
      std::string why;
      if (!pointwise_activation(*act, p.epilogue.alpha, p.epilogue.beta, why)) return Applicability::no(why);
    }
    try {
      // Building the graph and finalizing plans is the only way to know cuDNN can do the problem;
      // the result is cached, so later checks are a map lookup.
      Entry& e = entry(p, device);
      std::lock_guard lock(e.mutex);
      if (e.plans.size() > 0) return Applicability::yes();
      enumerate_if_needed(p, device, e);
      if (e.candidates.empty()) return Applicability::no("cuDNN graph API: " + e.none_reason);
    } catch (const Error& e) {
      return Applicability::no(e.what());
    }
    return Applicability::yes();
  }

  std::vector<EngineConfig> candidates(const ConvProblem& p, const runtime::Device& device) const override {
    Entry& e = entry(p, device);
    std::lock_guard lock(e.mutex);
    enumerate_if_needed(p, device, e);
    if (!e.candidates.empty()) return e.candidates;
    // cuDNN's lists gave no plan, yet a config of a find-db row did (check() said yes on it).
    std::vector<EngineConfig> stored;
    e.plans.for_each_value([&](std::shared_ptr<Plan>& plan) { stored.push_back(plan->choice); });
    return stored;
  }

  bool valid(const ConvProblem& p, const runtime::Device& device, const EngineConfig& config) const override {
    if (!can_take(p, device)) return false;
    try {
      Entry& e = entry(p, device);
      std::lock_guard lock(e.mutex);
      std::string why;
      if (plan_of(p, device, e, config, why) != nullptr) return true;
      debug_log(p, "config " + config.to_string() + " not usable: " + why);
    } catch (const Error& error) {
      debug_log(p, "config " + config.to_string() + " not usable: " + error.what());
    }
    return false;
  }

  std::size_t workspace_bytes(const ConvProblem& p, const runtime::Device& device,
                              const EngineConfig& config) const override {
    return std::size_t(require_plan(p, device, config)->workspace);
  }

  void run(runtime::Stream& stream, const ConvProblem& p, const dnn::ConvArgs& a,
           const EngineConfig& config) const override {
    const std::shared_ptr<Plan> plan = require_plan(p, stream.device(), config);
    if (a.workspace_bytes < std::size_t(plan->workspace))
      throw Error(Status::invalid_argument, name_ + ": workspace of " + std::to_string(a.workspace_bytes) +
                                                " bytes, needs " + std::to_string(plan->workspace));
    if (p.epilogue.bias && a.bias == nullptr)
      throw Error(Status::invalid_argument, name_ + ": the epilogue adds a bias but bias is null");
    if (p.epilogue.residual && a.residual == nullptr)
      throw Error(Status::invalid_argument, name_ + ": the epilogue adds a residual but residual is null");
    const GraphPointers pointers = call_pointers(p, a, plan->workspace > 0 ? a.workspace : nullptr);
    const auto names = conv_operation(p.direction).pointers;
    for (std::size_t i : {0, 1, 2}) {
      if (pointers[i] == nullptr)
        throw Error(Status::invalid_argument, name_ + ": " + names[i] + " pointer is null");
    }
    for (std::size_t i : {0, 1, 2, 4, 5}) {
      if (reinterpret_cast<std::uintptr_t>(pointers[i]) % kAlignment != 0)
        throw Error(Status::invalid_argument,
                    name_ + ": " + names[i] + " pointer not " + std::to_string(kAlignment) + "-byte aligned");
    }
    CudnnHandle& h = handle(stream.device());
    stream.launch(name_.c_str(), [&] {
      DeviceGuard guard(stream.device().index());
      std::lock_guard lock(h.mutex);
      const auto s = static_cast<cudaStream_t>(stream.native_handle());
      check_cudnn(h.set_stream(s, stream.id()), "cudnnSetStream");
      cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
      PointerSet* set = pointer_set(*plan, pointers, st);
      if (set == nullptr) check_cudnn(st, "variant pack (" + plan->info.tag() + ")");
      set->replay.run(s, name_.c_str(), [&] {
        if (const cudnnStatus_t ran = cudnnBackendExecute(h.handle, plan->plan.get(), set->pack.get());
            ran != CUDNN_STATUS_SUCCESS)
          check_cudnn(ran, "cudnnBackendExecute(" + plan->info.tag() + ")");
      });
    });
  }

  std::string detail(const ConvProblem& p, const runtime::Device& device) const override {
    const std::vector<EngineConfig> all = candidates(p, device);
    Entry& e = entry(p, device);
    std::lock_guard lock(e.mutex);
    std::string out = fused(e) ? "fused " + e.fused_graph + ", " : "";
    out += std::to_string(all.size()) +
           " engine configs for the tuner to time (the first runs without a tuned choice):";
    for (const EngineConfig& config : all) {
      std::string why;
      const std::shared_ptr<Plan> plan = plan_of(p, device, e, config, why);
      out.append(" ").append(config.to_string()).append(" (");
      if (plan == nullptr) {
        out.append(why).append(")");
        continue;
      }
      if (const std::string notes = notes_text(plan->info); !notes.empty()) out.append(notes).append(", ");
      out.append("workspace ").append(std::to_string(plan->workspace)).append(" B)");
    }
    return out + "; from heuristics mode A " + std::to_string(e.heuristic_configs) + " configs, fallback " +
           std::to_string(e.fallback_configs) + ", engines at default knobs " +
           std::to_string(e.global_engines);
  }

 private:
  CudnnHandle& handle(const runtime::Device& device) const { return cudnn_handle(device); }

  /// cudnn_can_take()'s device, dtype and size rules, for this solver's direction.
  Applicability can_take(const ConvProblem& p, const runtime::Device& device) const {
    if (p.direction != direction_)
      return Applicability::no(std::string(dnn::to_string(direction_)) + " only, not " +
                               dnn::to_string(p.direction));
    ConvProblem as_forward = p;
    as_forward.direction = ConvDirection::forward;
    return cudnn_can_take(as_forward, device);
  }

  static bool fused(const Entry& e) { return !e.fused_graph.empty(); }

  /// The entry of (device, problem), epilogue included: a fused problem never shares a plain one's.
  Entry& entry(const ConvProblem& p, const runtime::Device& device) const {
    const gpu::ProblemKey key{device.index(), p};
    std::lock_guard lock(entries_mutex_);  // held while building: plans of one handle, one at a time
    auto it = entries_.find(key);
    if (it != entries_.end()) return *it->second;
    std::unique_ptr<Entry> e;
    try {
      e = build(p, device);
    } catch (const Error& error) {
      if (!p.has_epilogue()) throw;
      // A fused graph cuDNN will not build is a refusal, kept so that later checks are a lookup.
      e = std::make_unique<Entry>();
      e->enumerated = true;
      e->none_reason = std::string("fused graph (") + p.epilogue.describe() + ") not built: " + error.what();
      debug_log(p, e->none_reason);
    }
    return *entries_.emplace(key, std::move(e)).first->second;
  }

  /// Lists the candidates once. e.mutex held.
  void enumerate_if_needed(const ConvProblem& p, const runtime::Device& device, Entry& e) const {
    if (e.enumerated) return;
    const auto start = std::chrono::steady_clock::now();
    try {
      enumerate(p, device, e);
    } catch (...) {
      // A half list must not be extended by the next try: it starts over (the plans stay cached).
      e.candidates.clear();
      e.heuristic_configs = e.fallback_configs = e.global_engines = 0;
      throw;
    }
    e.enumerated = true;
    if (log::enabled(log::Level::debug))
      debug_log(p, std::to_string(e.candidates.size()) + " plans finalized in " +
                       std::to_string(ms_since(start)) + " ms");
  }

  /// The plan of `config`, finalized on first use and cached; null, with `why`, when cuDNN or the
  /// notes filter refuses it. A refusal is not cached: it is asked about once per find-db row,
  /// which the tuner then replaces. e.mutex held.
  std::shared_ptr<Plan> plan_of(const ConvProblem& p, const runtime::Device& device, Entry& e,
                                const EngineConfig& config, std::string& why) const {
    if (std::shared_ptr<Plan>* known = e.plans.find(config)) return *known;
    if (e.graph.get() == nullptr) {
      why = e.none_reason;
      return nullptr;
    }
    std::shared_ptr<Plan> plan = build_plan(device, e, config, p.dtype, why, {}, fused(e));
    if (plan != nullptr) e.plans.insert(config, plan);
    return plan;
  }

  /// plan_of(), or Error(unsupported) naming the config and why cuDNN refused it.
  std::shared_ptr<Plan> require_plan(const ConvProblem& p, const runtime::Device& device,
                                     const EngineConfig& config) const {
    Entry& e = entry(p, device);
    std::lock_guard lock(e.mutex);
    std::string why;
    std::shared_ptr<Plan> plan = plan_of(p, device, e, config, why);
    if (plan == nullptr)
      throw Error(Status::unsupported,
                  name_ + ": engine config " + config.to_string() + " does not run " + p.key() + ": " + why);
    return plan;
  }

  /// The plan of an engine config given by its text form, or null (with `why`, cuDNN's status where
  /// it refused) when cuDNN does not have it, refuses it, or the notes filter would refuse it (a
  /// find-db row written by another build must not bypass the filter). A config whose read-back form
  /// is in `skip` is dropped before its plan is finalized (the costly step). `runtime_fusion` lets
  /// runtime-compiled engines through; `compile_attempts`, when given, counts their finalizations.
  std::shared_ptr<Plan> build_plan(const runtime::Device& device, const Entry& e, const EngineConfig& wanted,
                                   DType dtype, std::string& why, const std::vector<EngineConfig>& skip = {},
                                   bool runtime_fusion = false, int* compile_attempts = nullptr) const {
    CudnnHandle& h = handle(device);
    DeviceGuard guard(device.index());
    const std::string engine_name = "eng" + std::to_string(wanted.index);
    Desc engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
    engine.set_desc(CUDNN_ATTR_ENGINE_OPERATION_GRAPH, e.graph, "engine graph");
    engine.set(CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, &wanted.index, 1, "engine global index");
    if (const cudnnStatus_t st = cudnnBackendFinalize(engine.get()); st != CUDNN_STATUS_SUCCESS) {
      why = engine_name + ": engine " + status_text(st);
      return nullptr;
    }
    std::vector<Desc> choices;
    std::vector<cudnnBackendDescriptor_t> raw;
    for (const auto& [type, value] : wanted.knobs) {
      Desc choice(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR);
      const auto knob = static_cast<cudnnBackendKnobType_t>(type);
      choice.set(CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE, &knob, 1, "knob type");
      choice.set(CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64, &value, 1, "knob value");
      if (const cudnnStatus_t st = cudnnBackendFinalize(choice.get()); st != CUDNN_STATUS_SUCCESS) {
        why = engine_name + ": knob k" + std::to_string(type) + "=" + std::to_string(value) + " " +
              status_text(st);
        return nullptr;
      }
      raw.push_back(choice.get());
      choices.push_back(std::move(choice));
    }
    auto plan = std::make_shared<Plan>();
    plan->choice = wanted;
    plan->config = Desc(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    plan->config.set_desc(CUDNN_ATTR_ENGINECFG_ENGINE, engine, "config engine");
    if (!raw.empty()) {
      plan->config.set(CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_TYPE_BACKEND_DESCRIPTOR, raw.data(),
                       std::int64_t(raw.size()), "config knob choices");
    }
    if (const cudnnStatus_t st = cudnnBackendFinalize(plan->config.get()); st != CUDNN_STATUS_SUCCESS) {
      why = engine_name + ": engine config " + status_text(st);
      return nullptr;
    }
    plan->info = engine_info(plan->config);
    if (std::string refusal = refused(plan->info, dtype, runtime_fusion); !refusal.empty()) {
      why = plan->info.tag() + ": " + refusal;
      return nullptr;
    }
    if (std::find(skip.begin(), skip.end(), plan->info.config) != skip.end()) {
      why = plan->info.tag() + ": listed already";
      return nullptr;
    }
    if (compile_attempts && plan->info.has(CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION)) ++*compile_attempts;
    if (std::string failure = finalize_plan(h, *plan); !failure.empty()) {
      why = plan->info.tag() + ": " + failure;
      return nullptr;
    }
    return plan;
  }

  /// Finalizes `plan`'s execution plan from its engine config and reads its workspace; what failed
  /// (with cuDNN's status), or empty.
  static std::string finalize_plan(CudnnHandle& h, Plan& plan) {
    plan.plan = Desc(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
    cudnnBackendDescriptor_t cfg = plan.config.get();
    plan.plan.set(kPlanHandle, CUDNN_TYPE_HANDLE, &h.handle, 1, "plan handle");
    plan.plan.set(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, &cfg, 1,
                  "plan config");
    if (const cudnnStatus_t st = cudnnBackendFinalize(plan.plan.get()); st != CUDNN_STATUS_SUCCESS)
      return "plan " + status_text(st);
    std::int64_t n = 0;
    check_cudnn(cudnnBackendGetAttribute(plan.plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                         CUDNN_TYPE_INT64, 1, &n, &plan.workspace),
                "get EXECUTION_PLAN_WORKSPACE_SIZE");
    if (plan.workspace < 0 || std::size_t(plan.workspace) > kWorkspaceCap)
      return "workspace " + std::to_string(plan.workspace) + " B";
    return {};
  }

  /// The tensors, the convolution and its operation graph: one node, or the convolution and its
  /// epilogue's pointwise nodes (no engine work yet). Throws Error with cuDNN's status at the step
  /// that failed.
  std::unique_ptr<Entry> build(const ConvProblem& p, const runtime::Device& device) const {
    const gpu::ConvParams cp = gpu::make_params(p);
    const cudnnDataType_t dt = cudnn_data_type(cp.dtype, conv_operation(p.direction).solver);
    CudnnHandle& h = handle(device);
    DeviceGuard guard(device.index());
    auto e = std::make_unique<Entry>();
    e->x = make_tensor(kUidX, dt, cp.n, cp.c, cp.h, cp.w, cp.nhwc);
    e->w = make_tensor(kUidW, dt, cp.k, cp.cg, cp.r, cp.s, cp.nhwc);  // groups: w's channels are c / groups
    e->y = make_tensor(kUidY, dt, cp.n, cp.k, cp.p, cp.q, cp.nhwc);

    e->conv = Desc(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
    const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
    const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
    const std::int64_t spatial = 2;
    const std::int64_t pads[2] = {cp.pad_h, cp.pad_w}, strides[2] = {cp.stride_h, cp.stride_w},
                       dils[2] = {cp.dil_h, cp.dil_w};
    e->conv.set(CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, &compute, 1, "conv compute type");
    e->conv.set(CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, &mode, 1, "conv mode");
    e->conv.set(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, &spatial, 1, "conv spatial dims");
    e->conv.set(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, pads, 2, "conv pre paddings");
    e->conv.set(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, pads, 2, "conv post paddings");
    e->conv.set(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, strides, 2, "conv strides");
    e->conv.set(CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, dils, 2, "conv dilations");
    e->conv.finalize("convolution");

    const float alpha = 1.f, beta = 0.f;
    // A fused graph's convolution writes a virtual f32 tensor that the epilogue reads.
    const bool fused = p.has_epilogue();
    const ConvOperation node = conv_operation(p.direction);
    e->op = Desc(node.type);
    e->op.set_desc(node.x, e->x, "operation x");
    e->op.set_desc(node.w, e->w, "operation w");
    if (fused)
      e->fused.push_back(make_tensor(kUidVirtual, CUDNN_DATA_FLOAT, cp.n, cp.k, cp.p, cp.q, cp.nhwc, true));
    e->op.set_desc(node.y, fused ? e->fused.back() : e->y, "operation y");
    e->op.set_desc(node.conv, e->conv, "operation conv desc");
    e->op.set(node.alpha, CUDNN_TYPE_FLOAT, &alpha, 1, "operation alpha");
    e->op.set(node.beta, CUDNN_TYPE_FLOAT, &beta, 1, "operation beta");
    e->op.finalize(node.what);

    std::vector<cudnnBackendDescriptor_t> ops{e->op.get()};
    if (fused) add_epilogue(p, cp, dt, *e, ops);

    e->graph = Desc(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    e->graph.set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, ops.data(),
                 std::int64_t(ops.size()), "graph ops");
    e->graph.set(kGraphHandle, CUDNN_TYPE_HANDLE, &h.handle, 1, "graph handle");
    e->graph.finalize(fused ? "fused operation graph" : "operation graph");
    if (fused) debug_log(p, "fused graph " + e->fused_graph + " built");
    return e;
  }

  /// The epilogue's pointwise nodes after the convolution, whose virtual output is e.fused.back(),
  /// in the reference's order: + bias[k], + residual, activation; the last one writes y. Appends
  /// the operations to `ops` and describes the chain in e.fused_graph.
  static void add_epilogue(const ConvProblem& p, const gpu::ConvParams& cp, cudnnDataType_t dt, Entry& e,
                           std::vector<cudnnBackendDescriptor_t>& ops) {
    struct Step {
      Pointwise pw;
      const Desc* b;  // the second operand, or null for the activation
      std::string text;
    };
    std::vector<Step> steps;
    const Pointwise add;  // CUDNN_POINTWISE_ADD, no attributes
    if (p.epilogue.bias) {
      // [K] in memory, described as 1xKx1x1 so that it broadcasts over n, h and w.
      e.bias = make_tensor(kUidBias, dt, 1, cp.k, 1, 1, cp.nhwc);
      steps.push_back({add, &e.bias, "add bias"});
    }
    if (p.epilogue.residual) {
      e.residual = make_tensor(kUidResidual, dt, cp.n, cp.k, cp.p, cp.q, cp.nhwc);
      steps.push_back({add, &e.residual, "add residual"});
    }
    if (p.epilogue.activation) {
      std::string why;
      std::optional<Pointwise> act =
          pointwise_activation(*p.epilogue.activation, p.epilogue.alpha, p.epilogue.beta, why);
      if (!act) throw Error(Status::unsupported, std::string(kGraphSolverName) + ": " + why);
      steps.push_back({*act, nullptr, act->describe()});
    }
    e.fused_graph = "conv";
    const Desc* in = &e.fused.back();
    for (std::size_t i = 0; i < steps.size(); ++i) {
      const Desc* out = &e.y;
      if (i + 1 < steps.size()) {
        e.fused.push_back(make_tensor(kUidVirtual + 1 + std::int64_t(i), CUDNN_DATA_FLOAT, cp.n, cp.k, cp.p,
                                      cp.q, cp.nhwc, true));
        out = &e.fused.back();
      }
      e.fused.push_back(make_pointwise(steps[i].pw));
      const Desc& pw = e.fused.back();
      e.fused.push_back(make_pointwise_op(pw, *in, steps[i].b, *out));
      ops.push_back(e.fused.back().get());
      in = out;
      e.fused_graph += " -> " + steps[i].text;
    }
  }

  /// The candidates: engine configs from heuristics mode A and the fallback list, filtered and
  /// finalized into plans (kept in e.plans), or the sweep's when those give none. e.mutex held.
  void enumerate(const ConvProblem& p, const runtime::Device& device, Entry& e) const {
    const gpu::ConvParams cp = gpu::make_params(p);
    CudnnHandle& h = handle(device);
    DeviceGuard guard(device.index());
    const bool is_fused = fused(e);
    int compiled = 0;  // finalizations of runtime-compiled plans, failed ones too (fused graphs only)
    auto may_compile = [&] { return is_fused && compiled < kMaxRuntimeCompiled; };
    std::vector<EngineConfig> seen;
    std::vector<std::string> refusals;
    auto refuse = [&](std::string why) {
      if (is_fused) debug_log(p, "refused " + why);
      refusals.push_back(std::move(why));
    };
    auto keep = [&](std::shared_ptr<Plan> plan, std::chrono::steady_clock::time_point start,
                    const char* from) {
      if (is_fused) {
        debug_log(p,
                  std::string("plan ") + plan->info.tag() + " (" + from + ", " +
                      (plan->info.has(CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION) ? "runtime-compiled, " : "") +
                      "workspace " + std::to_string(plan->workspace) + " B) finalized in " +
                      std::to_string(ms_since(start)) + " ms");
      }
      // Listed under the form read back from cuDNN, which is what the tuner hands back.
      plan->choice = plan->info.config;
      e.candidates.push_back(plan->choice);
      if (e.plans.find(e.candidates.back()) == nullptr) e.plans.insert(e.candidates.back(), std::move(plan));
    };

    for (cudnnBackendHeurMode_t heur_mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
      const bool heuristic = heur_mode == CUDNN_HEUR_MODE_A;
      const char* from = heuristic ? "heuristics mode A" : "fallback";
      // f16/bf16 consult the fallback list only when mode A gave few usable configs (see kMaxFallback).
      const bool fallback_wanted =
          cp.dtype == DType::f32 || e.candidates.size() < kMinHeuristicForTensorCores;
      if (!heuristic && !fallback_wanted) continue;
      const std::size_t cap = e.candidates.size() + (heuristic ? kMaxHeuristic : kMaxFallback);
      std::string heur_failure;
      std::vector<Desc> configs = engine_configs(e, heur_mode, heur_failure);
      if (!heur_failure.empty()) refuse(std::string(from) + ": " + heur_failure);
      (heuristic ? e.heuristic_configs : e.fallback_configs) = int(configs.size());
      for (Desc& config : configs) {
        if (e.candidates.size() >= cap) break;
        const auto start = std::chrono::steady_clock::now();
        auto plan = std::make_shared<Plan>();
        plan->info = engine_info(config);
        if (std::find(seen.begin(), seen.end(), plan->info.config) != seen.end()) continue;
        seen.push_back(plan->info.config);
        if (auto why = refused(plan->info, cp.dtype, may_compile()); !why.empty()) {
          refuse(plan->info.tag() + ": " + why);
          continue;
        }
        plan->config = std::move(config);
        if (plan->info.has(CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION)) ++compiled;
        if (std::string failure = finalize_plan(h, *plan); !failure.empty()) {
          if (is_fused) failure += " (after " + std::to_string(ms_since(start)) + " ms)";
          refuse(plan->info.tag() + ": " + failure);
          continue;
        }
        keep(std::move(plan), start, from);
      }
    }
    // Every engine of the graph at its default knobs, when the lists gave no plan (see the top of
    // the file). The legacy API's IMPLICIT_PRECOMP_GEMM kernel stays out of reach: the graph API
    // does not expose it.
    std::int64_t engines = 0, got = 0;
    if (e.candidates.empty()) {
      if (const cudnnStatus_t st =
              cudnnBackendGetAttribute(e.graph.get(), CUDNN_ATTR_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT,
                                       CUDNN_TYPE_INT64, 1, &got, &engines);
          st != CUDNN_STATUS_SUCCESS) {
        refuse("get OPERATIONGRAPH_ENGINE_GLOBAL_COUNT: " + status_text(st));
        engines = 0;
      }
    }
    for (std::int64_t index = 0;
         index < std::min<std::int64_t>(engines, kMaxGlobalEngines) && e.global_engines < kMaxSwept;
         ++index) {
      const auto start = std::chrono::steady_clock::now();
      std::string why;
      std::shared_ptr<Plan> plan =
          build_plan(device, e, EngineConfig{index, {}}, cp.dtype, why, seen, may_compile(), &compiled);
      if (plan == nullptr) {
        // Plain graphs: most of the 100-odd engines refuse any one problem; the summary says enough.
        if (is_fused) refuse(why);
        continue;
      }
      seen.push_back(plan->info.config);
      ++e.global_engines;
      keep(std::move(plan), start, "engine at default knobs");
    }
    if (e.candidates.empty()) {
      e.none_reason = "no usable engine config (" + std::to_string(e.heuristic_configs) +
                      " from heuristics, " + std::to_string(e.fallback_configs) + " fallback, " +
                      std::to_string(engines) + " engines of the graph at default knobs)";
      if (is_fused) e.none_reason = "fused " + e.fused_graph + ": " + e.none_reason;
      for (std::size_t i = 0; i < std::min<std::size_t>(refusals.size(), 4); ++i)
        e.none_reason += "; " + refusals[i];
      if (refusals.size() > 4) e.none_reason += "; " + std::to_string(refusals.size() - 4) + " more";
    }
  }

  /// Engine configs of `mode`, best first; empty (with `failure` saying why, cuDNN's status
  /// included) when the heuristic has nothing for the graph.
  static std::vector<Desc> engine_configs(const Entry& e, cudnnBackendHeurMode_t mode, std::string& failure) {
    Desc heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    heur.set_desc(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, e.graph, "heuristics graph");
    heur.set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, &mode, 1, "heuristics mode");
    if (const cudnnStatus_t st = cudnnBackendFinalize(heur.get()); st != CUDNN_STATUS_SUCCESS) {
      failure = "heuristics finalize " + status_text(st);
      return {};
    }
    std::int64_t count = 0;
    if (const cudnnStatus_t st = cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                                          CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr);
        st != CUDNN_STATUS_SUCCESS) {
      failure = "get ENGINEHEUR_RESULTS count " + status_text(st);
      return {};
    }
    if (count <= 0) {
      failure = "no engine configs";
      return {};
    }
    std::vector<Desc> configs;
    std::vector<cudnnBackendDescriptor_t> raw;
    for (std::int64_t i = 0; i < count; ++i) {
      configs.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
      raw.push_back(configs.back().get());
    }
    std::int64_t got = 0;
    check_cudnn(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                         CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got, raw.data()),
                "get ENGINEHEUR_RESULTS");
    configs.resize(std::size_t(std::clamp<std::int64_t>(got, 0, count)));
    return configs;
  }

  ConvDirection direction_;
  std::string name_;
  mutable std::mutex entries_mutex_;
  // Keyed by the problem itself, see problem_key.hpp.
  mutable std::unordered_map<gpu::ProblemKey, std::unique_ptr<Entry>, gpu::ProblemKeyHash> entries_;
};

}  // namespace

std::unique_ptr<dnn::ConvSolver> make_cudnn_graph_conv_solver() {
  return std::make_unique<GraphSolver>(ConvDirection::forward);
}
std::unique_ptr<dnn::ConvSolver> make_cudnn_graph_bwd_data_conv_solver() {
  return std::make_unique<GraphSolver>(ConvDirection::backward_data);
}
std::unique_ptr<dnn::ConvSolver> make_cudnn_graph_bwd_weights_conv_solver() {
  return std::make_unique<GraphSolver>(ConvDirection::backward_weights);
}

}  // namespace galley::backends::cuda
