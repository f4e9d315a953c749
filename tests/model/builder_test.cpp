// GraphBuilder and the C++ model zoo: shapes inferred per call, mistakes named at the call, and
// the zoo's networks with torchvision's layer counts (as its ONNX export has them).
#include <gtest/gtest.h>

#include <map>

#include "galley/core/error.hpp"
#include "galley/model/builder.hpp"

namespace galley::model {
namespace {

std::map<std::string, int> op_counts(const Graph& g) {
  std::map<std::string, int> counts;
  for (const Node& n : g.nodes) counts[n.op_type]++;
  return counts;
}

TEST(GraphBuilder, InfersShapesAsItGoes) {
  GraphBuilder b("t");
  const auto x = b.input("x", {2, 3, 31, 29});
  const auto y = b.conv(x, 8, 3, 2, 1);
  EXPECT_EQ(b.shape(y), (Shape{2, 8, 16, 15}));
  const auto z = b.gemm(b.flatten(b.global_average_pool(b.relu(y))), 5);
  EXPECT_EQ(b.shape(z), (Shape{2, 5}));
  const Graph g = b.finish({z});
  EXPECT_EQ(g.outputs, std::vector<std::string>{z});
  EXPECT_EQ(g.inputs, std::vector<std::string>{"x"});
}

TEST(GraphBuilder, MistakesAreNamedAtTheCall) {
  GraphBuilder b("t");
  const auto x = b.input("x", {1, 6, 8, 8});
  EXPECT_THROW(b.conv(x, 8, 3, 1, 1, 4), Error);  // 4 groups do not divide 6 channels
  EXPECT_THROW(b.relu("nothing"), Error);
  EXPECT_THROW(b.add(x, b.input("y", {1, 5, 8, 8})), Error);  // shapes do not broadcast
  EXPECT_THROW(b.input("x", {1}), Error);                      // name taken
  EXPECT_THROW(b.finish({"nothing"}), Error);
}

TEST(ModelZoo, LayerCountsMatchTorchvisionsExports) {
  // Counted in torch.onnx exports of torchvision 0.14's models (scripts/export-models).
  const auto r18 = op_counts(build_model("resnet18", 1));
  EXPECT_EQ(r18.at("Conv"), 20);
  EXPECT_EQ(r18.at("Relu"), 17);
  EXPECT_EQ(r18.at("Add"), 8);
  const auto r50 = op_counts(build_model("resnet50", 1));
  EXPECT_EQ(r50.at("Conv"), 53);
  EXPECT_EQ(r50.at("Relu"), 49);
  EXPECT_EQ(r50.at("Add"), 16);
  const auto mb = op_counts(build_model("mobilenet_v2", 1));
  EXPECT_EQ(mb.at("Conv"), 52);
  EXPECT_EQ(mb.at("Clip"), 35);
  EXPECT_EQ(mb.at("Add"), 10);
}

TEST(ModelZoo, OutputsAndErrors) {
  const Graph g = build_model("resnet50", 4, 224);
  EXPECT_EQ(g.value(g.outputs[0]).shape, (Shape{4, 1000}));
  EXPECT_EQ(build_model("tiny_cnn", 2, 64).value("input").shape, (Shape{2, 3, 64, 64}));
  EXPECT_THROW(build_model("vgg", 1), Error);
  EXPECT_THROW(build_model("resnet18", 0), Error);
}

}  // namespace
}  // namespace galley::model
