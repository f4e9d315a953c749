// torchvision's classification networks rebuilt with GraphBuilder, as an inference export leaves
// them: batch norm folded into each convolution's weights and bias, so every conv has a bias.
#include <functional>
#include <map>

#include "galley/core/error.hpp"
#include "galley/model/builder.hpp"

namespace galley::model {
namespace {

using Builder = std::function<Graph(std::int64_t batch, std::int64_t size)>;

// ResNet's basic block (ResNet-18/34): two 3x3 convs, identity or 1x1 projection shortcut.
std::string basic_block(GraphBuilder& b, const std::string& x, std::int64_t planes, std::int64_t stride) {
  std::string y = b.relu(b.conv(x, planes, 3, stride, 1));
  y = b.conv(y, planes, 3, 1, 1);
  const std::string shortcut = (stride != 1 || b.shape(x)[1] != planes) ? b.conv(x, planes, 1, stride, 0) : x;
  return b.relu(b.add(y, shortcut));
}

// ResNet's bottleneck (ResNet-50): 1x1 reduce, 3x3 (stride here, as torchvision v1.5), 1x1 expand x4.
std::string bottleneck(GraphBuilder& b, const std::string& x, std::int64_t planes, std::int64_t stride) {
  std::string y = b.relu(b.conv(x, planes, 1, 1, 0));
  y = b.relu(b.conv(y, planes, 3, stride, 1));
  y = b.conv(y, planes * 4, 1, 1, 0);
  const std::string shortcut = (stride != 1 || b.shape(x)[1] != planes * 4) ? b.conv(x, planes * 4, 1, stride, 0) : x;
  return b.relu(b.add(y, shortcut));
}

Graph resnet(const std::string& name, std::int64_t batch, std::int64_t size, bool bottlenecks, const std::vector<int>& blocks) {
  GraphBuilder b(name);
  std::string x = b.input("input", {batch, 3, size, size});
  x = b.max_pool(b.relu(b.conv(x, 64, 7, 2, 3)), 3, 2, 1);
  const std::int64_t planes[4] = {64, 128, 256, 512};
  for (int stage = 0; stage < 4; ++stage) {
    for (int i = 0; i < blocks[stage]; ++i) {
      const std::int64_t stride = (stage > 0 && i == 0) ? 2 : 1;
      x = bottlenecks ? bottleneck(b, x, planes[stage], stride) : basic_block(b, x, planes[stage], stride);
    }
  }
  return b.finish({b.gemm(b.flatten(b.global_average_pool(x)), 1000)});
}

// MobileNet v2's inverted residual: 1x1 expand (when t > 1), 3x3 depthwise, 1x1 project, with
// relu6 after the first two and a residual when shapes allow.
std::string inverted_residual(GraphBuilder& b, const std::string& x, std::int64_t out, std::int64_t stride, std::int64_t t) {
  const std::int64_t in = b.shape(x)[1];
  const std::int64_t hidden = in * t;
  std::string y = x;
  if (t != 1) y = b.clip(b.conv(y, hidden, 1, 1, 0), 0, 6);
  y = b.clip(b.conv(y, hidden, 3, stride, 1, hidden), 0, 6);
  y = b.conv(y, out, 1, 1, 0);
  return (stride == 1 && in == out) ? b.add(x, y) : y;
}

Graph mobilenet_v2(std::int64_t batch, std::int64_t size) {
  GraphBuilder b("mobilenet_v2");
  std::string x = b.input("input", {batch, 3, size, size});
  x = b.clip(b.conv(x, 32, 3, 2, 1), 0, 6);
  // t (expansion), c (channels), n (repeats), s (first stride): torchvision's table.
  const int table[7][4] = {{1, 16, 1, 1}, {6, 24, 2, 2}, {6, 32, 3, 2}, {6, 64, 4, 2}, {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1}};
  for (const auto& row : table) {
    for (int i = 0; i < row[2]; ++i) x = inverted_residual(b, x, row[1], i == 0 ? row[3] : 1, row[0]);
  }
  x = b.clip(b.conv(x, 1280, 1, 1, 0), 0, 6);
  return b.finish({b.gemm(b.flatten(b.global_average_pool(x)), 1000)});
}

Graph tiny_cnn(std::int64_t batch, std::int64_t size) {
  GraphBuilder b("tiny_cnn");
  std::string x = b.input("input", {batch, 3, size, size});
  x = b.max_pool(b.relu(b.conv(x, 16, 3, 2, 1)), 3, 2, 1);
  x = basic_block(b, x, 16, 1);
  x = basic_block(b, x, 32, 2);
  return b.finish({b.gemm(b.flatten(b.global_average_pool(x)), 10)});
}

const std::map<std::string, Builder>& builders() {
  static const std::map<std::string, Builder> table = {
      {"resnet18", [](std::int64_t n, std::int64_t s) { return resnet("resnet18", n, s, false, {2, 2, 2, 2}); }},
      {"resnet50", [](std::int64_t n, std::int64_t s) { return resnet("resnet50", n, s, true, {3, 4, 6, 3}); }},
      {"mobilenet_v2", mobilenet_v2},
      {"tiny_cnn", tiny_cnn},
  };
  return table;
}

}  // namespace

std::vector<std::string> model_names() {
  std::vector<std::string> out;
  for (const auto& [name, builder] : builders()) out.push_back(name);
  return out;
}

Graph build_model(const std::string& name, std::int64_t batch, std::int64_t size) {
  const auto it = builders().find(name);
  if (it == builders().end()) {
    std::string known;
    for (const auto& n : model_names()) known += (known.empty() ? "" : ", ") + n;
    throw Error(Status::not_found, "unknown model '" + name + "' (known: " + known + ")");
  }
  if (batch <= 0 || size < 32) {
    throw Error(Status::invalid_argument, "model " + name + ": batch " + std::to_string(batch) + " must be positive and size " +
                                              std::to_string(size) + " at least 32");
  }
  return it->second(batch, size);
}

}  // namespace galley::model
