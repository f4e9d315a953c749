// cuda.conv.cudnn_graph: cuDNN 9's backend (graph) API, called directly. The legacy API behind
// cuda.conv.cudnn (cudnnFind) does not reach the engines PyTorch reaches through this API, which
// win by a wide margin on many f16/bf16 problems.
//
// Per (device, problem key), once: a one-node operation graph (conv forward; NCHW or NHWC is only
// a matter of strides), engine configs from heuristics mode A (the first kMaxHeuristic usable ones)
// and from the fallback list (kMaxFallback more), filtered by their notes, finalized into execution
// plans; then, on the first workspace_bytes() or run(), each plan is timed on scratch buffers and the
// fastest is kept. The fallback list holds the classic engines (Winograd, FFT, precomputed implicit
// GEMM) that mode A ranks low but that win some problems (a first layer of 3 channels, fp32 3x3
// layers): mode A's top configs alone would lose there to the legacy API's exhaustive cudnnFind.
// Every engine of the graph at its default knobs is tried only when those lists give no plan: the
// sweep finalizes some 10 more plans a problem, which tripled the search for a win of a few percent
// on one problem of the benchmark list. That keeps the search about PyTorch's (cudnn.benchmark
// times the first 10 configs of the same lists), which `galley tune` is measured against.
// workspace_bytes() is that plan's workspace, so it is exact for what run() executes.
// The winner is reported by tuned_params() as "eng<global index>{k<knob type>=<value>,...}"; the tuner
// stores it in the find-db and hands it back through use_tuned_params() in a new process, which then
// builds that one plan and skips the enumeration and the timing (MIOpen's perf-db idea).
// Variant packs (the data pointers) are kept per plan for the 16 most recent pointer sets and built
// only for a new one: building one on every call would add host time to calls of tens of microseconds,
// and layers of one shape in a network share the plan with tensors of their own. From a pointer
// set's third call on, the call is a CUDA graph launch (graph_replay.hpp): cuDNN's own host work per
// call is as long as the small layers' kernels.
//
// The backend API's descriptor wrapper, engine notes and the engine-config text live in
// cudnn_backend_desc.{hpp,cpp}; this file is the solver.
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
// runtime compilation is allowed for fused graphs, for at most kMaxRuntimeCompiled plan
// finalizations per problem (failed ones count: a machine without NVRTC fails each after a while). What cuDNN
// cannot build or has no engine for (often f32 NCHW) is a refusal carrying its status text, never a wrong
// answer; the tuner times whatever plan wins here against cuda.conv.unfused and the own kernels with their
// epilogue pass. GALLEY_LOG_LEVEL=debug logs every failed build step, heuristics query and plan finalization
// of a fused graph with its cuDNN status.
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
#include "backends/cuda/cudnn_handle.hpp"
#include "backends/cuda/graph_replay.hpp"
#include "backends/cuda/runtime_check.hpp"
#include "backends/cuda/vendor_conv_solvers.hpp"
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
using dnn::ConvProblem;

constexpr const char* kName = kGraphSolverName;
constexpr std::size_t kWorkspaceCap = std::size_t(1) << 30;  // 1 GiB, as cuda.conv.cudnn
constexpr int kMaxHeuristic = 8;
constexpr int kMaxFallback = 4;
constexpr std::int64_t kMaxGlobalEngines = 128;  // bound on the graph's global engine count (cuDNN reports it)
// A fused graph compiles each runtime fusion plan it finalizes (up to seconds each), inside the
// tuner's time box (GALLEY_FIND_TIME_MS, 2 s by default), which a second compile could use up before
// the other solvers are timed: one attempt per problem, the heuristics' best ranked config.
constexpr int kMaxRuntimeCompiled = 1;
// Plan timing: a plan whose single (warm-up) run takes more than kFarBehind times the best timed plan
// plus kSingleRunSlackMs is ranked by that run alone.
constexpr float kFarBehind = 4.0f;
constexpr float kSingleRunSlackMs = 1.0f;
constexpr std::int64_t kUidX = 1, kUidW = 2, kUidY = 3, kUidBias = 4, kUidResidual = 5;
constexpr std::int64_t kUidVirtual = 100;              // the fused graph's intermediates: 100, 101, ...
constexpr std::int64_t kAlignment = kTensorAlignment;  // bytes; run() checks the pointers
constexpr const char* kPointerNames[6] = {"x",         "w",    "y",
                                          "workspace", "bias", "residual"};  // GraphPointers' order

