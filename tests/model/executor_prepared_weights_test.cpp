// Conv nodes with constant weights keep them prepared (packed GEMM panels, Winograd transforms)
// across runs of one executor: the second run, which reads what the first prepared, gives the
// same outputs bit for bit as the first, and as another executor's first run. On the cpu.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "dnn/tensor_data.hpp"
#include "galley/model/builder.hpp"
#include "galley/model/executor.hpp"
#include "galley/model/passes.hpp"
#include "graph_inputs.hpp"

namespace galley::model {
namespace {

void expect_runs_agree(const std::string& name, std::int64_t size) {
  SCOPED_TRACE(name);
  Graph graph = build_model(name, 1, size);
  run_passes(graph);
  const runtime::Device cpu = runtime::device("cpu");
  runtime::Stream stream(cpu);
  const auto in = test::seeded_inputs(stream, graph, 5);
  Executor exec(graph, cpu);
  const auto first = test::host_bytes(stream, exec.run(stream, in, {}));
  const auto second = test::host_bytes(stream, exec.run(stream, in, {}));
  EXPECT_EQ(first, second) << "the run reading prepared weights differs from the run that prepared them";
  Executor other(graph, cpu);
  EXPECT_EQ(test::host_bytes(stream, other.run(stream, in, {})), first)
      << "another executor's first run differs";
  // Other inputs through the same prepared weights.
  const auto in2 = test::seeded_inputs(stream, graph, 77);
  EXPECT_EQ(test::host_bytes(stream, exec.run(stream, in2, {})),
            test::host_bytes(stream, other.run(stream, in2, {})));
}

TEST(ExecutorPreparedWeights, RunsAgreeAcrossRunsAndExecutors) {
  expect_runs_agree("resnet18", 64);
  expect_runs_agree("mobilenet_v2", 64);
}

// Graph mode replays the captured conv tasks, which hold the slot: replays agree with eager runs.
TEST(ExecutorPreparedWeights, GraphReplaysAgree) {
  Graph graph = build_model("resnet18", 1, 64);
  run_passes(graph);
  const runtime::Device cpu = runtime::device("cpu");
  runtime::Stream stream(cpu);
  const auto in = test::seeded_inputs(stream, graph, 9);
  Executor eager(graph, cpu);
  Executor captured(graph, cpu, ExecutorOptions{.capture = true});
  const auto want = test::host_bytes(stream, eager.run(stream, in, {}));
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(test::host_bytes(stream, captured.run(stream, in, {})), want) << "run " << i;
}

}  // namespace
}  // namespace galley::model
