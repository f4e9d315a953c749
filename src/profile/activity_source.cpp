// The registered device activity sources and their lifecycle, following the tracer's on/off state.
#include "profile/activity_source.hpp"

#include <array>
#include <atomic>
#include <exception>
#include <memory>
#include <mutex>
#include <vector>

#include "core/config.hpp"
#include "profile/tracer.hpp"

namespace galley::profile {
namespace {

struct Entry {
  ActivitySource* source = nullptr;
  bool running = false;  // started successfully and not stopped since
};

struct Sources {
  std::mutex mutex;  // serialises registration, start, flush and stop
  std::vector<Entry> all;
  bool on = false;  // the tracer state the sources were last brought to
};

// The running sources, read per traced launch (so lock-free); a source beyond these few is never
// asked to time launches (there is one per GPU backend).
std::array<std::atomic<ActivitySource*>, 4> g_running{};
std::atomic<bool> g_host_spans_only{false};

Sources& sources() {
  // Never destroyed: the GALLEY_PROFILE session stops tracing from an atexit handler.
  static Sources& instance = *std::make_unique<Sources>().release();
  return instance;
}

std::string reason(std::exception_ptr error) {
  try {
    std::rethrow_exception(std::move(error));
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "an exception that is not a std::exception";
  }
}

void start_one(Entry& e) noexcept {
  std::string why;
  try {
    why = e.source->start();
  } catch (...) {
    why = reason(std::current_exception());
    if (why.empty()) why = "start failed";
  }
  e.running = why.empty();
  if (!e.running) add_note(std::string(e.source->name()) + " unavailable: " + why);
  if (!e.running) return;
  for (auto& slot : g_running) {
    ActivitySource* empty = nullptr;
    if (slot.compare_exchange_strong(empty, e.source, std::memory_order_acq_rel)) break;
  }
}

void stop_one(Entry& e) noexcept {
  if (!e.running) return;
  e.running = false;
  for (auto& slot : g_running) {
    ActivitySource* mine = e.source;
    slot.compare_exchange_strong(mine, nullptr, std::memory_order_acq_rel);
  }
  try {
    e.source->stop();
  } catch (...) {
    add_note(std::string(e.source->name()) +
             ": stopping failed, its last activities may be missing: " + reason(std::current_exception()));
  }
}

void flush_one(Entry& e) noexcept {
  if (!e.running) return;
  try {
    e.source->flush();
  } catch (...) {
    // A source that cannot hand over its records is stopped: a trace without it beats a stuck one.
    add_note(std::string(e.source->name()) +
             ": flushing failed, the source was stopped: " + reason(std::current_exception()));
    stop_one(e);
  }
}

}  // namespace

void register_activity_source(ActivitySource& source) noexcept {
  Sources& s = sources();
  std::lock_guard lock(s.mutex);
  try {
    s.all.push_back(Entry{&source, false});
  } catch (...) {
    add_note(std::string(source.name()) + " unavailable: out of memory registering it");
    return;
  }
  if (s.on && !g_host_spans_only.load(std::memory_order_relaxed)) start_one(s.all.back());
}

bool host_spans_only() noexcept { return g_host_spans_only.load(std::memory_order_relaxed); }

bool device_times_from_source(std::string_view device) noexcept {
  for (const auto& slot : g_running) {
    const ActivitySource* source = slot.load(std::memory_order_acquire);
    if (source != nullptr && source->times_launches(device)) return true;
  }
  return false;
}

namespace detail {

void sync_activity_sources() noexcept {
  Sources& s = sources();
  std::lock_guard lock(s.mutex);
  // Read under the lock: of two threads switching tracing at once, the last to get here brings
  // the sources to the state both stores left.
  const bool on = enabled();
  if (on == s.on) return;
  s.on = on;
  if (on) g_host_spans_only.store(env::config().profile_device_times == "host", std::memory_order_relaxed);
  // Stopping a source that never started (host spans only) does nothing.
  for (Entry& e : s.all) {
    if (!on) {
      stop_one(e);
    } else if (!g_host_spans_only.load(std::memory_order_relaxed)) {
      start_one(e);
    }
  }
}

void flush_activity_sources() noexcept {
  Sources& s = sources();
  std::lock_guard lock(s.mutex);
  for (Entry& e : s.all) flush_one(e);
}

}  // namespace detail
}  // namespace galley::profile
