// The GALLEY_PROFILE session and the variable's validation (its grammar is a path this layer
// checks, so core's table hands it over through register_validator).
#include "profile/session.hpp"

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>

#include "core/config.hpp"
#include "profile/chrome_trace.hpp"
#include "profile/tracer.hpp"

namespace galley::profile {
namespace {

std::string& session_path() {
  // Read by the atexit handler, so never destroyed.
  static std::string& path = *std::make_unique<std::string>().release();
  return path;
}

void write_session_trace() noexcept {
  try {
    set_enabled(false);
    const auto records = collect();
    const auto lost = dropped();
    write_chrome_trace(session_path(), records, lost, notes());
    if (lost != 0) {
      std::fprintf(stderr,
                   "galley: warning: GALLEY_PROFILE: the tracer was full; %llu records dropped from '%s'\n",
                   static_cast<unsigned long long>(lost), session_path().c_str());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "galley: warning: GALLEY_PROFILE: %s\n", e.what());
  }
}

[[maybe_unused]] const bool kValidatorRegistered =
    env::register_validator("GALLEY_PROFILE", [](const std::string& value) {
      if (value.find_first_not_of(" \t") != std::string::npos) check_trace_path("GALLEY_PROFILE", value);
    });

}  // namespace

void start_session_from_config() {
  static std::once_flag once;
  std::call_once(once, [] {
    const std::string& path = env::config().profile;
    if (path.empty()) return;
    session_path() = path;
    // Registered after the backends started, so it runs before their runtimes are torn down.
    std::atexit(write_session_trace);
    set_enabled(true);
  });
}

}  // namespace galley::profile
