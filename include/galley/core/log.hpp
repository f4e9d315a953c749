// Leveled logging to stderr, controlled by GALLEY_LOG_LEVEL.
#pragma once

#include <string_view>

namespace galley::log {

enum class Level { error = 0, warn = 1, info = 2, debug = 3, trace = 4 };

/// The active level (GALLEY_LOG_LEVEL, default warn; warn while the configuration is invalid).
Level level();
/// Overrides the level for this process (tests, CLI -v).
void set_level(Level level);
/// True when messages of `at` are printed; check before building expensive messages.
inline bool enabled(Level at) { return static_cast<int>(at) <= static_cast<int>(level()); }

/// Prints "galley[<level>]: <message>" to stderr when the level is enabled. Thread-safe.
void write(Level at, std::string_view message);
inline void error(std::string_view m) { write(Level::error, m); }
inline void warn(std::string_view m) { write(Level::warn, m); }
inline void info(std::string_view m) { write(Level::info, m); }
inline void debug(std::string_view m) { write(Level::debug, m); }

/// Prints `message` once per process per distinct `key` at warn level (corrupt db, fallbacks).
void warn_once(std::string_view key, std::string_view message);

}  // namespace galley::log
