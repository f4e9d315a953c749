// The executor's graph mode: replays equal eager runs bit for bit and re-read their inputs, the
// captured graph's memory is nobody else's while it lives (another executor and other streams run
// at the same time), and what cannot be captured is an Error that names the input or the node. On
// the cpu (the recorded task list) and on the first GPU when there is one.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "dnn/tensor_data.hpp"
#include "galley/core/error.hpp"
#include "galley/memory/buffer.hpp"
#include "galley/model/builder.hpp"
#include "galley/model/executor.hpp"
#include "gpu/gpu_test_util.hpp"
#include "graph_inputs.hpp"
#include "memory/caching_allocator.hpp"
#include "model/lowering.hpp"

namespace galley::model {
namespace {

std::optional<runtime::Device> gpu(std::string& why) {
  for (const char* backend : {"cuda", "hip"}) {
    std::string reason;
    if (auto d = galley::testing::first_device(backend, reason)) return d;
    why += (why.empty() ? "" : "; ") + reason;
  }
  return std::nullopt;
}

// Two outputs, an input read twice, a view, a residual add: more than one fixed buffer each way.
Graph two_output_graph() {
  GraphBuilder b("two_outputs", 7);
  const auto x = b.input("x", {2, 4, 9, 11});
  const auto y = b.relu(b.conv(x, 4, 3, 1, 1));
  const auto sum = b.add(y, x);
  const auto logits = b.gemm(b.flatten(b.global_average_pool(sum)), 5);
  return b.finish({logits, y});
}

void replays_match_eager(const runtime::Device& device, Graph graph) {
  runtime::Stream stream(device);
  Executor eager(graph, device);
  Executor captured(graph, device, ExecutorOptions{.capture = true});
  const auto a = test::seeded_inputs(stream, graph, 11), b = test::seeded_inputs(stream, graph, 23),
             c = test::seeded_inputs(stream, graph, 37);

  RunReport first, second, third;
  const auto ga = test::host_bytes(stream, captured.run(stream, a, {}, &first));
  EXPECT_EQ(first.mode, RunMode::eager);
  EXPECT_FALSE(first.note.empty());
  const auto gb = test::host_bytes(stream, captured.run(stream, b, {}, &second));
  ASSERT_EQ(second.mode, RunMode::graph_replay);
  EXPECT_GT(second.graph_nodes, 0u);
  EXPECT_GT(second.graph_pool_bytes, 0u);
  EXPECT_GT(second.peak_bytes, 0u);
  EXPECT_EQ(second.layers.size(), first.layers.size());
  const auto gc = test::host_bytes(stream, captured.run(stream, c, {}, &third));
  EXPECT_EQ(third.mode, RunMode::graph_replay);
  const auto ga2 = test::host_bytes(stream, captured.run(stream, a));

  const auto eb = test::host_bytes(stream, eager.run(stream, b));
  const auto ec = test::host_bytes(stream, eager.run(stream, c));
  EXPECT_EQ(gb, eb) << "the first replay differs from the eager run on the same input";
  EXPECT_EQ(gc, ec) << "a later replay differs from the eager run on the same input";
  EXPECT_EQ(ga2, ga) << "replaying the first input again differs from its eager run";
  EXPECT_NE(gb, gc) << "new inputs must give new outputs: the replay re-reads its inputs";
}

TEST(ExecutorGraph, TinyCnnReplaysEqualEagerRunsOnCpu) {
  replays_match_eager(runtime::device("cpu"), build_model("tiny_cnn", 2, 32));
}

TEST(ExecutorGraph, ABuiltGraphWithTwoOutputsReplaysOnCpu) {
  replays_match_eager(runtime::device("cpu"), two_output_graph());
}

TEST(ExecutorGraph, TinyCnnReplaysEqualEagerRunsOnGpu) {
  std::string why;
  const auto device = gpu(why);
  if (!device) GTEST_SKIP() << why;
  replays_match_eager(*device, build_model("tiny_cnn", 4, 64));
  replays_match_eager(*device, two_output_graph());
}

// Ranges of the segments owned by private pools now.
std::vector<std::pair<std::uintptr_t, std::uintptr_t>> private_segments(const runtime::Device& device) {
  std::vector<std::pair<std::uintptr_t, std::uintptr_t>> out;
  const auto snap = nlohmann::json::parse(memory::allocator_for(device).snapshot_json());
  for (const auto& seg : snap["segments"]) {
    if (seg["private_pool"].get<std::uint64_t>() == 0) continue;
    const auto base = seg["address"].get<std::uintptr_t>();
    out.emplace_back(base, base + seg["total_size"].get<std::uintptr_t>());
  }
  return out;
}

bool inside(const std::vector<std::pair<std::uintptr_t, std::uintptr_t>>& ranges, const void* ptr) {
  const auto p = reinterpret_cast<std::uintptr_t>(ptr);
  for (const auto& [lo, hi] : ranges) {
    if (p >= lo && p < hi) return true;
  }
  return false;
}

void pool_is_isolated(const runtime::Device& device) {
  const Graph graph = build_model("tiny_cnn", 2, 32);
  runtime::Stream stream(device);
  const auto in = test::seeded_inputs(stream, graph, 5);
  std::map<std::string, std::vector<std::byte>> want;
  std::vector<std::pair<std::uintptr_t, std::uintptr_t>> pool;
  {
    Executor captured(graph, device, ExecutorOptions{.capture = true});
    want = test::host_bytes(stream, captured.run(stream, in));  // eager
    (void)captured.run(stream, in);                             // captures
    pool = private_segments(device);
    ASSERT_FALSE(pool.empty());

    // Another executor on its own stream and the allocations of a third run while the graph
    // replays; none of their memory may come from the graph's pool, and the replays stay exact.
    const Graph other_graph = two_output_graph();
    Executor other(other_graph, device);
    std::atomic<bool> stop{false};
    std::atomic<int> foreign_in_pool{0};
    std::thread noise([&] {
      runtime::Stream s2(device);
      const auto other_in = test::seeded_inputs(s2, other_graph, 9);
      while (!stop.load()) {
        for (const auto& [name, t] : other.run(s2, other_in))
          foreign_in_pool += inside(pool, t.data()) ? 1 : 0;
        std::vector<memory::Buffer> scratch;
        for (std::size_t bytes : {std::size_t{512}, std::size_t{64} << 10, std::size_t{3} << 20}) {
          scratch.push_back(memory::allocate(s2, bytes));
          memory::memset(s2, scratch.back(), 0xff, bytes);
          foreign_in_pool += inside(pool, scratch.back().data()) ? 1 : 0;
        }
        s2.synchronize();
      }
    });
    for (int i = 0; i < 6; ++i) {
      EXPECT_EQ(test::host_bytes(stream, captured.run(stream, in)), want)
          << "replay " << i << " was corrupted";
      memory::Buffer same_stream = memory::allocate(stream, std::size_t{64} << 10);
      foreign_in_pool += inside(pool, same_stream.data()) ? 1 : 0;
    }
    stop = true;
    noise.join();
    EXPECT_EQ(foreign_in_pool.load(), 0) << "memory of the captured graph's pool was handed to someone else";
  }
  // The executor is gone: its pool went back to the general cache.
  EXPECT_TRUE(private_segments(device).empty());
  memory::allocator_for(device).check_invariants();
}

TEST(ExecutorGraph, ThePoolIsNobodyElsesWhileTheGraphLivesOnCpu) { pool_is_isolated(runtime::device("cpu")); }

TEST(ExecutorGraph, ThePoolIsNobodyElsesWhileTheGraphLivesOnGpu) {
  std::string why;
  const auto device = gpu(why);
  if (!device) GTEST_SKIP() << why;
  pool_is_isolated(*device);
}

template <class Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(ExecutorGraph, AnInputOfAnotherShapeOrLayoutIsAnErrorNamingIt) {
  const runtime::Device cpu = runtime::device("cpu");
  const Graph graph = build_model("tiny_cnn", 2, 32);
  runtime::Stream stream(cpu);
  Executor captured(graph, cpu, ExecutorOptions{.capture = true});
  const auto in = test::seeded_inputs(stream, graph, 1);
  (void)captured.run(stream, in);
  (void)captured.run(stream, in);  // captured now

  std::map<std::string, Tensor> smaller{
      {"input", Tensor::empty(stream, dnn::TensorDesc::contiguous(DType::f32, {1, 3, 32, 32}))}};
  std::string message = error_of([&] { captured.run(stream, smaller); });
  EXPECT_NE(message.find("graph input 'input'"), std::string::npos) << message;
  std::map<std::string, Tensor> nhwc{
      {"input", Tensor::empty(stream, dnn::TensorDesc::packed(DType::f32, dnn::Layout::nhwc, 2, 3, 32, 32))}};
  message = error_of([&] { captured.run(stream, nhwc); });
  EXPECT_NE(message.find("graph input 'input' must be row-major"), std::string::npos) << message;
  message = error_of([&] { captured.run(stream, {}); });
  EXPECT_NE(message.find("'input' was not given"), std::string::npos) << message;
  // The graph still replays afterwards.
  EXPECT_EQ(test::host_bytes(stream, captured.run(stream, in)),
            test::host_bytes(stream, captured.run(stream, in)));
}

// Replaces one op type's lowering for a test and puts the original back.
class LoweringOverride {
 public:
  LoweringOverride(const std::string& op, detail::Lowering replacement)
      : op_(op), original_(*detail::find_lowering(op)) {
    detail::register_lowering(op, std::move(replacement));
  }
  ~LoweringOverride() { detail::register_lowering(op_, original_); }
  LoweringOverride(const LoweringOverride&) = delete;
  LoweringOverride& operator=(const LoweringOverride&) = delete;

