// ref.activ: the plainest correct activation. The formulas are activation_math.hpp's, the same the
// solvers use, evaluated in double; the tests check those formulas independently (hand-computed
// values, central finite differences for the derivatives).
#include "dnn/ref_activ.hpp"

#include <vector>

#include "dnn/activation_dispatch.hpp"
#include "dnn/tensor_data.hpp"
#include "galley/core/error.hpp"

namespace galley::dnn {
namespace {

class RefActiv final : public ActivSolver {
 public:
  std::string_view name() const override { return kRefActivName; }
  bool is_reference() const override { return true; }

  Applicability check(const ActivProblem& problem, const runtime::Device& device) const override {
    if (!device.is_cpu()) return Applicability::no("runs on the cpu backend only, not " + device.name());
    (void)problem;
    return Applicability::yes();
  }

  void run(runtime::Stream& stream, const ActivProblem& problem, const ActivArgs& args) const override {
    stream.launch(name(), [&] { stream.host_task([problem, args] { reference_activation(problem, args); }); });
  }
};

std::vector<float> load(const ActivProblem& p, const void* data) {
  std::vector<float> out(static_cast<std::size_t>(p.elements()));
  to_float(p.dtype, data, out.data(), p.elements());
  return out;
}

}  // namespace

void reference_activation(const ActivProblem& p, const ActivArgs& args) {
  p.validate();
  const std::int64_t count = p.elements();
  // The parameters as PyTorch's kernels (and every solver here) see them: rounded to float, the
  // math type of f32, f16 and bf16 alike. Then an input equal to a clip bound is equal to it here
  // too, and the reference takes the same side of every kink.
  const double alpha = static_cast<float>(p.alpha), beta = static_cast<float>(p.beta);
  std::vector<float> result(static_cast<std::size_t>(count));
  if (p.direction == ActivDirection::forward) {
    const std::vector<float> x = load(p, args.x);
    with_activation<double>(p.activation, alpha, beta, [&](auto f) {
      for (std::int64_t i = 0; i < count; ++i) {
        result[static_cast<std::size_t>(i)] = static_cast<float>(f.forward(static_cast<double>(x[static_cast<std::size_t>(i)])));
      }
    });
    from_float(p.dtype, result.data(), args.y, count);
    return;
  }
  const std::vector<float> dy = load(p, args.dy);
  const std::vector<float> v = load(p, p.reads_dst() ? static_cast<const void*>(args.y) : args.x);
  with_activation<double>(p.activation, alpha, beta, [&](auto f) {
    for (std::int64_t i = 0; i < count; ++i) {
      const auto k = static_cast<std::size_t>(i);
      result[k] = static_cast<float>(f.backward(static_cast<double>(dy[k]), static_cast<double>(v[k])));
    }
  });
  from_float(p.dtype, result.data(), args.dx, count);
}

std::unique_ptr<ActivSolver> make_ref_activ() { return std::make_unique<RefActiv>(); }

}  // namespace galley::dnn
