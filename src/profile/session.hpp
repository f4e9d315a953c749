// GALLEY_PROFILE: tracing for a whole process, written as a Chrome trace when it exits.
#pragma once

namespace galley::profile {

/// Once per process: when GALLEY_PROFILE names a file, turns tracing on and writes the trace there
/// at exit (a failed write is a warning on stderr, never a crash or a truncated file). The runtime
/// calls it before its first stream exists, after the configuration was validated.
void start_session_from_config();

}  // namespace galley::profile
