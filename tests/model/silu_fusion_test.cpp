// The conv-fusion pass's SiLU rewrite: x * Sigmoid(x) as ONNX exports it (either operand order)
// becomes one galley.Silu node (after a Conv too: it is no conv epilogue); a Sigmoid whose output
// another node also reads, or a Mul of a Sigmoid of another value, stays. The passed graph's
// outputs match the unpassed graph's on the cpu (reference and tuned solvers), and the rewritten
// graph holds one value less at its peak.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <random>

#include "galley/model/builder.hpp"
#include "galley/model/executor.hpp"
#include "galley/model/passes.hpp"

namespace galley::model {
namespace {

struct Ran {
  std::map<std::string, std::vector<double>> outputs;
  std::size_t peak_bytes = 0;
};

Ran run(const Graph& graph, bool reference) {
  const runtime::Device cpu = runtime::device("cpu");
  Executor exec(graph, cpu, {.reference = reference});
  runtime::Stream stream(cpu);
  std::map<std::string, Tensor> inputs;
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> dist(-4, 4);
  for (const std::string& name : graph.inputs) {
    HostTensor t;
    t.shape = graph.value(name).shape;
    t.data.resize(static_cast<std::size_t>(element_count(t.shape)) * 4);
    for (std::size_t i = 0; i < t.data.size(); i += 4) {
      const float v = dist(rng);
      std::memcpy(t.data.data() + i, &v, 4);
    }
    inputs[name] = to_device(stream, t);
  }
  Ran r;
  RunReport report;
  for (const auto& [name, t] : exec.run(stream, inputs, {}, &report)) r.outputs[name] = to_host(stream, t).as_double();
  r.peak_bytes = report.peak_bytes;
  return r;
}

void expect_close(const Ran& got, const Ran& want) {
  ASSERT_EQ(got.outputs.size(), want.outputs.size());
  for (const auto& [name, w] : want.outputs) {
    const auto& g = got.outputs.at(name);
    ASSERT_EQ(g.size(), w.size()) << name;
    for (std::size_t i = 0; i < w.size(); ++i) ASSERT_NEAR(g[i], w[i], 1e-5 * std::max(1.0, std::abs(w[i]))) << name << "[" << i << "]";
  }
}

int count(const Graph& g, const std::string& op) {
  int n = 0;
  for (const Node& node : g.nodes) n += node.op_type == op ? 1 : 0;
  return n;
}

// x -> Conv -> c; c * Sigmoid(c) (and the other operand order after a second conv).
Graph silu_graph() {
  GraphBuilder b("silu", 4);
  const std::string c = b.conv(b.input("x", {2, 5, 13, 11}), 8, 3, 1, 1);
  const std::string s1 = b.mul(c, b.sigmoid(c));
  const std::string c2 = b.conv(s1, 8, 1);
  const std::string s2 = b.mul(b.sigmoid(c2), c2);
  return b.finish({b.global_average_pool(s2)});
}

TEST(SiluFusion, SigmoidTimesItsInputBecomesOneNode) {
  const Graph plain = silu_graph();
  Graph fused = plain;
  PassOptions options;
  options.disabled = {"batch-norm-folding", "dead-node-removal"};
  run_passes(fused, options);
  EXPECT_EQ(count(fused, "Sigmoid"), 0);
  EXPECT_EQ(count(fused, "Mul"), 0);
  EXPECT_EQ(count(fused, "galley.Silu"), 2);
  EXPECT_EQ(count(fused, "Conv"), 2);
  const Ran ref_plain = run(plain, true);
  expect_close(run(fused, true), ref_plain);
  // With the tuner's solvers (the activation op's silu, in place): the same numbers.
  expect_close(run(fused, false), ref_plain);
}

// After an op without workspace (an Add), the value and its Sigmoid no longer live together: one
// [4,16,20,20] f32 buffer (100 KiB) less at the peak, give or take the small pooled values.
TEST(SiluFusion, TheValueAndItsSigmoidNoLongerLiveTogether) {
  GraphBuilder b("silu_peak", 8);
  const std::string x = b.input("x", {4, 16, 20, 20});
  const std::string c = b.add(x, x);
  const Graph plain = b.finish({b.global_average_pool(b.mul(c, b.sigmoid(c)))});
  Graph fused = plain;
  run_passes(fused);
  ASSERT_EQ(count(fused, "galley.Silu"), 1);
  const Ran ref_plain = run(plain, true), ref_fused = run(fused, true);
  expect_close(ref_fused, ref_plain);
  EXPECT_GE(ref_plain.peak_bytes, ref_fused.peak_bytes + 96 * 1024)
      << "fused " << ref_fused.peak_bytes << ", unfused " << ref_plain.peak_bytes;
}

TEST(SiluFusion, WithoutAConvItIsOneSiluNode) {
  GraphBuilder b("silu_alone", 5);
  const std::string x = b.input("x", {3, 7, 5, 4});
  const std::string y = b.mul(b.sigmoid(x), x);
  const Graph plain = b.finish({y});
  Graph fused = plain;
  run_passes(fused);
  EXPECT_EQ(count(fused, "galley.Silu"), 1);
  EXPECT_EQ(count(fused, "Sigmoid") + count(fused, "Mul"), 0);
  expect_close(run(fused, true), run(plain, true));
  expect_close(run(fused, false), run(plain, true));
}

TEST(SiluFusion, ASigmoidWithAnotherReaderOrOfAnotherValueStays) {
  GraphBuilder b("not_silu", 6);
  const std::string x = b.input("x", {2, 4, 6, 6});
  const std::string c = b.conv(x, 4, 3, 1, 1);
  const std::string s = b.sigmoid(c);
  const std::string shared = b.mul(c, s);   // s is also read below: no rewrite
  const std::string other = b.mul(x, s);    // a Sigmoid of c times x: not a SiLU
  const Graph plain = b.finish({b.add(shared, other)});
  Graph passed = plain;
  run_passes(passed);
  EXPECT_EQ(count(passed, "galley.Silu"), 0);
  EXPECT_EQ(count(passed, "Sigmoid"), 1);
  EXPECT_EQ(count(passed, "Mul"), 2);
  expect_close(run(passed, true), run(plain, true));
}

TEST(SiluFusion, ASigmoidThatIsAGraphOutputStays) {
  GraphBuilder b("silu_output", 7);
  const std::string x = b.input("x", {2, 4, 6, 6});
  const std::string s = b.sigmoid(x);
  const Graph plain = b.finish({b.mul(x, s), s});
  Graph passed = plain;
  run_passes(passed);
  EXPECT_EQ(count(passed, "galley.Silu"), 0);
  expect_close(run(passed, true), run(plain, true));
}

}  // namespace
}  // namespace galley::model
