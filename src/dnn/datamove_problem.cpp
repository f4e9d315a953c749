// The data-movement problems: validation, descriptors, tensors, byte counts and hashes (their
// text forms are in datamove_problem_text.cpp).
#include "galley/dnn/datamove_problem.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "galley/core/error.hpp"
#include "galley/dnn/problem.hpp"

namespace galley::dnn {
namespace {

[[noreturn]] void bad(const std::string& message) { throw Error(Status::invalid_argument, message); }

std::string list_text(const std::vector<std::int64_t>& v) {
  std::string out = "[";
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(v[i]);
  }
  return out + "]";
}

bool is_float(DType t) { return t == DType::f32 || t == DType::f16 || t == DType::bf16; }

// Rank, dims and layout of one shape; every later element count fits 63 bits.
void validate_shape(const char* op, const char* field, const std::vector<std::int64_t>& dims, Layout layout) {
  if (dims.empty() || dims.size() > static_cast<std::size_t>(kMaxRank)) {
    bad(std::string(op) + " problem: " + field + " has rank " + std::to_string(dims.size()) +
        " (valid: 1 to " + std::to_string(kMaxRank) + ")");
  }
  std::int64_t count = 1;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 1) {
      bad(std::string(op) + " problem: " + field + "[" + std::to_string(i) +
          "] = " + std::to_string(dims[i]) + " must be positive");
    }
    if (__builtin_mul_overflow(count, dims[i], &count) || count > (std::int64_t(1) << 40)) {
      bad(std::string(op) + " problem: " + field + " " + list_text(dims) +
          " has too many elements (at most 2^40)");
    }
  }
  if (layout == Layout::nhwc && dims.size() != 4) {
    bad(std::string(op) + " problem: layout nhwc needs a rank-4 (N, C, H, W) shape, " + field + " has rank " +
        std::to_string(dims.size()));
  }
}

void validate_dtype(const char* op, const char* field, DType dtype, bool floats_only) {
  if (floats_only && !is_float(dtype)) {
    bad(std::string(op) + " problem: " + field + " " + to_string(dtype) +
        " is not supported (valid: f32, f16, bf16)");
  }
}

// Concat's and split's shared shape rules.
void validate_parts(const char* op, DType dtype, Layout layout, const std::vector<std::int64_t>& dims,
                    int axis, const std::vector<std::int64_t>& sizes) {
  validate_dtype(op, "dtype", dtype, false);
  validate_shape(op, "dims", dims, layout);
  const int rank = static_cast<int>(dims.size());
  if (axis < 0 || axis >= rank) {
    bad(std::string(op) + " problem: axis " + std::to_string(axis) + " is out of range for rank " +
        std::to_string(rank) + " (valid: 0 to " + std::to_string(rank - 1) + ")");
  }
  const char* what = std::string_view(op) == "concat" ? "inputs" : "outputs";
  if (sizes.empty() || sizes.size() > kMaxMultiArgs) {
    bad(std::string(op) + " problem: " + std::to_string(sizes.size()) + " " + what + " (valid: 1 to " +
        std::to_string(kMaxMultiArgs) + ")");
  }
  std::int64_t sum = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] < 1) {
      bad(std::string(op) + " problem: sizes[" + std::to_string(i) + "] = " + std::to_string(sizes[i]) +
          " must be positive");
    }
    if (__builtin_add_overflow(sum, sizes[i], &sum)) bad(std::string(op) + " problem: sizes overflow");
  }
  if (sum != dims[static_cast<std::size_t>(axis)]) {
    bad(std::string(op) + " problem: sizes " + list_text(sizes) + " sum to " + std::to_string(sum) +
        ", but dims[" + std::to_string(axis) + "] (axis " + std::to_string(axis) + ") is " +
        std::to_string(dims[static_cast<std::size_t>(axis)]));
  }
}

std::vector<std::int64_t> with_axis(std::vector<std::int64_t> dims, int axis, std::int64_t extent) {
  dims[static_cast<std::size_t>(axis)] = extent;
  return dims;
}

