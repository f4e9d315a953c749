// The summary of a Chrome trace written by this layer: where device time went per op and solver,
// and per stream how much of the wall time the device was busy (T_total = sum(T_kernel) +
// sum(T_gap)), with the largest gaps and what the host was doing during them.
//
// It reads the trace file rather than the live records, so `galley prof --summary` describes
// exactly the trace it wrote, and a trace from another run can be summarised again. Device spans
// nested inside another span of their stream (a copy enqueued from inside a launch) are counted
// once, as part of the outer span, so no time is counted twice. Kernels from a device activity
// source (cat "activity") are listed under their op by name and counted in no sum: they are the
// same device time as the event-timed spans they lie inside.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace galley::profile {

/// Kernels of one name that a device activity source (CUPTI) saw under one op and solver.
struct KernelSummary {
  std::string name;
  std::uint64_t calls = 0;
  double device_us = 0;  ///< total
};

struct OpSummary {
  std::string op;           ///< the dispatch entry point; "-" for work launched outside one (copies)
  std::string solver;       ///< the solver, or the launch's name outside an op
  std::uint64_t calls = 0;  ///< op spans; device spans where the work had no op span
  double device_us = 0;     ///< total device time
  double mean_us = 0;       ///< device_us / calls
  double share = 0;         ///< of all device time in the trace, 0..1
  double host_us = 0;       ///< total host API time of the op spans
  /// The kernels it ran by name, largest total first; empty without an activity source's records.
  /// Their time lies inside device_us (the same work, seen kernel by kernel).
  std::vector<KernelSummary> kernels;
};

struct GapSummary {
  double start_us = 0;  ///< trace time
  double dur_us = 0;
  std::string host;  ///< the host span overlapping the gap most ("op: name", "launch: name"), or "idle"
};

struct StreamSummary {
  std::string device;
  std::uint64_t stream = 0;
  std::uint64_t spans = 0;               ///< top-level device spans
  double total_us = 0;                   ///< first start to last end
  double kernel_us = 0;                  ///< sum of the top-level spans
  double gap_us = 0;                     ///< total_us - kernel_us: the device idle between them
  double gap_share = 0;                  ///< gap_us / total_us
  std::vector<GapSummary> largest_gaps;  ///< the longest first, at most kLargestGaps
  std::string hint;                      ///< "launch-bound: ..." when gaps dominate; empty otherwise
};

/// The part of a trace a summary covers. A run captured into a graph (`galley run --graph`) runs
/// eagerly first (tuning, warm-up), captures, then replays; its replays are device spans named
/// "graph replay (N nodes)", and the phases split the trace at them.
enum class SummaryPhase {
  all,             ///< the whole trace
  before_replays,  ///< what starts before the first graph replay (the eager warm-up and the capture)
  replays,         ///< what starts from the first graph replay's start to the last one's end
};
const char* to_string(SummaryPhase phase) noexcept;
/// "all", "before-replays" or "replays"; Error(invalid_argument) naming the text otherwise.
SummaryPhase parse_summary_phase(std::string_view text);

struct TraceSummary {
  SummaryPhase phase = SummaryPhase::all;
  std::uint64_t replays = 0;  ///< graph replay spans in the whole trace
  double window_from_us = 0;  ///< the phase's window in trace time (whole trace: 0 .. its end)
  double window_to_us = 0;
  std::vector<OpSummary> ops;  ///< by device time, largest first
  std::vector<StreamSummary> streams;
  double device_us = 0;       ///< all top-level device spans
  std::uint64_t dropped = 0;  ///< records the tracer dropped (the trace is incomplete when > 0)
  /// Kernels an activity source saw outside any traced launch (a replayed graph's), by name.
  std::vector<KernelSummary> other_kernels;
  std::vector<std::string> notes;  ///< the trace's notes ("CUPTI unavailable: ...")
};

inline constexpr std::size_t kLargestGaps = 5;
/// Kernel names listed per op by format_summary; the rest are summed into one line.
inline constexpr std::size_t kKernelsListed = 8;

/// Parses a trace written by write_chrome_trace. Throws Error(corrupt_data) naming what is wrong
/// when the text is not such a trace, and Error(invalid_argument) for a phase other than `all` of a
/// trace without graph replays. Only the events that start inside the phase's window count: its
/// sums are those of that part of the trace.
TraceSummary summarize_trace(const std::string& json_text, SummaryPhase phase = SummaryPhase::all);
/// The same for a trace parsed already (the HTML report parses a large trace once).
TraceSummary summarize_parsed_trace(const nlohmann::json& trace, SummaryPhase phase = SummaryPhase::all);

/// The summary as text tables for a terminal.
std::string format_summary(const TraceSummary& summary);

}  // namespace galley::profile
