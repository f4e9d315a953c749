// Static shape inference and folding of constant shape computations, one rule per ONNX op. A rule
// reads its inputs' infos (and constants where the op needs a value, such as Reshape's shape) and
// returns its outputs' infos; a fold rule computes the value of a node whose inputs are constants.
#include <algorithm>
#include <cstring>
#include <functional>
#include <numeric>
#include <optional>
#include <set>

#include "galley/core/dtype.hpp"
#include "galley/core/error.hpp"
#include "galley/model/graph.hpp"
#include "model/shape_inference.hpp"

namespace galley::model {
namespace {

using Infos = std::vector<ValueInfo>;

// Largest dim, pad, stride or dilation arithmetic here produces: keeps every sum and product of a
// few of them inside int64 (no real network comes near it).
constexpr std::int64_t kMaxDim = std::int64_t{1} << 40;
// Largest constant a fold makes: shape computations are small; a file whose fold would be larger
// (a Gather repeating a big constant) is refused rather than allocated.
constexpr std::int64_t kMaxFoldedElements = std::int64_t{1} << 24;

struct Context {
  Graph& graph;
  const Node& node;

  [[noreturn]] void fail(const std::string& why) const {
    throw Error(Status::unsupported, node.label() + ": " + why);
  }
  [[noreturn]] void bad(const std::string& why) const {
    throw Error(Status::invalid_argument, node.label() + ": " + why);
  }
  std::size_t count() const { return node.inputs.size(); }
  bool has_input(std::size_t i) const { return i < node.inputs.size() && !node.inputs[i].empty(); }
  const ValueInfo& in(std::size_t i) const {
    if (!has_input(i)) bad("input " + std::to_string(i) + " is missing");
    const ValueInfo& v = graph.value(node.inputs[i]);
    if (!v.shape_known) fail("input '" + node.inputs[i] + "' has no static shape");
    return v;
  }
  const Shape& shape(std::size_t i) const { return in(i).shape; }
  const HostTensor* constant(std::size_t i) const {
    if (!has_input(i)) return nullptr;
    const auto it = graph.constants.find(node.inputs[i]);
    return it == graph.constants.end() ? nullptr : &it->second;
  }
  const HostTensor& required_constant(std::size_t i, const std::string& what) const {
    const HostTensor* t = constant(i);
    if (t == nullptr) fail(what + " (input '" + (has_input(i) ? node.inputs[i] : "") + "') must be a constant; only static shapes run");
    return *t;
  }
  std::int64_t axis(std::int64_t a, std::size_t rank, const std::string& attr) const {
    const auto r = static_cast<std::int64_t>(rank);
    if (a < -r || a >= r) bad("attribute '" + attr + "' = " + std::to_string(a) + " is outside [" + std::to_string(-r) + ", " + std::to_string(r - 1) + "]");
    return a < 0 ? a + r : a;
  }
  /// An int list from attribute `attr` (older opsets) or constant input `index` (newer ones).
  std::optional<std::vector<std::int64_t>> ints_from(const std::string& attr, std::size_t index) const {
    if (node.has(attr)) return node.ints_attr(attr, {});
    if (has_input(index)) return required_constant(index, "'" + attr + "'").as_int64(node.label() + " input '" + attr + "'");
    return std::nullopt;
  }
};

ValueInfo info(ElemType type, Shape shape) { return ValueInfo{type, std::move(shape), true}; }

// Input `i` must have input 0's element type (ONNX's one type variable T of Conv, Gemm, ...).
void same_type(const Context& c, std::size_t i, const std::string& what) {
  const ElemType want = c.in(0).type, got = c.in(i).type;
  if (got != want) {
    c.bad(what + " '" + c.node.inputs[i] + "' is " + to_string(got) + ", input '" + c.node.inputs[0] + "' is " + to_string(want));
  }
}

bool is_float(ElemType type) {
  return type == ElemType::f32 || type == ElemType::f16 || type == ElemType::bf16 || type == ElemType::f64;
}

Infos softmax(Context& c) {
  const ValueInfo& x = c.in(0);
  c.axis(c.node.int_attr("axis", c.graph.opset >= 13 ? -1 : 1), x.shape.size(), "axis");
  return {x};
}

Shape broadcast(const Context& c, const Shape& a, const Shape& b) {
  const std::size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (std::size_t i = 0; i < rank; ++i) {
    const std::int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const std::int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1) c.bad("shapes " + to_string(a) + " and " + to_string(b) + " do not broadcast");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

// Spatial output size of a window op; `ceil` for pooling's ceil_mode.
std::int64_t window_out(const Context& c, std::int64_t in, std::int64_t k, std::int64_t stride, std::int64_t dilation,
                        std::int64_t pad_total, bool ceil) {
  if (stride <= 0 || dilation <= 0 || k <= 0) c.bad("kernel, stride and dilation must be positive");
  // In 128 bits: attributes and dims from a file may be anywhere in int64.
  using Wide = __int128;
  const Wide span = Wide{dilation} * (k - 1) + 1;
  const Wide room = Wide{in} + pad_total - span;
  if (room < 0) {
    c.bad("window " + std::to_string(static_cast<long double>(span)) + " is larger than the padded input " +
          std::to_string(static_cast<long double>(Wide{in} + pad_total)));
  }
  Wide out = (ceil ? (room + stride - 1) / stride : room / stride) + 1;
  // PyTorch's and ONNX's ceil rule: the last window must start inside the input or left padding.
  if (ceil && (out - 1) * stride >= Wide{in} + pad_total / 2) --out;
  return static_cast<std::int64_t>(out);  // <= in + pad_total, which fits

}

// The 2-D window geometry of Conv/MaxPool/AveragePool: kernel, strides, dilations, pads (begin,
// end per dim) with auto_pad resolved.
struct Window {
  std::int64_t k[2], s[2], d[2], pad_begin[2], pad_end[2];
};

Window window(const Context& c, const Shape& x, std::vector<std::int64_t> kernel) {
  if (x.size() != 4) c.fail("input of shape " + to_string(x) + ": only 2-D (rank 4) windows are supported");
  if (kernel.size() != 2) c.fail("attribute 'kernel_shape' must have 2 values for a 2-D window");
  const auto strides = c.node.ints_attr("strides", {1, 1});
  const auto dilations = c.node.ints_attr("dilations", {1, 1});
  auto pads = c.node.ints_attr("pads", {0, 0, 0, 0});
  if (strides.size() != 2) c.bad("attribute 'strides' must have 2 values");
  if (dilations.size() != 2) c.bad("attribute 'dilations' must have 2 values");
  if (pads.size() != 4) c.bad("attribute 'pads' must have 4 values");
  Window w{};
  const std::string auto_pad = c.node.string_attr("auto_pad", "NOTSET");
  for (int i = 0; i < 2; ++i) {
    w.k[i] = kernel[i];
    w.s[i] = strides[i];
    w.d[i] = dilations[i];
    if (w.k[i] <= 0 || w.s[i] <= 0 || w.d[i] <= 0) c.bad("kernel_shape, strides and dilations must be positive");
    if (auto_pad == "NOTSET") {
      w.pad_begin[i] = pads[i];
      w.pad_end[i] = pads[i + 2];
      if (w.pad_begin[i] < 0 || w.pad_end[i] < 0) c.bad("attribute 'pads' has a negative value");
      if (w.pad_begin[i] > kMaxDim || w.pad_end[i] > kMaxDim) c.bad("attribute 'pads' has a value above " + std::to_string(kMaxDim));
    } else if (auto_pad == "VALID") {
      w.pad_begin[i] = w.pad_end[i] = 0;
    } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      const std::int64_t out = (x[2 + i] + w.s[i] - 1) / w.s[i];
      const std::int64_t total = std::max<std::int64_t>(0, (out - 1) * w.s[i] + w.d[i] * (w.k[i] - 1) + 1 - x[2 + i]);
      w.pad_begin[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      w.pad_end[i] = total - w.pad_begin[i];
    } else {
      c.bad("attribute 'auto_pad' = '" + auto_pad + "' (valid: NOTSET, VALID, SAME_UPPER, SAME_LOWER)");
    }
  }
  return w;
}

Infos unary(Context& c) { return {c.in(0)}; }

Infos binary(Context& c) {
  const ValueInfo& a = c.in(0);
  const ValueInfo& b = c.in(1);
  if (a.type != b.type) c.bad(std::string("inputs are ") + to_string(a.type) + " and " + to_string(b.type));
  return {info(a.type, broadcast(c, a.shape, b.shape))};
}

Infos conv(Context& c) {
  const ValueInfo& x = c.in(0);
  const Shape& w = c.shape(1);
  if (w.size() != 4) c.fail("weight of shape " + to_string(w) + ": only 2-D convolution is supported");
  const std::int64_t group = c.node.int_attr("group", 1);
  if (group <= 0 || x.shape.size() != 4 || x.shape[1] % group != 0 || x.shape[1] / group != w[1] || w[0] % group != 0) {
    c.bad("input " + to_string(x.shape) + ", weight " + to_string(w) + " and group " + std::to_string(group) +
          " do not agree (input channels = weight dim 1 x group, output channels a multiple of group)");
  }
  same_type(c, 1, "weight");
  if (c.has_input(2)) same_type(c, 2, "bias");
  const std::vector<std::int64_t> kernel = c.node.ints_attr("kernel_shape", {w[2], w[3]});
  if (kernel != std::vector<std::int64_t>{w[2], w[3]}) {
    c.bad("attribute 'kernel_shape' = " + to_string(kernel) + " disagrees with the weight's spatial dims " + to_string(Shape{w[2], w[3]}));
  }
  const Window win = window(c, x.shape, kernel);
  if (c.has_input(2) && c.shape(2) != Shape{w[0]}) c.bad("bias of shape " + to_string(c.shape(2)) + " is not [" + std::to_string(w[0]) + "]");
  Shape out{x.shape[0], w[0], 0, 0};
  for (int i = 0; i < 2; ++i) out[2 + i] = window_out(c, x.shape[2 + i], win.k[i], win.s[i], win.d[i], win.pad_begin[i] + win.pad_end[i], false);
  return {info(x.type, out)};
}

Infos conv_transpose(Context& c) {
  const ValueInfo& x = c.in(0);
  const Shape& w = c.shape(1);
  if (w.size() != 4 || x.shape.size() != 4) c.fail("only 2-D transposed convolution is supported");
  const std::int64_t group = c.node.int_attr("group", 1);
  if (group <= 0 || x.shape[1] != w[0] || w[0] % group != 0) {
    c.bad("input " + to_string(x.shape) + ", weight " + to_string(w) + " and group " + std::to_string(group) + " do not agree");
  }
  same_type(c, 1, "weight");
  if (c.node.has("output_shape")) c.fail("attribute 'output_shape' is not supported; give pads");
  if (c.node.string_attr("auto_pad", "NOTSET") != "NOTSET") c.fail("attribute 'auto_pad' is not supported");
  const auto strides = c.node.ints_attr("strides", {1, 1});
  const auto dilations = c.node.ints_attr("dilations", {1, 1});
  const auto pads = c.node.ints_attr("pads", {0, 0, 0, 0});
  const auto output_padding = c.node.ints_attr("output_padding", {0, 0});
  if (strides.size() != 2 || dilations.size() != 2 || pads.size() != 4 || output_padding.size() != 2) {
    c.bad("strides, dilations, pads and output_padding must have 2, 2, 4 and 2 values");
  }
  for (std::size_t i = 0; i < 4; ++i) {
    if (pads[i] < 0 || pads[i] > kMaxDim) c.bad("attribute 'pads' has a value outside [0, " + std::to_string(kMaxDim) + "]");
  }
  for (std::size_t i = 0; i < 2; ++i) {
    if (strides[i] <= 0 || dilations[i] <= 0) c.bad("strides and dilations must be positive");
    if (strides[i] > kMaxDim || dilations[i] > kMaxDim) c.bad("strides and dilations must be at most " + std::to_string(kMaxDim));
    if (output_padding[i] < 0 || output_padding[i] >= std::max(strides[i], dilations[i])) {
      c.bad("attribute 'output_padding' = " + std::to_string(output_padding[i]) + " must be in [0, max(stride, dilation))");
    }
  }
  using Wide = __int128;
  Shape out{x.shape[0], 0, 0, 0};
  const Wide channels = Wide{w[1]} * group;
  if (channels > kMaxDim) c.bad("output channels " + std::to_string(static_cast<long double>(channels)) + " are too many");
  out[1] = static_cast<std::int64_t>(channels);
  for (int i = 0; i < 2; ++i) {
    const Wide size = Wide{x.shape[2 + i] - 1} * strides[i] - pads[i] - pads[i + 2] + Wide{dilations[i]} * (w[2 + i] - 1) +
                      output_padding[i] + 1;
    if (size <= 0 || size > kMaxDim) c.bad("output size " + std::to_string(static_cast<long double>(size)) + " is not in [1, " + std::to_string(kMaxDim) + "]");
    out[2 + i] = static_cast<std::int64_t>(size);
  }
  return {info(x.type, out)};
}

Infos pool(Context& c) {
  const ValueInfo& x = c.in(0);
  if (c.node.outputs.size() > 1 && !c.node.outputs[1].empty()) c.fail("output 'Indices' is not supported");
  if (c.node.op_type == "MaxPool" && c.node.int_attr("storage_order", 0) != 0) c.fail("attribute 'storage_order' = 1 is not supported");
  if (!c.node.has("kernel_shape")) c.bad("attribute 'kernel_shape' is required");
  const Window win = window(c, x.shape, c.node.ints_attr("kernel_shape", {}));
  const bool ceil = c.node.int_attr("ceil_mode", 0) != 0;
  Shape out{x.shape[0], x.shape[1], 0, 0};
  for (int i = 0; i < 2; ++i) {
    if (win.pad_begin[i] >= win.k[i] || win.pad_end[i] >= win.k[i]) {
      c.bad("padding " + std::to_string(std::max(win.pad_begin[i], win.pad_end[i])) + " must be smaller than the kernel " + std::to_string(win.k[i]));
    }
    out[2 + i] = window_out(c, x.shape[2 + i], win.k[i], win.s[i], win.d[i], win.pad_begin[i] + win.pad_end[i], ceil);
  }
  return {info(x.type, out)};
}

Infos global_pool(Context& c) {
  const ValueInfo& x = c.in(0);
  if (x.shape.size() < 3) c.bad("input of shape " + to_string(x.shape) + " has no spatial dims");
  Shape out = x.shape;
  std::fill(out.begin() + 2, out.end(), 1);
  return {info(x.type, out)};
}

Infos batch_norm(Context& c) {
  const ValueInfo& x = c.in(0);
  if (c.node.int_attr("training_mode", 0) != 0) c.fail("attribute 'training_mode' = 1 is not supported for inference graphs");
  for (std::size_t i = 1; i < 5; ++i) {
    if (c.shape(i) != Shape{x.shape.size() > 1 ? x.shape[1] : 1}) c.bad("input " + std::to_string(i) + " of shape " + to_string(c.shape(i)) + " is not [C]");
  }
  return {x};
}

Infos layer_norm(Context& c) {
  const ValueInfo& x = c.in(0);
  const std::int64_t axis = c.axis(c.node.int_attr("axis", -1), x.shape.size(), "axis");
  Infos out{x};
  Shape stat = x.shape;
  std::fill(stat.begin() + axis, stat.end(), 1);
  for (std::size_t i = 1; i < c.node.outputs.size(); ++i) out.push_back(info(ElemType::f32, stat));
  return out;
}

Infos gemm(Context& c) {
  const ValueInfo& a = c.in(0);
  const Shape& b = c.shape(1);
  if (a.shape.size() != 2 || b.size() != 2) c.bad("inputs must be matrices, got " + to_string(a.shape) + " and " + to_string(b));
  same_type(c, 1, "B");
  if (c.has_input(2)) same_type(c, 2, "C");
  const bool ta = c.node.int_attr("transA", 0) != 0, tb = c.node.int_attr("transB", 0) != 0;
  const std::int64_t m = ta ? a.shape[1] : a.shape[0], k = ta ? a.shape[0] : a.shape[1];
  const std::int64_t kb = tb ? b[1] : b[0], n = tb ? b[0] : b[1];
  if (k != kb) c.bad("inner dims " + std::to_string(k) + " and " + std::to_string(kb) + " differ");
  if (c.has_input(2)) broadcast(c, c.shape(2), {m, n});
  return {info(a.type, {m, n})};
}

Infos matmul(Context& c) {
  const ValueInfo& a = c.in(0);
  Shape sa = a.shape, sb = c.shape(1);
  if (sa.empty() || sb.empty()) c.bad("inputs must have rank >= 1");
  same_type(c, 1, "B");
  const bool va = sa.size() == 1, vb = sb.size() == 1;
  if (va) sa.insert(sa.begin(), 1);
  if (vb) sb.push_back(1);
  if (sa.back() != sb[sb.size() - 2]) c.bad("inner dims of " + to_string(a.shape) + " and " + to_string(c.shape(1)) + " differ");
  Shape batch = broadcast(c, Shape(sa.begin(), sa.end() - 2), Shape(sb.begin(), sb.end() - 2));
  if (!va) batch.push_back(sa[sa.size() - 2]);
  if (!vb) batch.push_back(sb.back());
  return {info(a.type, batch)};
}

Infos reduce(Context& c) {
  const ValueInfo& x = c.in(0);
  auto axes = c.ints_from("axes", 1);
  const bool keep = c.node.int_attr("keepdims", 1) != 0;
  if (!axes || axes->empty()) {
    if (c.node.int_attr("noop_with_empty_axes", 0) != 0) return {x};
    axes = std::vector<std::int64_t>(x.shape.size());
    std::iota(axes->begin(), axes->end(), 0);
  }
  std::vector<bool> reduced(x.shape.size(), false);
  for (const std::int64_t a : *axes) reduced[c.axis(a, x.shape.size(), "axes")] = true;
  Shape out;
  for (std::size_t i = 0; i < x.shape.size(); ++i) {
    if (!reduced[i]) {
      out.push_back(x.shape[i]);
    } else if (keep) {
      out.push_back(1);
    }
  }
  return {info(x.type, out)};
}

Infos flatten(Context& c) {
  const ValueInfo& x = c.in(0);
  const std::int64_t axis = c.node.int_attr("axis", 1);
  const auto r = static_cast<std::int64_t>(x.shape.size());
  if (axis < -r || axis > r) c.bad("attribute 'axis' = " + std::to_string(axis) + " is outside [" + std::to_string(-r) + ", " + std::to_string(r) + "]");
  const std::int64_t a = axis < 0 ? axis + r : axis;
  const Shape head(x.shape.begin(), x.shape.begin() + a), tail(x.shape.begin() + a, x.shape.end());
  return {info(x.type, {element_count(head), element_count(tail)})};
}

Infos reshape(Context& c) {
  const ValueInfo& x = c.in(0);
  const auto target = c.node.has("shape") ? c.node.ints_attr("shape", {})
                                          : c.required_constant(1, "the target shape").as_int64(c.node.label() + " shape");
  const bool allow_zero = c.node.int_attr("allowzero", 0) != 0;
  Shape out;
  std::int64_t known = 1, infer = -1;
  for (std::size_t i = 0; i < target.size(); ++i) {
    std::int64_t d = target[i];
    if (d == 0 && !allow_zero) {
      if (i >= x.shape.size()) c.bad("shape entry 0 at " + std::to_string(i) + " copies a dim the input lacks");
      d = x.shape[i];
    }
    if (d == -1) {
      if (infer >= 0) c.bad("shape " + to_string(target) + " has more than one -1");
      infer = static_cast<std::int64_t>(i);
      out.push_back(1);
      continue;
    }
    if (d < 0) c.bad("shape " + to_string(target) + " has a negative entry");
    if (__builtin_mul_overflow(known, d, &known)) c.bad("shape " + to_string(target) + " has too many elements");
    out.push_back(d);
  }
  const std::int64_t total = element_count(x.shape);
  if (infer >= 0) {
    if (known == 0 || total % known != 0) c.bad("cannot reshape " + to_string(x.shape) + " to " + to_string(target));
    out[infer] = total / known;
  }
  if (element_count(out) != total) c.bad("cannot reshape " + to_string(x.shape) + " (" + std::to_string(total) + " elements) to " + to_string(out));
  return {info(x.type, out)};
}

Infos transpose(Context& c) {
  const ValueInfo& x = c.in(0);
  std::vector<std::int64_t> perm(x.shape.size());
  std::iota(perm.rbegin(), perm.rend(), 0);
  perm = c.node.ints_attr("perm", perm);
  if (perm.size() != x.shape.size()) c.bad("attribute 'perm' has " + std::to_string(perm.size()) + " entries for rank " + std::to_string(x.shape.size()));
  std::vector<bool> seen(perm.size(), false);
  Shape out;
  for (const std::int64_t p : perm) {
    const std::int64_t a = c.axis(p, x.shape.size(), "perm");
    if (seen[a]) c.bad("attribute 'perm' repeats axis " + std::to_string(a));
    seen[a] = true;
    out.push_back(x.shape[a]);
  }
  return {info(x.type, out)};
}

Infos concat(Context& c) {
  const ValueInfo& first = c.in(0);
  const std::int64_t axis = c.axis(c.node.int_attr("axis", 0), first.shape.size(), "axis");
  Shape out = first.shape;
  for (std::size_t i = 1; i < c.count(); ++i) {
    const Shape& s = c.shape(i);
    if (s.size() != out.size()) c.bad("input " + std::to_string(i) + " has rank " + std::to_string(s.size()));
    for (std::size_t d = 0; d < s.size(); ++d) {
      if (static_cast<std::int64_t>(d) == axis) continue;
      if (s[d] != out[d]) c.bad("input " + std::to_string(i) + " of shape " + to_string(s) + " differs from " + to_string(first.shape) + " off the axis");
    }
    if (s[axis] > kMaxDim || (out[axis] += s[axis]) > kMaxDim) c.bad("the concatenated dim exceeds " + std::to_string(kMaxDim));
  }
  return {info(first.type, out)};
}

Infos split(Context& c) {
  const ValueInfo& x = c.in(0);
  const std::int64_t axis = c.axis(c.node.int_attr("axis", 0), x.shape.size(), "axis");
  const std::size_t parts = c.node.outputs.size();
  if (parts == 0) c.bad("has no outputs");
  std::vector<std::int64_t> sizes;
  if (auto given = c.ints_from("split", 1)) {
    sizes = *given;
  } else {
    if (x.shape[axis] % static_cast<std::int64_t>(parts) != 0) c.fail("dim " + std::to_string(x.shape[axis]) + " does not split evenly into " + std::to_string(parts));
    sizes.assign(parts, x.shape[axis] / static_cast<std::int64_t>(parts));
  }
  bool sizes_ok = sizes.size() == parts;
  std::int64_t covered = 0;
  for (const std::int64_t size : sizes) sizes_ok = sizes_ok && size >= 0 && !__builtin_add_overflow(covered, size, &covered);
  if (!sizes_ok || covered != x.shape[axis]) {
    c.bad("split sizes " + to_string(sizes) + " do not cover dim " + std::to_string(x.shape[axis]) + " in " + std::to_string(parts) + " outputs");
  }
  Infos out;
  for (const std::int64_t s : sizes) {
    Shape shape = x.shape;
    shape[axis] = s;
    out.push_back(info(x.type, shape));
  }
  return out;
}

Infos pad(Context& c) {
  const ValueInfo& x = c.in(0);
  if (c.node.string_attr("mode", "constant") != "constant") c.fail("attribute 'mode' = '" + c.node.string_attr("mode", "") + "': only constant padding is supported");
  const auto pads = c.ints_from("pads", 1);
  if (!pads || pads->size() != 2 * x.shape.size()) c.bad("pads must have 2 x rank = " + std::to_string(2 * x.shape.size()) + " values");
  if (c.has_input(3)) c.fail("input 'axes' is not supported");
  Shape out = x.shape;
  for (std::size_t i = 0; i < out.size(); ++i) {
    const std::int64_t before = (*pads)[i], after = (*pads)[i + out.size()];
    if (before < 0 || after < 0) c.fail("negative pads (cropping) are not supported");
    if (before > kMaxDim || after > kMaxDim || (out[i] += before + after) > kMaxDim) c.bad("pads make a dim above " + std::to_string(kMaxDim));
  }
  return {info(x.type, out)};
}

Infos dropout(Context& c) {
  Infos out{c.in(0)};
  if (c.node.outputs.size() > 1) out.push_back(info(ElemType::boolean, c.in(0).shape));
  return out;
}

Infos clip(Context& c) {
  for (std::size_t i = 1; i < 3; ++i) {
    if (c.has_input(i) && c.constant(i) == nullptr) c.fail("min and max must be constants");
  }
  return {c.in(0)};
}

// Constant-only ops: their result is a constant, computed by their fold rule; the info follows.
Infos from_fold(Context&) { return {}; }

// --- folding of constant shape computations -------------------------------------------------------

using Fold = std::function<std::vector<HostTensor>(Context&)>;

HostTensor fold_shape(Context& c) {
  const Shape& s = c.shape(0);
  const auto r = static_cast<std::int64_t>(s.size());
  std::int64_t start = c.node.int_attr("start", 0), end = c.node.int_attr("end", r);
  start = std::clamp(start < 0 ? start + r : start, std::int64_t{0}, r);
  end = std::clamp(end < 0 ? end + r : end, std::int64_t{0}, r);
  std::vector<std::int64_t> dims(s.begin() + start, s.begin() + std::max(start, end));
  return HostTensor::from_int64(dims, {static_cast<std::int64_t>(dims.size())});
}

HostTensor fold_constant(Context& c) {
  const Node& n = c.node;
  if (const auto it = n.attributes.find("value"); it != n.attributes.end()) {
    if (const auto* t = std::get_if<HostTensor>(&it->second)) return *t;
  }
  if (n.has("value_int")) return HostTensor::from_int64({n.int_attr("value_int", 0)}, {});
  if (n.has("value_ints")) {
    const auto v = n.ints_attr("value_ints", {});
    return HostTensor::from_int64(v, {static_cast<std::int64_t>(v.size())});
  }
  if (n.has("value_float")) {
    HostTensor t;
    t.type = ElemType::f32;
    const auto f = static_cast<float>(n.float_attr("value_float", 0));
    t.data.resize(4);
    std::memcpy(t.data.data(), &f, 4);
    return t;
  }
  c.fail("only the value, value_int, value_ints and value_float forms are supported");
}

// Copies elements of `src` by index (element granularity) into a new tensor of `shape`.
HostTensor gather_elements(const HostTensor& src, const std::vector<std::int64_t>& index, Shape shape) {
  HostTensor t;
  t.type = src.type;
  t.shape = std::move(shape);
  const std::size_t size = size_of(src.type);
  t.data.resize(index.size() * size);
  for (std::size_t i = 0; i < index.size(); ++i) {
    std::memcpy(t.data.data() + i * size, src.data.data() + static_cast<std::size_t>(index[i]) * size, size);
  }
  return t;
}

std::vector<std::int64_t> row_major_strides(const Shape& s) {
  std::vector<std::int64_t> st(s.size(), 1);
  for (std::size_t i = s.size(); i-- > 1;) st[i - 1] = st[i] * s[i];
  return st;
}

HostTensor fold_gather(Context& c) {
  const HostTensor& data = *c.constant(0);
  const HostTensor& idx = *c.constant(1);
  const std::int64_t axis = c.axis(c.node.int_attr("axis", 0), data.shape.size(), "axis");
  auto indices = idx.as_int64(c.node.label() + " indices");
  const std::int64_t dim = data.shape[axis];
  for (auto& i : indices) {
    if (i < -dim || i >= dim) c.bad("index " + std::to_string(i) + " is outside a dim of " + std::to_string(dim));
    if (i < 0) i += dim;
  }
  Shape out(data.shape.begin(), data.shape.begin() + axis);
  out.insert(out.end(), idx.shape.begin(), idx.shape.end());
  out.insert(out.end(), data.shape.begin() + axis + 1, data.shape.end());
  if (element_count(out) > kMaxFoldedElements) {
    c.fail("folding would make " + to_string(out) + ", more than the " + std::to_string(kMaxFoldedElements) +
           " elements a shape computation folds");
  }
  const auto st = row_major_strides(data.shape);
  const std::int64_t outer = element_count(Shape(data.shape.begin(), data.shape.begin() + axis));
  const std::int64_t inner = st[axis];
  std::vector<std::int64_t> from;
  for (std::int64_t o = 0; o < outer; ++o) {
    for (const std::int64_t i : indices) {
      for (std::int64_t k = 0; k < inner; ++k) from.push_back(o * dim * inner + i * inner + k);
    }
  }
  return gather_elements(data, from, out);
}

HostTensor with_shape(HostTensor t, Shape shape) {
  t.shape = std::move(shape);
  return t;
}

HostTensor fold_unsqueeze(Context& c) {
  const HostTensor& x = *c.constant(0);
  const auto axes = c.ints_from("axes", 1).value_or(std::vector<std::int64_t>{});
  Shape out = x.shape;
  const std::size_t rank = out.size() + axes.size();
  std::vector<std::int64_t> sorted;
  for (const auto a : axes) sorted.push_back(c.axis(a, rank, "axes"));
  std::sort(sorted.begin(), sorted.end());
  for (const auto a : sorted) out.insert(out.begin() + a, 1);
  return with_shape(x, out);
}

HostTensor fold_squeeze(Context& c) {
  const HostTensor& x = *c.constant(0);
  const auto axes = c.ints_from("axes", 1);
  Shape out;
  for (std::size_t i = 0; i < x.shape.size(); ++i) {
    bool drop = !axes && x.shape[i] == 1;
    if (axes) {
      for (const auto a : *axes) drop = drop || c.axis(a, x.shape.size(), "axes") == static_cast<std::int64_t>(i);
    }
    if (drop && x.shape[i] != 1) c.bad("axis " + std::to_string(i) + " of " + to_string(x.shape) + " is not 1 and cannot be squeezed");
    if (!drop) out.push_back(x.shape[i]);
  }
  return with_shape(x, out);
}

HostTensor fold_concat(Context& c) {
  const Infos shape_info = concat(c);
  const std::int64_t axis = c.axis(c.node.int_attr("axis", 0), c.shape(0).size(), "axis");
  const Shape& out = shape_info[0].shape;
  const std::int64_t outer = element_count(Shape(out.begin(), out.begin() + axis));
  HostTensor t;
  t.type = c.constant(0)->type;
  t.shape = out;
  for (std::int64_t o = 0; o < outer; ++o) {
    for (std::size_t i = 0; i < c.count(); ++i) {
      const HostTensor& in = *c.constant(i);
      if (in.type != t.type) c.bad("inputs have different element types");
      const std::size_t chunk = static_cast<std::size_t>(element_count(Shape(in.shape.begin() + axis, in.shape.end()))) * size_of(t.type);
      const std::byte* src = in.data.data() + static_cast<std::size_t>(o) * chunk;
      t.data.insert(t.data.end(), src, src + chunk);
    }
  }
  return t;
}

// ONNX's TensorProto data type numbers of the types a Cast may name.
std::optional<ElemType> onnx_elem_type(std::int64_t to) {
  switch (to) {
    case 1: return ElemType::f32;
    case 2: return ElemType::u8;
    case 3: return ElemType::i8;
    case 6: return ElemType::i32;
    case 7: return ElemType::i64;
    case 9: return ElemType::boolean;
    case 10: return ElemType::f16;
    case 11: return ElemType::f64;
    case 16: return ElemType::bf16;
    default: return std::nullopt;
  }
}

// A Cast of a computed value: the executor converts between float types on the device.
Infos cast(Context& c) {
  const auto to = onnx_elem_type(c.node.int_attr("to", 0));
  if (!to) c.fail("attribute 'to' = " + std::to_string(c.node.int_attr("to", 0)) + " names no supported element type");
  return {info(*to, c.in(0).shape)};
}

HostTensor fold_cast(Context& c) {
  const HostTensor& x = *c.constant(0);
  const std::int64_t to = c.node.int_attr("to", 0);
  if (to == 7) return HostTensor::from_int64(x.as_int64(c.node.label() + " input"), x.shape);
  const auto type = onnx_elem_type(to);
  if (type == ElemType::f32 || type == ElemType::f16 || type == ElemType::bf16 || type == ElemType::f64) {
    const auto v = x.as_double();
    HostTensor t;
    t.type = *type;
    t.shape = x.shape;
    t.data.resize(v.size() * size_of(t.type));
    for (std::size_t i = 0; i < v.size(); ++i) {
      const auto f = static_cast<float>(v[i]);
      std::uint16_t h = 0;
      switch (t.type) {
        case ElemType::f32: std::memcpy(t.data.data() + 4 * i, &f, 4); break;
        case ElemType::f64: std::memcpy(t.data.data() + 8 * i, &v[i], 8); break;
        case ElemType::f16: h = float_to_half(f); std::memcpy(t.data.data() + 2 * i, &h, 2); break;
        default: h = float_to_bfloat16(f); std::memcpy(t.data.data() + 2 * i, &h, 2); break;
      }
    }
    return t;
  }
  c.fail("folding a Cast to type " + std::to_string(to) + " is not supported (int64 and the float types are)");
}

// galley.FusedConv (passes.hpp): Conv's rule for X, W and B, and a residual R of the output's
// shape and type.
Infos fused_conv(Context& c) {
  Infos out = conv(c);
  if (c.has_input(3)) {
    const ValueInfo& r = c.in(3);
    if (r.shape != out[0].shape || r.type != out[0].type) {
      c.bad("residual " + std::string(to_string(r.type)) + " " + to_string(r.shape) + " differs from the output " +
            to_string(out[0].type) + " " + to_string(out[0].shape));
    }
  }
  const std::string act = c.node.string_attr("activation", "");
  static const std::set<std::string> known{"", "Relu", "LeakyRelu", "Elu", "Clip", "Sigmoid", "Tanh", "HardSwish"};
  if (known.count(act) == 0) c.bad("attribute 'activation' = '" + act + "' is not an epilogue activation");
  return out;
}

// galley.Reorder (passes.hpp): the same logical value in another memory order.
Infos reorder(Context& c) {
  const std::string layout = c.node.string_attr("layout", "");
  if (layout != "NCHW" && layout != "NHWC") c.bad("attribute 'layout' = '" + layout + "' (valid: NCHW, NHWC)");
  return {c.in(0)};
}

HostTensor fold_slice(Context& c) {
  const HostTensor& x = *c.constant(0);
  if (x.shape.size() != 1) c.fail("folding a Slice of rank " + std::to_string(x.shape.size()) + " is not supported");
  const auto starts = c.ints_from("starts", 1).value_or(std::vector<std::int64_t>{0});
  const auto ends = c.ints_from("ends", 2).value_or(std::vector<std::int64_t>{x.shape[0]});
  const auto steps = c.has_input(4) ? c.required_constant(4, "steps").as_int64("steps") : std::vector<std::int64_t>{1};
  if (starts.size() != 1 || ends.size() != 1 || steps.size() != 1 || steps[0] == 0) c.bad("starts, ends and steps must be one value each, steps non-zero");
  const std::int64_t n = x.shape[0];
  const std::int64_t step = std::clamp(steps[0], -n - 1, n + 1);  // a longer step takes the same one element
  auto clampi = [&](std::int64_t v, std::int64_t lo, std::int64_t hi) { return std::clamp(v < 0 ? v + n : v, lo, hi); };
  std::vector<std::int64_t> index;
  if (step > 0) {
    for (std::int64_t i = clampi(starts[0], 0, n); i < clampi(ends[0], 0, n); i += step) index.push_back(i);
  } else {
    for (std::int64_t i = clampi(starts[0], -1, n - 1); i > clampi(ends[0], -1, n - 1); i += step) index.push_back(i);
  }
  return gather_elements(x, index, {static_cast<std::int64_t>(index.size())});
}

HostTensor fold_arithmetic(Context& c) {
  const HostTensor& a = *c.constant(0);
  const HostTensor& b = *c.constant(1);
  const Shape out = broadcast(c, a.shape, b.shape);
  const bool ints = a.type == ElemType::i64 && b.type == ElemType::i64;
  if (!ints) c.fail("folding arithmetic on " + std::string(to_string(a.type)) + " constants is not supported");
  const auto va = a.as_int64("a"), vb = b.as_int64("b");
  const std::int64_t count = element_count(out);
  if (!(va.size() == 1 || static_cast<std::int64_t>(va.size()) == count) || !(vb.size() == 1 || static_cast<std::int64_t>(vb.size()) == count)) {
    c.fail("folding arithmetic with partial broadcasting is not supported");
  }
  std::vector<std::int64_t> r(static_cast<std::size_t>(count));
  for (std::size_t i = 0; i < r.size(); ++i) {
    const std::int64_t x = va[va.size() == 1 ? 0 : i], y = vb[vb.size() == 1 ? 0 : i];
    const std::string& op = c.node.op_type;
    bool overflow = false;
    if (op == "Add") overflow = __builtin_add_overflow(x, y, &r[i]);
    else if (op == "Sub") overflow = __builtin_sub_overflow(x, y, &r[i]);
    else if (op == "Mul") overflow = __builtin_mul_overflow(x, y, &r[i]);
    else {
      if (y == 0) c.bad("integer division by zero");
      overflow = x == INT64_MIN && y == -1;
      if (!overflow) r[i] = x / y;
    }
    if (overflow) c.bad("int64 " + op + " of " + std::to_string(x) + " and " + std::to_string(y) + " overflows");
  }
  return HostTensor::from_int64(r, out);
}

HostTensor fold_reshape(Context& c) { return with_shape(*c.constant(0), reshape(c)[0].shape); }
HostTensor fold_identity(Context& c) { return *c.constant(0); }

struct Rule {
  std::function<Infos(Context&)> infer;
  std::function<HostTensor(Context&)> fold;  ///< null: never folded
  bool fold_only = false;                    ///< the op runs only when its inputs are constants
};

const std::map<std::string, Rule>& rules() {
  static const std::map<std::string, Rule> table = [] {
    std::map<std::string, Rule> t;
    for (const char* op : {"Relu", "LeakyRelu", "Elu", "Sigmoid", "Tanh", "HardSigmoid", "HardSwish", "Gelu", "Erf", "galley.Silu",
                           "Sqrt", "Neg", "Exp", "Reciprocal"}) {
      t[op] = {unary, nullptr};
    }
    t["Softmax"] = {softmax, nullptr};
    t["LogSoftmax"] = {softmax, nullptr};
    t["Identity"] = {unary, fold_identity};
    for (const char* op : {"Add", "Sub", "Mul", "Div"}) t[op] = {binary, fold_arithmetic};
    t["Pow"] = {binary, nullptr};
    t["Conv"] = {conv, nullptr};
    t["ConvTranspose"] = {conv_transpose, nullptr};
    t["MaxPool"] = {pool, nullptr};
    t["AveragePool"] = {pool, nullptr};
    t["GlobalAveragePool"] = {global_pool, nullptr};
    t["GlobalMaxPool"] = {global_pool, nullptr};
    t["BatchNormalization"] = {batch_norm, nullptr};
    t["LayerNormalization"] = {layer_norm, nullptr};
    t["Gemm"] = {gemm, nullptr};
    t["MatMul"] = {matmul, nullptr};
    t["ReduceMean"] = {reduce, nullptr};
    t["ReduceSum"] = {reduce, nullptr};
    t["Flatten"] = {flatten, nullptr};
    t["Reshape"] = {reshape, fold_reshape};
    t["Transpose"] = {transpose, nullptr};
    t["Concat"] = {concat, fold_concat};
    t["Split"] = {split, nullptr};
    t["Pad"] = {pad, nullptr};
    t["Dropout"] = {dropout, nullptr};
    t["Clip"] = {clip, nullptr};
    t["Constant"] = {from_fold, fold_constant, true};
    t["Shape"] = {from_fold, fold_shape, true};
    t["Gather"] = {from_fold, fold_gather, true};
    t["Unsqueeze"] = {from_fold, fold_unsqueeze, true};
    t["Squeeze"] = {from_fold, fold_squeeze, true};
    t["Cast"] = {cast, fold_cast};
    t["galley.FusedConv"] = {fused_conv, nullptr};
    t["galley.Reorder"] = {reorder, nullptr};
    t["Slice"] = {from_fold, fold_slice, true};
    return t;
  }();
  return table;
}

// The ops whose data input ONNX types as floats only (Conv's T is float16, float, double, ...;
// MaxPool also takes 8-bit integers).
const std::set<std::string>& float_ops() {
  static const std::set<std::string> ops{"Conv", "ConvTranspose", "galley.FusedConv", "AveragePool",
                                         "GlobalAveragePool", "GlobalMaxPool", "BatchNormalization",
                                         "LayerNormalization", "Gemm", "MatMul", "Softmax", "LogSoftmax", "Sigmoid",
                                         "Tanh", "HardSigmoid", "HardSwish", "Gelu", "Erf", "Elu", "LeakyRelu",
                                         "Sqrt", "Exp", "Reciprocal", "Dropout", "galley.Silu"};
  return ops;
}

void infer_with(Context& c, const Rule& rule) {
  const Node& node = c.node;
  Graph& graph = c.graph;
  if (float_ops().count(node.op_type) != 0 && c.has_input(0)) {
    const ElemType type = graph.value(node.inputs[0]).type;
    if (!is_float(type)) {
      c.bad("input '" + node.inputs[0] + "' is " + to_string(type) + "; " + node.op_type + " takes f32, f16, bf16 or f64");
    }
  }
  // Shape: only the input's shape is needed, so it folds whenever that shape is static.
  bool all_constant = !node.inputs.empty() || node.op_type == "Constant";
  for (std::size_t i = 0; i < node.inputs.size(); ++i) {
    if (node.op_type == "Shape") break;
    if (c.has_input(i) && c.constant(i) == nullptr) all_constant = false;
  }
  if (rule.fold && all_constant) {
    if (node.outputs.size() != 1) c.fail("folding a node with " + std::to_string(node.outputs.size()) + " outputs is not supported");
    try {
      HostTensor value = rule.fold(c);
      graph.values[node.outputs[0]] = info(value.type, value.shape);
      graph.constants[node.outputs[0]] = std::move(value);
      return;
    } catch (const Error& e) {
      // An op that also runs on computed values (Add on float constants, say) stays a node: the
      // constant-folding pass evaluates it on the cpu.
      if (rule.fold_only || e.status() != Status::unsupported) throw;
    }
  }
  if (rule.fold_only) c.fail("its inputs must be constants (a shape computation); only static shapes run");
  const Infos out = rule.infer(c);
  if (out.size() < node.outputs.size()) c.fail("has " + std::to_string(node.outputs.size()) + " outputs; supported: " + std::to_string(out.size()));
  for (std::size_t i = 0; i < node.outputs.size(); ++i) {
    if (!node.outputs[i].empty()) graph.values[node.outputs[i]] = out[i];
  }
}

}  // namespace

std::vector<std::string> supported_ops() {
  std::vector<std::string> out;
  for (const auto& [name, rule] : rules()) out.push_back(name);
  return out;
}

bool byte_size_fits(const Shape& shape, ElemType type) {
  std::int64_t n = static_cast<std::int64_t>(size_of(type));
  for (const std::int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return false;
  }
  return true;
}

void infer_node(Graph& graph, const Node& node) {
  const auto it = rules().find(node.op_type);
  if (it == rules().end()) {
    throw Error(Status::unsupported, node.label() + ": op '" + node.op_type + "' is not supported");
  }
  Context c{graph, node};
  try {
    infer_with(c, it->second);
  } catch (const Error& e) {
    // Helpers shared by many rules (element_count, as_int64) do not know the node: name it.
    const std::string what = e.what();
    if (what.find(node.label()) != std::string::npos) throw;
    throw Error(e.status(), node.label() + ": " + what);
  }
  for (const std::string& out : node.outputs) {
    if (out.empty()) continue;
    const ValueInfo& v = graph.value(out);
    if (v.shape_known && !byte_size_fits(v.shape, v.type)) {
      c.bad("output '" + out + "' of shape " + to_string(v.shape) + " has more bytes than a 64-bit size holds");
    }
  }
}

void infer_shapes(Graph& graph) {
  for (const Node& node : graph.nodes) infer_node(graph, node);
  for (const std::string& out : graph.outputs) {
    if (!graph.value(out).shape_known) throw Error(Status::unsupported, "graph output '" + out + "' has no static shape");
  }
}

}  // namespace galley::model
