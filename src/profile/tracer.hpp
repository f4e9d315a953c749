// The tracer: every layer's hooks record into it; `galley prof` and GALLEY_PROFILE read it out.
//
// Off by default. Each hook first calls enabled(), one relaxed atomic load, and does nothing else
// while tracing is off, so a build with the hooks compiled in pays that load per op, launch, copy
// and allocation. While on, records go to the recording thread's own buffer (its mutex is only
// ever contended by a reader collecting), and a process-wide bound on the number of records held
// turns a full tracer into counted drops instead of unbounded memory.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

namespace galley::profile {

// GALLEY_PROFILER (CMake option, default ON) builds the tracer's hooks in; OFF makes enabled() a
// constant false, so every hook is removed at compile time (the API stays; tracing never turns on).
#ifndef GALLEY_PROFILER
#define GALLEY_PROFILER 1
#endif

/// Whether this build has the profiler (GALLEY_PROFILER).
inline constexpr bool kCompiledIn = GALLEY_PROFILER != 0;

namespace detail {
extern std::atomic<bool> g_enabled;
}  // namespace detail

/// True while tracing is on. The hooks' only cost when it is off; none in a build without the
/// profiler.
#if GALLEY_PROFILER
inline bool enabled() noexcept { return detail::g_enabled.load(std::memory_order_relaxed); }
#else
constexpr bool enabled() noexcept { return false; }
#endif

/// Nanoseconds on the steady clock; every record's timestamps use it.
inline std::int64_t now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// Text a record holds: characters that live as long as the process (a string literal, or
/// interned()'s copy), so that making, moving and storing a record copies two words per field and
/// allocates nothing, where strings would cost a heap allocation per long name on every op.
class Text {
 public:
  constexpr Text() noexcept = default;
  /// A string literal.
  template <std::size_t N>
  constexpr Text(const char (&literal)[N]) noexcept
      : data_(literal), size_(N - 1) {}  // NOLINT: implicit by design
  /// The process-lived copy of `text` (intern()), found through a per-thread memo of the places
  /// recent texts were read from, so the names read at every op (a device's, a solver's, a problem
  /// key) cost a lookup and a compare, not a lock. Empty if out of memory.
  static Text interned(std::string_view text) noexcept;

  constexpr std::string_view view() const noexcept { return {data_, size_}; }
  constexpr operator std::string_view() const noexcept { return view(); }  // NOLINT: implicit by design
  std::string str() const { return std::string(view()); }
  constexpr const char* data() const noexcept { return data_; }
  constexpr std::size_t size() const noexcept { return size_; }
  constexpr bool empty() const noexcept { return size_ == 0; }
  constexpr bool starts_with(std::string_view prefix) const noexcept { return view().starts_with(prefix); }
  friend constexpr bool operator==(Text a, Text b) noexcept { return a.view() == b.view(); }
  friend constexpr bool operator==(Text a, std::string_view b) noexcept { return a.view() == b; }
  template <std::size_t N>
  friend constexpr bool operator==(Text a, const char (&b)[N]) noexcept {
    return a.view() == std::string_view(b, N - 1);
  }
  friend std::ostream& operator<<(std::ostream& out, Text text);
  friend constexpr auto operator<=>(Text a, Text b) noexcept { return a.view() <=> b.view(); }

 private:
  constexpr Text(const char* data, std::size_t size) noexcept : data_(data), size_(size) {}

