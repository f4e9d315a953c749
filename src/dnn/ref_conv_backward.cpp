// ref.conv.bwd_data and ref.conv.bwd_weights: the plainest correct backward convolutions, in
// double. Each output element is computed by one task as a gather over everything that feeds it
// (never a scatter-add), so no two threads touch one element and every element is written exactly
// once. Inputs are staged as float copies in the orders that make the innermost reduction
// contiguous, as the forward reference does.
#include "ref_conv_backward.hpp"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "conv_backward_args.hpp"
#include "galley/core/error.hpp"
#include "galley/dnn/conv_solver.hpp"
#include "reference_threads.hpp"
#include "tensor_data.hpp"

namespace galley::dnn {
namespace {

// A tensor of problem's dtype and layout as floats in N,H,W,C order (channels innermost),
// whatever its layout: `channels` is C for x, K for y.
std::vector<float> stage_nhwc(const ConvProblem& p, const void* data, std::int64_t n, std::int64_t channels,
                              std::int64_t h, std::int64_t w) {
  const std::int64_t count = n * channels * h * w;
  std::vector<float> out(static_cast<std::size_t>(count));
  if (p.layout == Layout::nhwc) {
    to_float(p.dtype, data, out.data(), count);
    return out;
  }
  std::vector<float> raw(static_cast<std::size_t>(count));
  to_float(p.dtype, data, raw.data(), count);
  for (std::int64_t in = 0; in < n; ++in)
    for (std::int64_t c = 0; c < channels; ++c)
      for (std::int64_t ih = 0; ih < h; ++ih)
        for (std::int64_t iw = 0; iw < w; ++iw)
          out[static_cast<std::size_t>(((in * h + ih) * w + iw) * channels + c)] =
              raw[static_cast<std::size_t>(((in * channels + c) * h + ih) * w + iw)];
  return out;
}

// Offset of weight (k, c, r, s) in the problem's weight layout (KCYX for nchw, KYXC for nhwc).
std::int64_t weight_offset(const ConvProblem& p, std::int64_t k, std::int64_t c, std::int64_t r,
                           std::int64_t s) {
  const std::int64_t cg = p.c / p.groups;
  return p.layout == Layout::nchw ? ((k * cg + c) * p.y + r) * p.x + s : ((k * p.y + r) * p.x + s) * cg + c;
}

// Offset of activation (n, c, h, w) of a tensor with `channels`, h_size x w_size, in problem's layout.
std::int64_t activation_offset(const ConvProblem& p, std::int64_t channels, std::int64_t h_size,
                               std::int64_t w_size, std::int64_t n, std::int64_t c, std::int64_t h,
                               std::int64_t w) {
  return p.layout == Layout::nchw ? ((n * channels + c) * h_size + h) * w_size + w
                                  : ((n * h_size + h) * w_size + w) * channels + c;
}

// The forward tap index t along one axis whose output position `o` reads input `i`:
// o = (i + pad - t*dil) / stride when that divides exactly and lands in [0, out); else -1.
std::int64_t output_of(std::int64_t i, std::int64_t t, std::int64_t pad, std::int64_t stride,
                       std::int64_t dil, std::int64_t out) {
  const std::int64_t num = i + pad - t * dil;
  if (num < 0 || num % stride != 0) return -1;
  const std::int64_t o = num / stride;
  return o < out ? o : -1;
}

void require_pointers(const char* what, const void* a, const char* a_name, const void* b, const char* b_name,
                      const void* out, const char* out_name) {
  for (const auto& [ptr, name] : {std::pair{a, a_name}, std::pair{b, b_name}, std::pair{out, out_name}}) {
    if (ptr == nullptr) throw Error(Status::invalid_argument, std::string(what) + ": " + name + " is null");
  }
}

// The reference solvers: the functions above on a cpu stream, checked like every solver.
class RefConvBackward final : public ConvSolver {
 public:
  explicit RefConvBackward(ConvDirection direction) : direction_(direction) {}

