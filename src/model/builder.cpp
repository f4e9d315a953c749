#include "galley/model/builder.hpp"

#include <cmath>
#include <cstring>

#include "galley/core/error.hpp"
#include "model/shape_inference.hpp"

namespace galley::model {
namespace {

std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

GraphBuilder::GraphBuilder(std::string name, std::uint64_t seed) : state_(seed) {
  graph_.name = std::move(name);
  graph_.opset = 17;
}

std::string GraphBuilder::fresh(const std::string& hint) { return hint + "_" + std::to_string(counter_++); }

HostTensor GraphBuilder::random(Shape shape, double bound) {
  HostTensor t;
  t.type = ElemType::f32;
  t.shape = std::move(shape);
  const auto count = static_cast<std::size_t>(element_count(t.shape));
  t.data.resize(count * 4);
  for (std::size_t i = 0; i < count; ++i) {
    const double u = static_cast<double>(splitmix64(state_) >> 11) * (1.0 / 9007199254740992.0);
    const auto v = static_cast<float>((2 * u - 1) * bound);
    std::memcpy(t.data.data() + 4 * i, &v, 4);
  }
  return t;
}

std::string GraphBuilder::input(const std::string& name, Shape shape) {
  if (graph_.values.count(name) != 0) throw Error(Status::invalid_argument, "value '" + name + "' already exists");
  element_count(shape);
  graph_.values[name] = ValueInfo{ElemType::f32, std::move(shape), true};
  graph_.inputs.push_back(name);
  return name;
}

std::string GraphBuilder::constant(HostTensor value, const std::string& hint) {
  const std::string name = fresh(hint);
  graph_.values[name] = ValueInfo{value.type, value.shape, true};
  graph_.constants[name] = std::move(value);
  return name;
}

std::vector<std::string> GraphBuilder::node(const std::string& op_type, std::vector<std::string> inputs,
                                            std::map<std::string, Attribute> attributes, std::size_t outputs) {
  Node n;
  n.name = fresh(op_type);
  n.op_type = op_type;
  for (const std::string& in : inputs) {
    if (!in.empty() && graph_.values.count(in) == 0) {
      throw Error(Status::invalid_argument, "node '" + n.name + "' (" + op_type + "): input '" + in + "' does not exist");
    }
  }
  n.inputs = std::move(inputs);
  n.attributes = std::move(attributes);
  for (std::size_t i = 0; i < outputs; ++i) n.outputs.push_back(n.name + (outputs == 1 ? "" : "_" + std::to_string(i)));
  infer_node(graph_, n);  // throws before the node joins the graph
  graph_.nodes.push_back(n);
  return n.outputs;
}

const Shape& GraphBuilder::shape(const std::string& value) const { return graph_.value(value).shape; }

std::string GraphBuilder::conv(const std::string& x, std::int64_t out_channels, std::int64_t k, std::int64_t stride,
                               std::int64_t pad, std::int64_t groups, bool bias, std::int64_t dilation) {
  const Shape& in = shape(x);
  if (in.size() != 4) throw Error(Status::invalid_argument, "conv input '" + x + "' has shape " + to_string(in) + ", not NCHW");
  if (groups <= 0 || in[1] % groups != 0) {
    throw Error(Status::invalid_argument, "conv groups " + std::to_string(groups) + " do not divide " + std::to_string(in[1]) + " channels");
  }
  const std::int64_t fan_in = in[1] / groups * k * k;
  std::vector<std::string> inputs{x, constant(random({out_channels, in[1] / groups, k, k}, std::sqrt(6.0 / static_cast<double>(fan_in))), "w")};
  if (bias) inputs.push_back(constant(random({out_channels}, 0.1), "b"));
  return node("Conv", inputs,
              {{"kernel_shape", std::vector<std::int64_t>{k, k}},
               {"strides", std::vector<std::int64_t>{stride, stride}},
               {"pads", std::vector<std::int64_t>{pad, pad, pad, pad}},
               {"dilations", std::vector<std::int64_t>{dilation, dilation}},
               {"group", groups}})[0];
}

std::string GraphBuilder::relu(const std::string& x) { return node("Relu", {x})[0]; }

std::string GraphBuilder::clip(const std::string& x, double lo, double hi) {
  HostTensor l, h;
  l.type = h.type = ElemType::f32;
  const auto lf = static_cast<float>(lo), hf = static_cast<float>(hi);
  l.data.resize(4);
  h.data.resize(4);
  std::memcpy(l.data.data(), &lf, 4);
  std::memcpy(h.data.data(), &hf, 4);
  return node("Clip", {x, constant(l, "min"), constant(h, "max")})[0];
}

std::string GraphBuilder::sigmoid(const std::string& x) { return node("Sigmoid", {x})[0]; }
std::string GraphBuilder::mul(const std::string& a, const std::string& b) { return node("Mul", {a, b})[0]; }
std::string GraphBuilder::add(const std::string& a, const std::string& b) { return node("Add", {a, b})[0]; }

std::string GraphBuilder::max_pool(const std::string& x, std::int64_t k, std::int64_t stride, std::int64_t pad) {
  return node("MaxPool", {x},
              {{"kernel_shape", std::vector<std::int64_t>{k, k}},
               {"strides", std::vector<std::int64_t>{stride, stride}},
               {"pads", std::vector<std::int64_t>{pad, pad, pad, pad}}})[0];
}

std::string GraphBuilder::global_average_pool(const std::string& x) { return node("GlobalAveragePool", {x})[0]; }
std::string GraphBuilder::flatten(const std::string& x) { return node("Flatten", {x}, {{"axis", std::int64_t{1}}})[0]; }

std::string GraphBuilder::gemm(const std::string& x, std::int64_t out_features) {
  const Shape& in = shape(x);
  if (in.size() != 2) throw Error(Status::invalid_argument, "gemm input '" + x + "' has shape " + to_string(in) + ", not [batch, features]");
  const double bound = 1.0 / std::sqrt(static_cast<double>(in[1]));
  const std::string w = constant(random({out_features, in[1]}, bound), "fc_w");
  const std::string b = constant(random({out_features}, bound), "fc_b");
  return node("Gemm", {x, w, b}, {{"transB", std::int64_t{1}}})[0];
}

Graph GraphBuilder::finish(const std::vector<std::string>& outputs) {
  for (const std::string& o : outputs) {
    if (graph_.values.count(o) == 0) throw Error(Status::invalid_argument, "output '" + o + "' is not a value of the graph");
  }
  graph_.outputs = outputs;
  graph_.validate();
  Graph out = std::move(graph_);
  graph_ = Graph{};
  return out;
}

}  // namespace galley::model
