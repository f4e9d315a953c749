// A network as a graph of op nodes over named values, the form the ONNX importer produces and the
// executor runs. It keeps what a backward pass needs: every node's attributes and inputs by name.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace galley::model {

/// Element types a graph's values and constants may have (ONNX's, as far as CNNs use them).
enum class ElemType : std::uint8_t { f32, f16, bf16, f64, i64, i32, i8, u8, boolean };
/// "f32", "i64", "bool", ...
const char* to_string(ElemType type) noexcept;
std::size_t size_of(ElemType type) noexcept;

using Shape = std::vector<std::int64_t>;
/// "[1,3,224,224]"
std::string to_string(const Shape& shape);
/// Product of the dims; throws Error(invalid_argument) on a negative dim or overflow.
std::int64_t element_count(const Shape& shape);

/// A constant on the host: an initializer, a Constant node's value or a folded result.
struct HostTensor {
  ElemType type = ElemType::f32;
  Shape shape;
  std::vector<std::byte> data;  ///< element_count(shape) * size_of(type) bytes, row-major

  /// The elements as int64 (i64, i32, i8, u8, bool); throws Error naming `what` for other types.
  std::vector<std::int64_t> as_int64(const std::string& what) const;
  /// The elements as double (any type).
  std::vector<double> as_double() const;
  static HostTensor from_int64(const std::vector<std::int64_t>& values, Shape shape);
};

/// An attribute value: int, float, string, tensor or a list of ints, floats or strings.
using Attribute = std::variant<std::int64_t, double, std::string, HostTensor, std::vector<std::int64_t>,
                               std::vector<double>, std::vector<std::string>>;

/// One op application. Inputs and outputs name values; an empty input name is an omitted optional input.
struct Node {
  std::string name;     ///< unique within the graph (the importer names unnamed nodes "<op>_<index>")
  std::string op_type;  ///< ONNX's op name: "Conv", "Relu", ...
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  std::map<std::string, Attribute> attributes;

  /// The attribute, or `fallback` when absent. Throws Error naming the node and attribute when it
  /// has another type.
  std::int64_t int_attr(const std::string& key, std::int64_t fallback) const;
  double float_attr(const std::string& key, double fallback) const;
  std::string string_attr(const std::string& key, const std::string& fallback) const;
  std::vector<std::int64_t> ints_attr(const std::string& key, const std::vector<std::int64_t>& fallback) const;
  bool has(const std::string& key) const { return attributes.count(key) != 0; }
  /// "node 'conv_3' (Conv)" for messages.
  std::string label() const;
};

/// What is known about a value: its type and static shape.
struct ValueInfo {
  ElemType type = ElemType::f32;
  Shape shape;
  bool shape_known = false;
};

class Graph {
 public:
  std::vector<Node> nodes;  ///< in a topological order (checked by validate())
  std::vector<std::string> inputs;   ///< graph inputs fed at run time (initializers excluded)
  std::vector<std::string> outputs;  ///< graph outputs
  std::map<std::string, ValueInfo> values;  ///< every value's type and shape, as far as known
  std::map<std::string, HostTensor> constants;  ///< initializers and folded constants, by value name
  std::int64_t opset = 0;  ///< the default domain's opset version
  std::string name;

  /// The value's info; throws Error(not_found) naming it.
  const ValueInfo& value(const std::string& name) const;
  bool is_constant(const std::string& name) const { return constants.count(name) != 0; }
  /// Throws Error(invalid_argument) naming the node when an input is produced by no earlier node,
  /// no graph input and no constant, or when two nodes write one value.
  void validate() const;
};

/// Fills `graph.values` with every node output's type and static shape, node by node, and folds
/// nodes whose inputs are all constants when the op is a shape computation (Shape, Gather,
/// Unsqueeze, Squeeze, Concat, Constant, Cast, Reshape, Slice, arithmetic on i64 ...), so that the
/// Shape -> Gather -> Unsqueeze -> Concat -> Reshape chains PyTorch exports become constants.
/// Throws Error naming the node, its op and the attribute or input shape when an op is unsupported,
/// an attribute is outside what the op layer implements, or shapes do not agree.
void infer_shapes(Graph& graph);

/// The ops infer_shapes() knows, sorted.
std::vector<std::string> supported_ops();

}  // namespace galley::model