  std::string_view name() const override {
    return direction_ == ConvDirection::backward_data ? kRefConvBackwardDataName
                                                      : kRefConvBackwardWeightsName;
  }

  Applicability check(const ConvProblem& problem, const runtime::Device& device) const override {
    if (!device.is_cpu()) return Applicability::no("runs on the cpu backend only, not " + device.name());
    if (problem.direction != direction_) {
      return Applicability::no(std::string(to_string(direction_)) + " only, not " +
                               to_string(problem.direction));
    }
    if (problem.dtype != DType::f32 && problem.dtype != DType::f16 && problem.dtype != DType::bf16) {
      return Applicability::no(std::string("dtype ") + to_string(problem.dtype) + " is not f32, f16 or bf16");
    }
    return Applicability::yes();
  }

  void run(runtime::Stream& stream, const ConvProblem& problem, const ConvArgs& args) const override {
    stream.launch(name(), [&] {
      if (direction_ == ConvDirection::backward_data) {
        stream.host_task([problem, a = backward_data_args(args)] {
          reference_conv_backward_data(problem, a.dy, a.w, a.dx);
        });
      } else {
        stream.host_task([problem, a = backward_weights_args(args)] {
          reference_conv_backward_weights(problem, a.x, a.dy, a.dw);
        });
      }
    });
  }

  bool is_reference() const override { return true; }