std::string status_text(cudnnStatus_t status) { return cudnnGetErrorString(status); }

void check_cudnn(cudnnStatus_t status, const std::string& call) { check_backend(status, call); }

void check_cuda(cudaError_t error, const std::string& call) {
  if (error != cudaSuccess)
    throw Error(Status::backend_error, std::string(kName) + ": " + call + ": " + cudaGetErrorString(error));
}

/// Prints "cuda.conv.cudnn_graph <key>: <what>" at debug level.
void debug_log(const ConvProblem& p, const std::string& what) {
  if (log::enabled(log::Level::debug)) log::debug(std::string(kName) + " " + p.key() + ": " + what);
}

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

/// A call's pointers: x, w, y, workspace, bias, residual (the last two null unless the epilogue
/// reads them). What a variant pack and a graph captured from a call hold.
using GraphPointers = std::array<const void*, 6>;

GraphPointers call_pointers(const ConvProblem& p, const void* x, const void* w, void* y, void* workspace,
                            const void* bias, const void* residual) {
  return {x, w, y, workspace, p.epilogue.bias ? bias : nullptr, p.epilogue.residual ? residual : nullptr};
}

/// What a plan's calls on one set of pointers reuse: the variant pack (cuDNN's table of the
/// pointers) and the CUDA graph the calls are replayed from once the set has repeated.
struct PointerSet {
  Desc pack;
  GraphReplay replay;
};

/// One timed execution plan.
struct Candidate {
  Desc config, plan;
  EngineInfo info;
  std::int64_t workspace = 0;
  float ms = -1;  // measured time of one run; < 0 until timed (or when it failed, or when stored)
  // Recent calls' pointer sets (GraphPointers), used under the handle's mutex. More than one:
  // layers of one shape share this plan with their own tensors (ResNet-50 repeats its blocks 3-6
  // times per stage), and a single cached pack would be rebuilt on each of their calls.
  gpu::RecentCache<GraphPointers, PointerSet> pointer_sets{kPointerSetsKept};
};

/// Everything for one (device, problem): the graph, its candidates and, once tuned, the winner.
/// The graph is built at once; the candidates on the first check() or run() unless a stored choice
/// came first (use_tuned_params), which makes that one plan the only candidate.
struct Entry {
  Desc x, w, y, conv, op, graph;
  // A fused graph's bias and residual tensors, and its virtual tensors, pointwise descriptors and
  // operations (a deque: the operations refer to the tensors by address).
  Desc bias, residual;
  std::deque<Desc> fused;
  std::string fused_graph;  // "conv -> add bias -> relu_fwd(...)"; empty for a plain graph
  std::mutex mutex;  // guards the members below
  bool enumerated = false;
  std::vector<Candidate> candidates;
  std::string none_reason;  // why there are no candidates
  int heuristic_configs = 0, fallback_configs = 0, global_engines = 0;
  bool tuned = false;
  bool stored_choice = false;  // the winner came from use_tuned_params, not from timing here
  int best = -1;
};

/// Device buffer for autotuning, freed on scope exit.
class Scratch {
 public:
  explicit Scratch(std::size_t bytes) {
    if (bytes > 0) check_cuda(cudaMalloc(&p_, bytes), "cudaMalloc(" + std::to_string(bytes) + " bytes, autotune)");
  }
  ~Scratch() {
    if (p_) (void)cudaFree(p_);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  void* get() const { return p_; }

 private:
  void* p_ = nullptr;
};

/// The state of `c`'s calls on these pointers, its variant pack built on first use; nullptr with
/// `status` set when cuDNN refused the pack. The pack holds x, w and y, and bias and residual where
/// `pointers` has them (call_pointers() leaves them null for a graph without them). The caller
/// holds the handle's mutex.
PointerSet* pointer_set(Candidate& c, const GraphPointers& pointers, cudnnStatus_t& status) {
  status = CUDNN_STATUS_SUCCESS;
  if (PointerSet* known = c.pointer_sets.find(pointers)) return known;
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
    status = cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace);
  if (status == CUDNN_STATUS_SUCCESS) status = cudnnBackendFinalize(vp);
  if (status != CUDNN_STATUS_SUCCESS) {
    (void)cudnnBackendDestroyDescriptor(vp);
    return nullptr;
  }
  return &c.pointer_sets.insert(pointers, PointerSet{Desc::adopt(vp), GraphReplay{}});
}

