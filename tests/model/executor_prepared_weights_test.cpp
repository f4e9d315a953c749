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

namespace galley::model {
namespace {

std::map<std::string, Tensor> inputs_for(runtime::Stream& stream, const Graph& g, std::uint64_t seed) {
  std::map<std::string, Tensor> out;
  for (const std::string& name : g.inputs) {
    const Shape& shape = g.value(name).shape;
    const auto desc = dnn::TensorDesc::contiguous(DType::f32, shape.data(), static_cast<int>(shape.size()));
    const auto bytes = dnn::random_tensor(DType::f32, desc.elements(), seed++);
    Tensor t = Tensor::empty(stream, desc);
    t.copy_from_host(stream, bytes.data(), bytes.size());
    out[name] = t;
  }
  return out;
}

std::map<std::string, std::vector<std::byte>> host_bytes(runtime::Stream& stream,
                                                         const std::map<std::string, Tensor>& tensors) {
  std::map<std::string, std::vector<std::byte>> out;
  for (const auto& [name, t] : tensors) out[name] = to_host(stream, t).data;
  return out;
}

void expect_runs_agree(const std::string& name, std::int64_t size) {
  SCOPED_TRACE(name);
  Graph graph = build_model(name, 1, size);
  run_passes(graph);
  const runtime::Device cpu = runtime::device("cpu");
  runtime::Stream stream(cpu);
  const auto in = inputs_for(stream, graph, 5);
  Executor exec(graph, cpu);
  const auto first = host_bytes(stream, exec.run(stream, in, {}));
  const auto second = host_bytes(stream, exec.run(stream, in, {}));
  EXPECT_EQ(first, second) << "the run reading prepared weights differs from the run that prepared them";
  Executor other(graph, cpu);
  EXPECT_EQ(host_bytes(stream, other.run(stream, in, {})), first) << "another executor's first run differs";
  // Other inputs through the same prepared weights.
  const auto in2 = inputs_for(stream, graph, 77);
  EXPECT_EQ(host_bytes(stream, exec.run(stream, in2, {})), host_bytes(stream, other.run(stream, in2, {})));
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
  const auto in = inputs_for(stream, graph, 9);
  Executor eager(graph, cpu);
  Executor captured(graph, cpu, ExecutorOptions{.capture = true});
  const auto want = host_bytes(stream, eager.run(stream, in, {}));
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(host_bytes(stream, captured.run(stream, in, {})), want) << "run " << i;
}

}  // namespace
}  // namespace galley::model
