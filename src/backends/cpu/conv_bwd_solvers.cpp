// The cpu backward-convolution solvers: thin frames (conv_bwd_base.hpp) around the free-function
// algorithms of conv_bwd_gemm.hpp and conv_bwd_depthwise.hpp, registered on backend "cpu".
#include <memory>
#include <string>

#include "backends/cpu/conv_base.hpp"
#include "backends/cpu/conv_bwd_base.hpp"
#include "backends/cpu/conv_solvers.hpp"
#include "backends/cpu/conv_bwd_depthwise.hpp"
#include "backends/cpu/conv_bwd_gemm.hpp"

namespace galley::backends::cpu {
namespace {

dnn::Applicability check_depthwise(const dnn::ConvProblem& p) {
  if (p.groups != p.c || p.groups == 1) {
    return dnn::Applicability::no("groups " + std::to_string(p.groups) + " != channels " +
                                  std::to_string(p.c) + ": not depthwise");
  }
  if (p.k != p.c) {
    return dnn::Applicability::no("channel multiplier " + std::to_string(p.k / p.c) + " (K " +
                                  std::to_string(p.k) + " != C " + std::to_string(p.c) +
                                  "); only multiplier 1");
  }
  return dnn::Applicability::yes();  // any filter, stride, padding, dilation, both layouts
}

class ConvBwdDataGemm final : public CpuConvBwdSolver {
 public:
  ConvBwdDataGemm() : CpuConvBwdSolver(dnn::ConvDirection::backward_data) {}
  std::string_view name() const override { return "cpu.conv.bwd_data_gemm"; }

 protected:
  dnn::Applicability check_f32(const dnn::ConvProblem& /*p*/) const override {
    return dnn::Applicability::yes();  // any filter, stride, padding, dilation, groups, layout
  }
  std::size_t f32_workspace_bytes(const dnn::ConvProblem& p) const override {
    return bwd::data_gemm_workspace(ConvShape::of(p));
  }
  void compute_data_f32(const dnn::ConvProblem& p, const float* dy, const float* w, float* dx,
                        void* ws) const override {
    bwd::data_gemm(ConvShape::of(p), dy, w, dx, ws);
  }
};

class ConvBwdWeightsGemm final : public CpuConvBwdSolver {
 public:
  ConvBwdWeightsGemm() : CpuConvBwdSolver(dnn::ConvDirection::backward_weights) {}
  std::string_view name() const override { return "cpu.conv.bwd_weights_gemm"; }

 protected:
  dnn::Applicability check_f32(const dnn::ConvProblem& /*p*/) const override {
    return dnn::Applicability::yes();  // any filter, stride, padding, dilation, groups, layout
  }
  std::size_t f32_workspace_bytes(const dnn::ConvProblem& p) const override {
    return bwd::weights_gemm_workspace(ConvShape::of(p));
  }
  void compute_weights_f32(const dnn::ConvProblem& p, const float* x, const float* dy, float* dw,
                           bool accumulate, void* ws) const override {
    bwd::weights_gemm(ConvShape::of(p), x, dy, dw, accumulate, ws);
  }
};

class ConvBwdDataDepthwise final : public CpuConvBwdSolver {
 public:
  ConvBwdDataDepthwise() : CpuConvBwdSolver(dnn::ConvDirection::backward_data) {}
  std::string_view name() const override { return "cpu.conv.bwd_data_depthwise"; }

 protected:
  dnn::Applicability check_f32(const dnn::ConvProblem& p) const override { return check_depthwise(p); }
  std::size_t f32_workspace_bytes(const dnn::ConvProblem& p) const override {
    return bwd::data_depthwise_workspace(ConvShape::of(p));
  }
  void compute_data_f32(const dnn::ConvProblem& p, const float* dy, const float* w, float* dx,
                        void* ws) const override {
    bwd::data_depthwise(ConvShape::of(p), dy, w, dx, ws);
  }
};

class ConvBwdWeightsDepthwise final : public CpuConvBwdSolver {
 public:
  ConvBwdWeightsDepthwise() : CpuConvBwdSolver(dnn::ConvDirection::backward_weights) {}
  std::string_view name() const override { return "cpu.conv.bwd_weights_depthwise"; }

 protected:
  dnn::Applicability check_f32(const dnn::ConvProblem& p) const override { return check_depthwise(p); }
  std::size_t f32_workspace_bytes(const dnn::ConvProblem& p) const override {
    return bwd::weights_depthwise_workspace(ConvShape::of(p));
  }
  void compute_weights_f32(const dnn::ConvProblem& p, const float* x, const float* dy, float* dw,
                           bool accumulate, void* ws) const override {
    bwd::weights_depthwise(ConvShape::of(p), x, dy, dw, accumulate, ws);
  }
};

}  // namespace

std::unique_ptr<dnn::ConvSolver> make_conv_bwd_data_depthwise() { return std::make_unique<ConvBwdDataDepthwise>(); }
std::unique_ptr<dnn::ConvSolver> make_conv_bwd_weights_depthwise() {
  return std::make_unique<ConvBwdWeightsDepthwise>();
}
std::unique_ptr<dnn::ConvSolver> make_conv_bwd_data_gemm() { return std::make_unique<ConvBwdDataGemm>(); }
std::unique_ptr<dnn::ConvSolver> make_conv_bwd_weights_gemm() { return std::make_unique<ConvBwdWeightsGemm>(); }

}  // namespace galley::backends::cpu