/// Runs `c`'s plan directly (no graph): plan timing. The caller holds the handle's mutex.
cudnnStatus_t execute(cudnnHandle_t handle, Candidate& c, const GraphPointers& pointers) {
  cudnnStatus_t status = CUDNN_STATUS_SUCCESS;
  PointerSet* set = pointer_set(c, pointers, status);
  return set ? cudnnBackendExecute(handle, c.plan.get(), set->pack.get()) : status;
}

class GraphSolver final : public dnn::ConvSolver {
 public:
  ~GraphSolver() override {
    // Plans may own device code and memory of a context that is gone at process exit: leak them.
    for (auto& [key, e] : entries_)
      for (Candidate& c : e->candidates) {
        c.plan.release();
        c.pointer_sets.for_each_value([](PointerSet& set) {
          set.pack.release();
          set.replay.release();
        });
      }
  }

  std::string_view name() const override { return kName; }
  /// Forward epilogues are built into the operation graph (see the top of this file).
  bool implements_fused_parts() const override { return true; }

  Applicability check(const ConvProblem& p, const runtime::Device& device) const override {
    if (Applicability a = cudnn_can_take(p, device); !a) return a;
    if (const auto& act = p.epilogue.activation) {
      std::string why;
      if (!pointwise_activation(*act, p.epilogue.alpha, p.epilogue.beta, why)) return Applicability::no(why);
    }
    try {
      // Building the graph and finalizing plans is the only way to know cuDNN can do the problem;
      // the result is cached, so later checks are a map lookup.
      Entry& e = entry(p, device);
      std::lock_guard lock(e.mutex);
      enumerate_if_needed(p, device, e);
      if (e.candidates.empty()) return Applicability::no("cuDNN graph API: " + e.none_reason);
    } catch (const Error& e) {
      return Applicability::no(e.what());
    }
    return Applicability::yes();
  }

  std::size_t workspace_bytes(const ConvProblem& p, const runtime::Device& device) const override {
    return std::size_t(best(p, device).workspace);
  }

  void run(runtime::Stream& stream, const ConvProblem& p, const dnn::ConvArgs& a) const override {
    Candidate& c = best(p, stream.device());
    if (a.workspace_bytes < std::size_t(c.workspace))
      throw Error(Status::invalid_argument, std::string(kName) + ": workspace of " + std::to_string(a.workspace_bytes) +
                                                " bytes, needs " + std::to_string(c.workspace));
    if (p.epilogue.bias && a.bias == nullptr)
      throw Error(Status::invalid_argument,
                  std::string(kName) + ": the epilogue adds a bias but bias is null");
    if (p.epilogue.residual && a.residual == nullptr)
      throw Error(Status::invalid_argument,
                  std::string(kName) + ": the epilogue adds a residual but residual is null");
    const GraphPointers pointers =
        call_pointers(p, a.x, a.w, a.y, c.workspace > 0 ? a.workspace : nullptr, a.bias, a.residual);
    for (std::size_t i : {0, 1, 2, 4, 5}) {
      if (reinterpret_cast<std::uintptr_t>(pointers[i]) % kAlignment != 0)
        throw Error(Status::invalid_argument, std::string(kName) + ": " + kPointerNames[i] + " pointer not " +
                                                  std::to_string(kAlignment) + "-byte aligned");
    }
    CudnnHandle& h = handle(stream.device());
    stream.launch(kName, [&] {
      DeviceGuard guard(stream.device().index());
      std::lock_guard lock(h.mutex);
      const auto s = static_cast<cudaStream_t>(stream.native_handle());
      check_cudnn(h.set_stream(s, stream.id()), "cudnnSetStream");
      cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
      PointerSet* set = pointer_set(c, pointers, st);
      if (set == nullptr) check_cudnn(st, "variant pack (" + c.info.tag() + ")");
      set->replay.run(s, kName, [&] {
        if (const cudnnStatus_t ran = cudnnBackendExecute(h.handle, c.plan.get(), set->pack.get()); ran != CUDNN_STATUS_SUCCESS)
          check_cudnn(ran, "cudnnBackendExecute(" + c.info.tag() + ")");
      });
    });
  }

