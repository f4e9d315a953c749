// CUPTI as the cuda plugin's device activity source (profile/activity_source.hpp): while tracing
// is on, every kernel, copy and memset the GPU runs is recorded under its own name (cuDNN's and
// cuBLAS's kernels, not only Galley's launches), beneath the Galley launch that made it.
//
// libcupti is loaded with dlopen when tracing first turns on, so the plugin loads and runs without
// it; a missing or failing CUPTI is a note of the trace ("CUPTI unavailable: ..."). Nothing of CUPTI
// runs while tracing is off: no subscription, no callbacks, no activity kinds enabled.
//
// Attribution: CUPTI calls back on the thread making each CUDA runtime or driver API call that
// enqueues work (launches, copies, memsets); the callback maps the call's correlation id to the
// thread's current Galley launch (profile::current_launch(), set around a traced launch's enqueue).
// cuDNN and cuBLAS launch through those APIs from inside that enqueue, so their kernels carry a
// correlation id that maps to the launch, its op and its flow id.
//
// Device spans: unless GALLEY_PROFILE_DEVICE_TIMES=events, the source also makes each traced
// launch's device span (Kind::device) from the activities attributed to its flow, the first one's
// start to the last one's end, and the runtime records no event pair around cuda launches
// (times_launches): two event records per launch and their later reads are most of what tracing
// costs a launch-bound run. The spans are recorded when the source flushes or stops.
//
// Time: CUPTI is given the tracer's steady clock as its timestamp source where it takes one
// (cuptiActivityRegisterTimestampCallback), so kernel times need no conversion; otherwise the
// offset between the two clocks is sampled at each start and flush.
#include <cuda_runtime_api.h>
#include <cupti.h>
#include <cxxabi.h>
#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "backends/gpu/op_lists.hpp"
#include "core/config.hpp"
#include "profile/activity_source.hpp"
#include "profile/tracer.hpp"

namespace galley::backends::cuda {
namespace {

// Activity buffers handed to CUPTI; each holds thousands of kernel records.
constexpr std::size_t kBufferBytes = std::size_t{4} << 20;
constexpr std::size_t kBufferAlignment = 8;
// Correlation ids remembered for kernels not yet delivered; the oldest are forgotten past this
// (their kernels, if they ever arrive, are still recorded, only without their launch, and that
// launch gets no CUPTI-made device span). CUPTI delivers a buffer when it is full, so this must
// outlast one buffer's records (about 20k kernels in 4 MiB); about 80 bytes each at most.
constexpr std::size_t kMaxCorrelations = std::size_t{1} << 18;

// The CUPTI entry points used, resolved from libcupti.
struct CuptiApi {
  decltype(&cuptiGetVersion) get_version = nullptr;
  decltype(&cuptiGetResultString) result_string = nullptr;
  decltype(&cuptiActivityRegisterCallbacks) register_callbacks = nullptr;
  decltype(&cuptiActivityEnable) enable = nullptr;
  decltype(&cuptiActivityDisable) disable = nullptr;
  decltype(&cuptiActivityFlushAll) flush_all = nullptr;
  decltype(&cuptiActivityGetNextRecord) next_record = nullptr;
  decltype(&cuptiActivityGetNumDroppedRecords) dropped_records = nullptr;
  decltype(&cuptiGetTimestamp) timestamp = nullptr;
  decltype(&cuptiSubscribe) subscribe = nullptr;
  decltype(&cuptiUnsubscribe) unsubscribe = nullptr;
  decltype(&cuptiEnableDomain) enable_domain = nullptr;
  decltype(&cuptiEnableCallback) enable_callback = nullptr;
  // Optional: absent from older CUPTI releases.
  decltype(&cuptiGetCallbackName) callback_name = nullptr;
  decltype(&cuptiActivityRegisterTimestampCallback) register_timestamp = nullptr;
};

// The Galley launch a CUDA API call was made in, shared by all the calls of that launch.
struct Attribution {
  std::uint64_t flow = 0;
  std::uint64_t stream = 0;
  profile::Text device, op, solver, key, config;
  profile::Text launch;         // the launch's own name (its device span's)
  profile::Text launch_solver;  // the op's solver as the launch record holds it
  std::uint64_t bytes = 0;      // the launch's (copies, memsets)
};

// A launch's device span being made from its activities.
struct LaunchSpan {
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  std::shared_ptr<const Attribution> launch;
};

// State shared by the source (start, flush, stop: serialised by the profile layer), the API
// callback (any thread calling CUDA) and the buffer callback (CUPTI's thread or the flushing one).
struct State {
  CuptiApi api;
  bool load_tried = false;
  std::string load_error;  // why libcupti is unusable; empty once loaded
  bool buffers_registered = false;
  bool own_clock = false;                     // CUPTI's timestamps are profile::now_ns()
  std::atomic<std::int64_t> clock_offset{0};  // profile::now_ns() - cuptiGetTimestamp(), without own_clock

