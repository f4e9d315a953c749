// Building a network in C++: each call adds one node (ONNX's op names and attributes, so a built
// graph and an imported one are the same thing) and returns the name of its output, with the shape
// inferred at once, so a mistake is an Error at the line that made it.
//
//   model::GraphBuilder b("tiny");
//   auto x = b.input("x", {1, 3, 32, 32});
//   auto y = b.relu(b.conv(x, 16, 3, 1, 1));
//   y = b.gemm(b.flatten(b.global_average_pool(y)), 10);
//   model::Graph g = b.finish({y});
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "galley/model/graph.hpp"

namespace galley::model {

class GraphBuilder {
 public:
  /// `seed` makes the random weights of conv() and gemm(): the same seed, the same weights.
  explicit GraphBuilder(std::string name, std::uint64_t seed = 2026);

  /// A graph input of f32 and `shape`.
  std::string input(const std::string& name, Shape shape);
  /// A constant (weights) added under a fresh name.
  std::string constant(HostTensor value, const std::string& hint = "const");

  /// Conv with `out_channels` filters of k x k, stride, symmetric pad, groups, dilation; weights
  /// (He-scaled uniform) and, with `bias`, a bias drawn from the builder's seed.
  std::string conv(const std::string& x, std::int64_t out_channels, std::int64_t k, std::int64_t stride = 1,
                   std::int64_t pad = 0, std::int64_t groups = 1, bool bias = true, std::int64_t dilation = 1);
  std::string relu(const std::string& x);
  /// Clip to [lo, hi] (relu6 = clip(x, 0, 6)).
  std::string clip(const std::string& x, double lo, double hi);
  std::string sigmoid(const std::string& x);
  std::string mul(const std::string& a, const std::string& b);
  std::string add(const std::string& a, const std::string& b);
  std::string max_pool(const std::string& x, std::int64_t k, std::int64_t stride, std::int64_t pad);
  std::string global_average_pool(const std::string& x);
  std::string flatten(const std::string& x);
  /// y = x W^T + b with W of [out_features, in_features] (nn.Linear), as ONNX Gemm with transB = 1.
  std::string gemm(const std::string& x, std::int64_t out_features);

  /// Adds any node (ONNX op name, attributes) and infers its outputs; returns their names.
  std::vector<std::string> node(const std::string& op_type, std::vector<std::string> inputs,
                                std::map<std::string, Attribute> attributes = {}, std::size_t outputs = 1);

  /// The output shape of a value built so far.
  const Shape& shape(const std::string& value) const;

  /// The graph with `outputs` as its outputs (each must be a value built here). The builder is
  /// empty afterwards.
  Graph finish(const std::vector<std::string>& outputs);

 private:
  std::string fresh(const std::string& hint);
  HostTensor random(Shape shape, double bound);

  Graph graph_;
  std::uint64_t state_;
  int counter_ = 0;
};

/// Networks built with GraphBuilder, for benchmarks and the demo without Python: "resnet18",
/// "resnet50", "mobilenet_v2" (torchvision's layer structure, batch norm folded into the
/// convolutions as an inference export does, random weights) and "tiny_cnn" (a few layers, quick on
/// the CPU). Input [batch, 3, size, size]; throws Error(not_found) listing the names for another.
Graph build_model(const std::string& name, std::int64_t batch, std::int64_t size = 224);
/// The names build_model() knows.
std::vector<std::string> model_names();

}  // namespace galley::model