// Stable names for the variadic tensors (TensorArg keeps a string_view).
const std::vector<std::string>& part_names(bool inputs) {
  static const auto make = [](const char* stem, const char* what) {
    std::vector<std::string> out;
    for (std::size_t i = 0; i < kMaxMultiArgs; ++i) {
      out.push_back(std::string(stem) + "[" + std::to_string(i) + "] (" + what + " " + std::to_string(i) +
                    ")");
    }
    return out;
  };
  static const std::vector<std::string> in = make("x", "input");
  static const std::vector<std::string> out = make("y", "output");
  return inputs ? in : out;
}

double bytes_of(const TensorDesc& d) {
  return static_cast<double>(d.elements()) * static_cast<double>(size_of(d.dtype));
}

std::uint64_t mix(std::uint64_t h, std::int64_t v) {
  return h ^ (static_cast<std::uint64_t>(v) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2));
}
template <class T>
std::uint64_t mix_all(std::uint64_t h, const std::vector<T>& v) {
  h = mix(h, static_cast<std::int64_t>(v.size()));
  for (const T& x : v) h = mix(h, static_cast<std::int64_t>(x));
  return h;
}

}  // namespace

TensorDesc datamove_desc(DType dtype, Layout layout, const std::vector<std::int64_t>& dims) {
  if (layout == Layout::nhwc) {
    if (dims.size() != 4) bad("layout nhwc needs 4 dims, not " + std::to_string(dims.size()));
    return TensorDesc::packed(dtype, Layout::nhwc, dims[0], dims[1], dims[2], dims[3]);
  }
  return TensorDesc::contiguous(dtype, dims.data(), static_cast<int>(dims.size()));
}

DataMoveArgs DataMoveArgs::from(const OpArgs& args) {
  DataMoveArgs out;
  out.src = args.get(ArgId::src) ? args.get(ArgId::src) : args.get(ArgId::diff_dst);
  out.dst = args.get(ArgId::dst) ? args.get(ArgId::dst) : args.get(ArgId::diff_src);
  for (std::size_t i = 0; i < kMaxMultiArgs; ++i) out.multi[i] = args.get(multi_arg(i));
  out.workspace = args.workspace;
  out.workspace_bytes = args.workspace_bytes;
  return out;
}

// ---- concat ----

TensorDesc ConcatProblem::part_desc(std::size_t i) const {
  return datamove_desc(dtype, layout, with_axis(dims, axis, sizes.at(i)));
}
TensorDesc ConcatProblem::whole_desc() const { return datamove_desc(dtype, layout, dims); }
void ConcatProblem::validate() const { validate_parts("concat", dtype, layout, dims, axis, sizes); }
SplitProblem ConcatProblem::backward() const { return {dtype, layout, dims, axis, sizes}; }

std::vector<TensorArg> ConcatProblem::tensors() const {
  std::vector<TensorArg> out;
  for (std::size_t i = 0; i < sizes.size(); ++i)
    out.push_back({multi_arg(i), part_desc(i), false, part_names(true)[i]});
  out.push_back({ArgId::dst, whole_desc(), true, "y (output)"});
  return out;
}

double ConcatProblem::min_bytes() const { return 2 * bytes_of(whole_desc()); }

std::size_t ConcatProblem::hash() const noexcept {
  std::uint64_t h =
      mix(mix(mix(1, static_cast<std::int64_t>(dtype)), static_cast<std::int64_t>(layout)), axis);
  return static_cast<std::size_t>(mix_all(mix_all(h, dims), sizes));
}

// ---- split ----

TensorDesc SplitProblem::part_desc(std::size_t i) const {
  return datamove_desc(dtype, layout, with_axis(dims, axis, sizes.at(i)));
}
TensorDesc SplitProblem::whole_desc() const { return datamove_desc(dtype, layout, dims); }
void SplitProblem::validate() const { validate_parts("split", dtype, layout, dims, axis, sizes); }
ConcatProblem SplitProblem::backward() const { return {dtype, layout, dims, axis, sizes}; }

