#include "galley/core/log.hpp"

#include <atomic>
#include <cstdio>
#include <mutex>
#include <set>
#include <string>

#include "core/config.hpp"
#include "galley/core/error.hpp"

namespace galley::log {
namespace {

constexpr const char* kNames[] = {"error", "warn", "info", "debug", "trace"};
std::atomic<int> g_level{-1};  // -1: not read from the environment yet
std::mutex g_write_mutex;

}  // namespace

Level level() {
  int current = g_level.load(std::memory_order_relaxed);
  if (current < 0) {
    // An invalid GALLEY_* value is reported by the library's up-front check, not here: logging
    // runs on error paths and must not throw.
    int parsed = static_cast<int>(Level::warn);
    try {
      parsed = env::config().log_level;
    } catch (const Error&) {
    }
    g_level.store(parsed);
    current = parsed;
  }
  return static_cast<Level>(current);
}

void set_level(Level at) { g_level.store(static_cast<int>(at)); }

void write(Level at, std::string_view message) {
  if (!enabled(at)) return;
  std::lock_guard lock(g_write_mutex);
  std::fprintf(stderr, "galley[%s]: %.*s\n", kNames[static_cast<int>(at)], static_cast<int>(message.size()),
               message.data());
}

void warn_once(std::string_view key, std::string_view message) {
  static std::mutex mutex;
  static std::set<std::string, std::less<>> seen;
  {
    std::lock_guard lock(mutex);
    if (!seen.emplace(key).second) return;
  }
  write(Level::warn, message);
}

}  // namespace galley::log
