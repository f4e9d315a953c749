#include "galley/dnn/data_movement.hpp"

#include <string>

#include "dnn/dispatch.hpp"
#include "galley/core/error.hpp"

namespace galley::dnn {
namespace {

[[noreturn]] void bad(const std::string& message) { throw Error(Status::invalid_argument, message); }

std::vector<std::int64_t> dims_of(const TensorDesc& d) { return {d.dims.begin(), d.dims.begin() + d.rank}; }

std::string dims_text(const std::vector<std::int64_t>& v) {
  std::string out = "[";
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(v[i]);
  }
  return out + "]";
}

void require_defined(const char* op, const std::string& what, const Tensor& t, runtime::Stream& stream) {
  if (!t.defined()) bad(std::string(op) + ": " + what + " is missing (an empty tensor)");
  if (!(t.device() == stream.device())) {
    bad(std::string(op) + ": " + what + " is on " + t.device().name() + ", but the stream is on " +
        stream.device().name());
  }
}

// One layout for a group of tensors: row-major when all are, else NHWC when all are packed so.
Layout group_layout(const char* op, const std::vector<std::pair<std::string, const TensorDesc*>>& group) {
  bool all_rows = true, all_nhwc = true;
  for (const auto& [name, d] : group) {
    all_rows = all_rows && d->is_contiguous();
    all_nhwc = all_nhwc && d->rank == 4 && d->is_packed(Layout::nhwc);
  }
  if (all_rows) return Layout::nchw;
  if (all_nhwc) return Layout::nhwc;
  for (const auto& [name, d] : group) datamove_layout(*d, std::string(op) + ": " + name);
  bad(std::string(op) + ": " + group.front().first +
      " and the other tensors mix row-major and NHWC layouts (" + "convert them with reorder first)");
}

// The pointer of `t` once it matches `want` (dtype, dims, layout, size, alignment).
void* bind_tensor(const char* op, const std::string& what, const Tensor& t, const TensorDesc& want,
                  runtime::Stream& stream) {
  require_defined(op, what, t, stream);
  const TensorDesc& d = t.desc();
  if (d.dtype != want.dtype || d.rank != want.rank || d.dims != want.dims) {
    bad(std::string(op) + ": " + what + " is " + d.to_string() + ", the op needs " +
        galley::to_string(want.dtype) + " " + dims_text(dims_of(want)));
  }
  if (t.storage_bytes() < want.bytes()) {
    bad(std::string(op) + ": " + what + " holds " + std::to_string(t.storage_bytes()) +
        " bytes, the op needs " + std::to_string(want.bytes()));
  }
  if (reinterpret_cast<std::uintptr_t>(t.data()) % size_of(want.dtype) != 0) {
    bad(std::string(op) + ": " + what + " is not aligned to its " + std::to_string(size_of(want.dtype)) +
        "-byte elements");
  }
  return t.data();
}

std::string part_name(bool input, std::size_t i) {
  return std::string(input ? "x[" : "y[") + std::to_string(i) + "]";
}

// Builds concat's (or split's) problem from the whole tensor and the parts, naming the first part
// whose other dims differ.
template <class P>
P parts_problem(const char* op, const Tensor& whole, const std::string& whole_name,
                std::span<const Tensor* const> parts, bool parts_are_inputs, int axis,
                runtime::Stream& stream) {
  require_defined(op, whole_name, whole, stream);
  if (parts.empty() || parts.size() > kMaxMultiArgs) {
    bad(std::string(op) + ": " + std::to_string(parts.size()) + " " +
        (parts_are_inputs ? "inputs" : "outputs") + " (valid: 1 to " + std::to_string(kMaxMultiArgs) + ")");
  }
  std::vector<std::pair<std::string, const TensorDesc*>> group{{whole_name, &whole.desc()}};
  for (std::size_t i = 0; i < parts.size(); ++i) {
    require_defined(op, part_name(parts_are_inputs, i), *parts[i], stream);
    group.emplace_back(part_name(parts_are_inputs, i), &parts[i]->desc());
  }
  P p;
  p.dtype = whole.dtype();
  p.layout = group_layout(op, group);
  p.dims = dims_of(whole.desc());
  p.axis = axis;
  if (axis < 0 || axis >= whole.desc().rank) {
    bad(std::string(op) + ": axis " + std::to_string(axis) + " is out of range for rank " +
        std::to_string(whole.desc().rank) + " (valid: 0 to " + std::to_string(whole.desc().rank - 1) + ")");
  }
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const std::vector<std::int64_t> d = dims_of(parts[i]->desc());
    bool same = d.size() == p.dims.size();
    for (std::size_t k = 0; same && k < d.size(); ++k)
      same = k == static_cast<std::size_t>(axis) || d[k] == p.dims[k];
    if (!same) {
      bad(std::string(op) + ": " + part_name(parts_are_inputs, i) + " has dims " + dims_text(d) + ", but " +
          whole_name + " has " + dims_text(p.dims) + ": they must match in every dim but axis " +
          std::to_string(axis));
    }
    p.sizes.push_back(d[static_cast<std::size_t>(axis)]);
  }
  p.validate();
  return p;
}

}  // namespace