  // Device spans from activities (times_launches); set at start, read by the buffer callback.
  std::atomic<bool> spans_from_activities{false};

  // The API callback's own lock, held only for one map update or lookup: a launch never waits while
  // a delivered buffer of thousands of records is read (under `mutex`), which would stall the host
  // loop of a launch-bound run for as long as the reading takes.
  std::mutex correlation_mutex;
  std::map<std::uint32_t, std::shared_ptr<const Attribution>> by_correlation;

  std::mutex mutex;  // guards everything below; never taken by the API callback
  std::unordered_map<std::uint64_t, LaunchSpan> spans;  // by flow, until the next flush or stop
  std::unordered_set<std::uint64_t> spans_recorded;     // flows whose span was recorded already
  std::map<std::pair<std::uint32_t, std::uint32_t>, std::uint64_t> galley_streams;  // (device, CUPTI stream)
  std::unordered_map<std::string, profile::Text> demangled;  // by the kernel's mangled name
};

State& state() {
  // Never destroyed: CUPTI may deliver a buffer from its own thread while the process exits.
  static State& instance = *std::make_unique<State>().release();
  return instance;
}

std::string result_text(CUptiResult result) {
  const char* text = nullptr;
  const CuptiApi& api = state().api;
  if (api.result_string != nullptr && api.result_string(result, &text) == CUPTI_SUCCESS && text != nullptr)
    return text;
  return "CUPTI error " + std::to_string(static_cast<int>(result));
}

// "" when `result` is a success, else "<call>: <CUPTI's text>".
std::string failure(CUptiResult result, const char* call) {
  return result == CUPTI_SUCCESS ? std::string() : std::string(call) + ": " + result_text(result);
}

// Where libcupti may be: the loader's path, then beside the CUDA runtime the plugin uses (the
// toolkit's lib64, where CUDA 12 and later put it, or extras/CUPTI/lib64 of older toolkits).
std::vector<std::string> library_candidates() {
  const std::string versioned = "libcupti.so." + std::to_string(CUDART_VERSION / 1000);
  std::vector<std::string> out{versioned, "libcupti.so"};
  Dl_info info{};
  if (dladdr(reinterpret_cast<const void*>(&cudaGetDeviceCount), &info) != 0 && info.dli_fname != nullptr) {
    const std::filesystem::path dir = std::filesystem::path(info.dli_fname).parent_path();
    for (const auto& folder : {dir, dir.parent_path() / "extras" / "CUPTI" / "lib64"}) {
      out.push_back((folder / versioned).string());
      out.push_back((folder / "libcupti.so").string());
    }
  }
  return out;
}

template <class Fn>
bool resolve(void* library, const char* name, Fn& fn, std::string& missing) {
  fn = reinterpret_cast<Fn>(dlsym(library, name));
  if (fn == nullptr) missing += std::string(missing.empty() ? "" : ", ") + name;
  return fn != nullptr;
}

// Loads libcupti once; "" on success, else why not.
std::string load_cupti() {
  State& s = state();
  if (s.load_tried) return s.load_error;
  s.load_tried = true;
  void* library = nullptr;
  std::string tried;
  for (const std::string& candidate : library_candidates()) {
    // RTLD_LOCAL: CUPTI stays private to this plugin. Never closed: CUPTI keeps callbacks into it.
    library = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (library != nullptr) break;
    const char* why = dlerror();
    if (tried.empty()) tried = why != nullptr ? why : candidate + ": not found";
  }
  if (library == nullptr) return s.load_error = "cannot load libcupti (" + tried + ")";
  CuptiApi& api = s.api;
  std::string missing;
  resolve(library, "cuptiGetVersion", api.get_version, missing);
  resolve(library, "cuptiGetResultString", api.result_string, missing);
  resolve(library, "cuptiActivityRegisterCallbacks", api.register_callbacks, missing);
  resolve(library, "cuptiActivityEnable", api.enable, missing);
  resolve(library, "cuptiActivityDisable", api.disable, missing);
  resolve(library, "cuptiActivityFlushAll", api.flush_all, missing);
  resolve(library, "cuptiActivityGetNextRecord", api.next_record, missing);
  resolve(library, "cuptiActivityGetNumDroppedRecords", api.dropped_records, missing);
  resolve(library, "cuptiGetTimestamp", api.timestamp, missing);
  resolve(library, "cuptiSubscribe", api.subscribe, missing);
  resolve(library, "cuptiUnsubscribe", api.unsubscribe, missing);
  resolve(library, "cuptiEnableDomain", api.enable_domain, missing);
  resolve(library, "cuptiEnableCallback", api.enable_callback, missing);
  if (!missing.empty()) return s.load_error = "libcupti lacks " + missing;
  std::string optional_missing;
  resolve(library, "cuptiGetCallbackName", api.callback_name, optional_missing);
  resolve(library, "cuptiActivityRegisterTimestampCallback", api.register_timestamp, optional_missing);
  // The activity records are read through this toolkit's structs (CUpti_ActivityKernel10, ...),
  // whose layout is the same within one CUPTI major version.
  std::uint32_t version = 0;
  if (const std::string why = failure(api.get_version(&version), "cuptiGetVersion"); !why.empty())
    return s.load_error = why;
  if (CUPTI_API_VERSION >= 10000 && version / 10000 != CUPTI_API_VERSION / 10000) {
    return s.load_error = "libcupti API version " + std::to_string(version) +
                          ", the plugin reads records of " + std::to_string(CUPTI_API_VERSION) +
                          " (the same major version is needed)";
  }
  return {};
}

std::uint64_t CUPTIAPI steady_timestamp() { return static_cast<std::uint64_t>(profile::now_ns()); }

void sample_clock_offset() {
  State& s = state();
  if (s.own_clock) return;
  // The midpoint of two reads of the steady clock around one of CUPTI's.
  const std::int64_t before = profile::now_ns();
  std::uint64_t stamp = 0;
  if (s.api.timestamp(&stamp) != CUPTI_SUCCESS) return;
  const std::int64_t after = profile::now_ns();
  s.clock_offset.store(before + (after - before) / 2 - static_cast<std::int64_t>(stamp),
                       std::memory_order_relaxed);
}

// --- attribution: the API callback ------------------------------------------------------------

// Whether an API call of this name enqueues device work that CUPTI reports as an activity.
bool enqueues_work(const char* name) {
  return name != nullptr &&
         (std::strstr(name, "Launch") != nullptr || std::strstr(name, "Memcpy") != nullptr ||
          std::strstr(name, "Memset") != nullptr);
}

// Per callback id: 0 not yet known, 1 enqueues work, 2 does not. Filled from the names CUPTI gives.
std::array<std::atomic<std::uint8_t>, CUPTI_RUNTIME_TRACE_CBID_SIZE> g_runtime_work{};
std::array<std::atomic<std::uint8_t>, CUPTI_DRIVER_TRACE_CBID_SIZE> g_driver_work{};

bool call_enqueues_work(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const char* name) {
  std::atomic<std::uint8_t>* known = nullptr;
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API && cbid < g_runtime_work.size()) known = &g_runtime_work[cbid];
  if (domain == CUPTI_CB_DOMAIN_DRIVER_API && cbid < g_driver_work.size()) known = &g_driver_work[cbid];
  if (known != nullptr) {
    if (const std::uint8_t k = known->load(std::memory_order_relaxed); k != 0) return k == 1;
  }
  const bool work = enqueues_work(name);
  if (known != nullptr) known->store(work ? 1 : 2, std::memory_order_relaxed);
  return work;
}

thread_local std::uint64_t t_attributed_flow = 0;
thread_local std::shared_ptr<const Attribution> t_attribution;

void CUPTIAPI on_api_call(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
  if (domain != CUPTI_CB_DOMAIN_RUNTIME_API && domain != CUPTI_CB_DOMAIN_DRIVER_API) return;
  const auto* call = static_cast<const CUpti_CallbackData*>(data);
  if (call == nullptr || call->callbackSite != CUPTI_API_ENTER) return;
  const profile::Record* launch = profile::current_launch();
  // Flow 0: the stream captures a graph, whose kernels run (and are seen) at replay.
  if (launch == nullptr || launch->flow == 0) return;
  if (!call_enqueues_work(domain, cbid, call->functionName)) return;
  try {
    if (t_attributed_flow != launch->flow) {
      auto a = std::make_shared<Attribution>();
      a->flow = launch->flow;
      a->stream = launch->stream;
      a->device = launch->device;
      a->op = launch->op;
      a->solver = launch->op.empty() ? launch->name : launch->solver;
      a->key = launch->key;
      a->config = launch->config;
      a->launch = launch->name;
      a->launch_solver = launch->solver;
      a->bytes = launch->bytes;
      t_attribution = std::move(a);
      t_attributed_flow = launch->flow;
    }
    State& s = state();
    std::lock_guard lock(s.correlation_mutex);
    s.by_correlation[call->correlationId] = t_attribution;
    // Correlation ids grow: the first entries are the oldest.
    while (s.by_correlation.size() > kMaxCorrelations) s.by_correlation.erase(s.by_correlation.begin());
  } catch (...) {
    // Out of memory: this call's kernels are recorded without their launch.
  }
}

// --- records: the buffer callbacks ------------------------------------------------------------

void CUPTIAPI buffer_requested(std::uint8_t** buffer, std::size_t* size, std::size_t* max_records) {
  *buffer = static_cast<std::uint8_t*>(std::aligned_alloc(kBufferAlignment, kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;
  *max_records = 0;  // as many as fit
}

profile::Text demangle_locked(State& s, const char* name) {
  if (name == nullptr) return "(unnamed kernel)";
  const auto found = s.demangled.find(name);
  if (found != s.demangled.end()) return found->second;
  std::string text = name;
  int status = 0;
  if (char* plain = abi::__cxa_demangle(name, nullptr, nullptr, &status); plain != nullptr) {
    if (status == 0) text = plain;
    std::free(plain);
  }
  const profile::Text interned = profile::Text::interned(text);
  s.demangled.emplace(name, interned);
  return interned;
}

// Fills the record's place and launch from the correlation id; outside any launch, the Galley
// stream last seen on the same CUDA stream, if any.
void attribute_locked(State& s, profile::Record& r, std::uint32_t correlation, std::uint32_t device,
                      std::uint32_t cupti_stream) {
  std::shared_ptr<const Attribution> launch;
  {
    std::lock_guard lock(s.correlation_mutex);
    if (const auto found = s.by_correlation.find(correlation); found != s.by_correlation.end())
      launch = found->second;
  }
  if (launch != nullptr) {
    const Attribution& a = *launch;
    if (s.spans_from_activities.load(std::memory_order_relaxed)) {
      const auto [it, fresh] =
          s.spans.try_emplace(a.flow, LaunchSpan{r.start_ns, r.start_ns + r.dur_ns, launch});
      if (!fresh) {
        it->second.start_ns = std::min(it->second.start_ns, r.start_ns);
        it->second.end_ns = std::max(it->second.end_ns, r.start_ns + r.dur_ns);
      }
    }
    r.device = a.device;
    r.stream = a.stream;
    r.flow = a.flow;
    r.op = a.op;
    r.solver = a.solver;
    r.key = a.key;
    r.config = a.config;
    s.galley_streams[{device, cupti_stream}] = a.stream;
    return;
  }
  r.device = profile::Text::interned("cuda:" + std::to_string(device));
  if (const auto known = s.galley_streams.find({device, cupti_stream}); known != s.galley_streams.end())
    r.stream = known->second;
}

profile::Text copy_kind_name(std::uint8_t kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
      return "memcpy HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
      return "memcpy DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
      return "memcpy DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH:
      return "memcpy HtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP:
      return "memcpy PtoP";
    default:
      return "memcpy";
  }
}

// One activity record as a tracer record; false for kinds not traced or times not filled in (a
// forced flush delivers work that has not run yet).
bool to_record(State& s, const CUpti_Activity* activity, profile::Record& r) {
  std::uint64_t start = 0, end = 0;
  std::uint32_t correlation = 0, device = 0, stream = 0;
  switch (activity->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(activity);
      start = k->start, end = k->end, correlation = k->correlationId, device = k->deviceId,
      stream = k->streamId;
      r.name = demangle_locked(s, k->name);
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto* c = reinterpret_cast<const CUpti_ActivityMemcpy6*>(activity);
      start = c->start, end = c->end, correlation = c->correlationId, device = c->deviceId,
      stream = c->streamId;
      r.name = copy_kind_name(c->copyKind);
      r.bytes = c->bytes;
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(activity);
      start = m->start, end = m->end, correlation = m->correlationId, device = m->deviceId,
      stream = m->streamId;
      r.name = "memset";
      r.bytes = m->bytes;
      break;
    }
    default:
      return false;
  }
  if (start == 0 || end < start) return false;
  r.kind = profile::Kind::kernel;
  r.source = "CUPTI";
  const std::int64_t offset = s.own_clock ? 0 : s.clock_offset.load(std::memory_order_relaxed);
  r.start_ns = static_cast<std::int64_t>(start) + offset;
  r.dur_ns = static_cast<std::int64_t>(end - start);
  attribute_locked(s, r, correlation, device, stream);
  return true;
}

void CUPTIAPI buffer_completed(CUcontext context, std::uint32_t stream_id, std::uint8_t* buffer, std::size_t,
                               std::size_t valid_bytes) {
  State& s = state();
  std::vector<profile::Record> records;
  try {
    std::lock_guard lock(s.mutex);
    CUpti_Activity* activity = nullptr;
    while (s.api.next_record(buffer, valid_bytes, &activity) == CUPTI_SUCCESS) {
      profile::Record r;
      if (to_record(s, activity, r)) records.push_back(std::move(r));
    }
  } catch (...) {
    profile::add_note("CUPTI: out of memory reading an activity buffer; its kernels are missing");
  }
  // Recorded unlocked: the tracer's own lock is the only one record() takes.
  for (profile::Record& r : records) profile::record(std::move(r));
  std::size_t lost = 0;
  if (s.api.dropped_records(context, stream_id, &lost) == CUPTI_SUCCESS && lost != 0)
    profile::count_dropped(lost);
  std::free(buffer);
}

// The device spans made from the activities delivered so far, recorded. A launch whose later
// activities arrive after its span was recorded (a flush while it ran) gets a second span without
// a flow (one flow ends once). Spans of one stream that would overlap partly (kernels of
// consecutive launches overlapping under programmatic dependent launch) are trimmed to follow each
// other, as a track of the trace holds no partly overlapping spans.
void record_launch_spans() noexcept {
  State& s = state();
  std::vector<profile::Record> records;
  try {
    std::lock_guard lock(s.mutex);
    records.reserve(s.spans.size());
    for (auto& [flow, span] : s.spans) {
      const Attribution& a = *span.launch;
      profile::Record r;
      r.kind = profile::Kind::device;
      r.start_ns = span.start_ns;
      r.dur_ns = span.end_ns - span.start_ns;
      r.name = a.launch;
      r.device = a.device;
      r.stream = a.stream;
      r.flow = s.spans_recorded.insert(flow).second ? flow : 0;
      r.bytes = a.bytes;
      r.op = a.op;
      r.solver = a.launch_solver;
      r.config = a.config;
      r.key = a.key;
      records.push_back(std::move(r));
    }
    s.spans.clear();
  } catch (...) {
    profile::add_note("CUPTI: out of memory making device spans; some launches have none");
  }
  std::sort(records.begin(), records.end(), [](const profile::Record& a, const profile::Record& b) {
    return std::tie(a.device, a.stream, a.start_ns) < std::tie(b.device, b.stream, b.start_ns);
  });
  for (std::size_t i = 1; i < records.size(); ++i) {
    profile::Record& r = records[i];
    const profile::Record& before = records[i - 1];
    const std::int64_t before_end = before.start_ns + before.dur_ns;
    if (r.device != before.device || r.stream != before.stream || r.start_ns >= before_end) continue;
    const std::int64_t end = r.start_ns + r.dur_ns;
    r.start_ns = before_end;
    r.dur_ns = std::max<std::int64_t>(0, end - before_end);
  }
  for (profile::Record& r : records) profile::record(std::move(r));
}

// --- the source -------------------------------------------------------------------------------

// The activity kinds recorded; the first is required, the others are recorded where CUPTI can.
constexpr std::array kKinds{CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                            CUPTI_ACTIVITY_KIND_MEMSET};

class CuptiSource final : public profile::ActivitySource {
 public:
  const char* name() const noexcept override { return "CUPTI"; }

