// The HTML report: the page's data from the trace and its summary, and the page around it.
#include "profile/html_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "galley/core/error.hpp"
#include "profile/html_report_assets.hpp"
#include "profile/output_file.hpp"
#include "profile/summary.hpp"

namespace galley::profile {
namespace {

using nlohmann::json;

constexpr int kHostPid = 0;

// Trace times are microseconds with nanosecond decimals; the page keeps integer nanoseconds,
// exact and shorter than the decimals a double prints.
std::int64_t to_ns(double us) { return std::llround(us * 1000.0); }

struct Span {
  std::int64_t start = 0, dur = 0;
  std::size_t name = 0, cat = 0, args = 0;
  int depth = 0;
};

struct Track {
  std::vector<Span> spans;
  int depth = 0;  // rows the nested spans need
};

// Interns strings and argument objects so a trace's thousands of identical launches cost an
// index each.
class Tables {
 public:
  std::size_t string(const std::string& text) {
    auto [it, fresh] = string_ids_.emplace(text, strings_.size());
    if (fresh) strings_.push_back(text);
    return it->second;
  }
  std::size_t args(const json& object) {
    std::string text = object.dump();
    auto [it, fresh] = args_ids_.emplace(std::move(text), args_.size());
    if (fresh) args_.push_back(object);
    return it->second;
  }
  json strings() const { return strings_; }
  json args() const { return args_; }

 private:
  std::unordered_map<std::string, std::size_t> string_ids_, args_ids_;
  json strings_ = json::array(), args_ = json::array();
};

// Each span's row within its track: a span starting inside an earlier one on the track sits one
// row below it (an op's launches and tuner pick under the op, a copy inside a launch).
int assign_depths(std::vector<Span>& spans) {
  std::stable_sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    return a.start != b.start ? a.start < b.start : a.dur > b.dur;
  });
  std::vector<std::int64_t> open_ends;
  int depth = 0;
  for (Span& s : spans) {
    while (!open_ends.empty() && open_ends.back() <= s.start) open_ends.pop_back();
    s.depth = static_cast<int>(open_ends.size());
    depth = std::max(depth, s.depth + 1);
    open_ends.push_back(s.start + s.dur);
  }
  return depth;
}

// One end of a flow: the track it is on and its time.
struct FlowEnd {
  std::pair<int, std::uint64_t> track;
  std::int64_t at = 0;
  bool seen = false;
};
struct FlowEnds {
  FlowEnd from, to;  // "s" on the launch, "f" on the device span
};

// The index of the innermost span of `spans` (sorted by start) holding time `at`: of the spans
// holding it, the one starting last. The search back gives up after a bounded number of spans (a
// long op with thousands of launches before `at`), leaving that flow out rather than slowing down.
std::optional<std::size_t> innermost_at(const std::vector<Span>& spans, std::int64_t at) {
  constexpr std::size_t kMaxScan = 256;
  auto it = std::upper_bound(spans.begin(), spans.end(), at,
                             [](std::int64_t t, const Span& s) { return t < s.start; });
  for (std::size_t scanned = 0; it != spans.begin() && scanned < kMaxScan; ++scanned) {
    --it;
    if (it->start + it->dur >= at) return static_cast<std::size_t>(it - spans.begin());
  }
  return std::nullopt;
}