  std::string detail(const ConvProblem& p, const runtime::Device& device) const override {
    const Candidate& c = best(p, device);
    Entry& e = entry(p, device);
    std::lock_guard lock(e.mutex);
    const std::string notes = notes_text(c.info);
    const std::string head = (e.fused_graph.empty() ? "" : "fused " + e.fused_graph + ", ") + c.info.tag() +
                             (notes.empty() ? "" : " (" + notes + ")") + ", workspace " +
                             std::to_string(c.workspace) + " B, ";
    if (e.stored_choice) return head + "the stored choice (find-db params), not timed in this process";
    return head + "fastest of " + std::to_string(e.candidates.size()) + " plans timed (" + std::to_string(c.ms) +
           " ms; heuristics mode A " + std::to_string(e.heuristic_configs) + " configs, fallback " +
           std::to_string(e.fallback_configs) + ", engines at default knobs " + std::to_string(e.global_engines) + ")";
  }

  std::string tuned_params(const ConvProblem& p, const runtime::Device& device) const override {
    return best(p, device).info.tag();
  }

  bool use_tuned_params(const ConvProblem& p, const runtime::Device& device, std::string_view params) const override {
    std::int64_t index = -1;
    std::vector<std::pair<std::int64_t, std::int64_t>> knobs;
    if (!parse_tag(params, index, knobs)) return false;
    try {
      if (p.dtype != DType::f32 && p.dtype != DType::f16 && p.dtype != DType::bf16) return false;
      Entry& e = entry(p, device);
      std::lock_guard lock(e.mutex);
      if (e.tuned) return true;  // this process chose already
      if (e.graph.get() == nullptr) return false;  // cuDNN could not build the fused graph
      std::string why;
      std::optional<Candidate> c = plan_from_tag(device, e, index, knobs, p.dtype, why, {}, fused(e));
      if (!c) {
        debug_log(p, "stored choice " + std::string(params) + " not usable: " + why);
        return false;
      }
      e.candidates.clear();
      e.candidates.push_back(std::move(*c));
      e.best = 0;
      e.tuned = true;
      e.stored_choice = true;
      return true;
    } catch (const Error&) {
      return false;
    }
  }

 private:
  CudnnHandle& handle(const runtime::Device& device) const { return cudnn_handle(device); }

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

  /// Builds the candidates once, unless a stored choice made the entry tuned already. e.mutex held.
  void enumerate_if_needed(const ConvProblem& p, const runtime::Device& device, Entry& e) const {
    if (e.enumerated || e.tuned) return;
    const auto start = std::chrono::steady_clock::now();
    enumerate(p, device, e);
    e.enumerated = true;
    debug_log_ms(p, std::to_string(e.candidates.size()) + " plans finalized", start);
  }

  /// Where a problem's first calls spend their time: neither step can be cut short by a time box.
  static void debug_log_ms(const ConvProblem& p, const std::string& what, std::chrono::steady_clock::time_point start) {
    if (!log::enabled(log::Level::debug)) return;
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    log::debug(std::string(kName) + " " + p.key() + ": " + what + " in " + std::to_string(ms) + " ms");
  }

