// A replayed graph in a trace: each replay is a device span on its stream's track, linked to its
// host launch, and the summary's phases split a captured run into its eager part and its replays
// with sums equal to the trace's.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/run_command.hpp"
#include "galley/core/error.hpp"
#include "galley/runtime/device.hpp"
#include "galley/runtime/stream.hpp"
#include "profile/chrome_trace.hpp"
#include "profile/summary.hpp"
#include "profile/tracer.hpp"
#include "trace_check.hpp"

namespace galley::profile {
namespace {

constexpr int kReplays = 4;
constexpr int kCapturedLaunches = 3;

void busy(std::chrono::microseconds time) {
  const auto until = std::chrono::steady_clock::now() + time;
  while (std::chrono::steady_clock::now() < until) {
  }
}

class GraphReplayTrace : public ::testing::Test {
 protected:
  void SetUp() override {
    set_enabled(false);
    clear();
  }
  void TearDown() override {
    set_enabled(false);
    clear();
  }

  // One eager launch, then a capture of kCapturedLaunches launches replayed kReplays times with a
  // host pause between replays, all traced; returns the records.
  std::vector<Record> trace_captured_run(runtime::Stream& stream) {
    set_enabled(true);
    stream.launch("eager", [&] { stream.host_task([] { busy(std::chrono::microseconds(500)); }); });
    stream.synchronize();
    stream.begin_capture();
    for (int i = 0; i < kCapturedLaunches; ++i)
      stream.launch("captured", [&] { stream.host_task([] { busy(std::chrono::microseconds(300)); }); });
    runtime::Graph graph = stream.end_capture();
    for (int i = 0; i < kReplays; ++i) {
      graph.replay(stream);
      stream.synchronize();
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    set_enabled(false);
    return collect();
  }
};

TEST_F(GraphReplayTrace, EachReplayIsADeviceSpanOnItsStreamWithItsLaunch) {
  runtime::Stream stream(runtime::device("cpu"));
  const auto records = trace_captured_run(stream);
  const std::string name = graph_replay_name(kCapturedLaunches).str();
  EXPECT_EQ(name, "graph replay (3 nodes)");
  std::vector<const Record*> spans, launches;
  for (const Record& r : records) {
    if (r.name != name) continue;
    (r.kind == Kind::device ? spans : launches).push_back(&r);
  }
  ASSERT_EQ(spans.size(), static_cast<std::size_t>(kReplays));
  ASSERT_EQ(launches.size(), static_cast<std::size_t>(kReplays));
  for (int i = 0; i < kReplays; ++i) {
    EXPECT_EQ(spans[i]->stream, stream.id());
    EXPECT_EQ(spans[i]->device, "cpu");
    // The replay runs three 300 us tasks: its span holds them.
    EXPECT_GE(spans[i]->dur_ns, 3 * 300'000 * 9 / 10) << i;
    EXPECT_NE(spans[i]->flow, 0u);
    EXPECT_EQ(spans[i]->flow, launches[i]->flow);
  }
  // The captured launches themselves have host spans only: their work runs in the replays.
  for (const Record& r : records) {
    if (r.name == "captured") EXPECT_EQ(r.kind, Kind::launch);
  }

  const auto json = test::check_chrome_trace(chrome_trace_json(records, dropped()));
  int on_track = 0;
  for (const auto& e : test::events_where(json, "X", "kernel")) {
    if (e["name"] != name) continue;
    EXPECT_EQ(e["tid"].get<std::uint64_t>(), stream.id()) << e.dump();
    EXPECT_NE(e["pid"].get<int>(), 0) << e.dump();
    EXPECT_GT(e["dur"].get<double>(), 0) << e.dump();
    ++on_track;
  }
  EXPECT_EQ(on_track, kReplays);
}

// The device spans starting inside [from, to) of the trace's stream tracks, summed.
double device_us_between(const nlohmann::json& trace, double from, double to) {
  double sum = 0;
  for (const auto& e : test::events_where(trace, "X", "")) {
    if (e["pid"].get<int>() == 0 || e.value("cat", "") == "activity") continue;
    const double ts = e["ts"].get<double>();
    if (ts >= from && ts < to) sum += e["dur"].get<double>();
  }
  return sum;
}

TEST_F(GraphReplayTrace, PhasesSplitTheSummaryAtTheFirstReplayWithTheTracesSums) {
  runtime::Stream stream(runtime::device("cpu"));
  const auto records = trace_captured_run(stream);
  const std::string text = chrome_trace_json(records, dropped());
  const nlohmann::json json = nlohmann::json::parse(text);

  const TraceSummary replays = summarize_trace(text, SummaryPhase::replays);
  EXPECT_EQ(replays.replays, static_cast<std::uint64_t>(kReplays));
  ASSERT_EQ(replays.streams.size(), 1u) << format_summary(replays);
  const StreamSummary& st = replays.streams.front();
  EXPECT_EQ(st.stream, stream.id());
  EXPECT_EQ(st.spans, static_cast<std::uint64_t>(kReplays)) << format_summary(replays);
  const double in_trace = device_us_between(json, replays.window_from_us, replays.window_to_us);
  EXPECT_NEAR(st.kernel_us, in_trace, 0.01 * in_trace);
  EXPECT_NEAR(st.total_us, replays.window_to_us - replays.window_from_us,
              0.01 * (replays.window_to_us - replays.window_from_us));
  EXPECT_NEAR(st.gap_us + st.kernel_us, st.total_us, 1e-6 * st.total_us);
  // The host pauses between replays are the gaps.
  EXPECT_GT(st.gap_share, 0.0);
  EXPECT_LT(st.gap_share, 1.0);
  const auto row = std::find_if(replays.ops.begin(), replays.ops.end(), [](const OpSummary& o) {
    return o.solver == graph_replay_name(kCapturedLaunches);
  });
  ASSERT_NE(row, replays.ops.end()) << format_summary(replays);
  EXPECT_EQ(row->calls, static_cast<std::uint64_t>(kReplays));
  EXPECT_NE(format_summary(replays).find("phase replays"), std::string::npos);

  const TraceSummary before = summarize_trace(text, SummaryPhase::before_replays);
  ASSERT_EQ(before.streams.size(), 1u) << format_summary(before);
  EXPECT_EQ(before.streams.front().spans, 1u) << format_summary(before);  // the eager launch
  EXPECT_NEAR(before.streams.front().kernel_us, device_us_between(json, -1, before.window_to_us),
              0.01 * before.streams.front().kernel_us);

  const TraceSummary all = summarize_trace(text);
  EXPECT_NEAR(all.device_us, before.device_us + replays.device_us, 0.01 * all.device_us);
  EXPECT_NE(format_summary(all).find("--phase replays"), std::string::npos) << format_summary(all);
}

TEST(TraceSummaryPhase, APhaseOfATraceWithoutReplaysOrAnUnknownPhaseIsANamedError) {
  const nlohmann::json trace = {{"traceEvents",
                                 {{{"ph", "X"},
                                   {"name", "k"},
                                   {"cat", "kernel"},
                                   {"pid", 1},
                                   {"tid", 1},
                                   {"ts", 0},
                                   {"dur", 1},
                                   {"args", {{"device", "cpu"}, {"stream", 1}}}}}}};
  EXPECT_EQ(summarize_trace(trace.dump()).streams.size(), 1u);
  try {
    (void)summarize_trace(trace.dump(), SummaryPhase::replays);
    ADD_FAILURE() << "a trace without replays summarised by its replays";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("no graph replay"), std::string::npos) << e.what();
  }
  try {
    (void)parse_summary_phase("warmup");
    ADD_FAILURE() << "phase 'warmup' accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'warmup'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("before-replays"), std::string::npos) << e.what();
  }
  EXPECT_EQ(parse_summary_phase("replays"), SummaryPhase::replays);
}

TEST(TraceSummaryPhase, HandMadeTraceGivesExactSumsPerPhase) {
  auto span = [](const char* name, double ts, double dur) {
    return nlohmann::json{
        {"ph", "X"}, {"name", name}, {"cat", "kernel"}, {"pid", 1},
        {"tid", 2},  {"ts", ts},     {"dur", dur},      {"args", {{"device", "cpu"}, {"stream", 2}}}};
  };
  nlohmann::json events = nlohmann::json::array();
  events.push_back(span("eager", 0, 10));  // warm-up: busy 10 of 100
  events.push_back(span("eager", 90, 10));
  events.push_back(span("graph replay (7 nodes)", 200, 30));  // replays: busy 60 of 100
  events.push_back(span("copy_d2d", 240, 0));                 // between the replays
  events.push_back(span("graph replay (7 nodes)", 270, 30));
  events.push_back(span("copy_d2d", 300, 5));  // starts at the last replay's end: outside
  const std::string text = nlohmann::json{{"traceEvents", events}}.dump();

  const TraceSummary r = summarize_trace(text, SummaryPhase::replays);
  ASSERT_EQ(r.streams.size(), 1u);
  EXPECT_DOUBLE_EQ(r.window_from_us, 200);
  EXPECT_DOUBLE_EQ(r.window_to_us, 300);
  EXPECT_DOUBLE_EQ(r.streams[0].total_us, 100);
  EXPECT_DOUBLE_EQ(r.streams[0].kernel_us, 60);
  EXPECT_DOUBLE_EQ(r.streams[0].gap_share, 0.4);
  EXPECT_EQ(r.streams[0].spans, 3u);

  const TraceSummary b = summarize_trace(text, SummaryPhase::before_replays);
  ASSERT_EQ(b.streams.size(), 1u);
  EXPECT_DOUBLE_EQ(b.streams[0].total_us, 100);
  EXPECT_DOUBLE_EQ(b.streams[0].kernel_us, 20);
  EXPECT_DOUBLE_EQ(b.streams[0].gap_share, 0.8);
}

std::string read(const std::filesystem::path& path) {
  std::ifstream file(path);
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

// `galley run --graph` traced by `galley prof`: one replay span per replayed iteration, and the
// replays' summary on its own.
TEST(GalleyProfGraph, ARunWithGraphReplaysSummarisesItsReplays) {
  const auto trace = std::filesystem::temp_directory_path() /
                     ("galley-graph-replay-trace-" + std::to_string(::getpid()) + ".json");
  const std::string galley = std::string(GALLEY_TEST_BIN_DIR) + "/galley";
  const auto result = testing::run_command(galley + " prof --out " + trace.string() +
                                           " --phase replays -- run --model tiny_cnn --size 32 --device cpu "
                                           "--graph --warmup 1 --iters 3 2>&1");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("phase replays"), std::string::npos) << result.output;
  const auto json = test::check_chrome_trace(read(trace));
  std::filesystem::remove(trace);
  int replays = 0;
  for (const auto& e : test::events_where(json, "X", "kernel")) {
    if (!is_graph_replay(e["name"].get<std::string>())) continue;
    EXPECT_GT(e["dur"].get<double>(), 0) << e.dump();
    EXPECT_EQ(e["tid"].get<std::uint64_t>(), e["args"]["stream"].get<std::uint64_t>()) << e.dump();
    ++replays;
  }
  // The first of the 1 + 3 iterations runs eagerly; the other three replay.
  EXPECT_EQ(replays, 3) << result.output;
}

}  // namespace
}  // namespace galley::profile