std::string text_of(const json& object, const char* name) {
  const auto it = object.find(name);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// One tuner decision, keyed by what was decided; repeated picks are counted.
struct TuneRow {
  std::uint64_t calls = 0;
  double total_us = 0;
};

json tuner_data(const std::vector<json>& picks) {
  std::map<std::tuple<std::string, std::string, std::string, std::string, std::string, bool>, TuneRow> rows;
  std::map<std::string, std::uint64_t> by_source;
  std::uint64_t hits = 0;
  double tuning_us = 0;
  for (const json& e : picks) {
    const json args = e.value("args", json::object());
    const bool hit = args.value("hit", false);
    const std::string source = text_of(args, "source");
    const double dur = e.value("dur", 0.0);
    hits += hit ? 1 : 0;
    by_source[source] += 1;
    if (source == "tuned") tuning_us += dur;
    TuneRow& row = rows[{text_of(args, "device"), text_of(args, "key"), text_of(args, "solver"),
                         text_of(args, "config"), source, hit}];
    row.calls += 1;
    row.total_us += dur;
  }
  json decisions = json::array();
  for (const auto& [what, row] : rows) {
    const auto& [device, key, solver, config, source, hit] = what;
    decisions.push_back({{"device", device},
                         {"key", key},
                         {"solver", solver},
                         {"config", config},
                         {"source", source},
                         {"hit", hit},
                         {"calls", row.calls},
                         {"total_us", row.total_us}});
  }
  return {{"picks", picks.size()},  {"hits", hits},           {"misses", picks.size() - hits},
          {"tuning_us", tuning_us}, {"by_source", by_source}, {"decisions", std::move(decisions)}};
}

json summary_data(const TraceSummary& summary) {
  json ops = json::array();
  for (const OpSummary& r : summary.ops) {
    ops.push_back({{"op", r.op},
                   {"solver", r.solver},
                   {"calls", r.calls},
                   {"device_us", r.device_us},
                   {"mean_us", r.mean_us},
                   {"share", r.share},
                   {"host_us", r.host_us}});
  }
  json streams = json::array();
  for (const StreamSummary& s : summary.streams) {
    json gaps = json::array();
    for (const GapSummary& g : s.largest_gaps)
      gaps.push_back({{"start_us", g.start_us}, {"dur_us", g.dur_us}, {"host", g.host}});
    streams.push_back({{"device", s.device},
                       {"stream", s.stream},
                       {"spans", s.spans},
                       {"total_us", s.total_us},
                       {"kernel_us", s.kernel_us},
                       {"gap_us", s.gap_us},
                       {"gap_share", s.gap_share},
                       {"hint", s.hint},
                       {"largest_gaps", std::move(gaps)}});
  }
  return {{"ops", std::move(ops)}, {"streams", std::move(streams)}, {"device_us", summary.device_us}};
}

json report_data(const json& trace, const TraceSummary& summary, const std::string& title) {
  std::map<int, std::string> process_names;
  std::map<std::pair<int, std::uint64_t>, std::string> thread_names;
  std::map<std::pair<int, std::uint64_t>, Track> tracks;  // host (pid 0) first, then devices by pid
  std::map<int, json> memory;                             // pid -> [[t_ns, allocated, reserved], ...]
  std::vector<json> picks;
  std::map<std::uint64_t, FlowEnds> flows;  // by flow id
  Tables tables;
  std::int64_t end_ns = 0;
  for (const json& e : trace["traceEvents"]) {
    const std::string ph = e.value("ph", "");
    const int pid = e.value("pid", -1);
    const std::uint64_t tid = e.value("tid", std::uint64_t{0});
    const json args = e.value("args", json::object());
    if (ph == "M") {
      const std::string name = text_of(args, "name");
      if (e.value("name", "") == "process_name") process_names[pid] = name;
      if (e.value("name", "") == "thread_name") thread_names[{pid, tid}] = name;
    } else if (ph == "X") {
      Span s;
      s.start = to_ns(e["ts"].get<double>());
      s.dur = std::max<std::int64_t>(0, to_ns(e["dur"].get<double>()));
      s.name = tables.string(e.value("name", ""));
      s.cat = tables.string(e.value("cat", ""));
      s.args = tables.args(args);
      end_ns = std::max(end_ns, s.start + s.dur);
      tracks[{pid, tid}].spans.push_back(s);
      if (e.value("cat", "") == "tune") picks.push_back(e);
    } else if (ph == "C" && e.value("name", "") == "memory" && e.contains("ts") && e["ts"].is_number()) {
      const std::int64_t t = to_ns(e["ts"].get<double>());
      end_ns = std::max(end_ns, t);
      auto& points = memory[pid];
      if (points.is_null()) points = json::array();
      points.push_back(
          {t, args.value("allocated", std::int64_t{0}), args.value("reserved", std::int64_t{0})});
    } else if ((ph == "s" || ph == "f") && e.contains("id") && e["id"].is_number_unsigned() &&
               e.contains("ts") && e["ts"].is_number()) {
      FlowEnds& ends = flows[e["id"].get<std::uint64_t>()];
      (ph == "s" ? ends.from : ends.to) = FlowEnd{{pid, tid}, to_ns(e["ts"].get<double>()), true};
    }
  }

  std::map<std::pair<int, std::uint64_t>, std::size_t> track_index;
  for (auto& [where, track] : tracks) {
    track.depth = assign_depths(track.spans);
    track_index.emplace(where, track_index.size());
  }
  // Each launch and the work it ran, as [host track, span, device track, span].
  json flow_list = json::array();
  for (const auto& [id, ends] : flows) {
    if (!ends.from.seen || !ends.to.seen) continue;
    const auto from_track = tracks.find(ends.from.track);
    const auto to_track = tracks.find(ends.to.track);
    if (from_track == tracks.end() || to_track == tracks.end()) continue;
    const auto from = innermost_at(from_track->second.spans, ends.from.at);
    const auto to = innermost_at(to_track->second.spans, ends.to.at);
    if (from && to)
      flow_list.push_back({track_index[ends.from.track], *from, track_index[ends.to.track], *to});
  }

  json track_list = json::array();
  for (auto& [where, track] : tracks) {
    const auto& [pid, tid] = where;
    json spans = json::array();
    for (const Span& s : track.spans) spans.push_back({s.start, s.dur, s.depth, s.name, s.cat, s.args});
    const auto process = process_names.find(pid);
    const auto thread = thread_names.find(where);
    track_list.push_back(
        {{"process", process != process_names.end() ? process->second : "pid " + std::to_string(pid)},
         {"name", thread != thread_names.end() ? thread->second : "tid " + std::to_string(tid)},
         {"host", pid == kHostPid},
         {"depth", track.depth},
         {"spans", std::move(spans)}});
  }
  json memory_list = json::array();
  for (auto& [pid, points] : memory) {
    const auto process = process_names.find(pid);
    std::string device = process != process_names.end() ? process->second : "pid " + std::to_string(pid);
    if (device.starts_with("device ")) device.erase(0, 7);
    memory_list.push_back({{"device", device}, {"points", std::move(points)}});
  }

  json data = summary_data(summary);
  data["format"] = "galley-html-report";
  data["version"] = 1;
  data["title"] = title;
  data["dropped"] = summary.dropped;
  data["end_ns"] = end_ns;
  data["strings"] = tables.strings();
  data["args"] = tables.args();
  data["tracks"] = std::move(track_list);
  data["memory"] = std::move(memory_list);
  data["flows"] = std::move(flow_list);
  data["tuner"] = tuner_data(picks);
  return data;
}

json report_data(const std::string& trace_json, const std::string& title) {
  json trace;
  try {
    trace = json::parse(trace_json);
  } catch (const json::exception& e) {
    throw Error(Status::corrupt_data, std::string("not a Galley trace: invalid JSON: ") + e.what());
  }
  try {
    // The summary names what is wrong with a trace that is not Galley's, so it goes first.
    return report_data(trace, summarize_parsed_trace(trace), title);
  } catch (const json::exception& e) {
    // A field of the wrong type (a string pid, say).
    throw Error(Status::corrupt_data, std::string("not a Galley trace: ") + e.what());
  }
}

// JSON inside <script>: '<' never appears raw (so neither "</script>" nor "<!--" can), nor '>'
// and '&'; outside strings JSON has none of them, inside strings the escapes mean the same text.
// U+2028 and U+2029 are left: JSON.parse accepts them.
std::string script_safe(const std::string& json_text) {
  std::string out;
  out.reserve(json_text.size() + json_text.size() / 64);
  for (const char c : json_text) {
    switch (c) {
      case '<':
        out += "\\u003c";
        break;
      case '>':
        out += "\\u003e";
        break;
      case '&':
        out += "\\u0026";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string html_escaped(std::string_view text) {
  std::string out;
  for (const char c : text) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

}  // namespace

std::string html_report(const std::string& trace_json, const std::string& title) {
  // Invalid UTF-8 in a name is replaced rather than refused: the page must still open.
  const std::string data =
      report_data(trace_json, title).dump(-1, ' ', false, json::error_handler_t::replace);
  std::string page;
  page.reserve(data.size() + assets::html_report_js().size() + assets::html_report_css().size() + 2048);
  page += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  page += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  // Nothing may be fetched: the page is one file, opened offline as often as not.
  page +=
      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
      "style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">\n";
  page += "<title>Galley profile: " + html_escaped(title) + "</title>\n<style>\n";
  page += assets::html_report_css();
  page += "</style>\n</head>\n<body>\n";
  page += "<header><h1>Galley profile</h1><p class=\"subtitle\">" + html_escaped(title) + "</p></header>\n";
  page += "<main id=\"report\"><p class=\"note\">Rendering the report needs JavaScript.</p></main>\n";
  page += std::string("<pre id=\"") + kHtmlReportStatusId +
          "\" class=\"status\" data-state=\"loading\">{\"state\":\"loading\"}</pre>\n";
  page += std::string("<script type=\"application/json\" id=\"") + kHtmlReportDataId + "\">";
  page += script_safe(data);
  page += "</script>\n<script>\n";
  page += assets::html_report_js();
  page += "</script>\n</body>\n</html>\n";
  return page;
}

void write_html_report(const std::string& path, const std::string& trace_json, const std::string& title) {
  write_file_atomically(path, html_report(trace_json, title), "the HTML report");
}

}  // namespace galley::profile
