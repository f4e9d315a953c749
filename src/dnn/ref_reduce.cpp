// ref.reduce: every src element visited in order with its coordinates, added (in double) into the
// output element at the same coordinates with the reduced ones set to 0.
#include "dnn/ref_reduce.hpp"

#include <vector>

#include "dnn/tensor_data.hpp"
#include "galley/core/error.hpp"

namespace galley::dnn {
namespace {

class RefReduce final : public Solver<ReduceProblem> {
 public:
  std::string_view name() const override { return kRefReduceName; }
  bool is_reference() const override { return true; }

  Applicability check(const ReduceProblem&, const runtime::Device& device) const override {
    if (!device.is_cpu()) return Applicability::no("runs on the cpu backend only, not " + device.name());
    return Applicability::yes();
  }

  void run(runtime::Stream& stream, const ReduceProblem& problem, const ReduceArgs& args) const override {
    stream.launch(name(), [&] {
      stream.host_task([problem, args] {
        if (problem.backward) {
          reference_reduce_backward(problem, args.diff_dst, args.diff_src);
        } else {
          reference_reduce_forward(problem, args.src, args.dst);
        }
      });
    });
  }
};

// The index into dst of every src element, in src order.
std::vector<std::int64_t> dst_index_of_src(const ReduceProblem& p) {
  Dims dst_stride{};
  std::int64_t stride = 1;
  for (int i = p.rank - 1; i >= 0; --i) {
    dst_stride[static_cast<std::size_t>(i)] = p.reduces(i) ? 0 : stride;
    if (!p.reduces(i)) stride *= p.dims[static_cast<std::size_t>(i)];
  }
  std::vector<std::int64_t> out(static_cast<std::size_t>(p.src_elements()));
  Dims coord{};
  std::int64_t index = 0;
  for (auto& o : out) {
    o = index;
    for (int i = p.rank - 1; i >= 0; --i) {
      const auto a = static_cast<std::size_t>(i);
      index += dst_stride[a];
      if (++coord[a] < p.dims[a]) break;
      index -= dst_stride[a] * coord[a];
      coord[a] = 0;
    }
  }
  return out;
}

double scale_of(const ReduceProblem& p) {
  return p.op == ReduceOp::mean ? 1.0 / static_cast<double>(p.reduced_count()) : 1.0;
}

}  // namespace

void reference_reduce_forward(const ReduceProblem& p, const void* src, void* dst) {
  p.validate();
  std::vector<float> x(static_cast<std::size_t>(p.src_elements()));
  to_float(p.dtype, src, x.data(), p.src_elements());
  const std::vector<std::int64_t> to = dst_index_of_src(p);
  std::vector<double> acc(static_cast<std::size_t>(p.dst_elements()), 0.0);
  for (std::size_t i = 0; i < x.size(); ++i) acc[static_cast<std::size_t>(to[i])] += x[i];
  const double scale = scale_of(p);
  std::vector<float> y(acc.size());
  for (std::size_t i = 0; i < acc.size(); ++i) y[i] = static_cast<float>(acc[i] * scale);
  from_float(p.dtype, y.data(), dst, p.dst_elements());
}

void reference_reduce_backward(const ReduceProblem& p, const void* diff_dst, void* diff_src) {
  p.validate();
  std::vector<float> dy(static_cast<std::size_t>(p.dst_elements()));
  to_float(p.dtype, diff_dst, dy.data(), p.dst_elements());
  const std::vector<std::int64_t> from = dst_index_of_src(p);
  const double scale = scale_of(p);
  std::vector<float> dx(from.size());
  for (std::size_t i = 0; i < dx.size(); ++i)
    dx[i] = static_cast<float>(dy[static_cast<std::size_t>(from[i])] * scale);
  from_float(p.dtype, dx.data(), diff_src, p.src_elements());
}

std::unique_ptr<Solver<ReduceProblem>> make_ref_reduce() { return std::make_unique<RefReduce>(); }

}  // namespace galley::dnn
