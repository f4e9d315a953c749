// Trace summary: op and solver table from the spans' args, per-stream busy time and gaps.
#include "profile/summary.hpp"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>
#include <utility>

#include "galley/core/error.hpp"
#include "profile/tracer.hpp"

namespace galley::profile {
namespace {

// A stream whose device is idle more than this share of the time is limited by the host's
// launches (or by synchronisation), not by its kernels.
constexpr double kLaunchBoundGapShare = 0.5;

struct Span {
  double ts = 0, dur = 0;
  std::string name, cat, op, solver;
};

[[noreturn]] void corrupt(const std::string& what) {
  throw Error(Status::corrupt_data, "not a Galley trace: " + what);
}

std::string text_arg(const nlohmann::json& event, const char* name) {
  const auto args = event.find("args");
  if (args == event.end() || !args->is_object()) return {};
  const auto value = args->find(name);
  return value != args->end() && value->is_string() ? value->get<std::string>() : std::string();
}

Span span_of(const nlohmann::json& event) {
  Span s;
  if (!event.contains("ts") || !event["ts"].is_number() || !event.contains("dur") ||
      !event["dur"].is_number())
    corrupt("an \"X\" event without numeric ts and dur: " + event.dump().substr(0, 200));
  s.ts = event["ts"].get<double>();
  s.dur = event["dur"].get<double>();
  s.name = event.value("name", "");
  s.cat = event.value("cat", "");
  s.op = text_arg(event, "op");
  s.solver = text_arg(event, "solver");
  return s;
}

// The spans of one track with nested ones removed (an inner span is inside its outer one).
std::vector<Span> top_level(std::vector<Span> spans) {
  std::stable_sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.ts < b.ts; });
  std::vector<Span> out;
  double end = -1e300;
  for (Span& s : spans) {
    if (s.ts < end) {
      // Nested, or overlapping through rounding: extend the outer span to keep the union exact.
      if (s.ts + s.dur > end) {
        out.back().dur = s.ts + s.dur - out.back().ts;
        end = s.ts + s.dur;
      }
      continue;
    }
    end = s.ts + s.dur;
    out.push_back(std::move(s));
  }
  return out;
}

std::string host_during(const std::vector<Span>& host, double from, double to) {
  const Span* best = nullptr;
  double best_overlap = 0;
  for (const Span& h : host) {
    const double overlap = std::min(to, h.ts + h.dur) - std::max(from, h.ts);
    // Prefer the innermost (shortest) span among equal overlaps: it says most about the host.
    if (overlap > best_overlap || (best != nullptr && overlap == best_overlap && h.dur < best->dur)) {
      best = &h;
      best_overlap = overlap;
    }
  }
  return best == nullptr ? "idle" : best->cat + ": " + best->name;
}

// One line per kernel name (the first kKernelsListed), then the rest together.
std::string format_kernels(const std::vector<KernelSummary>& kernels, const char* indent) {
  std::string out;
  char line[512];
  auto add = [&](const std::string& label, std::uint64_t calls, double us) {
    std::snprintf(line, sizeof line, "%s%-100s %8llu calls %12.3f ms\n", indent, label.c_str(),
                  static_cast<unsigned long long>(calls), us / 1000.0);
    out += line;
  };
  std::uint64_t rest_calls = 0;
  double rest_us = 0;
  for (std::size_t i = 0; i < kernels.size(); ++i) {
    const KernelSummary& k = kernels[i];
    if (i < kKernelsListed) {
      // Demangled template names can be very long; their head tells which kernel it is.
      add("kernel " + (k.name.size() > 90 ? k.name.substr(0, 87) + "..." : k.name), k.calls, k.device_us);
    } else {
      rest_calls += k.calls;
      rest_us += k.device_us;
    }
  }
  if (kernels.size() > kKernelsListed)
    add("(" + std::to_string(kernels.size() - kKernelsListed) + " more kernels)", rest_calls, rest_us);
  return out;
}

// The events a phase covers: those starting in [from, to).
struct Window {
  double from = -std::numeric_limits<double>::infinity();
  double to = std::numeric_limits<double>::infinity();
  bool holds(double ts) const { return ts >= from && ts < to; }
};

// Counts the trace's graph replays into `summary` and returns the phase's window (and records it).
Window phase_window(const nlohmann::json& events, SummaryPhase phase, TraceSummary& summary) {
  double first_replay = std::numeric_limits<double>::infinity();
  double last_replay_end = -std::numeric_limits<double>::infinity();
  double trace_end = 0;
  for (const auto& event : events) {
    if (!event.is_object() || event.value("ph", "") != "X") continue;
    const Span s = span_of(event);
    trace_end = std::max(trace_end, s.ts + s.dur);
    if (event.value("pid", std::int64_t{-1}) == 0 || s.cat == "activity" || !is_graph_replay(s.name))
      continue;
    ++summary.replays;
    first_replay = std::min(first_replay, s.ts);
    last_replay_end = std::max(last_replay_end, s.ts + s.dur);
  }
  Window w;
  summary.window_from_us = 0;
  summary.window_to_us = trace_end;
  if (phase == SummaryPhase::all) return w;
  if (summary.replays == 0) {
    throw Error(Status::invalid_argument,
                std::string("summary phase '") + to_string(phase) +
                    "': the trace has no graph replay spans (trace a run captured into a graph, e.g. "
                    "galley run --graph)");
  }
  if (phase == SummaryPhase::before_replays) {
    w.to = first_replay;
  } else {
    // The last replay's own end counts: it starts before it.
    w.from = first_replay;
    w.to = last_replay_end;
  }
  summary.window_from_us = std::max(w.from, 0.0);
  summary.window_to_us = std::min(w.to, trace_end);
  return w;
}

}  // namespace

