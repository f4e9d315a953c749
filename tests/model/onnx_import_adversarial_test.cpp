// The ONNX importer on small models made byte by byte here: malformed and truncated files, wrong
// element types, dangling inputs, cycles, duplicate names, huge or negative shapes, initializers
// whose data disagrees with their dims, out-of-range attributes, missing or unsupported opsets,
// empty graphs. Each is refused with a galley::Error naming the problem (never a crash, another
// exception type or an allocation of the declared size), or, where ONNX allows it, runs correctly.
//
// The files are written with a minimal protobuf encoder (wire format only), independent of the
// parser the importer uses.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "galley/core/error.hpp"
#include "galley/model/executor.hpp"
#include "galley/model/onnx.hpp"

namespace galley::model {
namespace {

namespace fs = std::filesystem;

// --- a protobuf wire-format writer ---------------------------------------------------------------

class Msg {
 public:
  Msg& varint(int field, std::uint64_t v) {
    key(field, 0);
    put(v);
    return *this;
  }
  Msg& int64(int field, std::int64_t v) { return varint(field, static_cast<std::uint64_t>(v)); }
  Msg& f32(int field, float v) {
    key(field, 5);
    char b[4];
    std::memcpy(b, &v, 4);
    bytes_.append(b, 4);
    return *this;
  }
  Msg& str(int field, const std::string& s) {
    key(field, 2);
    put(s.size());
    bytes_ += s;
    return *this;
  }
  Msg& msg(int field, const Msg& m) { return str(field, m.bytes_); }
  const std::string& bytes() const { return bytes_; }

 private:
  void key(int field, int wire) { put(static_cast<std::uint64_t>(field) << 3 | static_cast<std::uint64_t>(wire)); }
  void put(std::uint64_t v) {
    while (v >= 0x80) {
      bytes_ += static_cast<char>((v & 0x7f) | 0x80);
      v >>= 7;
    }
    bytes_ += static_cast<char>(v);
  }
  std::string bytes_;
};

// ONNX's TensorProto.DataType numbers.
constexpr int kFloat = 1, kString = 8, kInt64 = 7, kFloat16 = 10;

// TensorProto: dims 1, data_type 2, name 8, raw_data 9.
Msg tensor(const std::string& name, int type, const std::vector<std::int64_t>& dims, const std::string& raw) {
  Msg t;
  for (const auto d : dims) t.int64(1, d);
  t.varint(2, static_cast<std::uint64_t>(type)).str(8, name).str(9, raw);
  return t;
}

std::string floats(std::size_t count, float value = 0.5f) {
  std::string raw(count * 4, '\0');
  for (std::size_t i = 0; i < count; ++i) std::memcpy(raw.data() + 4 * i, &value, 4);
  return raw;
}

// ValueInfoProto: name 1, type 2 -> TypeProto.tensor_type 1 -> {elem_type 1, shape 2 -> dim 1 -> dim_value 1}.
Msg value(const std::string& name, int type, const std::vector<std::int64_t>& dims) {
  Msg shape;
  for (const auto d : dims) shape.msg(1, Msg().int64(1, d));
  return Msg().str(1, name).msg(2, Msg().msg(1, Msg().varint(1, static_cast<std::uint64_t>(type)).msg(2, shape)));
}

// AttributeProto: name 1, f 2, i 3, s 4, t 5, ints 8, type 20 (FLOAT 1, INT 2, STRING 3, TENSOR 4, INTS 7).
Msg int_attr(const std::string& name, std::int64_t v) { return Msg().str(1, name).int64(3, v).varint(20, 2); }
Msg ints_attr(const std::string& name, const std::vector<std::int64_t>& v) {
  Msg a;
  a.str(1, name);
  for (const auto x : v) a.int64(8, x);
  return a.varint(20, 7);
}
Msg tensor_attr(const std::string& name, const Msg& t) { return Msg().str(1, name).msg(5, t).varint(20, 4); }

// NodeProto: input 1, output 2, name 3, op_type 4, attribute 5.
Msg node(const std::string& op, const std::vector<std::string>& inputs, const std::vector<std::string>& outputs,
         const std::vector<Msg>& attributes = {}) {
  Msg n;
  for (const auto& i : inputs) n.str(1, i);
  for (const auto& o : outputs) n.str(2, o);
  n.str(4, op);
  for (const auto& a : attributes) n.msg(5, a);
  return n;
}

struct Model {
  std::vector<Msg> nodes, initializers, inputs, outputs;
  std::vector<std::pair<std::string, std::int64_t>> opsets{{"", 13}};

