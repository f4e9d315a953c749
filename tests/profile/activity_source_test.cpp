// Device activity sources on the cpu device, through a fake source standing in for CUPTI: started
// and stopped with tracing, its kernels under the op, stream and flow of the launch that made them,
// on tracks of their own in the Chrome trace, listed per op in the summary; a source that is
// unavailable or throws is a note of the trace, never a failure.
#include "profile/activity_source.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "common/scoped_env.hpp"
#include "galley/core/error.hpp"
#include "galley/runtime/device.hpp"
#include "galley/runtime/stream.hpp"
#include "profile/chrome_trace.hpp"
#include "profile/summary.hpp"
#include "profile/tracer.hpp"
#include "trace_check.hpp"

namespace galley::profile {
namespace {

// Sees "vendor API calls" as CUPTI's callbacks do (on the calling thread, attributed to the
// current launch) and hands each back as a kernel record at the next flush.
class FakeSource : public ActivitySource {
 public:
  const char* name() const noexcept override { return "fake"; }

  std::string start() override {
    ++starts;
    if (!throw_on_start.empty()) throw Error(Status::backend_error, throw_on_start);
    return unavailable;
  }
  void flush() override {
    ++flushes;
    if (!throw_on_flush.empty()) throw Error(Status::backend_error, throw_on_flush);
    std::vector<Record> seen;
    {
      std::lock_guard lock(mutex);
      seen.swap(calls);
    }
    for (Record& r : seen) record(std::move(r));
  }
  void stop() override {
    ++stops;
    flush();
  }

  // A vendor library's kernel launch: 2 us of "device time" from the call on, or from the end of the
  // previous one.
  void api_call(const std::string& kernel) {
    Record r;
    r.kind = Kind::kernel;
    r.name = Text::interned(kernel);
    r.source = "fake";
    r.dur_ns = 2000;
    if (const Record* launch = current_launch(); launch != nullptr) {
      r.device = launch->device;
      r.stream = launch->stream;
      r.flow = launch->flow;
      r.op = launch->op;
      r.solver = launch->op.empty() ? launch->name : launch->solver;
      r.key = launch->key;
    } else {
      r.device = "cpu";
    }
    std::lock_guard lock(mutex);
    // A stream runs its kernels one after another: a call within 3 us of the last one starts 1 us
    // after that one ends (a gap, so the trace's microsecond doubles never see them touch), so the
    // fake kernels never overlap however fast the host makes its calls.
    r.start_ns = std::max(now_ns(), next_start_ns);
    next_start_ns = r.start_ns + r.dur_ns + 1000;
    calls.push_back(std::move(r));
  }

  void reset() {
    starts = flushes = stops = 0;
    unavailable.clear();
    throw_on_start.clear();
    throw_on_flush.clear();
    std::lock_guard lock(mutex);
    calls.clear();
  }