const char* to_string(SummaryPhase phase) noexcept {
  switch (phase) {
    case SummaryPhase::all:
      return "all";
    case SummaryPhase::before_replays:
      return "before-replays";
    case SummaryPhase::replays:
      return "replays";
  }
  return "?";
}

SummaryPhase parse_summary_phase(std::string_view text) {
  for (const SummaryPhase phase : {SummaryPhase::all, SummaryPhase::before_replays, SummaryPhase::replays}) {
    if (text == to_string(phase)) return phase;
  }
  throw Error(Status::invalid_argument,
              "summary phase '" + std::string(text) + "' is not valid (valid: all, before-replays, replays)");
}

TraceSummary summarize_trace(const std::string& json_text, SummaryPhase phase) {
  nlohmann::json trace;
  try {
    trace = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::exception& e) {
    corrupt(std::string("invalid JSON: ") + e.what());
  }
  return summarize_parsed_trace(trace, phase);
}

TraceSummary summarize_parsed_trace(const nlohmann::json& trace, SummaryPhase phase) {
  if (!trace.is_object() || !trace.contains("traceEvents") || !trace["traceEvents"].is_array())
    corrupt("no \"traceEvents\" array");
  TraceSummary summary;
  summary.phase = phase;
  const Window window = phase_window(trace["traceEvents"], phase, summary);
  if (trace.contains("otherData") && trace["otherData"].is_object()) {
    const auto& other = trace["otherData"];
    summary.dropped = other.value("dropped_records", std::uint64_t{0});
    if (const auto notes = other.find("notes"); notes != other.end() && notes->is_array()) {
      for (const auto& note : *notes) {
        if (!note.is_string()) corrupt("a note that is not a string: " + note.dump().substr(0, 200));
        summary.notes.push_back(note.get<std::string>());
      }
    }
  }

  std::map<std::pair<std::string, std::uint64_t>, std::vector<Span>> device_tracks;  // (device, stream)
  std::vector<Span> host;
  std::map<std::pair<std::string, std::string>, std::pair<std::uint64_t, double>> op_host;  // calls, us
  // (op, solver) -> kernel name -> (calls, us); ("", "") holds kernels outside any launch.
  std::map<std::pair<std::string, std::string>, std::map<std::string, std::pair<std::uint64_t, double>>>
      kernels;
  for (const auto& event : trace["traceEvents"]) {
    if (!event.is_object()) corrupt("an event that is not an object");
    if (event.value("ph", "") != "X") continue;
    const std::int64_t pid = event.value("pid", std::int64_t{-1});
    Span s = span_of(event);
    if (!window.holds(s.ts)) continue;
    if (pid == 0) {
      if (s.cat == "op") {
        auto& row = op_host[{s.name, s.solver}];
        row.first += 1;
        row.second += s.dur;
      }
      host.push_back(std::move(s));
    } else if (s.cat == "activity") {
      // Keyed as the device spans are: (op, solver), or ("-", launch name) outside an op.
      const bool in_launch = !s.op.empty() || !s.solver.empty();
      auto& row = kernels[in_launch ? std::pair{s.op.empty() ? std::string("-") : s.op, s.solver}
                                    : std::pair<std::string, std::string>{}][s.name];
      row.first += 1;
      row.second += s.dur;
    } else {
      const auto args = event.find("args");
      const std::uint64_t stream =
          args != event.end() && args->is_object() ? args->value("stream", std::uint64_t{0}) : 0;
      device_tracks[{text_arg(event, "device"), stream}].push_back(std::move(s));
    }
  }

  std::map<std::pair<std::string, std::string>, OpSummary> ops;
  for (auto& [track, spans] : device_tracks) {
    const std::vector<Span> top = top_level(std::move(spans));
    if (top.empty()) continue;
    StreamSummary st;
    st.device = track.first;
    st.stream = track.second;
    st.spans = top.size();
    st.total_us = top.back().ts + top.back().dur - top.front().ts;
    std::vector<GapSummary> gaps;
    for (std::size_t i = 0; i < top.size(); ++i) {
      const Span& s = top[i];
      st.kernel_us += s.dur;
      const bool in_op = !s.op.empty();
      OpSummary& row = ops[{in_op ? s.op : "-", in_op && !s.solver.empty() ? s.solver : s.name}];
      row.device_us += s.dur;
      row.calls += 1;  // replaced by the op span count below where there is one
      if (i + 1 < top.size()) {
        const double gap = top[i + 1].ts - (s.ts + s.dur);
        if (gap > 0) gaps.push_back({s.ts + s.dur, gap, {}});
      }
    }
    st.gap_us = std::max(0.0, st.total_us - st.kernel_us);
    st.gap_share = st.total_us > 0 ? st.gap_us / st.total_us : 0;
    std::sort(gaps.begin(), gaps.end(),
              [](const GapSummary& a, const GapSummary& b) { return a.dur_us > b.dur_us; });
    if (gaps.size() > kLargestGaps) gaps.resize(kLargestGaps);
    for (GapSummary& g : gaps) g.host = host_during(host, g.start_us, g.start_us + g.dur_us);
    st.largest_gaps = std::move(gaps);
    if (st.gap_share > kLaunchBoundGapShare && st.spans > 1) {
      char text[160];
      std::snprintf(text, sizeof text,
                    "launch-bound: the device is idle %.0f%% of the time between its spans; fewer, larger "
                    "launches or a captured graph would help",
                    100 * st.gap_share);
      st.hint = text;
    }
    summary.device_us += st.kernel_us;
    summary.streams.push_back(std::move(st));
  }
  for (const auto& [key, calls_us] : op_host) {
    OpSummary& row = ops[key];
    row.calls = calls_us.first;
    row.host_us = calls_us.second;
  }
  auto by_name = [](const std::map<std::string, std::pair<std::uint64_t, double>>& names) {
    std::vector<KernelSummary> out;
    for (const auto& [name, calls_us] : names) out.push_back({name, calls_us.first, calls_us.second});
    std::stable_sort(out.begin(), out.end(), [](const KernelSummary& a, const KernelSummary& b) {
      return a.device_us > b.device_us;
    });
    return out;
  };
  for (const auto& [key, names] : kernels) {
    if (key.first.empty()) {
      summary.other_kernels = by_name(names);
    } else {
      ops[key].kernels = by_name(names);
    }
  }
  for (auto& [key, row] : ops) {
    row.op = key.first;
    row.solver = key.second;
    row.mean_us = row.calls > 0 ? row.device_us / static_cast<double>(row.calls) : 0;
    row.share = summary.device_us > 0 ? row.device_us / summary.device_us : 0;
    summary.ops.push_back(row);
  }
  std::stable_sort(summary.ops.begin(), summary.ops.end(),
                   [](const OpSummary& a, const OpSummary& b) { return a.device_us > b.device_us; });
  return summary;
}

