// The Chrome trace writer.
#include "profile/chrome_trace.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string_view>
#include <utility>

#include "profile/output_file.hpp"

namespace galley::profile {
namespace {

constexpr int kHostPid = 0;

std::string quoted(const std::string& text) { return nlohmann::json(text).dump(); }

// Microseconds with nanosecond decimals: the format's unit without losing the clock's resolution.
std::string micros(std::int64_t ns) {
  char text[40];
  std::snprintf(text, sizeof text, "%lld.%03lld", static_cast<long long>(ns / 1000),
                static_cast<long long>(ns % 1000 < 0 ? -(ns % 1000) : ns % 1000));
  return text;
}

class Writer {
 public:
  explicit Writer(const std::vector<Record>& records) {
    origin_ = records.empty() ? 0 : records.front().start_ns;
    for (const Record& r : records) origin_ = std::min(origin_, r.start_ns);
  }

  void metadata(const char* what, int pid, std::uint64_t tid, const std::string& name) {
    begin();
    out_ += R"({"ph":"M","name":")" + std::string(what) + R"(","pid":)" + std::to_string(pid) + R"(,"tid":)" +
            std::to_string(tid) + R"(,"args":{"name":)" + quoted(name) + "}}";
  }

  void span(const Record& r, int pid, std::uint64_t tid, std::string_view name, const char* cat,
            const std::string& args) {
    begin();
    out_ += R"({"ph":"X","name":)" + quoted(std::string(name)) + R"(,"cat":")" + cat + R"(","ts":)" +
            ts(r.start_ns) + R"(,"dur":)" + micros(std::max<std::int64_t>(r.dur_ns, 0)) + R"(,"pid":)" +
            std::to_string(pid) + R"(,"tid":)" + std::to_string(tid) + R"(,"args":{)" + args + "}}";
  }

  void flow(char phase, std::uint64_t id, std::int64_t at_ns, int pid, std::uint64_t tid) {
    begin();
    out_ += R"({"ph":")" + std::string(1, phase) + R"(","name":"launch","cat":"flow","id":)" +
            std::to_string(id) + R"(,"ts":)" + ts(at_ns) + R"(,"pid":)" + std::to_string(pid) + R"(,"tid":)" +
            std::to_string(tid) + (phase == 'f' ? R"(,"bp":"e"})" : "}");
  }

  void instant(const Record& r, const std::string& args) {
    begin();
    out_ += R"({"ph":"i","s":"t","name":")" + std::string(to_string(r.kind)) + R"(","cat":"memory","ts":)" +
            ts(r.start_ns) + R"(,"pid":0,"tid":)" + std::to_string(r.thread) + R"(,"args":{)" + args + "}}";
  }

  void sort_index(int pid, std::uint64_t tid, std::uint64_t index) {
    begin();
    out_ += R"({"ph":"M","name":"thread_sort_index","pid":)" + std::to_string(pid) + R"(,"tid":)" +
            std::to_string(tid) + R"(,"args":{"sort_index":)" + std::to_string(index) + "}}";
  }

  void counter(const Record& r, int pid) {
    begin();
    out_ += R"({"ph":"C","name":"memory","cat":"memory","ts":)" + ts(r.start_ns) + R"(,"pid":)" +
            std::to_string(pid) + R"(,"args":{"allocated":)" + std::to_string(r.allocated) +
            R"(,"reserved":)" + std::to_string(r.reserved) + "}}";
  }

  std::string finish(std::uint64_t dropped, const std::vector<std::string>& notes) {
    out_ += "\n],\"displayTimeUnit\":\"ns\",\"otherData\":{\"clock\":\"steady\",\"dropped_records\":" +
            std::to_string(dropped) + ",\"notes\":" + nlohmann::json(notes).dump() + "}}\n";
    return std::move(out_);
  }

 private:
  std::string ts(std::int64_t ns) const { return micros(ns - origin_); }
  void begin() { out_ += first_ ? "\n" : ",\n", first_ = false; }

