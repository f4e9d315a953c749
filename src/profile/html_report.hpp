// A trace written by write_chrome_trace as one self-contained HTML page (`galley prof --html`):
// a zoomable timeline with the trace's host and device rows, the per-op table, per stream the
// busy and gap time, device memory over time from the allocator's history, and the tuner's
// find-db hits, misses and tunings.
//
// The page loads nothing: its style sheet and script (html_report.css, html_report.js, compiled in
// as strings) and the data (embedded JSON) are all inline. The data is built here rather than by
// the script from the raw trace so the page's tables carry exactly the numbers `galley prof
// --summary` prints (both come from summarize_trace), and so the page stays a fraction of the
// trace's size: names are interned, each distinct argument set is stored once, times are integer
// nanoseconds.
#pragma once

#include <string>

namespace galley::profile {

/// The id of the <script type="application/json"> element holding the data, and of the element
/// the page's script fills with its status (a JSON object: "state" "ok" or "error", the errors it
/// caught, how many timeline events it drew and their names), which a headless browser reads back.
inline constexpr const char* kHtmlReportDataId = "galley-data";
inline constexpr const char* kHtmlReportStatusId = "galley-status";

/// The report of `trace_json` (the text of a trace written by write_chrome_trace), headed by
/// `title` (e.g. the command that was traced). Text from the trace is escaped, so no name or
/// problem key can end the data's <script> element or inject markup. Throws Error(corrupt_data)
/// naming what is wrong when `trace_json` is not such a trace.
std::string html_report(const std::string& trace_json, const std::string& title);

/// Writes html_report(trace_json, title) to `path` through a temporary file renamed into place.
/// Throws Error(io_error) naming the path and the reason.
void write_html_report(const std::string& path, const std::string& trace_json, const std::string& title);

}  // namespace galley::profile