std::string format_summary(const TraceSummary& summary) {
  std::string out;
  char line[512];
  auto ms = [](double us) { return us / 1000.0; };
  if (summary.phase != SummaryPhase::all) {
    std::snprintf(line, sizeof line,
                  "phase %s: events starting from %.3f ms to %.3f ms (%llu graph replays in the trace)\n\n",
                  to_string(summary.phase), ms(summary.window_from_us), ms(summary.window_to_us),
                  static_cast<unsigned long long>(summary.replays));
    out += line;
  }
  std::snprintf(line, sizeof line, "%-22s %-34s %8s %12s %12s %7s %12s\n", "op", "solver", "calls",
                "device ms", "mean us", "share", "host ms");
  out += line;
  for (const OpSummary& r : summary.ops) {
    std::snprintf(line, sizeof line, "%-22s %-34s %8llu %12.3f %12.2f %6.1f%% %12.3f\n", r.op.c_str(),
                  r.solver.c_str(), static_cast<unsigned long long>(r.calls), ms(r.device_us), r.mean_us,
                  100 * r.share, ms(r.host_us));
    out += line;
    out += format_kernels(r.kernels, "  ");
  }
  if (!summary.other_kernels.empty()) {
    out += "kernels outside Galley launches:\n";
    out += format_kernels(summary.other_kernels, "  ");
  }
  out += "\n";
  for (const StreamSummary& s : summary.streams) {
    std::snprintf(line, sizeof line,
                  "%s stream %llu: T_total %.3f ms = sum(T_kernel) %.3f ms + sum(T_gap) %.3f ms "
                  "(gap share %.1f%%, %llu spans)\n",
                  s.device.c_str(), static_cast<unsigned long long>(s.stream), ms(s.total_us),
                  ms(s.kernel_us), ms(s.gap_us), 100 * s.gap_share, static_cast<unsigned long long>(s.spans));
    out += line;
    for (const GapSummary& g : s.largest_gaps) {
      std::snprintf(line, sizeof line, "  gap %10.2f us at %.3f ms; host: %s\n", g.dur_us, ms(g.start_us),
                    g.host.c_str());
      out += line;
    }
    if (!s.hint.empty()) out += "  hint: " + s.hint + "\n";
  }
  if (summary.dropped != 0) {
    out += "warning: the tracer was full and dropped " + std::to_string(summary.dropped) +
           " records; the trace and these sums are incomplete\n";
  }
  if (summary.phase == SummaryPhase::all && summary.replays != 0) {
    out += "note: " + std::to_string(summary.replays) +
           " graph replays; --phase replays (or before-replays) summarises that part of the trace alone\n";
  }
  for (const std::string& note : summary.notes) out += "note: " + note + "\n";
  return out;
}

}  // namespace galley::profile