Layout datamove_layout(const TensorDesc& desc, std::string_view what) {
  if (desc.is_contiguous()) return Layout::nchw;
  if (desc.rank == 4 && desc.is_packed(Layout::nhwc)) return Layout::nhwc;
  bad(std::string(what) + " " + desc.to_string() +
      " is neither row-major nor packed NHWC (copy it into one of those first)");
}

const SolverBase& concat(runtime::Stream& stream, std::span<const Tensor> inputs, Tensor& y, int axis,
                         const SolverBase* solver, CallReport* report) {
  const char* op = "concat";
  std::vector<const Tensor*> parts;
  for (const Tensor& t : inputs) parts.push_back(&t);
  const ConcatProblem p = parts_problem<ConcatProblem>(op, y, "y (output)", parts, true, axis, stream);
  OpArgs args;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    args.set(multi_arg(i), bind_tensor(op, part_name(true, i), *parts[i], p.part_desc(i), stream));
  }
  args.set(ArgId::dst, bind_tensor(op, "y (output)", y, p.whole_desc(), stream));
  return execute(op, stream, ProblemRef::of(p), args, solver, report);
}

const SolverBase& split(runtime::Stream& stream, const Tensor& x, std::span<Tensor> outputs, int axis,
                        const SolverBase* solver, CallReport* report) {
  const char* op = "split";
  std::vector<const Tensor*> parts;
  for (const Tensor& t : outputs) parts.push_back(&t);
  const SplitProblem p = parts_problem<SplitProblem>(op, x, "x (input)", parts, false, axis, stream);
  OpArgs args;
  args.set(ArgId::src, bind_tensor(op, "x (input)", x, p.whole_desc(), stream));
  for (std::size_t i = 0; i < parts.size(); ++i) {
    args.set(multi_arg(i), bind_tensor(op, part_name(false, i), *parts[i], p.part_desc(i), stream));
  }
  return execute(op, stream, ProblemRef::of(p), args, solver, report);
}

const SolverBase& concat_backward(runtime::Stream& stream, const Tensor& dy, std::span<Tensor> dxs, int axis,
                                  const SolverBase* solver, CallReport* report) {
  return split(stream, dy, dxs, axis, solver, report);
}

const SolverBase& split_backward(runtime::Stream& stream, std::span<const Tensor> dys, Tensor& dx, int axis,
                                 const SolverBase* solver, CallReport* report) {
  return concat(stream, dys, dx, axis, solver, report);
}

const SolverBase& transpose(runtime::Stream& stream, const Tensor& x, Tensor& y, const std::vector<int>& perm,
                            const SolverBase* solver, CallReport* report) {
  const char* op = "transpose";
  require_defined(op, "x (input)", x, stream);
  TransposeProblem p{x.dtype(), dims_of(x.desc()), perm};
  p.validate();
  for (const auto& [name, t] : {std::pair<const char*, const Tensor*>{"x (input)", &x}, {"y (output)", &y}}) {
    require_defined(op, name, *t, stream);
    if (!t->desc().is_contiguous()) {
      bad(std::string("transpose: ") + name + " " + t->desc().to_string() +
          " is not row-major (transpose reads and writes row-major tensors; the permutation says the rest)");
    }
  }
  OpArgs args;
  args.set(ArgId::src, bind_tensor(op, "x (input)", x, p.src_desc(), stream));
  args.set(ArgId::dst, bind_tensor(op, "y (output)", y, p.dst_desc(), stream));
  return execute(op, stream, ProblemRef::of(p), args, solver, report);
}

