// The registered device activity sources and their lifecycle, following the tracer's on/off state.
#include "profile/activity_source.hpp"

#include <exception>
#include <memory>
#include <mutex>
#include <vector>

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
}

void stop_one(Entry& e) noexcept {
  if (!e.running) return;
  e.running = false;
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
  if (s.on) start_one(s.all.back());
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
  for (Entry& e : s.all) on ? start_one(e) : stop_one(e);
}

void flush_activity_sources() noexcept {
  Sources& s = sources();
  std::lock_guard lock(s.mutex);
  for (Entry& e : s.all) flush_one(e);
}

}  // namespace detail
}  // namespace galley::profile
