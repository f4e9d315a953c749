// ONNX protobuf messages into a Graph. Every malformed field is an Error naming the file and the
// node, initializer or input it belongs to; nothing here trusts a size or offset from the file.
#include "galley/model/onnx.hpp"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "galley/core/error.hpp"
#include "model/shape_inference.hpp"

namespace galley::model {
namespace {

// Opset 6 is the one of the PyTorch-converted ONNX test data; it differs from 7 for the ops here
// only by binary ops' explicit broadcast attribute, normalised below.
constexpr std::int64_t kMinOpset = 6;
constexpr std::int64_t kMaxOpset = 17;

std::string read_file(const std::string& path, const std::string& what) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw Error(Status::invalid_argument, what + " '" + path + "' is a directory, not a file");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(Status::not_found, "cannot open " + what + " '" + path + "'");
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (in.bad()) throw Error(Status::io_error, "cannot read " + what + " '" + path + "'");
  return std::move(bytes).str();
}

ElemType elem_type(int onnx_type, const std::string& what) {
  switch (onnx_type) {
    case onnx::TensorProto::FLOAT: return ElemType::f32;
    case onnx::TensorProto::FLOAT16: return ElemType::f16;
    case onnx::TensorProto::BFLOAT16: return ElemType::bf16;
    case onnx::TensorProto::DOUBLE: return ElemType::f64;
    case onnx::TensorProto::INT64: return ElemType::i64;
    case onnx::TensorProto::INT32: return ElemType::i32;
    case onnx::TensorProto::INT8: return ElemType::i8;
    case onnx::TensorProto::UINT8: return ElemType::u8;
    case onnx::TensorProto::BOOL: return ElemType::boolean;
    default: break;
  }
  const char* name = onnx::TensorProto::DataType_IsValid(onnx_type)
                         ? onnx::TensorProto::DataType_Name(static_cast<onnx::TensorProto::DataType>(onnx_type)).c_str()
                         : "unknown";
  throw Error(Status::unsupported, what + " has element type " + std::string(name) + " (" + std::to_string(onnx_type) +
                                       "), not one of float, float16, bfloat16, double, int64, int32, int8, uint8, bool");
}

// Appends `count` elements from a typed repeated field, narrowing to the tensor's storage type.
template <class Field>
void append_typed(HostTensor& t, const Field& field) {
  const std::size_t size = size_of(t.type);
  t.data.resize(static_cast<std::size_t>(field.size()) * size);
  for (int i = 0; i < field.size(); ++i) {
    std::byte* dst = t.data.data() + static_cast<std::size_t>(i) * size;
    const auto v = field.Get(i);
    switch (t.type) {
      case ElemType::f32: {
        const float f = static_cast<float>(v);
        std::memcpy(dst, &f, 4);
        break;
      }
      case ElemType::f64: {
        const double d = static_cast<double>(v);
        std::memcpy(dst, &d, 8);
        break;
      }
      case ElemType::i64: {
        const auto x = static_cast<std::int64_t>(v);
        std::memcpy(dst, &x, 8);
        break;
      }
      case ElemType::i32: {
        const auto x = static_cast<std::int32_t>(v);
        std::memcpy(dst, &x, 4);
        break;
      }
      case ElemType::f16:
      case ElemType::bf16: {  // stored as the bit pattern in int32_data
        const auto x = static_cast<std::uint16_t>(v);
        std::memcpy(dst, &x, 2);
        break;
      }
      default: {
        const auto x = static_cast<std::uint8_t>(v);
        std::memcpy(dst, &x, 1);
        break;
      }
    }
  }
}

HostTensor to_host(const onnx::TensorProto& proto, const std::filesystem::path& model_dir, const std::string& what) {
  HostTensor t;
  t.type = elem_type(proto.data_type(), what);
  for (const auto d : proto.dims()) {
    if (d < 0) throw Error(Status::invalid_argument, what + " has a negative dim " + std::to_string(d));
    t.shape.push_back(d);
  }
  if (!byte_size_fits(t.shape, t.type)) {
    throw Error(Status::invalid_argument, what + " of shape " + to_string(t.shape) + " has more bytes than a 64-bit size holds");
  }
  const std::int64_t count = element_count(t.shape);
  const std::size_t bytes = static_cast<std::size_t>(count) * size_of(t.type);
  if (proto.data_location() == onnx::TensorProto::EXTERNAL) {
    std::string location;
    std::int64_t offset = 0, length = -1;
    for (const auto& kv : proto.external_data()) {
      try {
        if (kv.key() == "location") location = kv.value();
        if (kv.key() == "offset") offset = std::stoll(kv.value());
        if (kv.key() == "length") length = std::stoll(kv.value());
      } catch (const std::exception&) {
        throw Error(Status::invalid_argument, what + ": external data field '" + kv.key() + "' = '" + kv.value() + "' is not a number");
      }
    }
    const std::filesystem::path file = model_dir / location;
    if (location.empty() || std::filesystem::path(location).is_absolute() ||
        location.find("..") != std::string::npos) {
      throw Error(Status::invalid_argument, what + ": external data location '" + location +
                                                "' must be a relative path inside the model's folder");
    }
    if (length >= 0 && static_cast<std::size_t>(length) != bytes) {
      throw Error(Status::invalid_argument, what + ": external data length " + std::to_string(length) + " is not the " +
                                                std::to_string(bytes) + " bytes of shape " + to_string(t.shape));
    }
    std::ifstream in(file, std::ios::binary);
    if (!in) throw Error(Status::not_found, what + ": cannot open external data file '" + file.string() + "'");
    in.seekg(0, std::ios::end);
    const auto file_size = static_cast<std::int64_t>(in.tellg());
    if (offset < 0 || offset > file_size || static_cast<std::size_t>(file_size - offset) < bytes) {
      throw Error(Status::invalid_argument, what + ": external data file '" + file.string() + "' (" +
                                                std::to_string(file_size) + " bytes) holds no " + std::to_string(bytes) +
                                                " bytes at offset " + std::to_string(offset));
    }
    t.data.resize(bytes);
    in.seekg(offset);
    in.read(reinterpret_cast<char*>(t.data.data()), static_cast<std::streamsize>(bytes));
    if (!in) throw Error(Status::io_error, what + ": cannot read external data file '" + file.string() + "'");
    return t;
  }
  if (proto.has_raw_data()) {
    if (proto.raw_data().size() != bytes) {
      throw Error(Status::invalid_argument, what + ": raw_data holds " + std::to_string(proto.raw_data().size()) +
                                                " bytes, shape " + to_string(t.shape) + " of " + to_string(t.type) +
                                                " needs " + std::to_string(bytes));
    }
    t.data.resize(bytes);
    if (bytes != 0) std::memcpy(t.data.data(), proto.raw_data().data(), bytes);
    return t;
  }
  switch (t.type) {
    case ElemType::f32: append_typed(t, proto.float_data()); break;
    case ElemType::f64: append_typed(t, proto.double_data()); break;
    case ElemType::i64: append_typed(t, proto.int64_data()); break;
    default: append_typed(t, proto.int32_data()); break;
  }
  if (t.data.size() != bytes) {
    throw Error(Status::invalid_argument, what + " holds " + std::to_string(t.data.size() / size_of(t.type)) +
                                              " elements, shape " + to_string(t.shape) + " needs " + std::to_string(count));
  }
  return t;
}

Attribute to_attribute(const onnx::AttributeProto& a, const std::filesystem::path& dir, const std::string& what) {
  switch (a.type()) {
    case onnx::AttributeProto::INT: return a.i();
    case onnx::AttributeProto::FLOAT: return static_cast<double>(a.f());
    case onnx::AttributeProto::STRING: return a.s();
    case onnx::AttributeProto::TENSOR: return to_host(a.t(), dir, what);
    case onnx::AttributeProto::INTS: return std::vector<std::int64_t>(a.ints().begin(), a.ints().end());
    case onnx::AttributeProto::FLOATS: return std::vector<double>(a.floats().begin(), a.floats().end());
    case onnx::AttributeProto::STRINGS: return std::vector<std::string>(a.strings().begin(), a.strings().end());
    default: break;
  }
  throw Error(Status::unsupported, what + " is of type " +
                                       onnx::AttributeProto::AttributeType_Name(a.type()) +
                                       " (subgraphs and sparse tensors are not supported)");
}

ValueInfo to_value_info(const onnx::ValueInfoProto& v, const OnnxImportOptions& options, bool is_input) {
  const std::string what = std::string(is_input ? "graph input '" : "value '") + v.name() + "'";
  if (!v.type().has_tensor_type()) throw Error(Status::unsupported, what + " is not a tensor");
  ValueInfo info;
  info.type = elem_type(v.type().tensor_type().elem_type(), what);
  if (!v.type().tensor_type().has_shape()) return info;
  info.shape_known = true;
  const auto& dims = v.type().tensor_type().shape().dim();
  for (int i = 0; i < dims.size(); ++i) {
    if (is_input && i == 0 && options.batch) {
      info.shape.push_back(*options.batch);
    } else if (dims[i].has_dim_value() && dims[i].dim_value() < 0) {
      throw Error(Status::invalid_argument, what + " dim " + std::to_string(i) + " = " + std::to_string(dims[i].dim_value()) +
                                                " is negative");
    } else if (dims[i].has_dim_value()) {
      info.shape.push_back(dims[i].dim_value());
    } else if (is_input) {
      throw Error(Status::unsupported, what + " dim " + std::to_string(i) + " is dynamic ('" + dims[i].dim_param() +
                                           "')" + (i == 0 ? "; give the batch size (--batch N)" : "; only static shapes run"));
    } else {
      info.shape_known = false;
      info.shape.clear();
      return info;
    }
  }
  if (!byte_size_fits(info.shape, info.type)) {
    throw Error(Status::invalid_argument, what + " of shape " + to_string(info.shape) + " has more bytes than a 64-bit size holds");
  }
  return info;
}

// Opset < 7 binary ops with broadcast=1 align B's dims at `axis` of A (default: trailing). A constant
// B gets trailing 1s instead, which NumPy broadcasting then aligns the same way.
void normalize_legacy_broadcast(Graph& g) {
  if (g.opset >= 7) return;
  for (Node& n : g.nodes) {
    if (n.op_type != "Add" && n.op_type != "Sub" && n.op_type != "Mul" && n.op_type != "Div") continue;
    if (n.int_attr("broadcast", 0) == 0) continue;
    if (!n.has("axis")) {
      n.attributes.erase("broadcast");
      continue;
    }
    const auto a = g.values.find(n.inputs.at(0));
    const auto b = g.constants.find(n.inputs.at(1));
    if (a == g.values.end() || !a->second.shape_known || b == g.constants.end()) {
      throw Error(Status::unsupported, n.label() + ": legacy broadcast with 'axis' needs a constant second input and a known first shape");
    }
    const auto rank = static_cast<std::int64_t>(a->second.shape.size());
    std::int64_t axis = n.int_attr("axis", 0);
    if (axis < 0) axis += rank;
    const auto trailing = rank - axis - static_cast<std::int64_t>(b->second.shape.size());
    if (axis < 0 || trailing < 0) throw Error(Status::invalid_argument, n.label() + ": attribute 'axis' does not fit the inputs");
    HostTensor copy = b->second;
    copy.shape.insert(copy.shape.end(), static_cast<std::size_t>(trailing), 1);
    const std::string name = n.inputs[1] + "__aligned_" + n.name;
    g.values[name] = ValueInfo{copy.type, copy.shape, true};
    g.constants[name] = std::move(copy);
    n.inputs[1] = name;
    n.attributes.erase("broadcast");
    n.attributes.erase("axis");
  }
}

}  // namespace