const SolverBase& transpose_backward(runtime::Stream& stream, const Tensor& dy, Tensor& dx,
                                     const std::vector<int>& perm, const SolverBase* solver,
                                     CallReport* report) {
  require_defined("transpose_backward", "dx (input gradient)", dx, stream);
  TransposeProblem forward{dx.dtype(), dims_of(dx.desc()), perm};
  forward.validate();
  return transpose(stream, dy, dx, forward.backward().perm, solver, report);
}

namespace {

const SolverBase& run_pad(const char* op, runtime::Stream& stream, const Tensor& small, const Tensor& padded,
                          const std::vector<std::int64_t>& before, const std::vector<std::int64_t>& after,
                          double value, PadDirection direction, const SolverBase* solver,
                          CallReport* report) {
  const bool fwd = direction == PadDirection::forward;
  const std::string small_name = fwd ? "x (input)" : "dx (input gradient)";
  const std::string padded_name = fwd ? "y (output)" : "dy (output gradient)";
  require_defined(op, small_name, small, stream);
  require_defined(op, padded_name, padded, stream);
  PadProblem p;
  p.dtype = small.dtype();
  p.layout = group_layout(op, {{small_name, &small.desc()}, {padded_name, &padded.desc()}});
  p.dims = dims_of(small.desc());
  p.before = before;
  p.after = after;
  p.value = value;
  p.direction = direction;
  p.validate();
  OpArgs args;
  void* s = bind_tensor(op, small_name, small, p.small_desc(), stream);
  void* d = bind_tensor(op, padded_name, padded, p.padded_desc(), stream);
  args.set(fwd ? ArgId::src : ArgId::diff_src, s);
  args.set(fwd ? ArgId::dst : ArgId::diff_dst, d);
  return execute(op, stream, ProblemRef::of(p), args, solver, report);
}

}  // namespace

const SolverBase& pad(runtime::Stream& stream, const Tensor& x, Tensor& y,
                      const std::vector<std::int64_t>& before, const std::vector<std::int64_t>& after,
                      double value, const SolverBase* solver, CallReport* report) {
  return run_pad("pad", stream, x, y, before, after, value, PadDirection::forward, solver, report);
}

const SolverBase& pad_backward(runtime::Stream& stream, const Tensor& dy, Tensor& dx,
                               const std::vector<std::int64_t>& before,
                               const std::vector<std::int64_t>& after, const SolverBase* solver,
                               CallReport* report) {
  return run_pad("pad_backward", stream, dx, dy, before, after, 0, PadDirection::backward, solver, report);
}

const SolverBase& reorder(runtime::Stream& stream, const Tensor& x, Tensor& y, const SolverBase* solver,
                          CallReport* report) {
  const char* op = "reorder";
  require_defined(op, "x (input)", x, stream);
  require_defined(op, "y (output)", y, stream);
  if (x.desc().rank != y.desc().rank || x.desc().dims != y.desc().dims) {
    bad("reorder: x (input) " + x.desc().to_string() + " and y (output) " + y.desc().to_string() +
        " differ in dims");
  }
  ReorderProblem p{dims_of(x.desc()), x.dtype(), datamove_layout(x.desc(), "reorder: x (input)"), y.dtype(),
                   datamove_layout(y.desc(), "reorder: y (output)")};
  p.validate();
  OpArgs args;
  args.set(ArgId::src, bind_tensor(op, "x (input)", x, p.src_desc(), stream));
  args.set(ArgId::dst, bind_tensor(op, "y (output)", y, p.dst_desc(), stream));
  return execute(op, stream, ProblemRef::of(p), args, solver, report);
}

}  // namespace galley::dnn
