// ref.softmax: the plainest correct softmax, in double, one row (a fixed outer and inner index,
// stepping along the axis by its stride) at a time.
#include "dnn/ref_softmax.hpp"

#include <cmath>
#include <limits>
#include <vector>

#include "dnn/reference_threads.hpp"
#include "dnn/tensor_data.hpp"
#include "galley/core/error.hpp"

namespace galley::dnn {
namespace {

class RefSoftmax final : public Solver<SoftmaxProblem> {
 public:
  std::string_view name() const override { return kRefSoftmaxName; }
  bool is_reference() const override { return true; }

  Applicability check(const SoftmaxProblem&, const runtime::Device& device) const override {
    if (!device.is_cpu()) return Applicability::no("runs on the cpu backend only, not " + device.name());
    return Applicability::yes();
  }

  void run(runtime::Stream& stream, const SoftmaxProblem& problem, const SoftmaxArgs& args) const override {
    stream.launch(name(), [&] {
      stream.host_task([problem, args] {
        if (problem.backward) {
          reference_softmax_backward(problem, args.diff_dst, args.dst, args.diff_src);
        } else {
          reference_softmax_forward(problem, args.src, args.dst);
        }
      });
    });
  }
};

std::vector<float> staged(const SoftmaxProblem& p, const void* data) {
  std::vector<float> out(static_cast<std::size_t>(p.elements()));
  to_float(p.dtype, data, out.data(), p.elements());
  return out;
}

}  // namespace

void reference_softmax_forward(const SoftmaxProblem& p, const void* src, void* dst) {
  p.validate();
  const std::int64_t outer = p.outer(), len = p.axis_size(), inner = p.inner();
  const std::vector<float> x = staged(p, src);
  std::vector<float> y(x.size());
  const bool log = p.algorithm == SoftmaxAlgorithm::log_softmax;
  reference_fan_out(outer, reference_threads(), [&](std::int64_t o) {
    for (std::int64_t i = 0; i < inner; ++i) {
      const std::int64_t base = o * len * inner + i;
      double max = -std::numeric_limits<double>::infinity();
      for (std::int64_t k = 0; k < len; ++k) max = std::max(max, static_cast<double>(x[base + k * inner]));
      // std::max drops a NaN that comes second; a NaN anywhere must still poison the row.
      for (std::int64_t k = 0; k < len; ++k) {
        if (std::isnan(x[base + k * inner])) max = std::numeric_limits<double>::quiet_NaN();
      }
      double sum = 0;
      for (std::int64_t k = 0; k < len; ++k) sum += std::exp(static_cast<double>(x[base + k * inner]) - max);
      const double log_sum = std::log(sum);
      for (std::int64_t k = 0; k < len; ++k) {
        const double shifted = static_cast<double>(x[base + k * inner]) - max;
        y[base + k * inner] = static_cast<float>(log ? shifted - log_sum : std::exp(shifted) / sum);
      }
    }
  });
  from_float(p.dtype, y.data(), dst, p.elements());
}

void reference_softmax_backward(const SoftmaxProblem& p, const void* diff_dst, const void* dst,
                                void* diff_src) {
  p.validate();
  const std::int64_t outer = p.outer(), len = p.axis_size(), inner = p.inner();
  const std::vector<float> dy = staged(p, diff_dst);
  const std::vector<float> y = staged(p, dst);
  std::vector<float> dx(y.size());
  const bool log = p.algorithm == SoftmaxAlgorithm::log_softmax;
  reference_fan_out(outer, reference_threads(), [&](std::int64_t o) {
    for (std::int64_t i = 0; i < inner; ++i) {
      const std::int64_t base = o * len * inner + i;
      double sum = 0;
      for (std::int64_t k = 0; k < len; ++k) {
        const std::int64_t j = base + k * inner;
        sum += log ? static_cast<double>(dy[j]) : static_cast<double>(dy[j]) * y[j];
      }
      for (std::int64_t k = 0; k < len; ++k) {
        const std::int64_t j = base + k * inner;
        const double g = dy[j], out = y[j];
        dx[j] = static_cast<float>(log ? g - std::exp(out) * sum : out * (g - sum));
      }
    }
  });
  from_float(p.dtype, dx.data(), diff_src, p.elements());
}

std::unique_ptr<Solver<SoftmaxProblem>> make_ref_softmax() { return std::make_unique<RefSoftmax>(); }

}  // namespace galley::dnn
