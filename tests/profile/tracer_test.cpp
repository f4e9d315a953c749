// The tracer: off by default, what a small cpu convolution records, the Chrome trace it gives,
// concurrent streams, the bounded buffer.
#include "profile/tracer.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/scoped_env.hpp"
#include "dnn/tensor_data.hpp"
#include "galley/core/error.hpp"
#include "galley/dnn/conv_problem.hpp"
#include "galley/dnn/convolution.hpp"
#include "galley/memory/buffer.hpp"
#include "galley/runtime/device.hpp"
#include "galley/runtime/stream.hpp"
#include "profile/chrome_trace.hpp"
#include "trace_check.hpp"

namespace galley::profile {
namespace {

// Every test leaves the tracer off and empty, as a process starts.
class Tracer : public ::testing::Test {
 protected:
  void SetUp() override { clear(); }
  void TearDown() override {
    set_enabled(false);
    set_capacity(kDefaultCapacity);
    clear();
  }
};

constexpr const char* kKey = "conv-F-f32-nchw-n1-c8-h12-w12-k8-y3-x3-p1-q1-u1-v1-l1-j1-g1";

// A record's text outlives what it was read from, is one copy per distinct text, and a place that
// later holds other characters gives the other text, never the remembered one.
TEST(RecordText, InternedTextIsOneLastingCopyPerText) {
  std::string source = "cuda.conv.some_long_solver_name";
  const Text first = Text::interned(source);
  const Text again = Text::interned(source);
  EXPECT_EQ(first.data(), again.data());
  EXPECT_NE(first.data(), source.data());
  const std::string elsewhere = source;
  EXPECT_EQ(Text::interned(elsewhere).data(), first.data());

  // Same address and length, other characters: the memo must not answer with the old text.
  source[0] = 'h';
  const Text changed = Text::interned(source);
  EXPECT_EQ(changed, "huda.conv.some_long_solver_name");
  EXPECT_EQ(first, "cuda.conv.some_long_solver_name");
  source.assign(1000, 'x');  // the old characters are gone; the texts still read
  EXPECT_EQ(first.size(), 31u);
  EXPECT_TRUE(changed.starts_with("huda."));

  EXPECT_TRUE(Text::interned("").empty());
  const Text literal = "memset";
  EXPECT_EQ(literal, std::string_view("memset"));
  EXPECT_EQ(Text::interned(std::string("memset")), literal);
}

// One picked forward convolution and one copy in, as a user's program runs them.
void run_small_conv(runtime::Stream& stream) {
  const dnn::ConvProblem p = dnn::ConvProblem::parse_key(kKey);
  auto x = dnn::random_tensor(p.dtype, p.x_desc().elements(), 1);
  auto w = dnn::random_tensor(p.dtype, p.w_desc().elements(), 2);
  auto device_x = memory::allocate(stream, x.size());
  stream.copy_h2d(device_x.data(), x.data(), x.size());
  std::vector<std::byte> y(p.y_desc().bytes());
  dnn::convolution_forward(stream, p, device_x.data(), w.data(), y.data());
  stream.synchronize();
}

TEST_F(Tracer, IsOffByDefaultAndRecordsNothing) {
  ASSERT_FALSE(enabled()) << "GALLEY_PROFILE is unset in the test environment";
  testing::ScopedEnv mode("GALLEY_FIND_MODE", "off");
  runtime::Stream stream(runtime::device("cpu"));
  run_small_conv(stream);
  EXPECT_TRUE(collect().empty());
  EXPECT_EQ(dropped(), 0u);
}

TEST_F(Tracer, ASmallCpuConvolutionGivesAValidTraceWithEveryKindOfEvent) {
  testing::ScopedEnv mode("GALLEY_FIND_MODE", "off");
  runtime::Stream stream(runtime::device("cpu"));
  set_enabled(true);
  run_small_conv(stream);
  set_enabled(false);
  const auto records = collect();
  ASSERT_FALSE(records.empty());
  const auto trace = test::check_chrome_trace(chrome_trace_json(records, dropped()));

  const auto ops = test::events_where(trace, "X", "op");
  ASSERT_EQ(ops.size(), 1u) << trace.dump(1);
  const auto& op = ops.front();
  EXPECT_EQ(op["pid"], 0);
  EXPECT_EQ(op["args"]["key"], kKey);
  EXPECT_EQ(op["args"]["device"], "cpu");
  EXPECT_EQ(op["args"]["stream"], stream.id());
  const std::string solver = op["args"]["solver"];
  EXPECT_TRUE(solver.starts_with("cpu.conv.")) << solver;

  const auto tunes = test::events_where(trace, "X", "tune");
  ASSERT_EQ(tunes.size(), 1u);
  // A first pick goes by list order (GALLEY_FIND_MODE=off); a later one in this process by its cache.
  const std::string source = tunes.front()["args"]["source"];
  EXPECT_TRUE(source == "list order" || source == "cache") << source;
  EXPECT_EQ(tunes.front()["args"]["hit"], false);
  EXPECT_EQ(tunes.front()["args"]["solver"], solver);

  // The device spans: the copy and the solver's work, on the cpu's pid and the stream's tid, each
  // reached by a flow from its launch and starting no earlier than the launch did.
  const auto kernels = test::events_where(trace, "X", "kernel");
  const auto copies = test::events_where(trace, "X", "copy");
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies.front()["name"], "copy_h2d");
  EXPECT_EQ(copies.front()["args"]["bytes"], dnn::ConvProblem::parse_key(kKey).x_desc().bytes());
  ASSERT_FALSE(kernels.empty());
  for (const auto& k : kernels) {
    EXPECT_GE(k["pid"].get<int>(), 1);
    EXPECT_EQ(k["tid"], stream.id());
    EXPECT_EQ(k["args"]["op"], op["name"]);
    EXPECT_EQ(k["args"]["solver"], solver);
    EXPECT_GE(k["ts"].get<double>(), op["ts"].get<double>());
  }
  const auto launches = test::events_where(trace, "X", "launch");
  EXPECT_EQ(launches.size(), kernels.size() + copies.size());
  for (const auto& l : launches) EXPECT_EQ(l["pid"], 0);
  EXPECT_EQ(test::events_where(trace, "s", "flow").size(), launches.size());

