// Graph passes: each one on a small graph changes what it should and nothing else, and the passed
// graph's outputs on the cpu (reference solvers) match the unpassed graph's within the pass's
// tolerance; with every pass off the graph is the one the importer or builder made.
#include "galley/model/passes.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>

#include "galley/core/error.hpp"
#include "galley/model/builder.hpp"
#include "galley/model/executor.hpp"
#include "galley/model/onnx.hpp"
#include "galley/runtime/device.hpp"
#include "model/onnx_testdata.hpp"

namespace galley::model {
namespace {

HostTensor random_tensor(Shape shape, std::uint32_t seed, float lo = -1, float hi = 1) {
  HostTensor t;
  t.type = ElemType::f32;
  t.shape = std::move(shape);
  const auto count = static_cast<std::size_t>(element_count(t.shape));
  t.data.resize(count * 4);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  for (std::size_t i = 0; i < count; ++i) {
    const float v = dist(rng);
    std::memcpy(t.data.data() + 4 * i, &v, 4);
  }
  return t;
}

// The graph's outputs on the cpu with the reference solvers, from seeded random inputs.
std::map<std::string, HostTensor> run(const Graph& graph) {
  const runtime::Device cpu = runtime::device("cpu");
  Executor exec(graph, cpu, {.reference = true});
  runtime::Stream stream(cpu);
  std::map<std::string, Tensor> inputs;
  std::uint32_t seed = 7;
  for (const std::string& name : graph.inputs)
    inputs[name] = to_device(stream, random_tensor(graph.value(name).shape, seed++));
  std::map<std::string, HostTensor> out;
  for (const auto& [name, t] : exec.run(stream, inputs)) out[name] = to_host(stream, t);
  return out;
}

// Max |a - b| / max(1, max|b|) over every output (they must have the same names, types, shapes).
double max_error(const std::map<std::string, HostTensor>& got,
                 const std::map<std::string, HostTensor>& want) {
  EXPECT_EQ(got.size(), want.size());
  double worst = 0;
  for (const auto& [name, w] : want) {
    const auto it = got.find(name);
    if (it == got.end()) {
      ADD_FAILURE() << "output " << name << " missing";
      return INFINITY;
    }
    EXPECT_EQ(it->second.type, w.type) << name;
    EXPECT_EQ(it->second.shape, w.shape) << name;
    const auto g = it->second.as_double(), v = w.as_double();
    double scale = 1, err = 0;
    for (const double x : v) scale = std::max(scale, std::abs(x));
    for (std::size_t i = 0; i < v.size(); ++i) err = std::max(err, std::abs(g[i] - v[i]));
    worst = std::max(worst, err / scale);
  }
  return worst;
}

std::map<std::string, int> op_counts(const Graph& g) {
  std::map<std::string, int> counts;
  for (const Node& n : g.nodes) counts[n.op_type]++;
  return counts;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

HostTensor scalar_shape(HostTensor t, Shape shape) {
  t.shape = std::move(shape);
  return t;
}

// Conv -> BatchNormalization -> Relu, the BN with constant statistics (variance positive).
Graph conv_bn_relu(bool conv_output_also_read) {
  GraphBuilder b("conv_bn");
  const auto x = b.input("x", {2, 5, 9, 7});
  const auto y = b.conv(x, 6, 3, 1, 1);
  const auto scale = b.constant(random_tensor({6}, 1, 0.5f, 1.5f), "scale");
  const auto shift = b.constant(random_tensor({6}, 2), "shift");
  const auto mean = b.constant(random_tensor({6}, 3), "mean");
  const auto var = b.constant(random_tensor({6}, 4, 0.1f, 2.0f), "var");
  const auto bn = b.node("BatchNormalization", {y, scale, shift, mean, var}, {{"epsilon", 1e-3}})[0];
  const auto out = b.relu(bn);
  if (conv_output_also_read) return b.finish({out, b.sigmoid(y)});
  return b.finish({out});
}

TEST(Passes, NamesInPipelineOrderAndUnknownNamesListTheValidOnes) {
  EXPECT_EQ(pass_names(), (std::vector<std::string>{"constant-folding", "batch-norm-folding", "conv-fusion",
                                                    "dead-node-removal", "dtype-conversion", "layout"}));
  Graph g = build_model("tiny_cnn", 1, 32);
  const std::string why = error_of([&] { run_passes(g, {.disabled = {"bn-folding"}}); });
  EXPECT_NE(why.find("unknown pass 'bn-folding'"), std::string::npos) << why;
  for (const auto& name : pass_names()) EXPECT_NE(why.find(name), std::string::npos) << why;
  EXPECT_NE(error_of([&] { convert_dtype(g, ElemType::i32); }).find("f16 and bf16"), std::string::npos);
}

TEST(Passes, AllOffReproduceTheGraph) {
  const Graph before = conv_bn_relu(false);
  Graph after = before;
  PassOptions options{.dtype = ElemType::f16, .layout = LayoutChoice::nhwc};
  for (const auto& name : pass_names()) options.disabled.insert(name);
  const PassReport report = run_passes(after, options);
  ASSERT_EQ(report.passes.size(), pass_names().size());
  for (const PassRecord& r : report.passes) {
    EXPECT_FALSE(r.ran) << r.name;
    EXPECT_EQ(r.note, "turned off");
  }
  ASSERT_EQ(after.nodes.size(), before.nodes.size());
  for (std::size_t i = 0; i < before.nodes.size(); ++i) {
    EXPECT_EQ(after.nodes[i].name, before.nodes[i].name);
    EXPECT_EQ(after.nodes[i].op_type, before.nodes[i].op_type);
    EXPECT_EQ(after.nodes[i].inputs, before.nodes[i].inputs);
    EXPECT_EQ(after.nodes[i].outputs, before.nodes[i].outputs);
    EXPECT_EQ(after.nodes[i].attributes.size(), before.nodes[i].attributes.size());
  }
  ASSERT_EQ(after.constants.size(), before.constants.size());
  for (const auto& [name, c] : before.constants) EXPECT_EQ(after.constants.at(name).data, c.data) << name;
  EXPECT_EQ(after.inputs, before.inputs);
  EXPECT_EQ(after.outputs, before.outputs);
  EXPECT_EQ(max_error(run(after), run(before)), 0.0);
}

TEST(Passes, ConstantFoldingEvaluatesWeightPreprocessing) {
  // W = Transpose(A) * s + B: three nodes on initializers before the conv, as some exports leave.
  GraphBuilder b("prep");
  const auto x = b.input("x", {1, 4, 8, 6});
  const auto a = b.constant(random_tensor({4, 8, 3, 3}, 11), "a");
  const auto s = b.constant(random_tensor({8, 1, 1, 1}, 12), "s");
  const auto c = b.constant(random_tensor({8, 4, 3, 3}, 13), "c");
  const auto t = b.node("Transpose", {a}, {{"perm", std::vector<std::int64_t>{1, 0, 2, 3}}})[0];
  const auto w = b.add(b.mul(t, s), c);
  const auto y = b.relu(b.node("Conv", {x, w}, {{"pads", std::vector<std::int64_t>{1, 1, 1, 1}}})[0]);
  const Graph before = b.finish({y});
  ASSERT_EQ(before.nodes.size(), 5u);  // infer_shapes folds no float arithmetic itself

  Graph after = before;
  EXPECT_EQ(fold_constants(after), 3);
  EXPECT_EQ(op_counts(after), (std::map<std::string, int>{{"Conv", 1}, {"Relu", 1}}));
  EXPECT_TRUE(after.is_constant(w));
  EXPECT_EQ(after.value(w).shape, (Shape{8, 4, 3, 3}));
  EXPECT_LE(max_error(run(after), run(before)), 1e-6);
  // Nothing left to fold: the second time changes nothing.
  EXPECT_EQ(fold_constants(after), 0);
}

TEST(Passes, BatchNormFoldsIntoTheConv) {
  const Graph before = conv_bn_relu(false);
  Graph after = before;
  EXPECT_EQ(fold_batch_norm(after), 1);
  EXPECT_EQ(op_counts(after), (std::map<std::string, int>{{"Conv", 1}, {"Relu", 1}}));
  EXPECT_LE(max_error(run(after), run(before)), 1e-5);
}

TEST(Passes, BatchNormStaysWhenTheConvOutputHasAnotherReader) {
  Graph g = conv_bn_relu(true);
  EXPECT_EQ(fold_batch_norm(g), 0);
  EXPECT_EQ(op_counts(g).at("BatchNormalization"), 1);
}

TEST(Passes, DeadNodesAndUnusedConstantsGo) {
  GraphBuilder b("dead");
  const auto x = b.input("x", {1, 3, 8, 8});
  const auto live = b.relu(b.conv(x, 4, 3, 1, 1));
  b.sigmoid(b.conv(x, 4, 1));  // reaches no output
  b.constant(random_tensor({16}, 5), "unused");
  const Graph before = b.finish({live});
  Graph after = before;
  // Two dead nodes, their two weights and bias, and the unused constant.
  EXPECT_EQ(remove_dead_nodes(after), 2 + 2 + 1);
  EXPECT_EQ(op_counts(after), (std::map<std::string, int>{{"Conv", 1}, {"Relu", 1}}));
  EXPECT_EQ(after.constants.size(), 2u);
  EXPECT_EQ(max_error(run(after), run(before)), 0.0);
}

// Two convs, one with a per-channel Add after it, meeting in a residual Add, then `act`.
Graph residual_block(const std::string& act) {
  GraphBuilder b("residual");
  const auto x = b.input("x", {2, 6, 9, 7});
  auto y = b.conv(x, 6, 3, 1, 1);
  y = b.add(y, b.constant(scalar_shape(random_tensor({6}, 21), {1, 6, 1, 1}), "channel_bias"));
  const auto shortcut = b.conv(x, 6, 1);
  y = b.add(y, shortcut);
  if (act == "Clip") {
    y = b.clip(y, 0, 0.5);
  } else if (act == "LeakyRelu") {
    y = b.node("LeakyRelu", {y}, {{"alpha", 0.2}})[0];
  } else {
    y = b.node(act, {y})[0];
  }
  return b.finish({y});
}

TEST(Passes, ConvBiasResidualActivationFuseIntoOneNode) {
  for (const std::string act : {"Relu", "Clip", "LeakyRelu", "Sigmoid"}) {
    const Graph before = residual_block(act);
    Graph after = before;
    // The residual conv's chain takes the Add; the shortcut conv has nothing left to fuse.
    EXPECT_EQ(fuse_conv_epilogues(after), 1) << act;
    EXPECT_EQ(op_counts(after), (std::map<std::string, int>{{"Conv", 1}, {"galley.FusedConv", 1}})) << act;
    const Node* fused = nullptr;
    for (const Node& n : after.nodes) fused = n.op_type == "galley.FusedConv" ? &n : fused;
    ASSERT_NE(fused, nullptr);
    EXPECT_EQ(fused->string_attr("activation", "?"), act);
    ASSERT_EQ(fused->inputs.size(), 4u);
    EXPECT_TRUE(after.is_constant(fused->inputs[2]));  // conv bias + the channel Add, summed
    EXPECT_FALSE(fused->inputs[3].empty());            // the residual
    EXPECT_EQ(fused->outputs, before.outputs);
    EXPECT_LE(max_error(run(after), run(before)), 1e-5) << act;
  }
}

TEST(Passes, FusionStopsAtAValueWithTwoReaders) {
  GraphBuilder b("two_readers");
  const auto x = b.input("x", {1, 3, 8, 8});
  const auto y = b.conv(x, 4, 3, 1, 1);
  Graph g = b.finish({b.relu(y), b.sigmoid(y)});
  EXPECT_EQ(fuse_conv_epilogues(g), 0);
  EXPECT_EQ(op_counts(g).count("galley.FusedConv"), 0u);
}

void check_dtype(ElemType dtype, double tolerance) {
  GraphBuilder b("mixed");
  const auto x = b.input("x", {2, 5, 12, 10});
  auto y = b.conv(x, 8, 3, 1, 1);
  const auto stat = [&](std::uint32_t seed, float lo, float hi) {
    return b.constant(random_tensor({8}, seed, lo, hi), "bn");
  };
  y = b.node("BatchNormalization",
             {y, stat(1, 0.5f, 1.5f), stat(2, -1, 1), stat(3, -1, 1), stat(4, 0.5f, 2.0f)})[0];
  y = b.max_pool(b.relu(y), 3, 2, 1);
  const Graph before = b.finish({b.gemm(b.flatten(b.global_average_pool(y)), 4)});
  Graph after = before;
  EXPECT_GT(convert_dtype(after, dtype), 0);
  // The interface stays f32; inside, every float constant but BN's statistics is converted.
  EXPECT_EQ(after.value("x").type, ElemType::f32);
  EXPECT_EQ(after.value(after.outputs[0]).type, ElemType::f32);
  EXPECT_EQ(after.nodes.front().op_type, "Cast");
  EXPECT_EQ(after.nodes.back().op_type, "Cast");
  for (const Node& n : after.nodes) {
    if (n.op_type == "Conv") EXPECT_EQ(after.value(n.inputs[1]).type, dtype);
    if (n.op_type == "Conv" || n.op_type == "Relu" || n.op_type == "MaxPool")
      EXPECT_EQ(after.value(n.outputs[0]).type, dtype);
    if (n.op_type == "BatchNormalization") EXPECT_EQ(after.value(n.inputs[3]).type, ElemType::f32);
  }
  EXPECT_LE(max_error(run(after), run(before)), tolerance) << to_string(dtype);
}

TEST(Passes, F16KeepsAnF32InterfaceAndMatchesWithin1em2) { check_dtype(ElemType::f16, 1e-2); }
TEST(Passes, Bf16KeepsAnF32InterfaceAndMatchesWithin5em2) { check_dtype(ElemType::bf16, 5e-2); }

TEST(Passes, NhwcLayoutReordersOnlyAtTheEdges) {
  const Graph before = build_model("tiny_cnn", 2, 32);
  Graph after = before;
  const PassReport report = run_passes(after, {.layout = LayoutChoice::nhwc});
  EXPECT_TRUE(report.passes.back().ran);
  int nhwc = 0, reorders = 0;
  for (const Node& n : after.nodes) {
    nhwc += n.string_attr("galley.layout", "") == "NHWC" ? 1 : 0;
    reorders += n.op_type == "galley.Reorder" ? 1 : 0;
  }
  // Every conv, pool and the epilogues run NHWC; one reorder in (the input), one out (before Flatten).
  EXPECT_GE(nhwc, 8);
  EXPECT_EQ(reorders, 2);
  EXPECT_LE(max_error(run(after), run(before)), 1e-5);
  // On a cpu the automatic choice stays NCHW, and on a GPU NCHW for f32.
  Graph cpu = before;
  EXPECT_FALSE(run_passes(cpu).passes.back().ran);
  Graph gpu_f32 = before;
  EXPECT_FALSE(run_passes(gpu_f32, {.gpu = true}).passes.back().ran);
}

TEST(Passes, NhwcSqueezeExcitationBroadcastsPerChannel) {
  // EfficientNet's squeeze-excitation: y * sigmoid(conv(pool(y))), [N,C,H,W] times [N,C,1,1], then a
  // per-channel constant; in NHWC the broadcast and the constant's bytes must follow the layout.
  GraphBuilder b("se");
  const auto x = b.input("x", {2, 8, 9, 7});
  const auto y = b.relu(b.conv(x, 8, 3, 1, 1));
  const auto s = b.sigmoid(b.conv(b.global_average_pool(y), 8, 1));
  const auto c = b.constant(scalar_shape(random_tensor({8}, 31), {1, 8, 1, 1}), "c");
  const auto plane = b.constant(random_tensor({1, 8, 9, 7}, 32), "plane");
  const Graph before = b.finish({b.add(b.add(b.mul(y, s), c), plane)});
  for (const ElemType dtype : {ElemType::f32, ElemType::f16}) {
    Graph after = before;
    run_passes(after, {.dtype = dtype, .layout = LayoutChoice::nhwc});
    int nhwc = 0;
    for (const Node& n : after.nodes) nhwc += n.string_attr("galley.layout", "") == "NHWC" ? 1 : 0;
    EXPECT_GE(nhwc, 5) << to_string(dtype);
    EXPECT_LE(max_error(run(after), run(before)), dtype == ElemType::f32 ? 1e-5 : 1e-2) << to_string(dtype);
  }
}

TEST(Passes, DefaultPipelineOnAResidualNetwork) {
  // BN after every conv (as a training export has it), then the whole pipeline, f32 and f16 + NHWC.
  GraphBuilder b("bn_net", 3);
  const auto x = b.input("x", {2, 3, 32, 32});
  std::uint32_t seed = 100;
  const auto conv_bn = [&](const std::string& in, std::int64_t k, std::int64_t kernel, std::int64_t stride) {
    const auto y = b.conv(in, k, kernel, stride, kernel / 2, 1, false);
    std::vector<std::string> stats;
    for (int i = 0; i < 4; ++i) {
      stats.push_back(b.constant(random_tensor({k}, seed++, i == 3 ? 0.5f : -0.5f, 1.5f), "bn"));
    }
    return b.node("BatchNormalization", {y, stats[0], stats[1], stats[2], stats[3]})[0];
  };
  auto y = b.max_pool(b.relu(conv_bn(x, 8, 3, 2)), 3, 2, 1);
  const auto block = b.relu(b.add(conv_bn(b.relu(conv_bn(y, 8, 3, 1)), 8, 3, 1), y));
  const Graph before = b.finish({b.gemm(b.flatten(b.global_average_pool(block)), 5)});

  Graph f32 = before;
  const PassReport report = run_passes(f32);
  EXPECT_EQ(report.passes[1].rewrites, 3);  // three BNs folded
  EXPECT_EQ(op_counts(f32).count("BatchNormalization"), 0u);
  EXPECT_EQ(op_counts(f32).at("galley.FusedConv"), 3);
  EXPECT_LT(report.passes.back().nodes_after, report.passes.front().nodes_before);
  EXPECT_LE(max_error(run(f32), run(before)), 1e-5);

  Graph f16 = before;
  run_passes(f16, {.dtype = ElemType::f16, .gpu = true});  // NHWC, as a GPU gets it
  EXPECT_GT(op_counts(f16).at("galley.Reorder"), 0);
  EXPECT_LE(max_error(run(f16), run(before)), 1e-2);
}

TEST(Passes, ZooNetworksKeepTheirResults) {
  for (const std::string name : {"resnet18", "mobilenet_v2"}) {
    const Graph before = build_model(name, 1, 32);
    const auto want = run(before);
    Graph f32 = before;
    run_passes(f32);
    EXPECT_LE(max_error(run(f32), want), 1e-5) << name;
    Graph f16 = before;
    run_passes(f16, {.dtype = ElemType::f16, .gpu = true});
    EXPECT_LE(max_error(run(f16), want), 1e-2) << name;
  }
}

TEST(Passes, ImportedOnnxModelKeepsItsResults) {
  const std::filesystem::path dir = testing::onnx_testdata_dir();
  const Graph before =
      import_onnx((dir / "pytorch-converted" / "test_Conv2d_groups" / "model.onnx").string());
  for (const ElemType dtype : {ElemType::f32, ElemType::f16}) {
    Graph after = before;
    run_passes(after, {.dtype = dtype, .layout = LayoutChoice::nhwc});
    EXPECT_LE(max_error(run(after), run(before)), dtype == ElemType::f32 ? 1e-5 : 1e-2) << to_string(dtype);
  }
}

}  // namespace
}  // namespace galley::model
