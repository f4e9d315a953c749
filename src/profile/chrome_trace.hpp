// Records as a Chrome trace (the JSON Object Format of chrome://tracing, which Perfetto loads).
//
// Layout: pid 0 is the host, one tid per host thread, holding op, launch and tuner spans and
// allocator instants; each device is a pid of its own (named after the device), one tid per
// stream, holding the device spans, and a "memory" counter of the allocator's bytes. A flow
// (ph "s" on the launch, ph "f" on the device span) links every launch to its execution.
// Kernels from a device activity source (CUPTI; cat "activity") sit on tracks of their own below
// their stream's ("stream N kernels (CUPTI)"), each with a flow from its launch.
// Timestamps are microseconds from the earliest record, with nanosecond decimals. otherData holds
// the count of dropped records and the tracer's notes ("CUPTI unavailable: ...").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "profile/output_file.hpp"
#include "profile/tracer.hpp"

namespace galley::profile {

/// The trace as JSON text. `dropped` and `notes` are written to otherData so a reader sees an
/// incomplete trace and why a source is missing.
std::string chrome_trace_json(const std::vector<Record>& records, std::uint64_t dropped,
                              const std::vector<std::string>& notes = {});

/// Writes the trace to `path` through a temporary file renamed into place, so a failed write
/// never leaves a truncated trace. Throws Error(io_error) naming the path and the reason.
void write_chrome_trace(const std::string& path, const std::vector<Record>& records, std::uint64_t dropped,
                        const std::vector<std::string>& notes = {});

}  // namespace galley::profile