  // Device time is real time: the spans lie inside the run, their sum within the host's wall time.
  double device_us = 0;
  for (const auto& k : kernels) device_us += k["dur"].get<double>();
  EXPECT_GT(device_us, 0);

  // Allocations: instants on the host and the cpu's memory counter.
  EXPECT_FALSE(test::events_where(trace, "i", "memory").empty());
  const auto counters = test::events_where(trace, "C", "memory");
  ASSERT_FALSE(counters.empty());
  EXPECT_GT(counters.front()["args"]["allocated"].get<std::int64_t>(), 0);

  // Names for the rows.
  bool host_named = false, device_named = false;
  for (const auto& m : test::events_where(trace, "M", "")) {
    if (m["name"] == "process_name" && m["args"]["name"] == "host") host_named = true;
    if (m["name"] == "process_name" && m["args"]["name"] == "device cpu") device_named = true;
  }
  EXPECT_TRUE(host_named && device_named);
}

TEST_F(Tracer, ConcurrentStreamsOnSeveralThreadsLoseNothingAndKeepTheirTracks) {
  constexpr int kThreads = 6;
  constexpr int kLaunches = 200;
  set_enabled(true);
  std::vector<std::uint64_t> ids(kThreads);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      try {
        runtime::Stream stream(runtime::device("cpu"));
        ids[t] = stream.id();
        std::vector<char> a(4096, 1), b(4096);
        for (int i = 0; i < kLaunches; ++i) {
          if (i % 2 == 0) {
            stream.copy_h2h(b.data(), a.data(), a.size());
          } else {
            stream.launch("test.spin", [&] { stream.host_task([] {}); });
          }
        }
        stream.synchronize();
      } catch (...) {
        ++failures;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  set_enabled(false);
  ASSERT_EQ(failures, 0);
  const auto records = collect();
  EXPECT_EQ(dropped(), 0u);
  std::map<std::uint64_t, int> launches, device;
  std::map<std::uint32_t, std::set<std::uint64_t>> streams_of_thread;
  for (const Record& r : records) {
    if (r.kind == Kind::launch) {
      ++launches[r.stream];
      streams_of_thread[r.thread].insert(r.stream);
    }
    if (r.kind == Kind::device) ++device[r.stream];
  }
  for (std::uint64_t id : ids) {
    EXPECT_EQ(launches[id], kLaunches) << "stream " << id;
    EXPECT_EQ(device[id], kLaunches) << "stream " << id;
  }
  // Each thread's records carry its own thread index: one stream per host thread.
  for (const auto& [thread, streams] : streams_of_thread)
    EXPECT_EQ(streams.size(), 1u) << "thread " << thread;
  test::check_chrome_trace(chrome_trace_json(records, dropped()));
}

TEST_F(Tracer, AFullTracerCountsItsDropsAndKeepsWorking) {
  set_capacity(100);
  set_enabled(true);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([] {
      for (int i = 0; i < 250; ++i) {
        Record r;
        r.kind = Kind::alloc;
        r.start_ns = now_ns();
        r.device = "cpu";
        r.bytes = 64;
        record(std::move(r));
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(collect().size(), 100u);
  EXPECT_EQ(dropped(), 900u);
  const auto trace = test::check_chrome_trace(chrome_trace_json(collect(), dropped()));
  EXPECT_EQ(trace["otherData"]["dropped_records"], 900);
  // A full tracer costs the program nothing but the records: streams and ops still run.
  runtime::Stream stream(runtime::device("cpu"));
  std::vector<char> a(64, 1), b(64);
  stream.copy_h2h(b.data(), a.data(), a.size());
  stream.synchronize();
  EXPECT_EQ(b[0], 1);
  EXPECT_GT(dropped(), 900u);
  clear();
  EXPECT_TRUE(collect().empty());
  EXPECT_EQ(dropped(), 0u);
}

TEST_F(Tracer, ACapturedLaunchHasAHostSpanOnlyAndItsReplayADeviceSpan) {
  runtime::Stream stream(runtime::device("cpu"));
  set_enabled(true);
  std::vector<char> a(64, 1), b(64);
  stream.begin_capture();
  stream.copy_h2h(b.data(), a.data(), a.size());
  auto graph = stream.end_capture();
  graph.replay(stream);
  stream.synchronize();
  set_enabled(false);
  int copy_launches = 0, copy_spans = 0, replay_launches = 0, replay_spans = 0;
  for (const Record& r : collect()) {
    copy_launches += r.kind == Kind::launch && r.name == "copy_h2h";
    copy_spans += r.kind == Kind::device && r.name == "copy_h2h";
    replay_launches += r.kind == Kind::launch && r.name == graph_replay_name(1);
    replay_spans += r.kind == Kind::device && r.name == graph_replay_name(1);
  }
  EXPECT_EQ(copy_launches, 1);
  EXPECT_EQ(copy_spans, 0) << "captured work runs at replay, inside the replay's span";
  EXPECT_EQ(replay_launches, 1);
  EXPECT_EQ(replay_spans, 1);
  EXPECT_EQ(b[0], 1);
}

TEST_F(Tracer, ALaunchThatThrowsLeavesNoPendingSpanBehind) {
  runtime::Stream stream(runtime::device("cpu"));
  set_enabled(true);
  EXPECT_THROW(stream.launch("test.fails", [] { throw Error(Status::internal, "enqueue failed"); }), Error);
  std::vector<char> a(64, 1), b(64);
  stream.copy_h2h(b.data(), a.data(), a.size());
  stream.synchronize();
  set_enabled(false);
  int device = 0;
  for (const Record& r : collect()) {
    EXPECT_NE(r.name, "test.fails");
    device += r.kind == Kind::device;
  }
  EXPECT_EQ(device, 1) << "the copy after the failed launch still gets its device span";
}

}  // namespace
}  // namespace galley::profile
