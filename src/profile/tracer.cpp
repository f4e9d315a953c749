// Per-thread record buffers under a process-wide bound; the op context of each thread.
#include "profile/tracer.hpp"

#include <algorithm>
#include <array>
#include <memory>
#include <mutex>
#include <ostream>
#include <set>
#include <string>
#include <utility>

#include "profile/activity_source.hpp"

namespace galley::profile {

namespace detail {
std::atomic<bool> g_enabled{false};
}  // namespace detail

namespace {

// Records per chunk of a thread's buffer: a full chunk is never moved or copied (a growing vector
// of records would move all of them at each doubling).
constexpr std::size_t kChunkRecords = 1024;

// Items of one type in chunks that are never moved or copied once written.
template <class Item>
struct Chunked {
  std::vector<std::unique_ptr<Item[]>> chunks;
  std::size_t size = 0;  // items held; chunks beyond size / kChunkRecords are spare

  template <class Value>
  void push(Value&& item) {
    const std::size_t chunk = size / kChunkRecords;
    if (chunk == chunks.size()) chunks.push_back(std::make_unique<Item[]>(kChunkRecords));
    chunks[chunk][size % kChunkRecords] = std::forward<Value>(item);
    ++size;
  }
  template <class Visit>
  void for_each(Visit&& visit) const {
    for (std::size_t i = 0; i < size; ++i) visit(chunks[i / kChunkRecords][i % kChunkRecords]);
  }
  void clear() {
    size = 0;
    chunks.clear();
  }
};

// A thread's records. The recording thread takes `mutex` for each record; only collect() and
// clear() contend for it. Allocator calls are kept apart as plain data (a tenth of a Record's size).
struct ThreadBuffer {
  std::mutex mutex;
  Chunked<Record> records;
  Chunked<MemoryEvent> memory;
  std::uint32_t thread = 0;
};

struct Buffers {
  std::mutex mutex;  // guards `all`; taken once per thread, at its first record
  std::vector<std::shared_ptr<ThreadBuffer>> all;
  std::atomic<std::size_t> held{0};
  std::atomic<std::uint64_t> dropped{0};
  std::atomic<std::size_t> capacity{kDefaultCapacity};
  std::atomic<std::uint64_t> next_flow{0};
  std::atomic<FlushHook> flush_hook{nullptr};
  std::mutex notes_mutex;
  std::vector<std::string> notes;
};

Buffers& buffers() {
  // Never destroyed: threads and atexit handlers may record or collect during static destruction.
  static Buffers& instance = *std::make_unique<Buffers>().release();
  return instance;
}

// The buffer outlives its thread (the registry holds it too), so a pool worker's records stay
// collectable after the pool is gone.
ThreadBuffer& this_thread_buffer() {
  thread_local std::shared_ptr<ThreadBuffer> buffer = [] {
    auto fresh = std::make_shared<ThreadBuffer>();
    Buffers& b = buffers();
    std::lock_guard lock(b.mutex);
    b.all.push_back(fresh);
    fresh->thread = static_cast<std::uint32_t>(b.all.size());
    return fresh;
  }();
  return *buffer;
}

thread_local const Record* t_current_op = nullptr;
thread_local const Record* t_current_launch = nullptr;
// The tuner's last pick on this thread, for the op span that runs it.
thread_local Text t_picked_solver;
thread_local Text t_picked_config;

}  // namespace

const char* to_string(Kind kind) noexcept {
  switch (kind) {
    case Kind::op:
      return "op";
    case Kind::launch:
      return "launch";
    case Kind::device:
      return "device";
    case Kind::tune:
      return "tune";
    case Kind::alloc:
      return "alloc";
    case Kind::free:
      return "free";
    case Kind::kernel:
      return "kernel";
  }
  return "?";
}

namespace {
constexpr std::string_view kGraphReplayPrefix = "graph replay (";
}  // namespace

Text graph_replay_name(std::size_t nodes) {
  try {
    return Text::interned(std::string(kGraphReplayPrefix) + std::to_string(nodes) +
                          (nodes == 1 ? " node)" : " nodes)"));
  } catch (...) {
    return "graph replay";
  }
}

bool is_graph_replay(std::string_view name) noexcept { return name.starts_with(kGraphReplayPrefix); }

void record(Record r) noexcept {
  Buffers& b = buffers();
  // Reserve a slot first, so concurrent recorders never hold more than the capacity together.
  if (b.held.fetch_add(1, std::memory_order_relaxed) >= b.capacity.load(std::memory_order_relaxed)) {
    b.held.fetch_sub(1, std::memory_order_relaxed);
    b.dropped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  try {
    ThreadBuffer& mine = this_thread_buffer();
    r.thread = mine.thread;
    std::lock_guard lock(mine.mutex);
    mine.records.push(std::move(r));
  } catch (...) {
    b.held.fetch_sub(1, std::memory_order_relaxed);
    b.dropped.fetch_add(1, std::memory_order_relaxed);
  }
}

void record_memory(const MemoryEvent& event) noexcept {
  Buffers& b = buffers();
  if (b.held.fetch_add(1, std::memory_order_relaxed) >= b.capacity.load(std::memory_order_relaxed)) {
    b.held.fetch_sub(1, std::memory_order_relaxed);
    b.dropped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  try {
    ThreadBuffer& mine = this_thread_buffer();
    std::lock_guard lock(mine.mutex);
    mine.memory.push(event);
  } catch (...) {
    b.held.fetch_sub(1, std::memory_order_relaxed);
    b.dropped.fetch_add(1, std::memory_order_relaxed);
  }
}

const char* intern(std::string_view text) noexcept {
  // Never destroyed, as the buffers: records may be collected during static destruction.
  static std::mutex& mutex = *std::make_unique<std::mutex>().release();
  static auto& texts = *std::make_unique<std::set<std::string, std::less<>>>().release();
  try {
    std::lock_guard lock(mutex);
    auto it = texts.find(text);
    if (it == texts.end()) it = texts.emplace(text).first;
    return it->c_str();
  } catch (...) {
    return nullptr;
  }
}

std::ostream& operator<<(std::ostream& out, Text text) { return out << text.view(); }

Text Text::interned(std::string_view text) noexcept {
  if (text.empty()) return {};
  // Direct-mapped by where the text was read from; a slot is trusted only if its characters still
  // match, so a reused address holding other text is interned afresh.
  struct Memo {
    const char* from = nullptr;
    Text text;
  };
  constexpr std::size_t kSlots = 256;
  thread_local std::array<Memo, kSlots> memo{};
  const std::uintptr_t where = reinterpret_cast<std::uintptr_t>(text.data());
  Memo& slot = memo[((where >> 3) ^ (where >> 12) ^ text.size()) % kSlots];
  if (slot.from == text.data() && slot.text.view() == text) return slot.text;
  const char* copy = intern(text);
  if (copy == nullptr) return {};
  slot = Memo{text.data(), Text(copy, text.size())};
  return slot.text;
}

std::uint64_t next_flow_id() noexcept {
  return buffers().next_flow.fetch_add(1, std::memory_order_relaxed) + 1;
}

void set_enabled(bool on) noexcept {
  detail::g_enabled.store(on, std::memory_order_relaxed);
  detail::sync_activity_sources();
}

void set_capacity(std::size_t records) noexcept {
  buffers().capacity.store(records, std::memory_order_relaxed);
}

std::size_t capacity() noexcept { return buffers().capacity.load(std::memory_order_relaxed); }

std::vector<Record> collect() {
  flush();
  Buffers& b = buffers();
  std::vector<std::shared_ptr<ThreadBuffer>> all;
  {
    std::lock_guard lock(b.mutex);
    all = b.all;
  }
  std::vector<Record> out;
  for (const auto& buffer : all) {
    std::lock_guard lock(buffer->mutex);
    buffer->records.for_each([&](const Record& r) { out.push_back(r); });
    buffer->memory.for_each([&](const MemoryEvent& m) {
      Record r;
      r.kind = m.kind;
      r.start_ns = m.start_ns;
      if (m.device != nullptr) r.device = Text::interned(m.device);
      r.thread = buffer->thread;
      r.bytes = m.bytes;
      r.allocated = m.allocated;
      r.reserved = m.reserved;
      out.push_back(std::move(r));
    });
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const Record& a, const Record& b) { return a.start_ns < b.start_ns; });
  return out;
}

void count_dropped(std::uint64_t records) noexcept {
  buffers().dropped.fetch_add(records, std::memory_order_relaxed);
}

std::uint64_t dropped() noexcept { return buffers().dropped.load(std::memory_order_relaxed); }

void clear() noexcept {
  Buffers& b = buffers();
  std::lock_guard lock(b.mutex);
  for (const auto& buffer : b.all) {
    std::lock_guard buffer_lock(buffer->mutex);
    b.held.fetch_sub(buffer->records.size + buffer->memory.size, std::memory_order_relaxed);
    buffer->records.clear();
    buffer->memory.clear();
  }
  b.dropped.store(0, std::memory_order_relaxed);
  std::lock_guard notes_lock(b.notes_mutex);
  b.notes.clear();
}

void add_note(std::string note) noexcept {
  Buffers& b = buffers();
  try {
    std::lock_guard lock(b.notes_mutex);
    if (std::find(b.notes.begin(), b.notes.end(), note) == b.notes.end()) b.notes.push_back(std::move(note));
  } catch (...) {
    // Only the copy can throw; a note is never worth failing for.
  }
}

std::vector<std::string> notes() {
  Buffers& b = buffers();
  std::lock_guard lock(b.notes_mutex);
  return b.notes;
}

void set_flush_hook(FlushHook hook) noexcept { buffers().flush_hook.store(hook, std::memory_order_release); }

void flush() noexcept {
  if (FlushHook hook = buffers().flush_hook.load(std::memory_order_acquire); hook != nullptr) hook();
  detail::flush_activity_sources();
}

const Record* current_op() noexcept { return t_current_op; }

const Record* current_launch() noexcept { return t_current_launch; }

LaunchScope::LaunchScope(const Record& launch) noexcept : outer_(t_current_launch) {
  t_current_launch = &launch;
}

LaunchScope::~LaunchScope() { t_current_launch = outer_; }

void OpScope::begin(OpInfo info) {
  active_ = true;
  record_.kind = Kind::op;
  record_.start_ns = now_ns();
  record_.name = info.name;
  record_.device = info.device;
  record_.stream = info.stream;
  record_.key = info.key;
  outer_ = t_current_op;
  t_current_op = &record_;
}

void OpScope::set_solver_slow(std::string_view solver) {
  record_.solver = Text::interned(solver);
  if (t_picked_solver == solver) record_.config = t_picked_config;
  t_picked_solver = {};
  t_picked_config = {};
}

void OpScope::end() noexcept {
  t_current_op = outer_;
  record_.dur_ns = now_ns() - record_.start_ns;
  record(std::move(record_));
}

void record_tune(std::int64_t started_ns, Text device, Text key, Text solver, Text config, Text source,
                 bool hit) noexcept {
  t_picked_solver = solver;
  t_picked_config = config;
  Record r;
  r.kind = Kind::tune;
  r.start_ns = started_ns;
  r.dur_ns = now_ns() - started_ns;
  r.name = "tuner.pick";
  r.device = device;
  r.key = key;
  r.solver = solver;
  r.config = config;
  r.source = source;
  r.hit = hit;
  record(r);
}

}  // namespace galley::profile