  std::string start() override {
    std::lock_guard lock(lifecycle_);
    if (exiting_) return {};
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
      (void)cudaGetLastError();
      return {};  // no CUDA device: nothing to observe, nothing to note
    }
    if (std::string why = load_cupti(); !why.empty()) return why;
    State& s = state();
    CuptiApi& api = s.api;
    if (!s.buffers_registered) {
      // The timestamp source must be set before any activity kind is enabled.
      s.own_clock =
          api.register_timestamp != nullptr && api.register_timestamp(&steady_timestamp) == CUPTI_SUCCESS;
      if (std::string why = failure(api.register_callbacks(&buffer_requested, &buffer_completed),
                                    "cuptiActivityRegisterCallbacks");
          !why.empty())
        return why;
      s.buffers_registered = true;
    }
    sample_clock_offset();
    {
      std::lock_guard correlation_lock(s.correlation_mutex);
      s.by_correlation.clear();
    }
    {
      std::lock_guard maps_lock(s.mutex);
      s.galley_streams.clear();
      s.spans.clear();
      s.spans_recorded.clear();
    }
    // Read per start: a test may switch it between traces (env::reload_for_testing).
    s.spans_from_activities.store(env::config().profile_device_times != "events", std::memory_order_relaxed);
    if (std::string why = failure(api.subscribe(&subscriber_, &on_api_call, nullptr), "cuptiSubscribe");
        !why.empty()) {
      subscriber_ = nullptr;
      return why;
    }
    if (std::string why = enable_work_callbacks(); !why.empty()) {
      end_subscription();
      return why;
    }
    enabled_kinds_.clear();
    for (const CUpti_ActivityKind kind : kKinds) {
      const CUptiResult result = api.enable(kind);
      if (result == CUPTI_SUCCESS) {
        enabled_kinds_.push_back(kind);
      } else if (kind == kKinds.front()) {
        end_subscription();
        return failure(result, "cuptiActivityEnable(CONCURRENT_KERNEL)");
      }
    }
    // Handlers run in reverse order of registration: registered now, once CUPTI has set itself up,
    // this one hands CUPTI's last records to the tracer before CUPTI tears down, also when
    // GALLEY_PROFILE's handler (which writes the trace after it) was registered before CUPTI loaded.
    static const bool kExitHandler = std::atexit(&stop_at_exit) == 0;
    (void)kExitHandler;
    return {};
  }