 private:
  std::string op_;
  detail::Lowering original_;
};

TEST(ExecutorGraph, AnOpThatWaitsForItsStreamCannotBeCapturedAndIsNamed) {
  const runtime::Device cpu = runtime::device("cpu");
  const detail::Lowering relu_lowering = *detail::find_lowering("Relu");
  const LoweringOverride waits("Relu", [relu_lowering](const detail::LoweringContext& ctx) {
    detail::LoweredNode node = relu_lowering(ctx);
    node.run = [inner = node.run](detail::RunContext& rc) {
      inner(rc);
      rc.stream.synchronize();  // as a host read of the result would need: not capturable
    };
    return node;
  });
  GraphBuilder b("waits", 3);
  const auto x = b.input("x", {1, 2, 5, 5});
  const Graph graph = b.finish({b.relu(b.conv(x, 2, 3, 1, 1))});
  const std::string relu = graph.nodes.back().label();
  runtime::Stream stream(cpu);
  Executor captured(graph, cpu, ExecutorOptions{.capture = true});
  const auto in = test::seeded_inputs(stream, graph, 2);
  const auto eager = test::host_bytes(stream, captured.run(stream, in));  // eager: waiting is allowed
  for (int attempt = 0; attempt < 2; ++attempt) {
    const std::string message = error_of([&] { captured.run(stream, in); });
    EXPECT_NE(message.find(relu), std::string::npos) << message;
    EXPECT_NE(message.find("cannot be captured"), std::string::npos) << message;
  }
  // The stream is not left capturing, and the failed capture's pool was released.
  EXPECT_FALSE(stream.impl().capturing());
  EXPECT_TRUE(private_segments(cpu).empty());
  Executor plain(graph, cpu);
  EXPECT_EQ(test::host_bytes(stream, plain.run(stream, in)), eager);
}

TEST(ExecutorGraph, PerLayerTimingRunsEagerlyWithANote) {
  const runtime::Device cpu = runtime::device("cpu");
  const Graph graph = build_model("tiny_cnn", 1, 32);
  runtime::Stream stream(cpu);
  Executor captured(graph, cpu, ExecutorOptions{.capture = true});
  const auto in = test::seeded_inputs(stream, graph, 4);
  (void)captured.run(stream, in);
  RunReport timed;
  (void)captured.run(stream, in, {.time_layers = true}, &timed);
  EXPECT_EQ(timed.mode, RunMode::eager);
  EXPECT_NE(timed.note.find("per-layer"), std::string::npos) << timed.note;
  RunReport replayed;
  (void)captured.run(stream, in, {}, &replayed);
  EXPECT_EQ(replayed.mode, RunMode::graph_replay);
}

}  // namespace
}  // namespace galley::model