  int starts = 0, flushes = 0, stops = 0;
  std::string unavailable, throw_on_start, throw_on_flush;
  std::mutex mutex;
  std::vector<Record> calls;
  std::int64_t next_start_ns = 0;  // 1 us after the last fake kernel ends
};

// Sources are registered for the life of the process: one fake serves every test.
FakeSource& fake() {
  static FakeSource& source = []() -> FakeSource& {
    static FakeSource instance;
    register_activity_source(instance);
    return instance;
  }();
  return source;
}

class ActivitySources : public ::testing::Test {
 protected:
  void SetUp() override {
    set_enabled(false);
    fake().reset();
    clear();
  }
  void TearDown() override {
    set_enabled(false);
    fake().reset();
    clear();
  }
};

// The fake source's notes only: where a GPU plugin is built, its own source (CUPTI) runs too.
std::vector<std::string> fake_notes(const std::vector<std::string>& all = notes()) {
  std::vector<std::string> out;
  for (const std::string& n : all)
    if (n.starts_with("fake")) out.push_back(n);
  return out;
}

bool has_note(const std::string& text) {
  const auto all = notes();
  return std::find(all.begin(), all.end(), text) != all.end();
}

TEST_F(ActivitySources, StartWhenTracingTurnsOnStopWhenItTurnsOffAndNeverRunWhileOff) {
  FakeSource& source = fake();
  runtime::Stream stream(runtime::device("cpu"));
  bool current_while_off = true;
  stream.launch("test.off", [&] { current_while_off = current_launch() != nullptr; });
  EXPECT_FALSE(current_while_off) << "an untraced launch has no current launch";
  flush();
  EXPECT_EQ(source.starts + source.flushes + source.stops, 0)
      << "nothing of a source runs while tracing is off";

  set_enabled(true);
  set_enabled(true);
  EXPECT_EQ(source.starts, 1) << "turning tracing on twice starts a source once";
  flush();
  EXPECT_EQ(source.flushes, 1);
  set_enabled(false);
  set_enabled(false);
  EXPECT_EQ(source.stops, 1);
  (void)collect();
  EXPECT_EQ(source.flushes, 2) << "the stop's own flush only: a stopped source is not flushed";
  set_enabled(true);
  EXPECT_EQ(source.starts, 2) << "tracing on again starts it again";
}

TEST_F(ActivitySources, ASourceRegisteredWhileTracingIsOnStartsAtOnce) {
  static FakeSource late;
  set_enabled(true);
  register_activity_source(late);
  EXPECT_EQ(late.starts, 1);
  set_enabled(false);
  EXPECT_EQ(late.stops, 1);
}

TEST_F(ActivitySources, KernelsSitUnderTheOpStreamAndFlowOfTheirLaunch) {
  FakeSource& source = fake();
  runtime::Stream stream(runtime::device("cpu"));
  set_enabled(true);
  {
    OpScope op([&] { return OpInfo{"fake_op", "cpu", stream.id(), "fake-key"}; });
    op.set_solver("cpu.fake.solver");
    stream.launch("cpu.fake.solver", [&] {
      const Record* launch = current_launch();
      ASSERT_NE(launch, nullptr);
      EXPECT_EQ(launch->name, "cpu.fake.solver");
      EXPECT_NE(launch->flow, 0u) << "the flow id is chosen before the enqueue runs";
      source.api_call("vendor_gemm_kernel");
      // A nested launch is current while it runs; the outer one is current again afterwards.
      stream.launch("cpu.fake.inner", [&] { source.api_call("vendor_inner_kernel"); });
      EXPECT_EQ(current_launch(), launch);
      source.api_call("vendor_reduce_kernel");
    });
  }
  stream.launch("plain.launch", [&] { source.api_call("vendor_copy_kernel"); });
  EXPECT_EQ(current_launch(), nullptr);
  source.api_call("kernel_outside_launches");
  stream.synchronize();
  set_enabled(false);
  const auto records = collect();

  std::map<std::string, const Record*> launches, kernels;
  std::map<std::uint64_t, const Record*> device_spans;  // by flow
  for (const Record& r : records) {
    if (r.kind == Kind::launch) launches[r.name.str()] = &r;
    if (r.kind == Kind::kernel) kernels[r.name.str()] = &r;
    if (r.kind == Kind::device) device_spans[r.flow] = &r;
  }
  ASSERT_EQ(kernels.size(), 5u);
  ASSERT_TRUE(launches.count("cpu.fake.solver") && launches.count("cpu.fake.inner") &&
              launches.count("plain.launch"));
  const Record& outer = *launches["cpu.fake.solver"];
  for (const char* name : {"vendor_gemm_kernel", "vendor_reduce_kernel"}) {
    const Record& k = *kernels[name];
    EXPECT_EQ(k.op, "fake_op") << name;
    EXPECT_EQ(k.solver, "cpu.fake.solver") << name;
    EXPECT_EQ(k.key, "fake-key") << name;
    EXPECT_EQ(k.stream, stream.id()) << name;
    EXPECT_EQ(k.flow, outer.flow) << name;
  }
  EXPECT_EQ(kernels["vendor_inner_kernel"]->flow, launches["cpu.fake.inner"]->flow);
  EXPECT_NE(launches["cpu.fake.inner"]->flow, outer.flow);
  ASSERT_TRUE(device_spans.count(outer.flow)) << "the launch's device span shares the flow its kernels carry";
  EXPECT_EQ(device_spans[outer.flow]->name, "cpu.fake.solver");
  EXPECT_EQ(kernels["vendor_copy_kernel"]->op, "");
  EXPECT_EQ(kernels["vendor_copy_kernel"]->solver, "plain.launch") << "outside an op: the launch's name";
  EXPECT_EQ(kernels["kernel_outside_launches"]->flow, 0u);
  EXPECT_EQ(kernels["kernel_outside_launches"]->solver, "");

  // The Chrome trace: kernels on their stream's activity track, each with a flow from its launch.
  const auto trace = test::check_chrome_trace(chrome_trace_json(records, dropped()));
  std::map<std::pair<int, std::uint64_t>, std::string> thread_names;
  for (const auto& m : test::events_where(trace, "M", "")) {
    if (m["name"] == "thread_name")
      thread_names[{m["pid"].get<int>(), m["tid"].get<std::uint64_t>()}] =
          m["args"]["name"].get<std::string>();
  }
  const auto activity = test::events_where(trace, "X", "activity");
  ASSERT_EQ(activity.size(), 5u);
  std::map<std::uint64_t, std::pair<int, std::uint64_t>> flow_starts, flow_finishes;  // id -> (pid, tid)
  for (const auto& e : trace["traceEvents"]) {
    const std::string ph = e.value("ph", "");
    if (ph != "s" && ph != "f") continue;
    (ph == "s" ? flow_starts : flow_finishes)[e["id"].get<std::uint64_t>()] = {e["pid"].get<int>(),
                                                                               e["tid"].get<std::uint64_t>()};
  }
  int with_flow = 0;
  for (const auto& e : activity) {
    const std::string name = e["name"].get<std::string>();
    const std::pair<int, std::uint64_t> track{e["pid"].get<int>(), e["tid"].get<std::uint64_t>()};
    EXPECT_NE(track.first, 0) << name << " is on a device, not the host";
    EXPECT_EQ(e["args"]["source"], "fake") << name;
    if (name == "kernel_outside_launches") {
      EXPECT_EQ(thread_names[track], "kernels outside Galley launches (fake)");
      continue;
    }
    EXPECT_EQ(thread_names[track], "stream " + std::to_string(stream.id()) + " kernels (fake)") << name;
    EXPECT_EQ(e["args"]["stream"], stream.id()) << name;
  }
  for (const auto& [id, at] : flow_finishes) {
    if (!thread_names[at].ends_with("kernels (fake)")) continue;
    ++with_flow;
    ASSERT_TRUE(flow_starts.count(id)) << "flow " << id;
    EXPECT_EQ(flow_starts[id].first, 0) << "the flow to a kernel starts on the host";
  }
  EXPECT_EQ(with_flow, 4) << "one flow per kernel made inside a launch";
  EXPECT_EQ(flow_starts.size(), flow_finishes.size());

  // The summary lists the kernels under their op and counts them in no sum.
  const TraceSummary with = summarize_trace(chrome_trace_json(records, dropped()));
  std::vector<Record> without_kernels;
  for (const Record& r : records)
    if (r.kind != Kind::kernel) without_kernels.push_back(r);
  const TraceSummary without = summarize_trace(chrome_trace_json(without_kernels, dropped()));
  EXPECT_DOUBLE_EQ(with.device_us, without.device_us);
  ASSERT_EQ(with.streams.size(), without.streams.size());
  for (std::size_t i = 0; i < with.streams.size(); ++i)
    EXPECT_DOUBLE_EQ(with.streams[i].kernel_us, without.streams[i].kernel_us);
  const OpSummary* op_row = nullptr;
  const OpSummary* plain_row = nullptr;
  for (const OpSummary& row : with.ops) {
    if (row.op == "fake_op" && row.solver == "cpu.fake.solver") op_row = &row;
    if (row.op == "-" && row.solver == "plain.launch") plain_row = &row;
  }
  ASSERT_NE(op_row, nullptr) << format_summary(with);
  ASSERT_NE(plain_row, nullptr) << format_summary(with);
  std::set<std::string> op_kernels;
  for (const KernelSummary& k : op_row->kernels) {
    op_kernels.insert(k.name);
    EXPECT_EQ(k.calls, 1u);
    EXPECT_NEAR(k.device_us, 2.0, 1e-3);
  }
  // The nested launch runs inside the same op, so its kernel is the op's too.
  EXPECT_EQ(op_kernels,
            (std::set<std::string>{"vendor_gemm_kernel", "vendor_inner_kernel", "vendor_reduce_kernel"}));
  ASSERT_EQ(plain_row->kernels.size(), 1u);
  EXPECT_EQ(plain_row->kernels[0].name, "vendor_copy_kernel");
  ASSERT_EQ(with.other_kernels.size(), 1u);
  EXPECT_EQ(with.other_kernels[0].name, "kernel_outside_launches");
  const std::string text = format_summary(with);
  EXPECT_NE(text.find("kernel vendor_gemm_kernel"), std::string::npos) << text;
  EXPECT_NE(text.find("kernels outside Galley launches:"), std::string::npos) << text;
}

TEST_F(ActivitySources, ACapturedLaunchIsCurrentWithoutAFlow) {
  runtime::Stream stream(runtime::device("cpu"));
  set_enabled(true);
  std::uint64_t flow = 1;
  bool seen = false;
  stream.begin_capture();
  stream.launch("test.captured", [&] {
    seen = current_launch() != nullptr;
    if (seen) flow = current_launch()->flow;
  });
  auto graph = stream.end_capture();
  set_enabled(false);
  EXPECT_TRUE(seen);
  EXPECT_EQ(flow, 0u) << "captured work runs at replay: no device span, no flow for kernels to join";
}

TEST_F(ActivitySources, AnUnavailableSourceIsANoteAndTracingGoesOn) {
  FakeSource& source = fake();
  source.unavailable = "libfake.so not found";
  runtime::Stream stream(runtime::device("cpu"));
  set_enabled(true);
  std::vector<char> a(64, 1), b(64);
  stream.copy_h2h(b.data(), a.data(), a.size());
  stream.synchronize();
  set_enabled(false);
  const auto records = collect();
  EXPECT_EQ(source.flushes, 0) << "a source that did not start is never flushed";
  EXPECT_EQ(source.stops, 0) << "nor stopped";
  EXPECT_TRUE(has_note("fake unavailable: libfake.so not found"));
  EXPECT_TRUE(
      std::any_of(records.begin(), records.end(), [](const Record& r) { return r.kind == Kind::device; }));

  const std::string json = chrome_trace_json(records, dropped(), notes());
  const auto trace = test::check_chrome_trace(json);
  EXPECT_EQ(fake_notes(trace["otherData"]["notes"].get<std::vector<std::string>>()),
            std::vector<std::string>{"fake unavailable: libfake.so not found"});
  const TraceSummary summary = summarize_trace(json);
  EXPECT_EQ(fake_notes(summary.notes), std::vector<std::string>{"fake unavailable: libfake.so not found"});
  EXPECT_NE(format_summary(summary).find("note: fake unavailable: libfake.so not found"), std::string::npos);

  // Again on: the same note is not repeated; clear() forgets it.
  set_enabled(true);
  set_enabled(false);
  EXPECT_EQ(fake_notes().size(), 1u);
  clear();
  EXPECT_TRUE(notes().empty());
}

TEST_F(ActivitySources, ASourceThatThrowsIsANoteNotAFailure) {
  FakeSource& source = fake();
  source.throw_on_start = "driver too old";
  set_enabled(true);
  const auto start_notes = fake_notes();
  ASSERT_EQ(start_notes.size(), 1u);
  EXPECT_TRUE(start_notes[0].starts_with("fake unavailable: ")) << start_notes[0];
  EXPECT_NE(start_notes[0].find("driver too old"), std::string::npos) << start_notes[0];
  set_enabled(false);
  EXPECT_EQ(source.stops, 0);

  source.reset();
  clear();
  source.throw_on_flush = "buffer corrupt";
  runtime::Stream stream(runtime::device("cpu"));
  set_enabled(true);
  stream.launch("test.launch", [&] { source.api_call("lost_kernel"); });
  stream.synchronize();
  const auto records = collect();  // the flush throws inside: the source is stopped, tracing is not
  EXPECT_TRUE(enabled());
  EXPECT_EQ(source.stops, 1);
  EXPECT_TRUE(
      std::any_of(records.begin(), records.end(), [](const Record& r) { return r.kind == Kind::launch; }));
  const auto all = fake_notes();
  ASSERT_FALSE(all.empty());
  EXPECT_TRUE(all[0].starts_with("fake: flushing failed, the source was stopped: ")) << all[0];
  EXPECT_NE(all[0].find("buffer corrupt"), std::string::npos) << all[0];
  (void)collect();
  EXPECT_EQ(source.flushes, 2) << "the failed flush and the one inside stop(); none after";
  set_enabled(false);
  EXPECT_EQ(source.stops, 1) << "a stopped source is not stopped again";
}

TEST_F(ActivitySources, KernelsOverlappingOnOneStreamTakeFurtherLanesAndAFlowNeedsItsLaunch) {
  std::vector<Record> records;
  auto kernel = [](std::int64_t start, std::int64_t dur, std::uint64_t flow) {
    Record r;
    r.kind = Kind::kernel;
    r.name = Text::interned("k" + std::to_string(start));
    r.device = "cuda:0";
    r.stream = 3;
    r.flow = flow;
    r.source = "CUPTI";
    r.start_ns = start;
    r.dur_ns = dur;
    return r;
  };
  // A programmatic dependent launch: the second kernel starts before the first ends.
  records.push_back(kernel(1000, 5000, 0));
  records.push_back(kernel(4000, 5000, 0));
  records.push_back(kernel(9500, 1000, 0));
  records.push_back(kernel(12000, 1000, 77));  // its launch was dropped: no flow
  const auto trace = test::check_chrome_trace(chrome_trace_json(records, 0));
  const auto spans = test::events_where(trace, "X", "activity");
  ASSERT_EQ(spans.size(), 4u);
  EXPECT_NE(spans[0]["tid"], spans[1]["tid"]);
  EXPECT_EQ(spans[0]["tid"], spans[2]["tid"]) << "the first lane is reused once free";
  EXPECT_TRUE(test::events_where(trace, "s", "").empty());
  EXPECT_TRUE(test::events_where(trace, "f", "").empty());
  std::set<std::string> names;
  for (const auto& m : test::events_where(trace, "M", ""))
    if (m["name"] == "thread_name") names.insert(m["args"]["name"].get<std::string>());
  EXPECT_TRUE(names.count("stream 3 kernels (CUPTI)"));
  EXPECT_TRUE(names.count("stream 3 kernels (CUPTI, overlapping 1)"));
}

// GALLEY_PROFILE_DEVICE_TIMES=host: the trace keeps the host's spans (ops, launches) and nothing of
// the device: no source starts, no device span is timed, and a launch points at no device span.
TEST_F(ActivitySources, HostSpansOnlyStartNoSourceAndTimeNoDeviceSpan) {
  FakeSource& source = fake();
  runtime::Stream stream(runtime::device("cpu"));
  auto traced_run = [&] {
    clear();
    set_enabled(true);
    {
      OpScope op([&] { return OpInfo{"fake_op", "cpu", stream.id(), "fake-key"}; });
      op.set_solver("cpu.fake.solver");
      stream.launch("cpu.fake.solver", [&] { source.api_call("vendor_gemm_kernel"); });
    }
    stream.synchronize();
    set_enabled(false);
    return collect();
  };
  auto count = [](const std::vector<Record>& records, Kind kind) {
    return std::count_if(records.begin(), records.end(), [&](const Record& r) { return r.kind == kind; });
  };

  std::vector<Record> host_only;
  {
    const testing::ScopedEnv mode("GALLEY_PROFILE_DEVICE_TIMES", "host");
    host_only = traced_run();
    EXPECT_EQ(source.starts, 0) << "no activity source starts for host spans only";
  }
  EXPECT_EQ(count(host_only, Kind::op), 1);
  ASSERT_EQ(count(host_only, Kind::launch), 1);
  EXPECT_EQ(count(host_only, Kind::device), 0);
  EXPECT_EQ(count(host_only, Kind::kernel), 0);
  for (const Record& r : host_only) {
    if (r.kind == Kind::launch) EXPECT_EQ(r.flow, 0u) << "a launch without a device span has no flow";
  }

  // The default again: the same run has its device span and the source's kernel.
  source.reset();
  const std::vector<Record> with_device = traced_run();
  EXPECT_EQ(source.starts, 1);
  EXPECT_EQ(count(with_device, Kind::device), 1);
  EXPECT_EQ(count(with_device, Kind::kernel), 1);
}

}  // namespace
}  // namespace galley::profile