  std::int64_t origin_ = 0;
  bool first_ = true;
  std::string out_ = "{\"traceEvents\":[";
};

// `"name":value`, appended piecewise (GCC 12 misreports `"literal" + std::string&&` as -Wrestrict).
std::string field(const char* name, const std::string& json_value) {
  std::string out = "\"";
  out += name;
  out += "\":";
  out += json_value;
  return out;
}
std::string field(const char* name, std::string_view text) { return field(name, quoted(std::string(text))); }
std::string field(const char* name, std::uint64_t value) { return field(name, std::to_string(value)); }

// Arguments shared by op, launch and device spans: what ran, for which problem, where.
std::string op_args(const Record& r) {
  std::string args = field("device", std::string_view(r.device));
  args += ',';
  args += field("stream", r.stream);
  for (const auto& [name, text] :
       {std::pair{"op", &r.op}, {"solver", &r.solver}, {"config", &r.config}, {"key", &r.key}}) {
    if (text->empty()) continue;
    args += ',';
    args += field(name, std::string_view(*text));
  }
  if (r.bytes != 0) {
    args += ',';
    args += field("bytes", r.bytes);
  }
  return args;
}

std::string tune_args(const Record& r) {
  std::string args;
  for (const auto& [name, text] : {std::pair{"device", &r.device},
                                   {"key", &r.key},
                                   {"solver", &r.solver},
                                   {"config", &r.config},
                                   {"source", &r.source}}) {
    args += field(name, std::string_view(*text));
    args += ',';
  }
  args += field("hit", std::string(r.hit ? "true" : "false"));
  return args;
}

std::string memory_args(const Record& r) {
  std::string args = field("device", std::string_view(r.device));
  args += ',';
  args += field("bytes", r.bytes);
  return args;
}

bool is_copy(std::string_view name) { return name.starts_with("copy_") || name == "memset"; }

// Activity-source kernels get tracks of their own beside each stream's event-timed spans (which
// they lie inside and would overlap partly); overlapping kernels of one stream (programmatic
// dependent launch) take further lanes, so no track holds partly overlapping spans.
constexpr std::uint64_t kActivityTidBase = std::uint64_t{1} << 40;
constexpr std::uint64_t kLanesPerStream = 256;
// Stream tracks sort by stream id, each followed by its activity lanes.
constexpr std::uint64_t stream_sort_index(std::uint64_t stream) { return stream * (kLanesPerStream + 1); }

std::string activity_track_name(const Record& r, std::uint64_t lane) {
  const std::string source = r.source.empty() ? std::string("activity") : r.source.str();
  std::string name = r.stream != 0 ? "stream " + std::to_string(r.stream) + " kernels (" + source
                                   : "kernels outside Galley launches (" + source;
  if (lane != 0) name += ", overlapping " + std::to_string(lane);
  return name + ")";
}

}  // namespace

std::string chrome_trace_json(const std::vector<Record>& records, std::uint64_t dropped,
                              const std::vector<std::string>& notes) {
  Writer w(records);
  // Kernels point back at their launch with a flow of their own (one flow id ends once), numbered
  // after every flow id the records use.
  std::map<std::uint64_t, const Record*> launches;
  // A launch's flow starts only where a device span ends it: a launch whose device span an
  // activity source makes has none when the source saw no work of it.
  std::set<std::uint64_t> device_flows;
  std::uint64_t next_flow = 0;
  for (const Record& r : records) {
    if (r.kind == Kind::launch && r.flow != 0) launches.emplace(r.flow, &r);
    if (r.kind == Kind::device && r.flow != 0) device_flows.insert(r.flow);
    next_flow = std::max(next_flow, r.flow);
  }
  std::map<std::pair<int, std::uint64_t>, std::vector<std::int64_t>> lane_ends;  // (pid, stream)
  std::map<std::string, int, std::less<>> device_pids;  // in order of first appearance, pid 1 upwards
  auto pid_of = [&](std::string_view device) {
    auto [it, fresh] = device_pids.emplace(std::string(device), static_cast<int>(device_pids.size()) + 1);
    if (fresh) w.metadata("process_name", it->second, 0, "device " + it->first);
    return it->second;
  };
  std::map<std::pair<int, std::uint64_t>, bool> named_threads;
  auto name_thread = [&](int pid, std::uint64_t tid) {
    if (!named_threads.emplace(std::pair{pid, tid}, true).second) return;
    w.metadata("thread_name", pid, tid, (pid == kHostPid ? "host thread " : "stream ") + std::to_string(tid));
    if (pid != kHostPid) w.sort_index(pid, tid, stream_sort_index(tid));
  };
  // The first lane of the record's stream whose last kernel ended by its start.
  auto activity_tid = [&](const Record& r, int pid) {
    std::vector<std::int64_t>& ends = lane_ends[{pid, r.stream}];
    std::uint64_t lane = 0;
    while (lane < ends.size() && ends[lane] > r.start_ns) ++lane;
    if (lane == kLanesPerStream) lane = kLanesPerStream - 1;  // never reached by real streams
    if (lane == ends.size()) ends.push_back(0);
    ends[lane] = std::max(ends[lane], r.start_ns + std::max<std::int64_t>(r.dur_ns, 0));
    const std::uint64_t tid = kActivityTidBase + r.stream * kLanesPerStream + lane;
    if (named_threads.emplace(std::pair{pid, tid}, true).second) {
      w.metadata("thread_name", pid, tid, activity_track_name(r, lane));
      w.sort_index(pid, tid, stream_sort_index(r.stream) + 1 + lane);
    }
    return tid;
  };
  w.metadata("process_name", kHostPid, 0, "host");
  for (const Record& r : records) {
    switch (r.kind) {
      case Kind::op:
        name_thread(kHostPid, r.thread);
        w.span(r, kHostPid, r.thread, r.name, "op", op_args(r));
        break;
      case Kind::launch:
        name_thread(kHostPid, r.thread);
        w.span(r, kHostPid, r.thread, r.name, "launch", op_args(r));
        if (r.flow != 0 && device_flows.count(r.flow) != 0)
          w.flow('s', r.flow, r.start_ns + r.dur_ns / 2, kHostPid, r.thread);
        break;
      case Kind::device: {
        const int pid = pid_of(r.device);
        name_thread(pid, r.stream);
        w.span(r, pid, r.stream, r.name, is_copy(r.name) ? "copy" : "kernel", op_args(r));
        if (r.flow != 0 && launches.count(r.flow) != 0) w.flow('f', r.flow, r.start_ns, pid, r.stream);
        break;
      }
      case Kind::tune:
        name_thread(kHostPid, r.thread);
        w.span(r, kHostPid, r.thread, r.name, "tune", tune_args(r));
        break;
      case Kind::alloc:
      case Kind::free:
        name_thread(kHostPid, r.thread);
        w.instant(r, memory_args(r));
        w.counter(r, pid_of(r.device));
        break;
      case Kind::kernel: {
        const int pid = pid_of(r.device);
        const std::uint64_t tid = activity_tid(r, pid);
        std::string args = op_args(r);
        if (!r.source.empty()) {
          args += ',';
          args += field("source", std::string_view(r.source));
        }
        w.span(r, pid, tid, r.name, "activity", args);
        if (const auto launch = launches.find(r.flow); r.flow != 0 && launch != launches.end()) {
          const Record& l = *launch->second;
          w.flow('s', ++next_flow, l.start_ns + l.dur_ns / 2, kHostPid, l.thread);
          w.flow('f', next_flow, r.start_ns, pid, tid);
        }
        break;
      }
    }
  }
  return w.finish(dropped, notes);
}

void write_chrome_trace(const std::string& path, const std::vector<Record>& records, std::uint64_t dropped,
                        const std::vector<std::string>& notes) {
  write_file_atomically(path, chrome_trace_json(records, dropped, notes), "the trace");
}

}  // namespace galley::profile
