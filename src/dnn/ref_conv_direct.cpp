// ref.conv.direct: the plainest correct convolution, in double. Speed matters only so far as the
// conformance tests and `-V 1` on real layers stay bearable, hence the float staging copies (no
// per-element dtype dispatch in the inner loop) and a simple fan-out over host threads.
#include "ref_conv_direct.hpp"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "dnn/activation_dispatch.hpp"
#include "dnn/reference_threads.hpp"
#include "galley/core/error.hpp"
#include "galley/dnn/conv_solver.hpp"
#include "tensor_data.hpp"

namespace galley::dnn {
namespace {

class RefConvDirect final : public ConvSolver {
 public:
  std::string_view name() const override { return kRefConvDirectName; }

  Applicability check(const ConvProblem& problem, const runtime::Device& device) const override {
    if (!device.is_cpu()) return Applicability::no("runs on the cpu backend only, not " + device.name());
    if (problem.direction != ConvDirection::forward) {
      return Applicability::no(std::string("forward only, not ") + to_string(problem.direction));
    }
    if (problem.dtype != DType::f32 && problem.dtype != DType::f16 && problem.dtype != DType::bf16) {
      return Applicability::no(std::string("dtype ") + to_string(problem.dtype) + " is not f32, f16 or bf16");
    }
    return Applicability::yes();
  }

  void run(runtime::Stream& stream, const ConvProblem& problem, const ConvArgs& args) const override {
    stream.launch(name(), [&] {
      stream.host_task([problem, args] {
        reference_conv_forward(problem, args.x, args.w, args.y, args.bias, args.residual);
      });
    });
  }