 private:
  ConvDirection direction_;
};

}  // namespace

std::unique_ptr<ConvSolver> make_ref_conv_bwd_data() {
  return std::make_unique<RefConvBackward>(ConvDirection::backward_data);
}
std::unique_ptr<ConvSolver> make_ref_conv_bwd_weights() {
  return std::make_unique<RefConvBackward>(ConvDirection::backward_weights);
}

void reference_conv_backward_data(const ConvProblem& p, const void* dy, const void* w, void* dx) {
  constexpr const char* kWhat = "reference_conv_backward_data";
  p.validate();
  require_pointers(kWhat, dy, "dy", w, "w", dx, "dx");
  const std::int64_t g = p.groups, cg = p.c / g, kg = p.k / g;
  const std::int64_t ho = p.out_h(), wo = p.out_w();

  const std::vector<float> dys = stage_nhwc(p, dy, p.n, p.k, ho, wo);
  // Weights as [g][r][s][c in group][k in group]: for one (r, s, c) the k of a group are contiguous,
  // as the channels of dy are.
  std::vector<float> wt(static_cast<std::size_t>(p.k * cg * p.y * p.x));
  {
    std::vector<float> raw(wt.size());
    to_float(p.dtype, w, raw.data(), static_cast<std::int64_t>(raw.size()));
    for (std::int64_t k = 0; k < p.k; ++k)
      for (std::int64_t c = 0; c < cg; ++c)
        for (std::int64_t r = 0; r < p.y; ++r)
          for (std::int64_t s = 0; s < p.x; ++s)
            wt[static_cast<std::size_t>((((k / kg * p.y + r) * p.x + s) * cg + c) * kg + k % kg)] =
                raw[static_cast<std::size_t>(weight_offset(p, k, c, r, s))];
  }

  std::vector<float> out(static_cast<std::size_t>(p.n * p.c * p.h * p.w));
  // One task per input row (n, ih): its elements are gathered from every dy element that read them.
  reference_fan_out(p.n * p.h, reference_threads(), [&](std::int64_t row) {
    const std::int64_t n = row / p.h, ih = row % p.h;
    for (std::int64_t iw = 0; iw < p.w; ++iw) {
      for (std::int64_t c = 0; c < p.c; ++c) {
        const std::int64_t grp = c / cg, cc = c % cg;
        double acc[4] = {0, 0, 0, 0};
        for (std::int64_t r = 0; r < p.y; ++r) {
          const std::int64_t oh = output_of(ih, r, p.pad_h, p.stride_h, p.dilation_h, ho);
          if (oh < 0) continue;
          for (std::int64_t s = 0; s < p.x; ++s) {
            const std::int64_t ow = output_of(iw, s, p.pad_w, p.stride_w, p.dilation_w, wo);
            if (ow < 0) continue;
            const float* dp = &dys[static_cast<std::size_t>(((n * ho + oh) * wo + ow) * p.k + grp * kg)];
            const float* wp = &wt[static_cast<std::size_t>((((grp * p.y + r) * p.x + s) * cg + cc) * kg)];
            std::int64_t k = 0;
            for (; k + 4 <= kg; k += 4) {
              acc[0] += static_cast<double>(dp[k]) * wp[k];
              acc[1] += static_cast<double>(dp[k + 1]) * wp[k + 1];
              acc[2] += static_cast<double>(dp[k + 2]) * wp[k + 2];
              acc[3] += static_cast<double>(dp[k + 3]) * wp[k + 3];
            }
            for (; k < kg; ++k) acc[0] += static_cast<double>(dp[k]) * wp[k];
          }
        }
        out[static_cast<std::size_t>(activation_offset(p, p.c, p.h, p.w, n, c, ih, iw))] =
            static_cast<float>((acc[0] + acc[1]) + (acc[2] + acc[3]));
      }
    }
  });
  from_float(p.dtype, out.data(), dx, static_cast<std::int64_t>(out.size()));
}

void reference_conv_backward_weights(const ConvProblem& p, const void* x, const void* dy, void* dw) {
  constexpr const char* kWhat = "reference_conv_backward_weights";
  p.validate();
  require_pointers(kWhat, x, "x", dy, "dy", dw, "dw");
  const std::int64_t g = p.groups, cg = p.c / g, kg = p.k / g;
  const std::int64_t ho = p.out_h(), wo = p.out_w();
  const std::vector<float> xs = stage_nhwc(p, x, p.n, p.c, p.h, p.w);
  const std::vector<float> dys = stage_nhwc(p, dy, p.n, p.k, ho, wo);

  std::vector<float> out(static_cast<std::size_t>(p.k * cg * p.y * p.x));
  // One task per (k, r): the sums of its S x Cg weights over the batch and the output pixels.
  reference_fan_out(p.k * p.y, reference_threads(), [&](std::int64_t task) {
    const std::int64_t k = task / p.y, r = task % p.y, grp = k / kg;
    std::vector<double> acc(static_cast<std::size_t>(p.x * cg), 0.0);
    for (std::int64_t n = 0; n < p.n; ++n) {
      for (std::int64_t oh = 0; oh < ho; ++oh) {
        const std::int64_t ih = oh * p.stride_h - p.pad_h + r * p.dilation_h;
        if (ih < 0 || ih >= p.h) continue;
        for (std::int64_t ow = 0; ow < wo; ++ow) {
          const double d = dys[static_cast<std::size_t>(((n * ho + oh) * wo + ow) * p.k + k)];
          for (std::int64_t s = 0; s < p.x; ++s) {
            const std::int64_t iw = ow * p.stride_w - p.pad_w + s * p.dilation_w;
            if (iw < 0 || iw >= p.w) continue;
            const float* xp = &xs[static_cast<std::size_t>(((n * p.h + ih) * p.w + iw) * p.c + grp * cg)];
            double* ap = &acc[static_cast<std::size_t>(s * cg)];
            for (std::int64_t c = 0; c < cg; ++c) ap[c] += d * xp[c];
          }
        }
      }
    }
    for (std::int64_t s = 0; s < p.x; ++s)
      for (std::int64_t c = 0; c < cg; ++c)
        out[static_cast<std::size_t>(weight_offset(p, k, c, r, s))] =
            static_cast<float>(acc[static_cast<std::size_t>(s * cg + c)]);
  });
  from_float(p.dtype, out.data(), dw, static_cast<std::int64_t>(out.size()));
}

}  // namespace galley::dnn