  /// The plan of a stored engine config, or nothing (with `why`, cuDNN's status where it refused)
  /// when cuDNN no longer has it, refuses it, or the notes filter would refuse it (a row written by
  /// another build must not bypass the filter). A config whose tag is in `skip` is dropped before
  /// its plan is finalized (the costly step). `runtime_fusion` lets runtime-compiled engines through;
  /// `compile_attempts`, when given, counts their finalizations.
  std::optional<Candidate> plan_from_tag(const runtime::Device& device, const Entry& e, std::int64_t index,
                                         const std::vector<std::pair<std::int64_t, std::int64_t>>& knobs,
                                         DType dtype, std::string& why,
                                         const std::vector<std::string>& skip = {},
                                         bool runtime_fusion = false, int* compile_attempts = nullptr) const {
    CudnnHandle& h = handle(device);
    DeviceGuard guard(device.index());
    const std::string engine_name = "eng" + std::to_string(index);
    Desc engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
    engine.set_desc(CUDNN_ATTR_ENGINE_OPERATION_GRAPH, e.graph, "engine graph");
    engine.set(CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, &index, 1, "engine global index");
    if (const cudnnStatus_t st = cudnnBackendFinalize(engine.get()); st != CUDNN_STATUS_SUCCESS) {
      why = engine_name + ": engine " + status_text(st);
      return std::nullopt;
    }
    std::vector<Desc> choices;
    std::vector<cudnnBackendDescriptor_t> raw;
    for (const auto& [type, value] : knobs) {
      Desc choice(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR);
      const auto knob = static_cast<cudnnBackendKnobType_t>(type);
      choice.set(CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE, &knob, 1, "knob type");
      choice.set(CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64, &value, 1, "knob value");
      if (const cudnnStatus_t st = cudnnBackendFinalize(choice.get()); st != CUDNN_STATUS_SUCCESS) {
        why = engine_name + ": knob k" + std::to_string(type) + "=" + std::to_string(value) + " " +
              status_text(st);
        return std::nullopt;
      }
      raw.push_back(choice.get());
      choices.push_back(std::move(choice));
    }
    Candidate c;
    c.config = Desc(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    c.config.set_desc(CUDNN_ATTR_ENGINECFG_ENGINE, engine, "config engine");
    if (!raw.empty()) {
      c.config.set(CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_TYPE_BACKEND_DESCRIPTOR, raw.data(),
                   std::int64_t(raw.size()), "config knob choices");
    }
    if (const cudnnStatus_t st = cudnnBackendFinalize(c.config.get()); st != CUDNN_STATUS_SUCCESS) {
      why = engine_name + ": engine config " + status_text(st);
      return std::nullopt;
    }
    c.info = engine_info(c.config);
    if (std::string refusal = refused(c.info, dtype, runtime_fusion); !refusal.empty()) {
      why = c.info.tag() + ": " + refusal;
      return std::nullopt;
    }
    if (std::find(skip.begin(), skip.end(), c.info.tag()) != skip.end()) {
      why = c.info.tag() + ": listed already";
      return std::nullopt;
    }
    if (compile_attempts && c.info.has(CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION)) ++*compile_attempts;
    if (std::string failure = finalize_plan(h, c); !failure.empty()) {
      why = c.info.tag() + ": " + failure;
      return std::nullopt;
    }
    return c;
  }

  /// Finalizes `c`'s plan from its config and reads its workspace; what failed (with cuDNN's
  /// status), or empty.
  static std::string finalize_plan(CudnnHandle& h, Candidate& c) {
    c.plan = Desc(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
    cudnnBackendDescriptor_t cfg = c.config.get();
    c.plan.set(kPlanHandle, CUDNN_TYPE_HANDLE, &h.handle, 1, "plan handle");
    c.plan.set(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, &cfg, 1, "plan config");
    if (const cudnnStatus_t st = cudnnBackendFinalize(c.plan.get()); st != CUDNN_STATUS_SUCCESS)
      return "plan " + status_text(st);
    std::int64_t n = 0;
    check_cudnn(cudnnBackendGetAttribute(c.plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n,
                                         &c.workspace),
                "get EXECUTION_PLAN_WORKSPACE_SIZE");
    if (c.workspace < 0 || std::size_t(c.workspace) > kWorkspaceCap)
      return "workspace " + std::to_string(c.workspace) + " B";
    return {};
  }

  /// The tensors, the convolution and its operation graph: one node, or the convolution and its
  /// epilogue's pointwise nodes (no engine work yet). Throws Error with cuDNN's status at the step
  /// that failed.
  std::unique_ptr<Entry> build(const ConvProblem& p, const runtime::Device& device) const {
    const gpu::ConvParams cp = gpu::make_params(p);
    const cudnnDataType_t dt = data_type(cp.dtype);
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

    e->op = Desc(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR);
    const float alpha = 1.f, beta = 0.f;
    e->op.set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, e->x, "conv fwd x");
    e->op.set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, e->w, "conv fwd w");
    // A fused graph's convolution writes a virtual f32 tensor that the epilogue reads.
    const bool fused = p.has_epilogue();
    if (fused)
      e->fused.push_back(make_tensor(kUidVirtual, CUDNN_DATA_FLOAT, cp.n, cp.k, cp.p, cp.q, cp.nhwc, true));
    e->op.set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, fused ? e->fused.back() : e->y, "conv fwd y");
    e->op.set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, e->conv, "conv fwd conv desc");
    e->op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, &alpha, 1, "conv fwd alpha");
    e->op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, &beta, 1, "conv fwd beta");
    e->op.finalize("conv forward operation");

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
      if (!act) throw Error(Status::unsupported, std::string(kName) + ": " + why);
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

  /// Engine configs from heuristics mode A and the fallback list, filtered, finalized into plans.
  void enumerate(const ConvProblem& p, const runtime::Device& device, Entry& entry) const {
    const gpu::ConvParams cp = gpu::make_params(p);
    CudnnHandle& h = handle(device);
    DeviceGuard guard(device.index());
    Entry* e = &entry;
    const bool is_fused = fused(*e);
    int compiled = 0;  // finalizations of runtime-compiled plans, failed ones too (fused graphs only)
    auto may_compile = [&] { return is_fused && compiled < kMaxRuntimeCompiled; };
    std::vector<std::string> seen, refusals;
    auto refuse = [&](std::string why) {
      if (is_fused) debug_log(p, "refused " + why);
      refusals.push_back(std::move(why));
    };
    auto took = [&](const Candidate& c, std::chrono::steady_clock::time_point start, const char* from) {
      if (is_fused) {
        debug_log(p, std::string("plan ") + c.info.tag() + " (" + from + ", " +
                         (c.info.has(CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION) ? "runtime-compiled, " : "") +
                         "workspace " + std::to_string(c.workspace) + " B) finalized in " +
                         std::to_string(ms_since(start)) + " ms");
      }
    };

    for (cudnnBackendHeurMode_t heur_mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
      const bool heuristic = heur_mode == CUDNN_HEUR_MODE_A;
      const char* from = heuristic ? "heuristics mode A" : "fallback";
      const std::size_t cap = e->candidates.size() + (heuristic ? kMaxHeuristic : kMaxFallback);
      std::string heur_failure;
      std::vector<Desc> configs = engine_configs(*e, heur_mode, heur_failure);
      if (!heur_failure.empty()) refuse(std::string(from) + ": " + heur_failure);
      (heuristic ? e->heuristic_configs : e->fallback_configs) = int(configs.size());
      for (Desc& config : configs) {
        if (e->candidates.size() >= cap) break;
        const auto start = std::chrono::steady_clock::now();
        Candidate c;
        c.info = engine_info(config);
        if (std::find(seen.begin(), seen.end(), c.info.tag()) != seen.end()) continue;
        seen.push_back(c.info.tag());
        if (auto why = refused(c.info, cp.dtype, may_compile()); !why.empty()) {
          refuse(c.info.tag() + ": " + why);
          continue;
        }
        c.config = std::move(config);
        if (c.info.has(CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION)) ++compiled;
        if (std::string failure = finalize_plan(h, c); !failure.empty()) {
          if (is_fused) failure += " (after " + std::to_string(ms_since(start)) + " ms)";
          refuse(c.info.tag() + ": " + failure);
          continue;
        }
        took(c, start, from);
        e->candidates.push_back(std::move(c));
      }
    }
    // Every engine of the graph at its default knobs, when the lists gave no plan (see the top of
    // the file). The legacy API's IMPLICIT_PRECOMP_GEMM kernel stays out of reach: the graph API
    // does not expose it.
    std::int64_t engines = 0, got = 0;
    if (e->candidates.empty()) {
      if (const cudnnStatus_t st =
              cudnnBackendGetAttribute(e->graph.get(), CUDNN_ATTR_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT,
                                       CUDNN_TYPE_INT64, 1, &got, &engines);
          st != CUDNN_STATUS_SUCCESS) {
        refuse("get OPERATIONGRAPH_ENGINE_GLOBAL_COUNT: " + status_text(st));
        engines = 0;
      }
    }
    for (std::int64_t index = 0; index < std::min<std::int64_t>(engines, kMaxGlobalEngines); ++index) {
      const auto start = std::chrono::steady_clock::now();
      std::string why;
      std::optional<Candidate> c =
          plan_from_tag(device, *e, index, {}, cp.dtype, why, seen, may_compile(), &compiled);
      if (!c) {
        // Plain graphs: most of the 100-odd engines refuse any one problem; the summary says enough.
        if (is_fused) refuse(why);
        continue;
      }
      seen.push_back(c->info.tag());
      ++e->global_engines;
      took(*c, start, "engine at default knobs");
      e->candidates.push_back(std::move(*c));
    }
    if (e->candidates.empty()) {
      e->none_reason = "no usable engine config (" + std::to_string(e->heuristic_configs) + " from heuristics, " +
                       std::to_string(e->fallback_configs) + " fallback, " + std::to_string(engines) +
                       " engines of the graph at default knobs)";
      if (is_fused) e->none_reason = "fused " + e->fused_graph + ": " + e->none_reason;
      for (std::size_t i = 0; i < std::min<std::size_t>(refusals.size(), 4); ++i) e->none_reason += "; " + refusals[i];
      if (refusals.size() > 4) e->none_reason += "; " + std::to_string(refusals.size() - 4) + " more";
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
    check_cudnn(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count,
                                         &got, raw.data()),
                "get ENGINEHEUR_RESULTS");
    configs.resize(std::size_t(std::clamp<std::int64_t>(got, 0, count)));
    return configs;
  }

  /// The tuned plan for the problem (enumerates and tunes on first use). The reference stays valid:
  /// once tuned, an entry's candidates never change.
  Candidate& best(const ConvProblem& p, const runtime::Device& device) const {
    Entry& e = entry(p, device);
    std::lock_guard lock(e.mutex);
    enumerate_if_needed(p, device, e);
    if (e.candidates.empty())
      throw Error(Status::unsupported, std::string(kName) + ": " + e.none_reason + " for " + p.key());
    if (!e.tuned) {
      const auto start = std::chrono::steady_clock::now();
      tune(p, device, e);
      debug_log_ms(p, std::to_string(e.candidates.size()) + " plans timed", start);
    }
    return e.candidates[std::size_t(e.best)];
  }

  /// Times every candidate on scratch buffers (constant non-zero data: zeros can run faster than
  /// real data) and keeps the fastest. One warm-up run, then enough runs to fill ~1 ms.
  void tune(const ConvProblem& p, const runtime::Device& device, Entry& e) const {
    DeviceGuard guard(device.index());
    std::int64_t max_ws = 0;
    for (const Candidate& c : e.candidates) max_ws = std::max(max_ws, c.workspace);
    const Scratch x{p.x_desc().bytes()}, w{p.w_desc().bytes()}, y{p.y_desc().bytes()}, ws{std::size_t(max_ws)};
    const std::size_t bias_bytes = p.epilogue.bias ? std::size_t(p.k) * size_of(p.dtype) : 0;
    const std::size_t residual_bytes = p.epilogue.residual ? p.y_desc().bytes() : 0;
    const Scratch bias{bias_bytes}, residual{residual_bytes};
    const GraphPointers pointers =
        call_pointers(p, x.get(), w.get(), y.get(), ws.get(), bias.get(), residual.get());
    cudaStream_t stream = nullptr;
    check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    cudaEvent_t start = nullptr, stop = nullptr;
    auto cleanup = [&] {
      if (start) (void)cudaEventDestroy(start);
      if (stop) (void)cudaEventDestroy(stop);
      (void)cudaStreamSynchronize(stream);
      (void)cudaStreamDestroy(stream);
    };
    CudnnHandle& h = handle(device);
    std::string failures;
    try {
      check_cuda(cudaEventCreate(&start), "cudaEventCreate");
      check_cuda(cudaEventCreate(&stop), "cudaEventCreate");
      check_cuda(cudaMemsetAsync(x.get(), 0x3c, p.x_desc().bytes(), stream), "cudaMemsetAsync");
      check_cuda(cudaMemsetAsync(w.get(), 0x3c, p.w_desc().bytes(), stream), "cudaMemsetAsync");
      if (bias_bytes > 0)
        check_cuda(cudaMemsetAsync(bias.get(), 0x3c, bias_bytes, stream), "cudaMemsetAsync");
      if (residual_bytes > 0)
        check_cuda(cudaMemsetAsync(residual.get(), 0x3c, residual_bytes, stream), "cudaMemsetAsync");
      std::lock_guard lock(h.mutex);
      check_cudnn(h.set_stream(stream), "cudnnSetStream");
      // With graph replay on, a plan's calls are graph launches once their pointers repeat, so
      // what sets a plan apart is its kernels' time, not cuDNN's host work per call: that is about
      // the same for every plan and, on small problems, longer than the kernels, which made plans
      // timed call by call indistinguishable. So `runs` > 1 executions are timed as one captured
      // graph; directly when the plan cannot be captured (or replay is off).
      auto time_runs = [&](Candidate& c, int runs, float* ms) -> cudnnStatus_t {
        cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
        auto enqueue_runs = [&] {
          for (int i = 0; i < runs && st == CUDNN_STATUS_SUCCESS; ++i) st = execute(h.handle, c, pointers);
        };
        cudaGraphExec_t graph = nullptr;
        if (runs > 1 && graph_replay_enabled()) {
          std::string failure;
          graph = capture_graph(stream, enqueue_runs, failure);
          if (st != CUDNN_STATUS_SUCCESS && graph != nullptr) {  // the capture is partial: time directly
            (void)cudaGraphExecDestroy(graph);
            graph = nullptr;
          }
          st = CUDNN_STATUS_SUCCESS;
        }
        check_cuda(cudaEventRecord(start, stream), "cudaEventRecord");
        if (graph != nullptr) {
          const cudaError_t launched = cudaGraphLaunch(graph, stream);
          (void)cudaGraphExecDestroy(graph);  // freed once the launch completes
          check_cuda(launched, "cudaGraphLaunch (plan timing)");
        } else {
          enqueue_runs();
          if (st != CUDNN_STATUS_SUCCESS) return st;
        }
        check_cuda(cudaEventRecord(stop, stream), "cudaEventRecord");
        check_cuda(cudaEventSynchronize(stop), "cudaEventSynchronize");
        check_cuda(cudaEventElapsedTime(ms, start, stop), "cudaEventElapsedTime");
        *ms /= float(runs);
        return CUDNN_STATUS_SUCCESS;
      };
      for (std::size_t i = 0; i < e.candidates.size(); ++i) {
        Candidate& c = e.candidates[i];
        float once = 0;
        cudnnStatus_t st = time_runs(c, 1, &once);  // warm-up, and the size of the real timing
        // A plan whose single run is far behind the best timed one cannot win, and its timed runs
        // would cost the most (a dilated problem's slowest plans take tens of milliseconds a run):
        // its single run ranks it. The slack covers what a first run may carry besides the kernels:
        // the launch work (longer than a small problem's kernel) and loading the plan's kernels.
        const bool far_behind = e.best >= 0 && once > kFarBehind * e.candidates[std::size_t(e.best)].ms + kSingleRunSlackMs;
        if (st == CUDNN_STATUS_SUCCESS && far_behind) {
          c.ms = once;
          continue;
        }
        if (st == CUDNN_STATUS_SUCCESS) {
          const int runs = std::clamp(int(1.0f / std::max(once, 1e-3f)), 1, 20);
          st = time_runs(c, runs, &c.ms);
        }
        if (st != CUDNN_STATUS_SUCCESS) {
          c.ms = -1;
          failures.append(" ").append(c.info.tag()).append(": ").append(status_text(st)).append(";");
          continue;
        }
        if (e.best < 0 || c.ms < e.candidates[std::size_t(e.best)].ms) e.best = int(i);
      }
      check_cudnn(h.set_stream(nullptr), "cudnnSetStream");
    } catch (...) {
      cleanup();
      throw;
    }
    cleanup();
    if (e.best < 0)
      throw Error(Status::backend_error, std::string(kName) + ": every plan failed for " + p.key() + ":" + failures);
    e.tuned = true;
  }

  mutable std::mutex entries_mutex_;
  // Keyed by the problem itself, see problem_key.hpp.
  mutable std::unordered_map<gpu::ProblemKey, std::unique_ptr<Entry>, gpu::ProblemKeyHash> entries_;
};

}  // namespace

std::unique_ptr<dnn::ConvSolver> make_cudnn_graph_conv_solver() { return std::make_unique<GraphSolver>(); }

}  // namespace galley::backends::cuda