Graph import_onnx(const std::string& path, const OnnxImportOptions& options) {
  if (options.batch && *options.batch <= 0) {
    throw Error(Status::invalid_argument, "batch " + std::to_string(*options.batch) + " must be positive");
  }
  const std::string bytes = read_file(path, "ONNX model");
  onnx::ModelProto model;
  if (!model.ParseFromString(bytes)) {
    throw Error(Status::invalid_argument, "'" + path + "' is not an ONNX model (protobuf parsing failed)");
  }
  Graph g;
  g.name = model.graph().name();
  bool has_default_domain = false;
  for (const auto& op : model.opset_import()) {
    if (!op.domain().empty() && op.domain() != "ai.onnx") continue;
    if (has_default_domain) throw Error(Status::invalid_argument, "'" + path + "' imports the default ONNX domain's opset twice");
    has_default_domain = true;
    g.opset = op.version();
  }
  if (!has_default_domain) {
    throw Error(Status::invalid_argument, "'" + path + "' has no opset_import for the default ONNX domain (a truncated or " +
                                              "hand-made file?); supported opsets: " + std::to_string(kMinOpset) + " to " +
                                              std::to_string(kMaxOpset));
  }
  if (g.opset < kMinOpset || g.opset > kMaxOpset) {
    throw Error(Status::unsupported, "'" + path + "' uses opset " + std::to_string(g.opset) + "; supported: " +
                                         std::to_string(kMinOpset) + " to " + std::to_string(kMaxOpset));
  }
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  const onnx::GraphProto& graph = model.graph();
  const auto duplicate = [&](const std::string& what, const std::string& name) {
    return Error(Status::invalid_argument, "'" + path + "': " + what + " '" + name + "' is listed twice");
  };
  for (const auto& init : graph.initializer()) {
    if (init.name().empty()) throw Error(Status::invalid_argument, "'" + path + "' has an initializer without a name");
    if (g.constants.count(init.name()) != 0) throw duplicate("initializer", init.name());
    HostTensor t = to_host(init, dir, "initializer '" + init.name() + "'");
    g.values[init.name()] = ValueInfo{t.type, t.shape, true};
    g.constants[init.name()] = std::move(t);
  }
  for (const auto& in : graph.input()) {
    if (g.constants.count(in.name()) != 0) continue;  // opset < 9 lists initializers as inputs too
    if (in.name().empty()) throw Error(Status::invalid_argument, "'" + path + "' has a graph input without a name");
    if (g.values.count(in.name()) != 0) throw duplicate("graph input", in.name());
    g.values[in.name()] = to_value_info(in, options, true);
    g.inputs.push_back(in.name());
  }
  for (const auto& out : graph.output()) {
    if (out.name().empty()) throw Error(Status::invalid_argument, "'" + path + "' has a graph output without a name");
    if (std::find(g.outputs.begin(), g.outputs.end(), out.name()) != g.outputs.end()) throw duplicate("graph output", out.name());
    g.outputs.push_back(out.name());
  }
  if (g.outputs.empty()) throw Error(Status::invalid_argument, "'" + path + "' has a graph without outputs: nothing to compute");
  std::set<std::string> names;
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto& p = graph.node(i);
    Node n;
    n.op_type = p.op_type();
    n.name = p.name().empty() ? p.op_type() + "_" + std::to_string(i) : p.name();
    if (!names.insert(n.name).second) n.name += "_" + std::to_string(i);
    if (!p.domain().empty() && p.domain() != "ai.onnx") {
      throw Error(Status::unsupported, n.label() + " is in domain '" + p.domain() + "'; only the default ONNX domain is supported");
    }
    n.inputs.assign(p.input().begin(), p.input().end());
    n.outputs.assign(p.output().begin(), p.output().end());
    for (const std::string& out : n.outputs) {
      // Graph::validate() lets a node write a constant's name (a folded node keeps its output);
      // in a file that would hide the node behind the initializer's value.
      if (g.constants.count(out) != 0) {
        throw Error(Status::invalid_argument, n.label() + ": output '" + out + "' is also the name of an initializer");
      }
    }
    for (const auto& a : p.attribute()) {
      n.attributes[a.name()] = to_attribute(a, dir, n.label() + " attribute '" + a.name() + "'");
    }
    g.nodes.push_back(std::move(n));
  }
  normalize_legacy_broadcast(g);
  g.validate();
  infer_shapes(g);
  return g;
}

HostTensor read_onnx_tensor(const std::string& path) {
  const std::string bytes = read_file(path, "tensor file");
  onnx::TensorProto proto;
  if (!proto.ParseFromString(bytes)) {
    throw Error(Status::invalid_argument, "'" + path + "' is not an ONNX TensorProto (protobuf parsing failed)");
  }
  return to_host(proto, std::filesystem::path(path).parent_path(), "tensor file '" + path + "'");
}

}  // namespace galley::model