  // ModelProto: ir_version 1, graph 7 (node 1, name 2, initializer 5, input 11, output 12),
  // opset_import 8 (domain 1, version 2). The opset comes last, so no strict prefix of the file
  // carries one.
  std::string bytes() const {
    Msg g;
    for (const auto& n : nodes) g.msg(1, n);
    g.str(2, "adversarial");
    for (const auto& t : initializers) g.msg(5, t);
    for (const auto& v : inputs) g.msg(11, v);
    for (const auto& v : outputs) g.msg(12, v);
    Msg m;
    m.int64(1, 8).msg(7, g);
    for (const auto& [domain, version] : opsets) m.msg(8, Msg().str(1, domain).int64(2, version));
    return m.bytes();
  }
};

// x [1,3,8,8] -> Conv(W [4,3,3,3], B [4], pads 1) -> Relu -> z [1,4,8,8].
Model conv_model() {
  Model m;
  m.inputs.push_back(value("x", kFloat, {1, 3, 8, 8}));
  m.initializers.push_back(tensor("W", kFloat, {4, 3, 3, 3}, floats(4 * 3 * 3 * 3, 0.1f)));
  m.initializers.push_back(tensor("B", kFloat, {4}, floats(4)));
  m.nodes.push_back(node("Conv", {"x", "W", "B"}, {"y"}, {ints_attr("pads", {1, 1, 1, 1}), ints_attr("kernel_shape", {3, 3})}));
  m.nodes.push_back(node("Relu", {"y"}, {"z"}));
  m.outputs.push_back(value("z", kFloat, {1, 4, 8, 8}));
  return m;
}

// --- running the importer ------------------------------------------------------------------------

const fs::path& model_file() {
  static const fs::path path = [] {
    const fs::path dir = fs::temp_directory_path() / ("galley_adversarial_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    return dir / "model.onnx";
  }();
  static const bool cleaned_at_exit = (std::atexit([] {
                                         std::error_code ec;
                                         fs::remove_all(model_file().parent_path(), ec);
                                       }),
                                       true);
  (void)cleaned_at_exit;
  return path;
}

struct Outcome {
  bool imported = false;
  std::string error;  // "<status>: <message>" when refused
  Status status = Status::ok;
};

// Imports the bytes and, when they import, lowers the graph for the cpu (as `galley run` would).
// Any exception but galley::Error, and an internal error, fails the test.
Outcome import_bytes(const std::string& bytes, bool lower = true) {
  {
    std::ofstream out(model_file(), std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  Outcome o;
  try {
    Graph g = import_onnx(model_file().string());
    if (lower) Executor exec(std::move(g), runtime::device("cpu"));
    o.imported = true;
  } catch (const Error& e) {
    o.status = e.status();
    o.error = std::string(to_string(e.status())) + ": " + e.what();
    EXPECT_NE(e.status(), Status::internal) << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not a galley::Error: " << e.what();
  }
  return o;
}

// The refusal of `m`; the test fails when it imports.
std::string refusal(const Model& m) {
  const Outcome o = import_bytes(m.bytes());
  EXPECT_FALSE(o.imported) << "imported, but should have been refused";
  return o.error;
}

#define EXPECT_MENTIONS(text, what) EXPECT_NE((text).find(what), std::string::npos) << "'" << (text) << "' should mention '" << (what) << "'"

TEST(OnnxAdversarial, TheValidModelImportsAndRuns) {
  const Outcome o = import_bytes(conv_model().bytes());
  EXPECT_TRUE(o.imported) << o.error;
}

TEST(OnnxAdversarial, MalformedBytesAreNamedAsNotAModel) {
  const std::string cases[] = {
      std::string("\x0a\xff\xff\xff\xff\x0f", 6),   // a length far past the end
      std::string("\x3a\x05\x0a\x03", 4),           // graph field cut short
      std::string("\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 11),  // an over-long varint key
      std::string("\x0b\x0c", 2),                   // start/end group wire types
  };
  for (const auto& bytes : cases) {
    const Outcome o = import_bytes(bytes);
    EXPECT_FALSE(o.imported);
    // Protobuf may read a few bytes as an empty model, which then lacks an opset.
    EXPECT_TRUE(o.error.find("not an ONNX model") != std::string::npos || o.error.find("no opset_import") != std::string::npos)
        << o.error;
  }
  // Random bytes: refused, whatever protobuf makes of them.
  std::mt19937 rng(17);
  for (int i = 0; i < 200; ++i) {
    std::string bytes(rng() % 64, '\0');
    for (char& b : bytes) b = static_cast<char>(rng());
    EXPECT_FALSE(import_bytes(bytes).imported);
  }
}

TEST(OnnxAdversarial, EveryTruncationIsRefused) {
  const std::string whole = conv_model().bytes();
  for (std::size_t n = 0; n < whole.size(); ++n) {
    const Outcome o = import_bytes(whole.substr(0, n), false);
    EXPECT_FALSE(o.imported) << "prefix of " << n << " of " << whole.size() << " bytes imported";
    EXPECT_TRUE(o.error.find("not an ONNX model") != std::string::npos || o.error.find("opset") != std::string::npos)
        << "prefix of " << n << " bytes: " << o.error;
  }
}

TEST(OnnxAdversarial, FlippedBytesGiveAGraphOrAnError) {
  const std::string whole = conv_model().bytes();
  std::mt19937 rng(2026);
  for (int i = 0; i < 400; ++i) {
    std::string bytes = whole;
    for (int k = 0; k < 1 + static_cast<int>(rng() % 3); ++k) bytes[rng() % bytes.size()] = static_cast<char>(rng());
    (void)import_bytes(bytes);  // a crash, a hang or a non-galley exception fails the test
  }
}

TEST(OnnxAdversarial, WrongElementTypesAreNamed) {
  Model int_conv = conv_model();
  int_conv.inputs[0] = value("x", kInt64, {1, 3, 8, 8});
  int_conv.initializers[0] = tensor("W", kInt64, {4, 3, 3, 3}, std::string(4 * 3 * 3 * 3 * 8, '\0'));
  int_conv.initializers[1] = tensor("B", kInt64, {4}, std::string(4 * 8, '\0'));
  std::string why = refusal(int_conv);
  EXPECT_MENTIONS(why, "(Conv)");
  EXPECT_MENTIONS(why, "i64");

  Model mixed = conv_model();
  mixed.initializers[0] = tensor("W", kFloat16, {4, 3, 3, 3}, std::string(4 * 3 * 3 * 3 * 2, '\0'));
  why = refusal(mixed);
  EXPECT_MENTIONS(why, "weight 'W' is f16");

  Model strings = conv_model();
  strings.initializers.push_back(tensor("S", kString, {1}, ""));
  why = refusal(strings);
  EXPECT_MENTIONS(why, "initializer 'S'");
  EXPECT_MENTIONS(why, "STRING");

  Model string_input = conv_model();
  string_input.inputs[0] = value("x", kString, {1, 3, 8, 8});
  why = refusal(string_input);
  EXPECT_MENTIONS(why, "graph input 'x'");
  EXPECT_MENTIONS(why, "STRING");
}

TEST(OnnxAdversarial, DanglingInputsAndCyclesAreNamed) {
  Model dangling = conv_model();
  dangling.nodes[1] = node("Relu", {"nowhere"}, {"z"});
  std::string why = refusal(dangling);
  EXPECT_MENTIONS(why, "input 'nowhere' is produced by no earlier node");

  Model cycle = conv_model();
  cycle.nodes = {node("Relu", {"b"}, {"a"}), node("Relu", {"a"}, {"b"}), node("Relu", {"b"}, {"z"})};
  why = refusal(cycle);
  EXPECT_MENTIONS(why, "input 'b'");
  EXPECT_MENTIONS(why, "cycle");

  Model self_loop = conv_model();
  self_loop.nodes = {node("Add", {"x", "z"}, {"z"})};
  why = refusal(self_loop);
  EXPECT_MENTIONS(why, "input 'z'");
}

TEST(OnnxAdversarial, DuplicateNamesAreRefused) {
  Model twice = conv_model();
  twice.nodes.push_back(node("Relu", {"y"}, {"z"}));
  EXPECT_MENTIONS(refusal(twice), "output 'z' is written twice");

  Model over_input = conv_model();
  over_input.nodes.push_back(node("Relu", {"z"}, {"x"}));
  EXPECT_MENTIONS(refusal(over_input), "output 'x' is written twice");

  Model over_initializer = conv_model();
  over_initializer.nodes.insert(over_initializer.nodes.begin(), node("Relu", {"x"}, {"W"}));
  EXPECT_MENTIONS(refusal(over_initializer), "output 'W' is also the name of an initializer");

  Model two_outputs = conv_model();
  two_outputs.outputs.push_back(value("z", kFloat, {1, 4, 8, 8}));
  EXPECT_MENTIONS(refusal(two_outputs), "graph output 'z' is listed twice");

  Model two_inputs = conv_model();
  two_inputs.inputs.push_back(value("x", kFloat, {1, 3, 8, 8}));
  EXPECT_MENTIONS(refusal(two_inputs), "graph input 'x' is listed twice");

  Model two_initializers = conv_model();
  two_initializers.initializers.push_back(tensor("B", kFloat, {4}, floats(4)));
  EXPECT_MENTIONS(refusal(two_initializers), "initializer 'B' is listed twice");
}

TEST(OnnxAdversarial, HugeAndNegativeShapesAreRefusedBeforeAllocating) {
  constexpr std::int64_t kTera = 1'000'000'000'000;
  // A product past int64.
  Model overflow = conv_model();
  overflow.inputs[0] = value("x", kFloat, {1, 3, kTera, kTera});
  std::string why = refusal(overflow);
  EXPECT_MENTIONS(why, "graph input 'x'");
  EXPECT_MENTIONS(why, "64-bit");

  // Fits int64 but no device: refused when the executor is made, before anything is allocated.
  Model huge;
  huge.inputs.push_back(value("x", kFloat, {kTera, 4}));
  huge.nodes.push_back(node("Relu", {"x"}, {"y"}));
  huge.outputs.push_back(value("y", kFloat, {kTera, 4}));
  why = refusal(huge);
  EXPECT_MENTIONS(why, "out_of_memory");
  EXPECT_MENTIONS(why, "graph input 'x'");

  Model negative = conv_model();
  negative.inputs[0] = value("x", kFloat, {1, -3, 8, 8});
  why = refusal(negative);
  EXPECT_MENTIONS(why, "graph input 'x' dim 1 = -3 is negative");

  Model negative_initializer = conv_model();
  negative_initializer.initializers[1] = tensor("B", kFloat, {-4}, floats(4));
  EXPECT_MENTIONS(refusal(negative_initializer), "initializer 'B' has a negative dim -4");

  // Declared dims of a terabyte with 16 bytes behind them: refused by size, nothing allocated.
  Model lying = conv_model();
  lying.initializers[1] = tensor("B", kFloat, {kTera}, floats(4));
  why = refusal(lying);
  EXPECT_MENTIONS(why, "initializer 'B': raw_data holds 16 bytes");

  Model lying_overflow = conv_model();
  lying_overflow.initializers[1] = tensor("B", kFloat, {kTera, kTera, kTera}, floats(4));
  EXPECT_MENTIONS(refusal(lying_overflow), "initializer 'B'");

  // A Reshape whose constant target multiplies past int64.
  Model reshape;
  reshape.inputs.push_back(value("x", kFloat, {2, 3}));
  reshape.initializers.push_back(Msg(tensor("shape", kInt64, {3}, [] {
    std::string raw(24, '\0');
    const std::int64_t v[3] = {kTera, kTera, kTera};
    std::memcpy(raw.data(), v, 24);
    return raw;
  }())));
  reshape.nodes.push_back(node("Reshape", {"x", "shape"}, {"y"}));
  reshape.outputs.push_back(value("y", kFloat, {}));
  why = refusal(reshape);
  EXPECT_MENTIONS(why, "(Reshape)");

  // A Gather of a constant that would fold into 10^12 elements from a few bytes of file.
  Model gather;
  gather.inputs.push_back(value("x", kFloat, {1}));
  gather.initializers.push_back(tensor("data", kInt64, {1, 1000}, std::string(8000, '\0')));
  gather.initializers.push_back(tensor("idx", kInt64, {1000, 1000}, std::string(8'000'000, '\0')));
  gather.nodes.push_back(node("Gather", {"data", "idx"}, {"g"}, {int_attr("axis", 0)}));
  gather.nodes.push_back(node("Shape", {"g"}, {"s"}));
  gather.nodes.push_back(node("Reshape", {"x", "s"}, {"y"}));
  gather.outputs.push_back(value("y", kFloat, {}));
  why = refusal(gather);
  EXPECT_MENTIONS(why, "(Gather)");
  EXPECT_MENTIONS(why, "folding would make");
}

TEST(OnnxAdversarial, InitializerDataDisagreeingWithDimsIsNamed) {
  Model short_raw = conv_model();
  short_raw.initializers[0] = tensor("W", kFloat, {4, 3, 3, 3}, floats(100));
  std::string why = refusal(short_raw);
  EXPECT_MENTIONS(why, "initializer 'W': raw_data holds 400 bytes");
  EXPECT_MENTIONS(why, "needs 432");

  Model typed;  // float_data (field 4, packed) with 3 values for dims [4]
  typed.inputs.push_back(value("x", kFloat, {4}));
  Msg b;
  b.int64(1, 4).varint(2, kFloat).str(8, "b").str(4, floats(3));
  typed.initializers.push_back(b);
  typed.nodes.push_back(node("Add", {"x", "b"}, {"y"}));
  typed.outputs.push_back(value("y", kFloat, {4}));
  why = refusal(typed);
  EXPECT_MENTIONS(why, "initializer 'b' holds 3 elements");
}

std::string conv_refusal(const std::vector<Msg>& attributes, std::int64_t out_channels = 4, std::int64_t in_per_group = 3) {
  Model m = conv_model();
  m.initializers[0] = tensor("W", kFloat, {out_channels, in_per_group, 3, 3}, floats(static_cast<std::size_t>(out_channels * in_per_group * 9)));
  m.initializers[1] = tensor("B", kFloat, {out_channels}, floats(static_cast<std::size_t>(out_channels)));
  m.nodes[0] = node("Conv", {"x", "W", "B"}, {"y"}, attributes);
  return refusal(m);
}

TEST(OnnxAdversarial, OutOfRangeAttributesAreNamed) {
  EXPECT_MENTIONS(conv_refusal({ints_attr("pads", {-1, 0, 0, 0})}), "attribute 'pads' has a negative value");
  EXPECT_MENTIONS(conv_refusal({ints_attr("strides", {0, 1})}), "strides and dilations must be positive");
  EXPECT_MENTIONS(conv_refusal({ints_attr("dilations", {1, -2})}), "strides and dilations must be positive");
  EXPECT_MENTIONS(conv_refusal({ints_attr("pads", {1, 1})}), "attribute 'pads' must have 4 values");
  EXPECT_MENTIONS(conv_refusal({ints_attr("pads", {INT64_MAX, 0, INT64_MAX, 0})}), "attribute 'pads'");
  EXPECT_MENTIONS(conv_refusal({int_attr("group", 2)}), "group 2 do not agree");
  EXPECT_MENTIONS(conv_refusal({int_attr("group", 0)}), "group 0 do not agree");
  // 3 input channels in 3 groups of 1, but 4 output channels do not split into 3 groups.
  EXPECT_MENTIONS(conv_refusal({int_attr("group", 3)}, 4, 1), "group 3 do not agree");
  EXPECT_MENTIONS(conv_refusal({ints_attr("kernel_shape", {5, 5})}), "attribute 'kernel_shape' = [5,5] disagrees");
  EXPECT_MENTIONS(conv_refusal({ints_attr("kernel_shape", {3})}), "kernel_shape");
  EXPECT_MENTIONS(conv_refusal({int_attr("pads", 1)}), "attribute 'pads' must be a list of ints");

  const auto single = [](const std::string& op, const std::vector<std::string>& inputs, const std::vector<Msg>& attributes,
                         std::size_t outputs = 1) {
    Model m;
    m.inputs.push_back(value("x", kFloat, {2, 3, 4}));
    std::vector<std::string> outs;
    for (std::size_t i = 0; i < outputs; ++i) outs.push_back("y" + std::to_string(i));
    m.nodes.push_back(node(op, inputs, outs, attributes));
    m.outputs.push_back(value(outputs == 0 ? "x" : "y0", kFloat, {}));
    return refusal(m);
  };
  EXPECT_MENTIONS(single("Softmax", {"x"}, {int_attr("axis", 3)}), "attribute 'axis' = 3 is outside [-3, 2]");
  EXPECT_MENTIONS(single("LogSoftmax", {"x"}, {int_attr("axis", -4)}), "attribute 'axis' = -4");
  EXPECT_MENTIONS(single("Concat", {"x", "x"}, {int_attr("axis", 7)}), "attribute 'axis' = 7");
  EXPECT_MENTIONS(single("Transpose", {"x"}, {ints_attr("perm", {0, 0, 1})}), "attribute 'perm' repeats axis 0");
  EXPECT_MENTIONS(single("Transpose", {"x"}, {ints_attr("perm", {0, 1, 5})}), "perm");
  EXPECT_MENTIONS(single("Transpose", {"x"}, {ints_attr("perm", {1, 0})}), "attribute 'perm' has 2 entries for rank 3");
  EXPECT_MENTIONS(single("Flatten", {"x"}, {int_attr("axis", 9)}), "attribute 'axis' = 9");
  EXPECT_MENTIONS(single("Split", {"x"}, {int_attr("axis", 0)}, 0), "(Split)");
  EXPECT_MENTIONS(single("Split", {"x"}, {int_attr("axis", 1), ints_attr("split", {-1, 4})}, 2), "split sizes");
  EXPECT_MENTIONS(single("MaxPool", {"x"}, {ints_attr("kernel_shape", {2, 2})}), "only 2-D");
  EXPECT_MENTIONS(single("Relu", {}, {}), "input 0 is missing");
  EXPECT_MENTIONS(single("NoSuchOp", {"x"}, {}), "op 'NoSuchOp' is not supported");
}

TEST(OnnxAdversarial, ConstantArithmeticThatOverflowsIsRefused) {
  Model m;
  m.inputs.push_back(value("x", kFloat, {1}));
  const auto i64 = [](const std::string& name, std::int64_t v) {
    std::string raw(8, '\0');
    std::memcpy(raw.data(), &v, 8);
    return tensor(name, kInt64, {1}, raw);
  };
  m.initializers.push_back(i64("a", INT64_MIN));
  m.initializers.push_back(i64("b", -1));
  m.nodes.push_back(node("Div", {"a", "b"}, {"q"}));
  m.nodes.push_back(node("Reshape", {"x", "q"}, {"y"}));
  m.outputs.push_back(value("y", kFloat, {}));
  EXPECT_MENTIONS(refusal(m), "overflows");
  m.nodes[0] = node("Mul", {"a", "a"}, {"q"});
  EXPECT_MENTIONS(refusal(m), "overflows");
  m.nodes[0] = node("Div", {"b", "b"}, {"one"});
  m.nodes.insert(m.nodes.begin() + 1, node("Sub", {"one", "one"}, {"zero"}));
  m.nodes.insert(m.nodes.begin() + 2, node("Div", {"b", "zero"}, {"q"}));
  EXPECT_MENTIONS(refusal(m), "integer division by zero");
}

TEST(OnnxAdversarial, OpsetsOutsideTheRangeAreNamed) {
  Model none = conv_model();
  none.opsets.clear();
  EXPECT_MENTIONS(refusal(none), "has no opset_import for the default ONNX domain");

  Model other_domain = conv_model();
  other_domain.opsets = {{"ai.onnx.ml", 3}};
  EXPECT_MENTIONS(refusal(other_domain), "has no opset_import for the default ONNX domain");

  Model too_new = conv_model();
  too_new.opsets = {{"", 99}};
  EXPECT_MENTIONS(refusal(too_new), "uses opset 99; supported: 6 to 17");

  Model too_old = conv_model();
  too_old.opsets = {{"ai.onnx", 2}};
  EXPECT_MENTIONS(refusal(too_old), "uses opset 2");

  Model twice = conv_model();
  twice.opsets = {{"", 13}, {"ai.onnx", 11}};
  EXPECT_MENTIONS(refusal(twice), "opset twice");
}

TEST(OnnxAdversarial, EmptyGraphsAreRefused) {
  EXPECT_MENTIONS(refusal(Model{}), "has a graph without outputs");
  Model no_nodes;
  no_nodes.outputs.push_back(value("y", kFloat, {1}));
  EXPECT_MENTIONS(refusal(no_nodes), "graph output 'y' is never produced");
}

// ONNX allows a graph output that is a graph input: the run returns a copy, never the caller's
// tensor itself.
TEST(OnnxAdversarial, AnOutputThatIsAnInputRunsAsACopy) {
  Model m;
  m.inputs.push_back(value("x", kFloat, {2, 3}));
  m.nodes.push_back(node("Relu", {"x"}, {"y"}));
  m.outputs.push_back(value("x", kFloat, {2, 3}));
  m.outputs.push_back(value("y", kFloat, {2, 3}));
  {
    std::ofstream out(model_file(), std::ios::binary | std::ios::trunc);
    out << m.bytes();
  }
  const runtime::Device cpu = runtime::device("cpu");
  runtime::Stream stream(cpu);
  for (const bool capture : {false, true}) {
    Executor exec(import_onnx(model_file().string()), cpu, ExecutorOptions{.capture = capture});
    const std::vector<float> values{-1, 2, -3, 4, -5, 6};
    Tensor x = Tensor::empty(stream, dnn::TensorDesc::contiguous(DType::f32, {2, 3}));
    x.copy_from_host(stream, values.data(), values.size() * 4);
    for (int run = 0; run < 3; ++run) {
      const auto out = exec.run(stream, {{"x", x}});
      EXPECT_NE(out.at("x").data(), x.data()) << "the output is the caller's input tensor";
      EXPECT_EQ(out.at("x").to_host<float>(stream), values);
      EXPECT_EQ(out.at("y").to_host<float>(stream), (std::vector<float>{0, 2, 0, 4, 0, 6}));
    }
  }
}

}  // namespace
}  // namespace galley::model