  bool is_reference() const override { return true; }
  bool implements_fused_parts() const override { return true; }
};

}  // namespace

void reference_conv_forward(const ConvProblem& p, const void* x, const void* w, void* y, const void* bias,
                            const void* residual) {
  p.validate();
  if (p.direction != ConvDirection::forward) {
    throw Error(Status::unsupported, std::string("reference_conv_forward: direction ") +
                                         to_string(p.direction) + " is not forward");
  }
  if (p.epilogue.bias && bias == nullptr) {
    throw Error(Status::invalid_argument, "reference_conv_forward: the problem adds a bias but bias is null");
  }
  if (p.epilogue.residual && residual == nullptr) {
    throw Error(Status::invalid_argument, "reference_conv_forward: the problem adds a residual but residual is null");
  }
  const std::int64_t n = p.n, c = p.c, h = p.h, wd = p.w, k = p.k, fy = p.y, fx = p.x;
  const std::int64_t g = p.groups, cg = c / g, kg = k / g;
  const std::int64_t ho = p.out_h(), wo = p.out_w();
  const bool nchw = p.layout == Layout::nchw;

  // Stage x as N,H,W,C and w as K,Y,X,Cg floats: the reduction over channels is then contiguous.
  std::vector<float> xs(static_cast<std::size_t>(n * c * h * wd));
  std::vector<float> ws(static_cast<std::size_t>(k * cg * fy * fx));
  {
    std::vector<float> raw(std::max(xs.size(), ws.size()));
    to_float(p.dtype, x, raw.data(), n * c * h * wd);
    if (nchw) {
      for (std::int64_t in = 0; in < n; ++in)
        for (std::int64_t ic = 0; ic < c; ++ic)
          for (std::int64_t ih = 0; ih < h; ++ih)
            for (std::int64_t iw = 0; iw < wd; ++iw)
              xs[((in * h + ih) * wd + iw) * c + ic] = raw[((in * c + ic) * h + ih) * wd + iw];
    } else {
      std::copy_n(raw.begin(), xs.size(), xs.begin());
    }
    to_float(p.dtype, w, raw.data(), k * cg * fy * fx);
    if (nchw) {
      for (std::int64_t ik = 0; ik < k; ++ik)
        for (std::int64_t ic = 0; ic < cg; ++ic)
          for (std::int64_t r = 0; r < fy; ++r)
            for (std::int64_t s = 0; s < fx; ++s)
              ws[((ik * fy + r) * fx + s) * cg + ic] = raw[((ik * cg + ic) * fy + r) * fx + s];
    } else {
      std::copy_n(raw.begin(), ws.size(), ws.begin());
    }
  }

  // The epilogue's inputs as floats (exact for every storage type), y's layout for the residual.
  std::vector<float> bias_f, residual_f;
  if (p.epilogue.bias) {
    bias_f.resize(static_cast<std::size_t>(k));
    to_float(p.dtype, bias, bias_f.data(), k);
  }
  if (p.epilogue.residual) {
    residual_f.resize(static_cast<std::size_t>(n * k * ho * wo));
    to_float(p.dtype, residual, residual_f.data(), n * k * ho * wo);
  }
  const auto finish = [&](double acc, std::int64_t in, std::int64_t oh, std::int64_t ow, std::int64_t ok) {
    if (p.epilogue.bias) acc += bias_f[static_cast<std::size_t>(ok)];
    if (p.epilogue.residual) {
      const std::int64_t at = nchw ? ((in * k + ok) * ho + oh) * wo + ow : ((in * ho + oh) * wo + ow) * k + ok;
      acc += residual_f[static_cast<std::size_t>(at)];
    }
    if (p.epilogue.activation) {
      acc = with_activation<double>(*p.epilogue.activation, p.epilogue.alpha, p.epilogue.beta,
                                    [acc](const auto& f) { return f.forward(acc); });
    }
    return static_cast<float>(acc);
  };

  const std::size_t elem = size_of(p.dtype);
  auto* out = static_cast<std::byte*>(y);
  // One task per output row (n, ho): rows are independent and write disjoint elements.
  reference_fan_out(n * ho, reference_threads(), [&](std::int64_t row) {
    const std::int64_t in = row / ho, oh = row % ho;
    std::vector<float> values(static_cast<std::size_t>(wo * k));
    for (std::int64_t ow = 0; ow < wo; ++ow) {
      for (std::int64_t ok = 0; ok < k; ++ok) {
        const std::int64_t grp = ok / kg;
        double acc[4] = {0, 0, 0, 0};
        for (std::int64_t r = 0; r < fy; ++r) {
          const std::int64_t ih = oh * p.stride_h - p.pad_h + r * p.dilation_h;
          if (ih < 0 || ih >= h) continue;
          for (std::int64_t s = 0; s < fx; ++s) {
            const std::int64_t iw = ow * p.stride_w - p.pad_w + s * p.dilation_w;
            if (iw < 0 || iw >= wd) continue;
            const float* xp = &xs[static_cast<std::size_t>(((in * h + ih) * wd + iw) * c + grp * cg)];
            const float* wp = &ws[static_cast<std::size_t>(((ok * fy + r) * fx + s) * cg)];
            std::int64_t ic = 0;
            for (; ic + 4 <= cg; ic += 4) {
              acc[0] += static_cast<double>(xp[ic]) * wp[ic];
              acc[1] += static_cast<double>(xp[ic + 1]) * wp[ic + 1];
              acc[2] += static_cast<double>(xp[ic + 2]) * wp[ic + 2];
              acc[3] += static_cast<double>(xp[ic + 3]) * wp[ic + 3];
            }
            for (; ic < cg; ++ic) acc[0] += static_cast<double>(xp[ic]) * wp[ic];
          }
        }
        values[static_cast<std::size_t>(ow * k + ok)] = finish((acc[0] + acc[1]) + (acc[2] + acc[3]), in, oh, ow, ok);
      }
    }
    // Round once to the storage type and scatter into the row's place in y.
    if (nchw) {
      std::vector<float> line(static_cast<std::size_t>(wo));
      for (std::int64_t ok = 0; ok < k; ++ok) {
        for (std::int64_t ow = 0; ow < wo; ++ow) line[ow] = values[static_cast<std::size_t>(ow * k + ok)];
        from_float(p.dtype, line.data(),
                   out + static_cast<std::size_t>(((in * k + ok) * ho + oh) * wo) * elem, wo);
      }
    } else {
      from_float(p.dtype, values.data(), out + static_cast<std::size_t>((in * ho + oh) * wo * k) * elem,
                 wo * k);
    }
  });
}

std::unique_ptr<ConvSolver> make_ref_conv_direct() { return std::make_unique<RefConvDirect>(); }

}  // namespace galley::dnn
