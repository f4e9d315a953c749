// CUPTI through the cuda plugin: a traced cuDNN convolution and a traced cuBLAS GEMM show the
// vendor libraries' own kernels under their own names, beneath the Galley op and launch that made
// them, inside that launch's event-timed device span, on the stream's CUPTI track of the Chrome
// trace with a flow from the launch, and listed under the op in the summary; with the device spans
// made from CUPTI's kernel records (GALLEY_PROFILE_DEVICE_TIMES=cupti, the default) and from an
// event pair per launch (events). Skips without a CUDA device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/scoped_env.hpp"
#include "dnn/dispatch.hpp"
#include "dnn/op_verify.hpp"
#include "galley/dnn/conv_problem.hpp"
#include "galley/dnn/gemm_problem.hpp"
#include "galley/dnn/solver.hpp"
#include "gpu_test_util.hpp"
#include "profile/chrome_trace.hpp"
#include "profile/summary.hpp"
#include "profile/trace_check.hpp"
#include "profile/tracer.hpp"

namespace galley::profile {
namespace {

// Kernels lie inside their launch's device span up to the two clocks' agreement: the span is
// placed through an anchor event (late by its host thread's wake-up, which passed 60 us with the
// host's cores all busy), CUPTI's times through its own calibration.
constexpr std::int64_t kToleranceNs = 250'000;

// The device-time mode: GALLEY_PROFILE_DEVICE_TIMES.
class CuptiTrace : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    mode_.emplace("GALLEY_PROFILE_DEVICE_TIMES", GetParam());
    std::string why;
    device_ = galley::testing::first_device("cuda", why);
    if (!device_) GTEST_SKIP() << "no CUDA device: " << why;
    set_enabled(false);
    clear();
  }
  void TearDown() override {
    set_enabled(false);
    clear();
    mode_.reset();
  }

  // One untraced run first (cuDNN's algorithm search, cuBLAS's heuristics and handles), then the
  // traced one; tracing stops before collecting, so CUPTI's forced flush hands over every kernel.
  std::vector<Record> trace(const char* op, dnn::ProblemRef problem, const char* solver_name) {
    const dnn::SolverBase* solver = dnn::find_solver("cuda", problem.kind(), solver_name);
    EXPECT_NE(solver, nullptr) << solver_name;
    if (solver == nullptr) return {};
    const dnn::Applicability a = solver->check_any(problem, *device_);
    EXPECT_TRUE(a) << solver_name << ": " << a.reason;
    if (!a) return {};
    runtime::Stream stream(*device_);
    dnn::OpTensors tensors = dnn::make_op_tensors(stream, problem, dnn::default_op_seed(problem));
    dnn::load_op_tensors(stream, tensors);
    dnn::execute(op, stream, problem, tensors.op_args, solver);
    stream.synchronize();
    clear();
    set_enabled(true);
    dnn::execute(op, stream, problem, tensors.op_args, solver);
    stream.synchronize();
    set_enabled(false);
    for (const std::string& note : notes()) ADD_FAILURE() << "trace note: " << note;
    stream_ = stream.id();
    return collect();
  }