  void flush() override {
    std::lock_guard lock(lifecycle_);
    if (subscriber_ == nullptr) return;
    sample_clock_offset();
    // Buffers whose records all completed; one holding work still running waits for a later flush
    // (or the forced one at stop).
    State& s = state();
    if (std::string why = failure(s.api.flush_all(0), "cuptiActivityFlushAll"); !why.empty())
      throw std::runtime_error(why);
    record_launch_spans();
  }

  void stop() override {
    std::lock_guard lock(lifecycle_);
    if (subscriber_ == nullptr) return;
    State& s = state();
    end_subscription();
    for (const CUpti_ActivityKind kind : enabled_kinds_) (void)s.api.disable(kind);
    enabled_kinds_.clear();
    sample_clock_offset();
    // Forced: everything recorded so far, including buffers with work that never ran (skipped).
    const std::string why =
        failure(s.api.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "cuptiActivityFlushAll");
    record_launch_spans();
    s.spans_from_activities.store(false, std::memory_order_relaxed);
    if (!why.empty()) throw std::runtime_error(why);
  }

  bool times_launches(std::string_view device) const noexcept override {
    return state().spans_from_activities.load(std::memory_order_relaxed) && device.starts_with("cuda:");
  }

  // At process exit: the tracer's records get CUPTI's last activities, then CUPTI is left idle.
  void shut_down() noexcept {
    {
      std::lock_guard lock(lifecycle_);
      exiting_ = true;
    }
    try {
      stop();
    } catch (const std::exception& e) {
      profile::add_note(std::string("CUPTI: the last activities at exit are missing: ") + e.what());
    }
  }

