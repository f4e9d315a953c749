// Host and device spans of traced launches (see launch_trace.hpp for how device times are read).
#include "runtime/launch_trace.hpp"

#include <atomic>
#include <cmath>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "profile/activity_source.hpp"
#include "profile/session.hpp"
#include "profile/tracer.hpp"
#include "runtime/backend.hpp"

namespace galley::runtime::detail {
namespace {

// Spans still waiting for their events, per stream. Past this many the oldest is dropped (and
// counted): its events were never waited for, and a trace must not grow a queue without bound.
constexpr std::size_t kMaxPending = 4096;
// Event timing is single-precision milliseconds: ~0.1 us resolution within a second of the anchor.
constexpr float kReanchorMs = 1000.0f;

struct Pending {
  std::uint64_t slot = 0;
  std::unique_ptr<EventImpl> start;
  std::unique_ptr<EventImpl> end;  // null until the launch's enqueue returned
  profile::Record record;
};

struct StreamTrace {
  std::mutex mutex;
  std::unique_ptr<EventImpl> anchor;
  std::int64_t anchor_ns = 0;
  std::deque<Pending> pending;
  std::vector<std::unique_ptr<EventImpl>> spare;  // completed events, recorded again for later spans
  std::uint64_t last_slot = 0;
};

struct Traces {
  std::mutex mutex;
  std::unordered_map<std::uint64_t, std::shared_ptr<StreamTrace>> streams;
};

Traces& traces() {
  // Never destroyed: the tracer's flush hook may run from an atexit handler.
  static Traces& instance = *std::make_unique<Traces>().release();
  return instance;
}

std::atomic<bool> g_any_traced{false};

std::unique_ptr<EventImpl> take_event(StreamTrace& st, Stream& stream) {
  if (!st.spare.empty()) {
    auto event = std::move(st.spare.back());
    st.spare.pop_back();
    return event;
  }
  return stream.device().impl().create_event(true);
}

// The stream's trace, anchored at its first use: the anchor's host time is read once it completed,
// so device times are late by at most that wake-up, never early.
std::shared_ptr<StreamTrace> trace_of(Stream& stream) {
  Traces& t = traces();
  {
    std::lock_guard lock(t.mutex);
    if (auto it = t.streams.find(stream.id()); it != t.streams.end()) return it->second;
  }
  auto fresh = std::make_shared<StreamTrace>();
  fresh->anchor = stream.device().impl().create_event(true);
  stream.impl().record(*fresh->anchor);
  fresh->anchor->synchronize();
  fresh->anchor_ns = profile::now_ns();
  g_any_traced.store(true, std::memory_order_relaxed);
  std::lock_guard lock(t.mutex);
  return t.streams.try_emplace(stream.id(), std::move(fresh)).first->second;
}

std::shared_ptr<StreamTrace> find_trace(std::uint64_t stream_id) {
  Traces& t = traces();
  std::lock_guard lock(t.mutex);
  const auto it = t.streams.find(stream_id);
  return it == t.streams.end() ? nullptr : it->second;
}

// Records every finished span at the front whose end event completed (all of them with `wait`).
// Spans stay in launch order: an unfinished (still enqueueing) one stops the walk.
void resolve_locked(StreamTrace& st, bool wait) noexcept {
  while (!st.pending.empty() && st.pending.front().end != nullptr) {
    Pending& p = st.pending.front();
    try {
      if (wait) {
        p.end->synchronize();
      } else if (!p.end->query()) {
        return;
      }
      const float start_ms = p.start->elapsed_ms_since(*st.anchor);
      const float dur_ms = p.end->elapsed_ms_since(*p.start);
      p.record.start_ns = st.anchor_ns + std::llround(static_cast<double>(start_ms) * 1e6);
      p.record.dur_ns = std::llround(static_cast<double>(dur_ms) * 1e6);
      profile::record(std::move(p.record));
      if (start_ms > kReanchorMs) {
        st.spare.push_back(std::move(st.anchor));
        st.anchor = std::move(p.start);
        st.anchor_ns = p.record.start_ns;
      } else {
        st.spare.push_back(std::move(p.start));
      }
      st.spare.push_back(std::move(p.end));
    } catch (...) {
      // The stream failed or was torn down: the span's time is unknown, the trace goes on.
      profile::count_dropped(1);
    }
    st.pending.pop_front();
  }
}

void flush_all() noexcept {
  std::vector<std::shared_ptr<StreamTrace>> all;
  {
    Traces& t = traces();
    std::lock_guard lock(t.mutex);
    for (auto& [id, st] : t.streams) all.push_back(st);
  }
  for (auto& st : all) {
    std::lock_guard lock(st->mutex);
    resolve_locked(*st, false);
  }
}

profile::Record base_record(Stream& stream, std::string_view op, std::size_t bytes) {
  profile::Record r;
  r.name = profile::Text::interned(op);
  r.device = profile::Text::interned(stream.device().name());
  r.stream = stream.id();
  r.bytes = bytes;
  if (const profile::Record* current = profile::current_op(); current != nullptr) {
    r.op = current->name;
    r.solver = current->solver;
    r.config = current->config;
    r.key = current->key;
  }
  return r;
}

}  // namespace

LaunchTrace::LaunchTrace(Stream& stream, std::string_view op, std::size_t bytes)
    : stream_(stream), host_(base_record(stream, op, bytes)) {
  host_.kind = profile::Kind::launch;
  host_.start_ns = profile::now_ns();
  if (stream.impl().capturing()) return;   // captured work runs at replay; only the host span is real
  if (profile::host_spans_only()) return;  // no device span to time or point at
  // Chosen before the enqueue runs, so the kernels an activity source sees during it share it.
  host_.flow = profile::next_flow_id();
  // An activity source (CUPTI) makes the device span from the kernels it attributes to the flow.
  source_timed_ = profile::device_times_from_source(host_.device);
  if (source_timed_) return;
  auto st = trace_of(stream);
  std::unique_ptr<EventImpl> start;
  {
    std::lock_guard lock(st->mutex);
    start = take_event(*st, stream);
  }
  // Recorded unlocked: a cpu stream's record waits while its queue is full, and a task of that
  // stream may itself launch (and need the lock) before the queue drains.
  stream.impl().record(*start);
  std::lock_guard lock(st->mutex);
  Pending p;
  p.slot = slot_ = ++st->last_slot;
  p.start = std::move(start);
  st->pending.push_back(std::move(p));
}

LaunchTrace::~LaunchTrace() {
  if (slot_ == 0) return;
  // The launch threw before finish(): its span is not a launch that happened.
  if (auto st = find_trace(stream_.id())) {
    std::lock_guard lock(st->mutex);
    std::erase_if(st->pending, [&](const Pending& p) { return p.slot == slot_; });
    resolve_locked(*st, false);
  }
}

void LaunchTrace::finish() {
  profile::Record host = std::move(host_);
  auto st = slot_ != 0 ? find_trace(stream_.id()) : nullptr;
  if (st == nullptr) slot_ = 0;
  if (slot_ == 0 && !source_timed_) host.flow = 0;  // no device span to point at
  if (slot_ != 0) {
    std::unique_ptr<EventImpl> end;
    {
      std::lock_guard lock(st->mutex);
      end = take_event(*st, stream_);
    }
    stream_.impl().record(*end);  // unlocked, as the start event
    std::lock_guard lock(st->mutex);
    // From the back: this launch is the newest pending one unless launches nest.
    for (auto p = st->pending.rbegin(); p != st->pending.rend(); ++p) {
      if (p->slot != slot_) continue;
      p->end = std::move(end);
      p->record = host;
      p->record.kind = profile::Kind::device;
      break;
    }
    slot_ = 0;
    resolve_locked(*st, false);
    while (st->pending.size() > kMaxPending) {
      st->pending.pop_front();
      profile::count_dropped(1);
    }
  }
  host.dur_ns = profile::now_ns() - host.start_ns;
  profile::record(std::move(host));
}

void resolve_launch_traces(std::uint64_t stream_id, bool wait) noexcept {
  if (!g_any_traced.load(std::memory_order_relaxed)) return;
  if (auto st = find_trace(stream_id)) {
    std::lock_guard lock(st->mutex);
    resolve_locked(*st, wait);
  }
}

void end_launch_traces(std::uint64_t stream_id) noexcept {
  if (!g_any_traced.load(std::memory_order_relaxed)) return;
  std::shared_ptr<StreamTrace> st;
  {
    Traces& t = traces();
    std::lock_guard lock(t.mutex);
    const auto it = t.streams.find(stream_id);
    if (it == t.streams.end()) return;
    st = std::move(it->second);
    t.streams.erase(it);
  }
  std::lock_guard lock(st->mutex);
  resolve_locked(*st, true);
  profile::count_dropped(st->pending.size());  // launches still enqueueing as the stream goes
}

void start_tracing_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    profile::set_flush_hook(&flush_all);
    profile::start_session_from_config();
  });
}

}  // namespace galley::runtime::detail