std::vector<TensorArg> SplitProblem::tensors() const {
  std::vector<TensorArg> out;
  out.push_back({ArgId::src, whole_desc(), false, "x (input)"});
  for (std::size_t i = 0; i < sizes.size(); ++i)
    out.push_back({multi_arg(i), part_desc(i), true, part_names(false)[i]});
  return out;
}

double SplitProblem::min_bytes() const { return 2 * bytes_of(whole_desc()); }

std::size_t SplitProblem::hash() const noexcept {
  std::uint64_t h =
      mix(mix(mix(2, static_cast<std::int64_t>(dtype)), static_cast<std::int64_t>(layout)), axis);
  return static_cast<std::size_t>(mix_all(mix_all(h, dims), sizes));
}

// ---- transpose ----

std::vector<std::int64_t> TransposeProblem::dst_dims() const {
  std::vector<std::int64_t> out(perm.size());
  for (std::size_t i = 0; i < perm.size(); ++i) out[i] = dims.at(static_cast<std::size_t>(perm[i]));
  return out;
}
TensorDesc TransposeProblem::src_desc() const { return datamove_desc(dtype, Layout::nchw, dims); }
TensorDesc TransposeProblem::dst_desc() const { return datamove_desc(dtype, Layout::nchw, dst_dims()); }

void TransposeProblem::validate() const {
  validate_shape("transpose", "dims", dims, Layout::nchw);
  if (perm.size() != dims.size()) {
    bad("transpose problem: perm has " + std::to_string(perm.size()) + " entries, dims has rank " +
        std::to_string(dims.size()) + " (perm must list every axis once)");
  }
  std::vector<bool> seen(perm.size(), false);
  for (std::size_t i = 0; i < perm.size(); ++i) {
    const int p = perm[i];
    if (p < 0 || p >= rank()) {
      bad("transpose problem: perm[" + std::to_string(i) + "] = " + std::to_string(p) +
          " is out of range (valid: 0 to " + std::to_string(rank() - 1) + ")");
    }
    if (seen[static_cast<std::size_t>(p)]) {
      bad("transpose problem: perm[" + std::to_string(i) + "] = " + std::to_string(p) +
          " repeats an axis (perm must be a permutation of 0 to " + std::to_string(rank() - 1) + ")");
    }
    seen[static_cast<std::size_t>(p)] = true;
  }
}

TransposeProblem TransposeProblem::backward() const {
  TransposeProblem out{dtype, dst_dims(), std::vector<int>(perm.size())};
  for (std::size_t i = 0; i < perm.size(); ++i)
    out.perm[static_cast<std::size_t>(perm[i])] = static_cast<int>(i);
  return out;
}

std::vector<TensorArg> TransposeProblem::tensors() const {
  return {{ArgId::src, src_desc(), false, "x (input)"}, {ArgId::dst, dst_desc(), true, "y (output)"}};
}

double TransposeProblem::min_bytes() const { return 2 * bytes_of(src_desc()); }

std::size_t TransposeProblem::hash() const noexcept {
  return static_cast<std::size_t>(mix_all(mix_all(mix(3, static_cast<std::int64_t>(dtype)), dims), perm));
}

// ---- pad ----

std::vector<std::int64_t> PadProblem::padded_dims() const {
  std::vector<std::int64_t> out = dims;
  for (std::size_t i = 0; i < out.size() && i < before.size() && i < after.size(); ++i)
    out[i] += before[i] + after[i];
  return out;
}
TensorDesc PadProblem::small_desc() const { return datamove_desc(dtype, layout, dims); }
TensorDesc PadProblem::padded_desc() const { return datamove_desc(dtype, layout, padded_dims()); }

void PadProblem::validate() const {
  validate_dtype("pad", "dtype", dtype, true);
  validate_shape("pad", "dims", dims, layout);
  for (const auto& [name, v] :
       {std::pair<const char*, const std::vector<std::int64_t>&>{"before", before}, {"after", after}}) {
    if (v.size() != dims.size()) {
      bad(std::string("pad problem: ") + name + " has " + std::to_string(v.size()) +
          " entries, dims has rank " + std::to_string(dims.size()) + " (one pad per dim)");
    }
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (v[i] < 0 || v[i] > (std::int64_t(1) << 40)) {
        bad(std::string("pad problem: ") + name + "[" + std::to_string(i) + "] = " + std::to_string(v[i]) +
            (v[i] < 0 ? " is negative (valid: >= 0; crop is pad's backward)" : " is too large"));
      }
    }
  }
  if (std::isnan(value)) bad("pad problem: value is NaN (valid: any number or +-inf)");
  validate_shape("pad", "padded dims", padded_dims(), layout);
}