 private:
  static void stop_at_exit();

  // Callbacks for the API calls that enqueue work only, so every other CUDA call (event queries,
  // attribute reads) runs without entering CUPTI's callback; the whole domains where CUPTI cannot
  // name its callbacks (the callback then filters by name).
  std::string enable_work_callbacks() {
    CuptiApi& api = state().api;
    for (const auto& [domain, size] :
         {std::pair{CUPTI_CB_DOMAIN_RUNTIME_API, std::uint32_t{CUPTI_RUNTIME_TRACE_CBID_SIZE}},
          std::pair{CUPTI_CB_DOMAIN_DRIVER_API, std::uint32_t{CUPTI_DRIVER_TRACE_CBID_SIZE}}}) {
      if (api.callback_name == nullptr) {
        if (std::string why = failure(api.enable_domain(1, subscriber_, domain), "cuptiEnableDomain");
            !why.empty())
          return why;
        continue;
      }
      for (std::uint32_t cbid = 1; cbid < size; ++cbid) {
        const char* name = nullptr;
        if (api.callback_name(domain, cbid, &name) != CUPTI_SUCCESS || !enqueues_work(name)) continue;
        if (std::string why =
                failure(api.enable_callback(1, subscriber_, domain, cbid), "cuptiEnableCallback");
            !why.empty())
          return why;
      }
    }
    return {};
  }

  void end_subscription() {
    if (subscriber_ == nullptr) return;
    (void)state().api.unsubscribe(subscriber_);
    subscriber_ = nullptr;
  }

  // Start, flush and stop are serialised by the profile layer already; this also orders them with
  // the exit handler, which runs outside it.
  std::mutex lifecycle_;
  bool exiting_ = false;
  CUpti_SubscriberHandle subscriber_ = nullptr;
  std::vector<CUpti_ActivityKind> enabled_kinds_;
};

CuptiSource& source() {
  // Never destroyed: the exit handler and the tracer's own handler use it during exit.
  static CuptiSource& instance = *std::make_unique<CuptiSource>().release();
  return instance;
}

void CuptiSource::stop_at_exit() { source().shut_down(); }

// Registered from the plugin's entry point (which runs the list registrars once the backend is
// registered), not from a static initialiser: when tracing is already on, registering starts
// CUPTI, which must not happen inside the dlopen that loads the plugin.
void register_cupti_source() { profile::register_activity_source(source()); }

[[maybe_unused]] const bool kRegistered = gpu::add_list_registrar(&register_cupti_source);

}  // namespace
}  // namespace galley::backends::cuda
