#include "galley/model/graph.hpp"

#include <cstring>
#include <set>

#include "galley/core/error.hpp"

namespace galley::model {

const char* to_string(ElemType type) noexcept {
  switch (type) {
    case ElemType::f32: return "f32";
    case ElemType::f16: return "f16";
    case ElemType::bf16: return "bf16";
    case ElemType::f64: return "f64";
    case ElemType::i64: return "i64";
    case ElemType::i32: return "i32";
    case ElemType::i8: return "i8";
    case ElemType::u8: return "u8";
    case ElemType::boolean: return "bool";
  }
  return "?";
}

std::size_t size_of(ElemType type) noexcept {
  switch (type) {
    case ElemType::f64:
    case ElemType::i64: return 8;
    case ElemType::f32:
    case ElemType::i32: return 4;
    case ElemType::f16:
    case ElemType::bf16: return 2;
    case ElemType::i8:
    case ElemType::u8:
    case ElemType::boolean: return 1;
  }
  return 1;
}

std::string to_string(const Shape& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) out += (i ? "," : "") + std::to_string(shape[i]);
  return out + "]";
}

std::int64_t element_count(const Shape& shape) {
  std::int64_t count = 1;
  for (const std::int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(count, d, &count)) {
      throw Error(Status::invalid_argument, "shape " + to_string(shape) + " has a negative dim or too many elements");
    }
  }
  return count;
}

namespace {

float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  std::uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: renormalise
      int e = -1;
      std::uint32_t m = mant;
      do {
        ++e;
        m <<= 1;
      } while ((m & 0x400u) == 0);
      bits = sign | ((127 - 15 - e) << 23) | ((m & 0x3ffu) << 13);
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

}  // namespace

std::vector<std::int64_t> HostTensor::as_int64(const std::string& what) const {
  const auto count = static_cast<std::size_t>(element_count(shape));
  std::vector<std::int64_t> out(count);
  for (std::size_t i = 0; i < count; ++i) {
    switch (type) {
      case ElemType::i64: std::memcpy(&out[i], data.data() + 8 * i, 8); break;
      case ElemType::i32: {
        std::int32_t v;
        std::memcpy(&v, data.data() + 4 * i, 4);
        out[i] = v;
        break;
      }
      case ElemType::i8: out[i] = static_cast<std::int8_t>(data[i]); break;
      case ElemType::u8:
      case ElemType::boolean: out[i] = static_cast<std::uint8_t>(data[i]); break;
      default:
        throw Error(Status::invalid_argument,
                    what + " must hold integers, not " + std::string(to_string(type)) + " " + to_string(shape));
    }
  }
  return out;
}

std::vector<double> HostTensor::as_double() const {
  const auto count = static_cast<std::size_t>(element_count(shape));
  std::vector<double> out(count);
  for (std::size_t i = 0; i < count; ++i) {
    switch (type) {
      case ElemType::f32: {
        float v;
        std::memcpy(&v, data.data() + 4 * i, 4);
        out[i] = v;
        break;
      }
      case ElemType::f64: std::memcpy(&out[i], data.data() + 8 * i, 8); break;
      case ElemType::f16: {
        std::uint16_t h;
        std::memcpy(&h, data.data() + 2 * i, 2);
        out[i] = half_to_float(h);
        break;
      }
      case ElemType::bf16: {
        std::uint16_t h;
        std::memcpy(&h, data.data() + 2 * i, 2);
        const std::uint32_t bits = static_cast<std::uint32_t>(h) << 16;
        float v;
        std::memcpy(&v, &bits, 4);
        out[i] = v;
        break;
      }
      default: out[i] = static_cast<double>(as_int64("tensor")[i]); break;
    }
  }
  return out;
}

HostTensor HostTensor::from_int64(const std::vector<std::int64_t>& values, Shape shape) {
  HostTensor t;
  t.type = ElemType::i64;
  t.shape = std::move(shape);
  if (static_cast<std::size_t>(element_count(t.shape)) != values.size()) {
    throw Error(Status::internal, "from_int64: " + std::to_string(values.size()) + " values for shape " + to_string(t.shape));
  }
  t.data.resize(values.size() * 8);
  if (!values.empty()) std::memcpy(t.data.data(), values.data(), t.data.size());
  return t;
}

std::string Node::label() const { return "node '" + name + "' (" + op_type + ")"; }

namespace {

template <class T>
const T* typed(const Node& node, const std::string& key, const char* want) {
  const auto it = node.attributes.find(key);
  if (it == node.attributes.end()) return nullptr;
  const T* v = std::get_if<T>(&it->second);
  if (v == nullptr) {
    throw Error(Status::invalid_argument, node.label() + ": attribute '" + key + "' must be " + want);
  }
  return v;
}

}  // namespace

std::int64_t Node::int_attr(const std::string& key, std::int64_t fallback) const {
  const auto* v = typed<std::int64_t>(*this, key, "an int");
  return v ? *v : fallback;
}

double Node::float_attr(const std::string& key, double fallback) const {
  const auto it = attributes.find(key);
  if (it != attributes.end()) {
    if (const auto* i = std::get_if<std::int64_t>(&it->second)) return static_cast<double>(*i);
  }
  const auto* v = typed<double>(*this, key, "a float");
  return v ? *v : fallback;
}

std::string Node::string_attr(const std::string& key, const std::string& fallback) const {
  const auto* v = typed<std::string>(*this, key, "a string");
  return v ? *v : fallback;
}

std::vector<std::int64_t> Node::ints_attr(const std::string& key, const std::vector<std::int64_t>& fallback) const {
  const auto* v = typed<std::vector<std::int64_t>>(*this, key, "a list of ints");
  return v ? *v : fallback;
}

const ValueInfo& Graph::value(const std::string& value_name) const {
  const auto it = values.find(value_name);
  if (it == values.end()) throw Error(Status::not_found, "graph has no value '" + value_name + "'");
  return it->second;
}

void Graph::validate() const {
  std::set<std::string> defined(inputs.begin(), inputs.end());
  for (const auto& [name_, tensor] : constants) defined.insert(name_);
  std::set<std::string> written, produced;
  for (const Node& n : nodes) produced.insert(n.outputs.begin(), n.outputs.end());
  for (const Node& n : nodes) {
    for (const std::string& in : n.inputs) {
      if (!in.empty() && defined.count(in) == 0) {
        throw Error(Status::invalid_argument,
                    n.label() + ": input '" + in + "' is produced by no earlier node, graph input or initializer" +
                        (produced.count(in) != 0 ? " (only by this node or a later one: the nodes are not in a "
                                                   "topological order, or they form a cycle)"
                                                 : ""));
      }
    }
    for (const std::string& out : n.outputs) {
      if (out.empty()) continue;
      if (!written.insert(out).second || (defined.count(out) != 0 && !is_constant(out))) {
        throw Error(Status::invalid_argument, n.label() + ": output '" + out + "' is written twice");
      }
      defined.insert(out);
    }
  }
  for (const std::string& out : outputs) {
    if (defined.count(out) == 0) throw Error(Status::invalid_argument, "graph output '" + out + "' is never produced");
  }
}

}  // namespace galley::model