  const char* data_ = "";
  std::size_t size_ = 0;
};

enum class Kind : std::uint8_t {
  op,      ///< host: one dispatch call, validation to enqueue (the host API time)
  launch,  ///< host: one Stream::launch (a solver's enqueue, a copy, a memset)
  device,  ///< device: the launched work's execution, between events recorded around it (or,
           ///< where an activity source times the launches, its first to last activity)
  tune,    ///< host: the tuner's pick for one call (cache or find-db hit, or tuning)
  alloc,   ///< host instant: a caching-allocator allocation, with the device's bytes after it
  free,    ///< host instant: a caching-allocator free, with the device's bytes after it
  kernel,  ///< device: one kernel, copy or memset as a device activity source (CUPTI) saw it,
           ///< under its own name (a cuDNN or cuBLAS kernel) beneath the launch that made it
};
const char* to_string(Kind kind) noexcept;

/// One traced event. Fields a kind does not use stay empty or zero.
struct Record {
  Kind kind = Kind::op;
  std::int64_t start_ns = 0;   ///< steady clock (now_ns())
  std::int64_t dur_ns = 0;     ///< 0 for instants and counters
  Text name;                   ///< op entry point, launch name (the solver's name, "copy_h2d", ...)
  Text device;                 ///< "cpu", "cuda:0"
  std::uint64_t stream = 0;    ///< Stream::id(); 0: none
  std::uint32_t thread = 0;    ///< host thread index (1 = the first thread that recorded)
  std::uint64_t flow = 0;      ///< links a launch to its device span and kernels; 0: none
  std::uint64_t bytes = 0;     ///< copies, memsets, allocations
  Text op;                     ///< launches, device spans, kernels: the dispatch op active on the thread
  Text solver;                 ///< ops, tuner picks; kernels: the op's solver, or the launch's name
                               ///< outside an op (both empty: made outside any traced launch)
  Text config;                 ///< the solver's inner choice as text; empty: none or its default
  Text key;                    ///< problem key
  Text source;                 ///< tune: "cache", "user find-db", "tuned", ...; kernel: "CUPTI"
  bool hit = false;            ///< tune: a stored result was used
  std::int64_t allocated = 0;  ///< alloc, free: the allocator's allocated bytes after the call
  std::int64_t reserved = 0;   ///< alloc, free: its reserved bytes after the call
};

/// The launch and device span name of one replay of a captured graph: "graph replay (N nodes)".
Text graph_replay_name(std::size_t nodes);
/// Whether a span of this name is a graph replay (graph_replay_name).
bool is_graph_replay(std::string_view name) noexcept;

/// Stores `record` in the calling thread's buffer, stamping its thread index; counts a drop when
/// the tracer holds its capacity already. Never throws (a failed allocation is a drop too).
void record(Record record) noexcept;

/// A caching-allocator call as plain data, recorded without building a Record (an op call makes
/// two: its workspace's allocation and free); collect() turns it into a Kind::alloc or Kind::free
/// record.
struct MemoryEvent {
  Kind kind = Kind::alloc;     ///< alloc or free
  std::int64_t start_ns = 0;   ///< now_ns()
  std::uint64_t bytes = 0;     ///< the call's
  std::int64_t allocated = 0;  ///< the allocator's allocated bytes after the call
  std::int64_t reserved = 0;   ///< its reserved bytes after the call
  const char* device = "";     ///< from intern(): lives as long as the process
};
/// Stores `event` as record() stores a record (same bound, same drop count). Never throws.
void record_memory(const MemoryEvent& event) noexcept;
/// A copy of `text` that lives as long as the process, the same pointer for equal texts. For the
/// names that recur in records (devices, solvers, problem keys, kernels): a process traces a
/// bounded set of them, and each is kept once. Null if out of memory.
const char* intern(std::string_view text) noexcept;

/// A fresh flow id (launch -> device span), unique for the process.
std::uint64_t next_flow_id() noexcept;

/// Turns tracing on or off. Records already held are kept. The device activity sources are started
/// or stopped with it (activity_source.hpp), so none runs while tracing is off.
void set_enabled(bool on) noexcept;
/// Most records held at once (all threads together); later ones are dropped and counted.
void set_capacity(std::size_t records) noexcept;
std::size_t capacity() noexcept;
inline constexpr std::size_t kDefaultCapacity = std::size_t{1} << 20;

/// Every record held, ordered by start time. Threads may keep recording meanwhile.
std::vector<Record> collect();
/// Counts `records` lost without being stored (a device span whose events never completed).
void count_dropped(std::uint64_t records) noexcept;
/// Records dropped because the tracer was full, since the last clear().
std::uint64_t dropped() noexcept;
/// Forgets every record, the drop count and the notes.
void clear() noexcept;

/// Adds a one-line note to the trace, such as a device activity source that cannot run ("CUPTI
/// unavailable: ..."). A note already held is not added twice. Never throws.
void add_note(std::string note) noexcept;
/// The notes held, in the order they were added.
std::vector<std::string> notes();

/// Work a lower layer cannot do itself before records are collected: the runtime resolves device
/// spans whose events completed (it holds the events; this layer sits below it). Set once.
using FlushHook = void (*)() noexcept;
void set_flush_hook(FlushHook hook) noexcept;
/// Runs the flush hook, if one is set, then flushes the device activity sources
/// (activity_source.hpp).
void flush() noexcept;

/// What an op span describes; built only while tracing is on (see OpScope).
struct OpInfo {
  Text name;
  Text device;
  std::uint64_t stream = 0;
  Text key;
};

/// The dispatch op the calling thread is inside, or null. Launches and device spans are named
/// after it.
const Record* current_op() noexcept;

/// The traced Stream::launch whose enqueue the calling thread is running, or null: its launch
/// record (name, device, stream, op, solver, flow; the flow is 0 while the stream captures a graph).
/// A device activity source attributes the vendor API calls it observes meanwhile to it.
const Record* current_launch() noexcept;

/// Makes `launch` the calling thread's current launch while alive; the runtime opens one around
/// each traced launch's enqueue. Launches may nest (a task that launches); the outer one returns.
class LaunchScope {
 public:
  explicit LaunchScope(const Record& launch) noexcept;
  ~LaunchScope();
  LaunchScope(const LaunchScope&) = delete;
  LaunchScope& operator=(const LaunchScope&) = delete;

 private:
  const Record* outer_;
};

/// Records one op span (Kind::op) around a dispatch call: from construction to destruction, with
/// the solver set once it is chosen. `describe` (returning OpInfo) runs only while tracing is on,
/// so the problem key is built only then.
class OpScope {
 public:
  template <class Describe>
  explicit OpScope(Describe&& describe) {
    if (enabled()) begin(describe());
  }
  ~OpScope() {
    if (active_) end();
  }
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;
  /// The solver that runs; its config is the one the tuner last picked on this thread for it.
  void set_solver(std::string_view solver) {
    if (active_) set_solver_slow(solver);
  }

 private:
  void begin(OpInfo info);
  void set_solver_slow(std::string_view solver);
  void end() noexcept;

  bool active_ = false;
  Record record_;
  const Record* outer_ = nullptr;
};

/// Records the tuner's pick (Kind::tune) for the op about to run on this thread; `started_ns` is
/// now_ns() taken before picking. Also remembers the pick's config for the OpScope of that op.
void record_tune(std::int64_t started_ns, Text device, Text key, Text solver, Text config, Text source,
                 bool hit) noexcept;

}  // namespace galley::profile
