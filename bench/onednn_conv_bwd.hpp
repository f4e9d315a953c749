// oneDNN's backward convolutions (backward_data, backward_weights) on one problem, with plain
// NCHW/OIHW tensors and with oneDNN's own blocked layouts (format_tag::any). The blocked
// primitive's inputs are reordered once, outside any timing, and its output is reordered to the
// plain layout only for verification, so blocked() times the kernel alone. Header-only, for
// bench/cpu_conv_bwd_vs_onednn.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>
#include <string>

#include "galley/dnn/conv_problem.hpp"

namespace galley::bench {

class OneDnnConvBwd {
 public:
  /// backward_data: a = dy, b = w, out = dx. backward_weights: a = x, b = dy, out = dw.
  OneDnnConvBwd(dnnl::engine& engine, dnnl::stream& stream, const dnn::ConvProblem& p, const float* a,
                const float* b, float* out)
      : stream_(stream), data_(p.direction == dnn::ConvDirection::backward_data) {
    using tag = dnnl::memory::format_tag;
    using dt = dnnl::memory::data_type;
    const dnnl::memory::dims src_dims{p.n, p.c, p.h, p.w}, dst_dims{p.n, p.k, p.out_h(), p.out_w()};
    const dnnl::memory::dims wei_dims =
        p.groups == 1 ? dnnl::memory::dims{p.k, p.c, p.y, p.x}
                      : dnnl::memory::dims{p.groups, p.k / p.groups, p.c / p.groups, p.y, p.x};
    const dnnl::memory::dims strides{p.stride_h, p.stride_w}, dilates{p.dilation_h - 1, p.dilation_w - 1};
    const dnnl::memory::dims pad_l{p.pad_h, p.pad_w};
    const dnnl::memory::dims pad_r{
        (p.out_h() - 1) * p.stride_h - p.h + (p.y - 1) * p.dilation_h + 1 - p.pad_h,
        (p.out_w() - 1) * p.stride_w - p.w + (p.x - 1) * p.dilation_w + 1 - p.pad_w};
    const dnnl::memory::desc src(src_dims, dt::f32, tag::nchw), dst(dst_dims, dt::f32, tag::nchw);
    const dnnl::memory::desc wei(wei_dims, dt::f32, p.groups == 1 ? tag::oihw : tag::goihw);
    const auto any = [](const dnnl::memory::dims& d) { return dnnl::memory::desc(d, dt::f32, tag::any); };
    const auto forward_hint = [&](const dnnl::memory::desc& s, const dnnl::memory::desc& w,
                                  const dnnl::memory::desc& d) {
      const dnnl::convolution_forward::desc desc(dnnl::prop_kind::forward_training,
                                                 dnnl::algorithm::convolution_direct, s, w, d, strides,
                                                 dilates, pad_l, pad_r);
      return dnnl::convolution_forward::primitive_desc(desc, engine);
    };
    if (data_) {
      const auto make = [&](const dnnl::memory::desc& s, const dnnl::memory::desc& w,
                            const dnnl::memory::desc& d) {
        const dnnl::convolution_backward_data::desc desc(dnnl::algorithm::convolution_direct, s, w, d,
                                                         strides, dilates, pad_l, pad_r);
        return dnnl::convolution_backward_data::primitive_desc(desc, engine, forward_hint(s, w, d));
      };
      const auto plain_pd = make(src, wei, dst);
      const auto blocked_pd = make(any(src_dims), any(wei_dims), any(dst_dims));
      plain_ = dnnl::convolution_backward_data(plain_pd);
      blocked_ = dnnl::convolution_backward_data(blocked_pd);
      bind(engine, dst, wei, src, blocked_pd.diff_dst_desc(), blocked_pd.weights_desc(),
           blocked_pd.diff_src_desc(), a, b, out);
      arg_a_ = DNNL_ARG_DIFF_DST, arg_b_ = DNNL_ARG_WEIGHTS, arg_out_ = DNNL_ARG_DIFF_SRC;
      impls_ = std::string("plain ") + plain_pd.impl_info_str() + ", blocked " + blocked_pd.impl_info_str();
    } else {
      const auto make = [&](const dnnl::memory::desc& s, const dnnl::memory::desc& w,
                            const dnnl::memory::desc& d) {
        const dnnl::convolution_backward_weights::desc desc(dnnl::algorithm::convolution_direct, s, w, d,
                                                            strides, dilates, pad_l, pad_r);
        return dnnl::convolution_backward_weights::primitive_desc(desc, engine, forward_hint(s, w, d));
      };
      const auto plain_pd = make(src, wei, dst);
      const auto blocked_pd = make(any(src_dims), any(wei_dims), any(dst_dims));
      plain_ = dnnl::convolution_backward_weights(plain_pd);
      blocked_ = dnnl::convolution_backward_weights(blocked_pd);
      bind(engine, src, dst, wei, blocked_pd.src_desc(), blocked_pd.diff_dst_desc(),
           blocked_pd.diff_weights_desc(), a, b, out);
      arg_a_ = DNNL_ARG_SRC, arg_b_ = DNNL_ARG_DIFF_DST, arg_out_ = DNNL_ARG_DIFF_WEIGHTS;
      impls_ = std::string("plain ") + plain_pd.impl_info_str() + ", blocked " + blocked_pd.impl_info_str();
    }
  }

  /// The pass on the plain tensors.
  void plain() {
    plain_.execute(stream_, {{arg_a_, a_}, {arg_b_, b_}, {arg_out_, out_}});
    stream_.wait();
  }
  /// The blocked kernel alone, on inputs already in oneDNN's layouts.
  void blocked() {
    blocked_.execute(stream_, {{arg_a_, ba_}, {arg_b_, bb_}, {arg_out_, bout_}});
    stream_.wait();
  }
  /// The blocked kernel, then its output reordered into the plain output (for verification).
  void blocked_to_plain() {
    blocked();
    dnnl::reorder(bout_, out_).execute(stream_, bout_, out_);
    stream_.wait();
  }
  /// "plain x64:gemm:jit, blocked jit:avx512_core": the implementations oneDNN chose.
  const std::string& implementations() const { return impls_; }

 private:
  void bind(dnnl::engine& engine, const dnnl::memory::desc& a, const dnnl::memory::desc& b,
            const dnnl::memory::desc& out, const dnnl::memory::desc& ba, const dnnl::memory::desc& bb,
            const dnnl::memory::desc& bout, const float* a_data, const float* b_data, float* out_data) {
    a_ = dnnl::memory(a, engine, const_cast<float*>(a_data));
    b_ = dnnl::memory(b, engine, const_cast<float*>(b_data));
    out_ = dnnl::memory(out, engine, out_data);
    ba_ = dnnl::memory(ba, engine);
    bb_ = dnnl::memory(bb, engine);
    bout_ = dnnl::memory(bout, engine);
    dnnl::reorder(a_, ba_).execute(stream_, a_, ba_);
    dnnl::reorder(b_, bb_).execute(stream_, b_, bb_);
    stream_.wait();
  }

  dnnl::stream& stream_;
  bool data_;
  int arg_a_ = 0, arg_b_ = 0, arg_out_ = 0;
  dnnl::memory a_, b_, out_, ba_, bb_, bout_;
  dnnl::primitive plain_, blocked_;
  std::string impls_;
};

}  // namespace galley::bench