  // The checks every vendor op gets; `op` and `solver` name what ran.
  void check_vendor_kernels(const std::vector<Record>& records, const std::string& op,
                            const std::string& solver) {
    std::map<std::uint64_t, const Record*> spans;  // device spans by flow
    std::map<std::uint64_t, const Record*> launches;
    for (const Record& r : records) {
      if (r.kind == Kind::device && r.flow != 0) spans[r.flow] = &r;
      if (r.kind == Kind::launch && r.flow != 0) launches[r.flow] = &r;
    }
    int vendor = 0;
    for (const Record& k : records) {
      if (k.kind != Kind::kernel || k.op != op) continue;
      EXPECT_EQ(k.source, "CUPTI");
      EXPECT_EQ(k.solver, solver) << k.name;
      EXPECT_EQ(k.device, device_->name()) << k.name;
      EXPECT_EQ(k.stream, stream_) << k.name;
      ASSERT_TRUE(launches.count(k.flow)) << k.name << ": no launch with flow " << k.flow;
      EXPECT_EQ(launches[k.flow]->op, op);
      ASSERT_TRUE(spans.count(k.flow)) << k.name << ": no device span with flow " << k.flow;
      const Record& span = *spans[k.flow];
      EXPECT_GE(k.start_ns, span.start_ns - kToleranceNs)
          << k.name << " starts " << (span.start_ns - k.start_ns) / 1000.0 << " us before its launch's span";
      EXPECT_LE(k.start_ns + k.dur_ns, span.start_ns + span.dur_ns + kToleranceNs)
          << k.name << " ends " << (k.start_ns + k.dur_ns - span.start_ns - span.dur_ns) / 1000.0
          << " us after its launch's span";
      // A vendor kernel: its own name, not one of Galley's launch or solver names.
      const bool galley_name = k.name == solver || k.name.starts_with("cuda.") ||
                               k.name.starts_with("gpu.") || k.name.starts_with("copy_") ||
                               k.name == "memset";
      if (!galley_name && !k.name.starts_with("memcpy")) ++vendor;
    }
    EXPECT_GT(vendor, 0) << "no kernel of " << solver << " under " << op;
    // Every launch of the op that ran device work has its one device span, in either mode.
    for (const auto& [flow, launch] : launches) {
      if (launch->op != op || launch->name != solver) continue;
      ASSERT_TRUE(spans.count(flow)) << launch->name << ": no device span with flow " << flow;
      EXPECT_GT(spans[flow]->dur_ns, 0);
      EXPECT_EQ(spans[flow]->stream, stream_);
    }

    // The Chrome trace: the op's kernels on the stream's CUPTI track, each with a flow from the host.
    const auto json = test::check_chrome_trace(chrome_trace_json(records, dropped(), notes()));
    std::map<std::pair<int, std::uint64_t>, std::string> names;
    for (const auto& m : test::events_where(json, "M", ""))
      if (m["name"] == "thread_name")
        names[{m["pid"].get<int>(), m["tid"].get<std::uint64_t>()}] = m["args"]["name"].get<std::string>();
    std::map<std::pair<int, std::uint64_t>, int> finishes;
    for (const auto& f : test::events_where(json, "f", ""))
      ++finishes[{f["pid"].get<int>(), f["tid"].get<std::uint64_t>()}];
    int on_track = 0;
    for (const auto& e : test::events_where(json, "X", "activity")) {
      if (e["args"].value("op", "") != op) continue;
      const std::pair<int, std::uint64_t> track{e["pid"].get<int>(), e["tid"].get<std::uint64_t>()};
      EXPECT_TRUE(names[track].starts_with("stream " + std::to_string(stream_) + " kernels (CUPTI"))
          << names[track];
      EXPECT_EQ(e["args"]["solver"], solver);
      EXPECT_GT(finishes[track], 0) << "no flow reaches " << names[track];
      ++on_track;
    }
    EXPECT_GT(on_track, 0);

    // The summary lists them under the op, and its sums are those of the event-timed spans.
    const TraceSummary summary = summarize_trace(chrome_trace_json(records, dropped()));
    const auto row = std::find_if(summary.ops.begin(), summary.ops.end(),
                                  [&](const OpSummary& s) { return s.op == op && s.solver == solver; });
    ASSERT_NE(row, summary.ops.end()) << format_summary(summary);
    EXPECT_FALSE(row->kernels.empty()) << format_summary(summary);
    std::printf("%s", format_summary(summary).c_str());
  }

  std::optional<galley::testing::ScopedEnv> mode_;
  std::optional<runtime::Device> device_;
  std::uint64_t stream_ = 0;
};

INSTANTIATE_TEST_SUITE_P(DeviceTimes, CuptiTrace, ::testing::Values("cupti", "events"));

TEST_P(CuptiTrace, CudnnConvolutionKernelsAppearUnderTheirOpAndLaunch) {
  dnn::ConvProblem p{.n = 2, .c = 32, .h = 28, .w = 28, .k = 64, .y = 3, .x = 3, .pad_h = 1, .pad_w = 1};
  const auto records = trace("convolution_forward", dnn::ProblemRef::of(p), "cuda.conv.cudnn");
  if (HasFatalFailure() || records.empty()) return;
  check_vendor_kernels(records, "convolution_forward", "cuda.conv.cudnn");
}

