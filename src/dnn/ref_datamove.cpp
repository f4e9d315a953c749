#include "dnn/ref_datamove.hpp"

#include <cstring>
#include <string>

#include "dnn/tensor_data.hpp"

namespace galley::dnn {
namespace {

// Calls f(index) for every logical index of `dims`, the last dim fastest.
template <class F>
void for_each_index(const std::vector<std::int64_t>& dims, F&& f) {
  std::vector<std::int64_t> index(dims.size(), 0);
  std::int64_t count = 1;
  for (std::int64_t d : dims) count *= d;
  for (std::int64_t n = 0; n < count; ++n) {
    f(index);
    for (int k = static_cast<int>(dims.size()) - 1; k >= 0; --k) {
      if (++index[static_cast<std::size_t>(k)] < dims[static_cast<std::size_t>(k)]) break;
      index[static_cast<std::size_t>(k)] = 0;
    }
  }
}

std::int64_t offset(const TensorDesc& d, const std::vector<std::int64_t>& index) {
  std::int64_t off = 0;
  for (std::size_t k = 0; k < index.size(); ++k) off += index[k] * d.strides[k];
  return off;
}

// Copies one element's bytes (pure moves are exact for every dtype).
void move(const TensorDesc& sd, const void* src, std::int64_t s, const TensorDesc& dd, void* dst,
          std::int64_t d) {
  const std::size_t e = size_of(sd.dtype);
  std::memcpy(static_cast<std::byte*>(dst) + d * static_cast<std::int64_t>(e),
              static_cast<const std::byte*>(src) + s * static_cast<std::int64_t>(e), e);
  (void)dd;
}

std::vector<std::int64_t> dims_of(const TensorDesc& d) { return {d.dims.begin(), d.dims.begin() + d.rank}; }

template <class P>
void parts_reference(const P& p, const DataMoveArgs& args, bool concat) {
  p.validate();
  const TensorDesc whole = p.whole_desc();
  std::int64_t start = 0;
  for (std::size_t i = 0; i < p.sizes.size(); ++i) {
    const TensorDesc part = p.part_desc(i);
    for_each_index(dims_of(part), [&](const std::vector<std::int64_t>& index) {
      std::vector<std::int64_t> w = index;
      w[static_cast<std::size_t>(p.axis)] += start;
      if (concat) {
        move(part, args.multi[i], offset(part, index), whole, args.dst, offset(whole, w));
      } else {
        move(whole, args.src, offset(whole, w), part, args.multi[i], offset(part, index));
      }
    });
    start += p.sizes[i];
  }
}

template <class P>
class RefSolver final : public Solver<P> {
 public:
  using Fn = void (*)(const P&, const DataMoveArgs&);
  RefSolver(const char* name, Fn fn) : name_(name), fn_(fn) {}
  std::string_view name() const override { return name_; }
  bool is_reference() const override { return true; }
  Applicability check(const P&, const runtime::Device& device) const override {
    if (!device.is_cpu()) return Applicability::no("runs on the cpu backend only, not " + device.name());
    return Applicability::yes();
  }
  void run(runtime::Stream& stream, const P& problem, const DataMoveArgs& args) const override {
    stream.launch(name(), [&] { stream.host_task([problem, args, fn = fn_] { fn(problem, args); }); });
  }

 private:
  const char* name_;
  Fn fn_;
};

}  // namespace

void reference_concat(const ConcatProblem& p, const DataMoveArgs& args) { parts_reference(p, args, true); }
void reference_split(const SplitProblem& p, const DataMoveArgs& args) { parts_reference(p, args, false); }

void reference_transpose(const TransposeProblem& p, const DataMoveArgs& args) {
  p.validate();
  const TensorDesc sd = p.src_desc(), dd = p.dst_desc();
  for_each_index(p.dims, [&](const std::vector<std::int64_t>& index) {
    std::vector<std::int64_t> out(index.size());
    for (std::size_t i = 0; i < index.size(); ++i) out[i] = index[static_cast<std::size_t>(p.perm[i])];
    move(sd, args.src, offset(sd, index), dd, args.dst, offset(dd, out));
  });
}

void reference_pad(const PadProblem& p, const DataMoveArgs& args) {
  p.validate();
  const TensorDesc small = p.small_desc(), padded = p.padded_desc();
  if (p.direction == PadDirection::forward) {
    const float value = static_cast<float>(p.value);
    for_each_index(p.padded_dims(), [&](const std::vector<std::int64_t>& index) {
      std::vector<std::int64_t> in = index;
      bool inside = true;
      for (std::size_t k = 0; k < index.size(); ++k) {
        in[k] -= p.before[k];
        inside = inside && in[k] >= 0 && in[k] < p.dims[k];
      }
      const std::int64_t d = offset(padded, index);
      if (inside) {
        move(small, args.src, offset(small, in), padded, args.dst, d);
      } else {
        from_float(p.dtype, &value,
                   static_cast<std::byte*>(args.dst) + d * static_cast<std::int64_t>(size_of(p.dtype)), 1);
      }
    });
    return;
  }
  for_each_index(p.dims, [&](const std::vector<std::int64_t>& index) {
    std::vector<std::int64_t> in = index;
    for (std::size_t k = 0; k < index.size(); ++k) in[k] += p.before[k];
    move(padded, args.src, offset(padded, in), small, args.dst, offset(small, index));
  });
}

void reference_reorder(const ReorderProblem& p, const DataMoveArgs& args) {
  p.validate();
  const TensorDesc sd = p.src_desc(), dd = p.dst_desc();
  const auto se = static_cast<std::int64_t>(size_of(sd.dtype)),
             de = static_cast<std::int64_t>(size_of(dd.dtype));
  for_each_index(p.dims, [&](const std::vector<std::int64_t>& index) {
    float v = 0;
    to_float(sd.dtype, static_cast<const std::byte*>(args.src) + offset(sd, index) * se, &v, 1);
    from_float(dd.dtype, &v, static_cast<std::byte*>(args.dst) + offset(dd, index) * de, 1);
  });
}

std::unique_ptr<Solver<ConcatProblem>> make_ref_concat() {
  return std::make_unique<RefSolver<ConcatProblem>>("ref.concat", &reference_concat);
}
std::unique_ptr<Solver<SplitProblem>> make_ref_split() {
  return std::make_unique<RefSolver<SplitProblem>>("ref.split", &reference_split);
}
std::unique_ptr<Solver<TransposeProblem>> make_ref_transpose() {
  return std::make_unique<RefSolver<TransposeProblem>>("ref.transpose", &reference_transpose);
}
std::unique_ptr<Solver<PadProblem>> make_ref_pad() {
  return std::make_unique<RefSolver<PadProblem>>("ref.pad", &reference_pad);
}
std::unique_ptr<Solver<ReorderProblem>> make_ref_reorder() {
  return std::make_unique<RefSolver<ReorderProblem>>("ref.reorder", &reference_reorder);
}

}  // namespace galley::dnn
