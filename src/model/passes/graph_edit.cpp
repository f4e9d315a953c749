#include "model/passes/graph_edit.hpp"

#include <cstring>
#include <set>

#include "galley/core/dtype.hpp"
#include "galley/core/error.hpp"

namespace galley::model::passes {

std::map<std::string, std::vector<std::size_t>> readers(const Graph& graph) {
  std::map<std::string, std::vector<std::size_t>> out;
  for (std::size_t i = 0; i < graph.nodes.size(); ++i) {
    for (const std::string& in : graph.nodes[i].inputs) {
      if (!in.empty()) out[in].push_back(i);
    }
  }
  return out;
}

std::map<std::string, std::size_t> producers(const Graph& graph) {
  std::map<std::string, std::size_t> out;
  for (std::size_t i = 0; i < graph.nodes.size(); ++i) {
    for (const std::string& o : graph.nodes[i].outputs) {
      if (!o.empty()) out[o] = i;
    }
  }
  return out;
}

bool is_graph_output(const Graph& graph, const std::string& value) {
  for (const std::string& o : graph.outputs) {
    if (o == value) return true;
  }
  return false;
}

bool is_folded(const Graph& graph, const Node& node) {
  bool any = false;
  for (const std::string& out : node.outputs) {
    if (out.empty()) continue;
    if (!graph.is_constant(out)) return false;
    any = true;
  }
  return any;
}

std::string fresh_name(const Graph& graph, const std::string& base) {
  std::set<std::string> node_names;
  for (const Node& n : graph.nodes) node_names.insert(n.name);
  const auto taken = [&](const std::string& name) {
    return graph.values.count(name) != 0 || graph.constants.count(name) != 0 || node_names.count(name) != 0;
  };
  if (!taken(base)) return base;
  for (int i = 1;; ++i) {
    const std::string name = base + "_" + std::to_string(i);
    if (!taken(name)) return name;
  }
}

void set_constant(Graph& graph, const std::string& name, HostTensor value) {
  graph.values[name] = ValueInfo{value.type, value.shape, true};
  graph.constants[name] = std::move(value);
}

bool is_float(ElemType type) {
  return type == ElemType::f32 || type == ElemType::f16 || type == ElemType::bf16 || type == ElemType::f64;
}

HostTensor from_doubles(const std::vector<double>& values, Shape shape, ElemType type) {
  HostTensor t;
  t.type = type;
  t.shape = std::move(shape);
  if (static_cast<std::size_t>(element_count(t.shape)) != values.size()) {
    throw Error(Status::internal,
                "from_doubles: " + std::to_string(values.size()) + " values for shape " + to_string(t.shape));
  }
  t.data.resize(values.size() * size_of(type));
  std::byte* out = t.data.data();
  for (std::size_t i = 0; i < values.size(); ++i) {
    switch (type) {
      case ElemType::f32: {
        const auto f = static_cast<float>(values[i]);
        std::memcpy(out + 4 * i, &f, 4);
        break;
      }
      case ElemType::f64:
        std::memcpy(out + 8 * i, &values[i], 8);
        break;
      case ElemType::f16: {
        const std::uint16_t h = float_to_half(static_cast<float>(values[i]));
        std::memcpy(out + 2 * i, &h, 2);
        break;
      }
      case ElemType::bf16: {
        const std::uint16_t h = float_to_bfloat16(static_cast<float>(values[i]));
        std::memcpy(out + 2 * i, &h, 2);
        break;
      }
      default:
        throw Error(Status::internal,
                    std::string("from_doubles: ") + to_string(type) + " is not a float type");
    }
  }
  return t;
}

HostTensor converted(const HostTensor& tensor, ElemType type) {
  if (tensor.type == type) return tensor;
  return from_doubles(tensor.as_double(), tensor.shape, type);
}

void refresh(Graph& graph) {
  std::set<std::string> defined(graph.inputs.begin(), graph.inputs.end());
  for (const auto& [name, tensor] : graph.constants) defined.insert(name);
  for (const Node& n : graph.nodes) defined.insert(n.outputs.begin(), n.outputs.end());
  for (auto it = graph.values.begin(); it != graph.values.end();) {
    it = defined.count(it->first) != 0 ? std::next(it) : graph.values.erase(it);
  }
  graph.validate();
  infer_shapes(graph);
}

}  // namespace galley::model::passes
