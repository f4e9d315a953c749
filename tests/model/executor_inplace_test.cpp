// The executor's in-place execution (ExecutorOptions::in_place): activation and elementwise nodes
// writing into an input that dies there give results bit-equal to every node having its own memory,
// never overwrite a value that a later node still reads (directly or through a view), a graph input
// or a graph output, lower the peak where they apply, and replay bit-equal in graph mode. On the cpu.
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

struct Compared {
  RunReport in_place, separate;
};

// Runs `graph` with and without in-place execution (eager, then a graph-mode executor's eager run,
// capture and replays on two inputs) and expects every output bit-equal and the inputs untouched.
Compared expect_in_place_matches(const Graph& graph) {
  const runtime::Device cpu = runtime::device("cpu");
  runtime::Stream stream(cpu);
  Executor separate(graph, cpu, ExecutorOptions{.in_place = false});
  Executor in_place(graph, cpu);
  Executor captured(graph, cpu, ExecutorOptions{.capture = true});
  Compared reports;
  for (const std::uint64_t seed : {3u, 41u}) {
    const auto in = test::seeded_inputs(stream, graph, seed);
    const auto in_before = test::host_bytes(stream, in);
    const auto want = test::host_bytes(stream, separate.run(stream, in, {}, &reports.separate));
    EXPECT_EQ(test::host_bytes(stream, in), in_before) << "an out-of-place run changed its inputs";
    const auto got = test::host_bytes(stream, in_place.run(stream, in, {}, &reports.in_place));
    EXPECT_EQ(got, want) << graph.name << ": in place differs from out of place (seed " << seed << ")";
    EXPECT_EQ(test::host_bytes(stream, in), in_before)
        << graph.name << ": an in-place run overwrote a graph input";
    // Graph mode: the first run is eager, the second captures and replays, the third replays.
    for (int run = 0; run < 3; ++run) {
      RunReport r;
      EXPECT_EQ(test::host_bytes(stream, captured.run(stream, in, {}, &r)), want)
          << graph.name << ": graph-mode run " << run << " (" << to_string(r.mode) << ") differs (seed "
          << seed << ")";
    }
    EXPECT_EQ(test::host_bytes(stream, in), in_before) << graph.name << ": a replay overwrote a graph input";
  }
  return reports;
}

// A chain where each activation can take its input's memory: the peak must drop.
TEST(ExecutorInPlace, AnActivationChainRunsInPlaceWithALowerPeak) {
  GraphBuilder b("chain", 3);
  // An Add (no workspace) makes the first value the executor owns; a conv's workspace could
  // outweigh the activations at the peak.
  const std::string x = b.input("x", {2, 16, 33, 31});
  std::string y = b.relu(b.add(x, x));
  y = b.sigmoid(y);
  y = b.clip(y, 0.1, 0.7);
  y = b.node("Tanh", {y})[0];
  const Compared r = expect_in_place_matches(b.finish({b.global_average_pool(y)}));
  // Out of place, the input, the sum and the Relu's output live together; in place, one buffer of
  // [2,16,33,31] f32 (128 KiB) less at the peak, give or take the small pooled values.
  EXPECT_GE(r.separate.peak_bytes, r.in_place.peak_bytes + 120 * 1024)
      << "in place " << r.in_place.peak_bytes << ", out of place " << r.separate.peak_bytes;
}

// c is read by the sigmoid and then by the Mul, so the sigmoid must not overwrite it; the Mul may
// take c's or s's memory. The SE-style broadcast Mul takes the big input's memory, not the [N,C,1,1]
// one's. As EfficientNet's SiLU and squeeze-excitation blocks.
TEST(ExecutorInPlace, AValueReadByTwoLaterNodesIsNotOverwritten) {
  GraphBuilder b("silu_se", 5);
  const std::string x = b.input("x", {2, 12, 17, 19});
  const std::string c = b.add(x, x);
  const std::string silu = b.mul(c, b.sigmoid(c));
  const std::string se = b.sigmoid(b.conv(b.global_average_pool(silu), 12, 1));
  const std::string scaled = b.mul(silu, se);
  // `scaled` is read by two later nodes: neither the Relu nor the Add may overwrite it before both ran.
  const std::string r = b.relu(scaled);
  const std::string sum = b.add(r, scaled);
  const Compared reports = expect_in_place_matches(b.finish({b.add(sum, b.sigmoid(scaled))}));
  EXPECT_LT(reports.in_place.peak_bytes, reports.separate.peak_bytes);
}

// Graph outputs are never overwritten, even where the node reading them is the last reader: y is
// an output and the input of the Sigmoid; v is an output that is a view (Flatten) of a value an
// activation then reads; and a graph input read by an activation stays untouched.
TEST(ExecutorInPlace, GraphOutputsAndInputsAreNeverOverwritten) {
  GraphBuilder b("outputs", 7);
  const std::string x = b.input("x", {3, 5, 7, 9});
  const std::string y = b.relu(x);
  const std::string z = b.sigmoid(y);
  const std::string v = b.flatten(z);
  const std::string w = b.node("Tanh", {z})[0];
  expect_in_place_matches(b.finish({y, v, b.add(w, w), z}));
}

// A graph output that is a view of memory the executor allocated stays valid after the run,
// while later allocations reuse freed blocks.
TEST(ExecutorInPlace, AViewGraphOutputOutlivesTheRun) {
  GraphBuilder b("view_out", 9);
  const std::string y = b.flatten(b.relu(b.conv(b.input("x", {1, 4, 8, 8}), 4, 3, 1, 1)));
  const Graph graph = b.finish({y});
  const runtime::Device cpu = runtime::device("cpu");
  runtime::Stream stream(cpu);
  Executor exec(graph, cpu);
  const auto out = exec.run(stream, test::seeded_inputs(stream, graph, 1));
  const auto want = test::host_bytes(stream, out);
  // Blocks of the output's size, written over: a freed output block would be reused by them.
  std::vector<Tensor> others;
  const dnn::TensorDesc desc = out.at(y).desc();
  const std::vector<float> ones(static_cast<std::size_t>(desc.elements()), 1.0f);
  for (int i = 0; i < 4; ++i) {
    others.push_back(Tensor::empty(stream, desc));
    others.back().copy_from_host(stream, ones.data(), ones.size() * sizeof(float));
  }
  EXPECT_EQ(test::host_bytes(stream, out), want);
}

// Built networks with the passes the CLI runs (conv fusion leaves standalone adds and activations
// where a value has two readers): in place equals out of place, eager and replayed.
TEST(ExecutorInPlace, BuiltNetworksMatchOutOfPlace) {
  for (const char* name : {"tiny_cnn", "mobilenet_v2"}) {
    Graph plain = build_model(name, 2, 32);
    plain.name = std::string(name) + " (no passes)";
    expect_in_place_matches(plain);
    Graph optimised = build_model(name, 1, 32);
    run_passes(optimised);
    optimised.name = std::string(name) + " (passes)";
    expect_in_place_matches(optimised);
  }
}

}  // namespace
}  // namespace galley::model