TEST_P(CuptiTrace, CublasGemmKernelsAppearUnderTheirOpAndLaunch) {
  dnn::GemmProblem p;
  p.m = 512, p.n = 384, p.k = 256;
  const auto records = trace("gemm", dnn::ProblemRef::of(p), "cuda.gemm.cublas");
  if (HasFatalFailure() || records.empty()) return;
  check_vendor_kernels(records, "gemm", "cuda.gemm.cublas");
}

// A replay of a captured graph is one device span on its stream; the kernels CUPTI reports for the
// replay's nodes carry the replay's flow and lie inside that span.
TEST_P(CuptiTrace, KernelsOfAGraphReplaySitBeneathTheReplaySpan) {
  dnn::GemmProblem p;
  p.m = 256, p.n = 256, p.k = 256;
  const dnn::ProblemRef problem = dnn::ProblemRef::of(p);
  const dnn::SolverBase* solver = dnn::find_solver("cuda", problem.kind(), "cuda.gemm.cublas");
  ASSERT_NE(solver, nullptr);
  runtime::Stream stream(*device_);
  dnn::OpTensors tensors = dnn::make_op_tensors(stream, problem, dnn::default_op_seed(problem));
  dnn::load_op_tensors(stream, tensors);
  // Untraced: the handle and the workspace block exist before the capture reuses them.
  dnn::execute("gemm", stream, problem, tensors.op_args, solver);
  stream.synchronize();
  stream.begin_capture();
  dnn::execute("gemm", stream, problem, tensors.op_args, solver);
  runtime::Graph graph = stream.end_capture();
  clear();
  set_enabled(true);
  graph.replay(stream);
  stream.synchronize();
  set_enabled(false);
  for (const std::string& note : notes()) ADD_FAILURE() << "trace note: " << note;
  const auto records = collect();
  const std::string name = graph_replay_name(graph.node_count()).str();
  std::vector<const Record*> spans;
  for (const Record& r : records)
    if (r.kind == Kind::device && r.name == name) spans.push_back(&r);
  ASSERT_EQ(spans.size(), 1u) << name;
  const Record& span = *spans.front();
  EXPECT_EQ(span.stream, stream.id());
  EXPECT_NE(span.flow, 0u);
  EXPECT_GT(span.dur_ns, 0);
  int beneath = 0;
  for (const Record& k : records) {
    if (k.kind != Kind::kernel || k.flow != span.flow) continue;
    EXPECT_EQ(k.stream, stream.id()) << k.name;
    EXPECT_EQ(k.solver, name) << k.name;  // outside an op, a kernel's solver is its launch's name
    EXPECT_GE(k.start_ns, span.start_ns - kToleranceNs) << k.name;
    EXPECT_LE(k.start_ns + k.dur_ns, span.start_ns + span.dur_ns + kToleranceNs) << k.name;
    ++beneath;
  }
  EXPECT_GT(beneath, 0) << "no CUPTI kernel attributed to the replay";
  test::check_chrome_trace(chrome_trace_json(records, dropped(), notes()));
}

TEST_P(CuptiTrace, TracingOffAgainLeavesCuptiIdleAndOnAgainWorks) {
  dnn::GemmProblem p;
  p.m = 64, p.n = 64, p.k = 64;
  const auto first = trace("gemm", dnn::ProblemRef::of(p), "cuda.gemm.cublas");
  if (HasFatalFailure()) return;
  // Work while tracing is off is not seen; a second traced run is, with fresh flows.
  const auto second = trace("gemm", dnn::ProblemRef::of(p), "cuda.gemm.cublas");
  auto kernels = [](const std::vector<Record>& records) {
    return std::count_if(records.begin(), records.end(),
                         [](const Record& r) { return r.kind == Kind::kernel && r.op == "gemm"; });
  };
  EXPECT_GT(kernels(first), 0);
  EXPECT_GT(kernels(second), 0) << "tracing on again starts CUPTI again";
  EXPECT_LT(kernels(second), 2 * kernels(first))
      << "the untraced warm-up run of the second trace must not appear";
}

}  // namespace
}  // namespace galley::profile
