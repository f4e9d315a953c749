// The trace summary: exact sums on a hand-made trace, agreement with a real trace within 1%, and
// a named error for what is not a trace.
#include "profile/summary.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "galley/core/error.hpp"
#include "galley/runtime/device.hpp"
#include "galley/runtime/stream.hpp"
#include "profile/chrome_trace.hpp"
#include "profile/tracer.hpp"

namespace galley::profile {
namespace {

nlohmann::json span(const char* name, const char* cat, int pid, int tid, double ts, double dur,
                    nlohmann::json args) {
  return {{"ph", "X"},  {"name", name}, {"cat", cat}, {"pid", pid},
          {"tid", tid}, {"ts", ts},     {"dur", dur}, {"args", std::move(args)}};
}

TEST(TraceSummary, HandMadeTraceGivesExactSumsAndGaps) {
  nlohmann::json events = nlohmann::json::array();
  const nlohmann::json conv = {{"device", "cpu"}, {"stream", 7}, {"op", "conv_fwd"}, {"solver", "cpu.a"}};
  // Host: two op spans of conv_fwd with cpu.a, one launch span during the first gap.
  events.push_back(span("conv_fwd", "op", 0, 1, 0, 5, {{"solver", "cpu.a"}}));
  events.push_back(span("conv_fwd", "op", 0, 1, 40, 5, {{"solver", "cpu.a"}}));
  events.push_back(span("cpu.a", "launch", 0, 1, 41, 2, conv));
  // Device stream 7: 10 + 20 busy with a nested copy that must not count twice, gaps of 15 and 5.
  events.push_back(span("cpu.a", "kernel", 1, 7, 10, 10, conv));
  events.push_back(span("copy_d2d", "copy", 1, 7, 12, 3, {{"device", "cpu"}, {"stream", 7}}));
  events.push_back(span("cpu.a", "kernel", 1, 7, 35, 20, conv));
  events.push_back(span("copy_h2d", "copy", 1, 7, 60, 4, {{"device", "cpu"}, {"stream", 7}}));
  const nlohmann::json trace = {{"traceEvents", events}, {"otherData", {{"dropped_records", 3}}}};

  const TraceSummary s = summarize_trace(trace.dump());
  ASSERT_EQ(s.streams.size(), 1u);
  const StreamSummary& st = s.streams.front();
  EXPECT_EQ(st.device, "cpu");
  EXPECT_EQ(st.stream, 7u);
  EXPECT_EQ(st.spans, 3u);
  EXPECT_DOUBLE_EQ(st.total_us, 54.0);   // 10 .. 64
  EXPECT_DOUBLE_EQ(st.kernel_us, 34.0);  // 10 + 20 + 4
  EXPECT_DOUBLE_EQ(st.gap_us, 20.0);     // 15 + 5
  EXPECT_DOUBLE_EQ(st.gap_share, 20.0 / 54.0);
  ASSERT_EQ(st.largest_gaps.size(), 2u);
  EXPECT_DOUBLE_EQ(st.largest_gaps[0].dur_us, 15.0);
  EXPECT_DOUBLE_EQ(st.largest_gaps[0].start_us, 20.0);
  EXPECT_EQ(st.largest_gaps[0].host, "idle");
  EXPECT_DOUBLE_EQ(st.largest_gaps[1].dur_us, 5.0);
  EXPECT_EQ(st.largest_gaps[1].host, "idle");
  EXPECT_TRUE(st.hint.empty());
  EXPECT_DOUBLE_EQ(s.device_us, 34.0);
  EXPECT_EQ(s.dropped, 3u);

  ASSERT_EQ(s.ops.size(), 2u);
  EXPECT_EQ(s.ops[0].op, "conv_fwd");
  EXPECT_EQ(s.ops[0].solver, "cpu.a");
  EXPECT_EQ(s.ops[0].calls, 2u);
  EXPECT_DOUBLE_EQ(s.ops[0].device_us, 30.0);
  EXPECT_DOUBLE_EQ(s.ops[0].mean_us, 15.0);
  EXPECT_DOUBLE_EQ(s.ops[0].host_us, 10.0);
  EXPECT_DOUBLE_EQ(s.ops[0].share, 30.0 / 34.0);
  EXPECT_EQ(s.ops[1].op, "-");
  EXPECT_EQ(s.ops[1].solver, "copy_h2d");
  EXPECT_EQ(s.ops[1].calls, 1u);

  const std::string text = format_summary(s);
  EXPECT_NE(text.find("T_total 0.054 ms = sum(T_kernel) 0.034 ms + sum(T_gap) 0.020 ms"), std::string::npos)
      << text;
  EXPECT_NE(text.find("dropped 3 records"), std::string::npos) << text;
}

TEST(TraceSummary, AGapDuringHostWorkNamesIt) {
  nlohmann::json events = nlohmann::json::array();
  events.push_back(span("cpu.a", "kernel", 1, 2, 0, 10, {{"device", "cpu"}, {"stream", 2}}));
  events.push_back(span("cpu.a", "kernel", 1, 2, 110, 10, {{"device", "cpu"}, {"stream", 2}}));
  events.push_back(span("tuner.pick", "tune", 0, 1, 5, 100, nlohmann::json::object()));
  const TraceSummary s = summarize_trace(nlohmann::json{{"traceEvents", events}}.dump());
  ASSERT_EQ(s.streams.size(), 1u);
  ASSERT_EQ(s.streams[0].largest_gaps.size(), 1u);
  EXPECT_EQ(s.streams[0].largest_gaps[0].host, "tune: tuner.pick");
  EXPECT_NE(s.streams[0].hint.find("launch-bound"), std::string::npos);
}

TEST(TraceSummary, SumsEqualTheTraceWithinOnePercent) {
  runtime::Stream a(runtime::device("cpu"));
  runtime::Stream b(runtime::device("cpu"));
  set_enabled(true);
  std::vector<char> src(1 << 20, 3), dst(1 << 20);
  for (int i = 0; i < 50; ++i) {
    a.copy_h2h(dst.data(), src.data(), src.size());
    b.launch("test.sleep",
             [&] { b.host_task([] { std::this_thread::sleep_for(std::chrono::microseconds(200)); }); });
  }
  a.synchronize();
  b.synchronize();
  set_enabled(false);
  const std::string text = chrome_trace_json(collect(), dropped());
  clear();
  const TraceSummary s = summarize_trace(text);

  // The same sums straight from the trace's events.
  const auto trace = nlohmann::json::parse(text);
  std::map<std::uint64_t, double> busy, first, last;
  double all = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] != "X" || e["pid"] == 0) continue;
    const auto stream = e["tid"].get<std::uint64_t>();
    const double ts = e["ts"], dur = e["dur"];
    busy[stream] += dur;
    all += dur;
    first[stream] = first.count(stream) ? std::min(first[stream], ts) : ts;
    last[stream] = std::max(last[stream], ts + dur);
  }
  ASSERT_EQ(s.streams.size(), 2u);
  for (const StreamSummary& st : s.streams) {
    EXPECT_NEAR(st.kernel_us, busy[st.stream], 0.01 * busy[st.stream]) << "stream " << st.stream;
    EXPECT_NEAR(st.total_us, last[st.stream] - first[st.stream], 0.01 * st.total_us);
    EXPECT_NEAR(st.total_us, st.kernel_us + st.gap_us, 1e-9 * st.total_us);
    EXPECT_EQ(st.spans, 50u);
  }
  double ops_us = 0, share = 0;
  for (const OpSummary& op : s.ops) {
    ops_us += op.device_us;
    share += op.share;
  }
  EXPECT_NEAR(ops_us, all, 0.01 * all);
  EXPECT_NEAR(s.device_us, all, 0.01 * all);
  EXPECT_NEAR(share, 1.0, 0.01);
  // 50 sleeps of >= 200 us each.
  for (const OpSummary& op : s.ops) {
    if (op.solver == "test.sleep") EXPECT_GE(op.device_us, 50 * 200.0 * 0.99);
  }
}

TEST(TraceSummary, WhatIsNotATraceIsANamedError) {
  for (const char* text :
       {"{", "[]", "{\"traceEvents\": 3}", "{\"traceEvents\":[{\"ph\":\"X\",\"pid\":1}]}"}) {
    try {
      summarize_trace(text);
      ADD_FAILURE() << text << " accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), Status::corrupt_data) << text;
      EXPECT_NE(std::string(e.what()).find("not a Galley trace"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace galley::profile
