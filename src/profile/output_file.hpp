// Files the profiler writes (traces, memory snapshots): checked before the run, written whole.
#pragma once

#include <string>

namespace galley::profile {

/// Throws Error(invalid_argument) naming `setting` and `path` when a file cannot be written there
/// (no name, a folder, a folder that does not exist or is not writable).
void check_trace_path(const std::string& setting, const std::string& path);

/// Writes `text` to `path` through a temporary file renamed into place, so a failed write never
/// leaves a truncated file. Throws Error(io_error) naming `what`, the path and the reason.
void write_file_atomically(const std::string& path, const std::string& text, const std::string& what);

}  // namespace galley::profile