PadProblem PadProblem::backward() const {
  PadProblem out = *this;
  out.direction = direction == PadDirection::forward ? PadDirection::backward : PadDirection::forward;
  return out;
}

std::vector<TensorArg> PadProblem::tensors() const {
  if (direction == PadDirection::forward) {
    return {{ArgId::src, small_desc(), false, "x (input)"}, {ArgId::dst, padded_desc(), true, "y (output)"}};
  }
  return {{ArgId::diff_dst, padded_desc(), false, "dy (output gradient)"},
          {ArgId::diff_src, small_desc(), true, "dx (input gradient)"}};
}

double PadProblem::min_bytes() const {
  // Forward writes the whole padded tensor; the crop reads only its interior.
  return direction == PadDirection::forward ? bytes_of(small_desc()) + bytes_of(padded_desc())
                                            : 2 * bytes_of(small_desc());
}

std::size_t PadProblem::hash() const noexcept {
  std::uint64_t h = mix(mix(mix(4, static_cast<std::int64_t>(dtype)), static_cast<std::int64_t>(layout)),
                        static_cast<std::int64_t>(direction));
  std::int64_t bits = 0;
  const double v = value == 0 ? 0.0 : value;  // -0 and 0 compare equal, so they must hash equal
  static_assert(sizeof(bits) == sizeof(v));
  __builtin_memcpy(&bits, &v, sizeof(v));
  return static_cast<std::size_t>(mix(mix_all(mix_all(mix_all(h, dims), before), after), bits));
}

// ---- reorder ----

TensorDesc ReorderProblem::src_desc() const { return datamove_desc(src_dtype, src_layout, dims); }
TensorDesc ReorderProblem::dst_desc() const { return datamove_desc(dst_dtype, dst_layout, dims); }

void ReorderProblem::validate() const {
  validate_dtype("reorder", "src dtype", src_dtype, true);
  validate_dtype("reorder", "dst dtype", dst_dtype, true);
  validate_shape("reorder", "dims", dims, src_layout);
  validate_shape("reorder", "dims", dims, dst_layout);
}

ReorderProblem ReorderProblem::backward() const {
  return {dims, dst_dtype, dst_layout, src_dtype, src_layout};
}

std::vector<TensorArg> ReorderProblem::tensors() const {
  return {{ArgId::src, src_desc(), false, "x (input)"}, {ArgId::dst, dst_desc(), true, "y (output)"}};
}

double ReorderProblem::tolerance() const {
  const bool widening = dst_dtype == DType::f32 || dst_dtype == src_dtype;
  if (widening) return 0;
  return dst_dtype == DType::f16 ? 1.0 / 2048 : 1.0 / 256;
}

double ReorderProblem::min_bytes() const { return bytes_of(src_desc()) + bytes_of(dst_desc()); }

std::size_t ReorderProblem::hash() const noexcept {
  std::uint64_t h =
      mix(mix(mix(mix(5, static_cast<std::int64_t>(src_dtype)), static_cast<std::int64_t>(src_layout)),
              static_cast<std::int64_t>(dst_dtype)),
          static_cast<std::int64_t>(dst_layout));
  return static_cast<std::size_t>(mix_all(h, dims));
}

namespace {
const bool kRegistered =
    register_problem_ops(problem_ops<ConcatProblem>()) && register_problem_ops(problem_ops<SplitProblem>()) &&
    register_problem_ops(problem_ops<TransposeProblem>()) &&
    register_problem_ops(problem_ops<PadProblem>()) && register_problem_ops(problem_ops<ReorderProblem>());
}  // namespace

}  // namespace galley::dnn
