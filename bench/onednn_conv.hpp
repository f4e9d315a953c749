// oneDNN's forward convolution on one problem, in the two ways a framework calls it: plain
// NCHW/OIHW tensors, and oneDNN's own blocked layouts (format_tag::any) with the activations
// reordered in and out. The weights of the blocked primitive are reordered once, outside any
// timing, as a framework caches them. Header-only, for bench/cpu_conv_vs_onednn.
#pragma once

#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <vector>

#include "galley/dnn/conv_problem.hpp"

namespace galley::bench {

class OneDnnConv {
 public:
  OneDnnConv(dnnl::engine& engine, dnnl::stream& stream, const dnn::ConvProblem& p, const float* x, const float* w,
             float* y)
      : stream_(stream) {
    using tag = dnnl::memory::format_tag;
    using dt = dnnl::memory::data_type;
    const dnnl::memory::dims src_dims{p.n, p.c, p.h, p.w}, dst_dims{p.n, p.k, p.out_h(), p.out_w()};
    const dnnl::memory::dims wei_dims = p.groups == 1
                                            ? dnnl::memory::dims{p.k, p.c, p.y, p.x}
                                            : dnnl::memory::dims{p.groups, p.k / p.groups, p.c / p.groups, p.y, p.x};
    const dnnl::memory::dims strides{p.stride_h, p.stride_w}, dilates{p.dilation_h - 1, p.dilation_w - 1};
    const dnnl::memory::dims pad_l{p.pad_h, p.pad_w};
    const dnnl::memory::dims pad_r{(p.out_h() - 1) * p.stride_h - p.h + (p.y - 1) * p.dilation_h + 1 - p.pad_h,
                                   (p.out_w() - 1) * p.stride_w - p.w + (p.x - 1) * p.dilation_w + 1 - p.pad_w};
    const dnnl::memory::desc user_src(src_dims, dt::f32, tag::nchw), user_dst(dst_dims, dt::f32, tag::nchw);
    const dnnl::memory::desc user_wei(wei_dims, dt::f32, p.groups == 1 ? tag::oihw : tag::goihw);
    src_ = dnnl::memory(user_src, engine, const_cast<float*>(x));
    wei_ = dnnl::memory(user_wei, engine, const_cast<float*>(w));
    dst_ = dnnl::memory(user_dst, engine, y);
    auto make_pd = [&](const dnnl::memory::desc& s, const dnnl::memory::desc& wd, const dnnl::memory::desc& d) {
      const dnnl::convolution_forward::desc desc(dnnl::prop_kind::forward_inference,
                                                 dnnl::algorithm::convolution_direct, s, wd, d, strides, dilates,
                                                 pad_l, pad_r);
      return dnnl::convolution_forward::primitive_desc(desc, engine);
    };
    const auto plain_pd = make_pd(user_src, user_wei, user_dst);
    plain_ = dnnl::convolution_forward(plain_pd);
    const auto any = [](const dnnl::memory::dims& d) { return dnnl::memory::desc(d, dt::f32, tag::any); };
    const auto blocked_pd = make_pd(any(src_dims), any(wei_dims), any(dst_dims));
    blocked_ = dnnl::convolution_forward(blocked_pd);
    bsrc_ = dnnl::memory(blocked_pd.src_desc(), engine);
    bwei_ = dnnl::memory(blocked_pd.weights_desc(), engine);
    bdst_ = dnnl::memory(blocked_pd.dst_desc(), engine);
    dnnl::reorder(wei_, bwei_).execute(stream_, wei_, bwei_);
    stream_.wait();
    src_in_ = dnnl::reorder(src_, bsrc_);
    dst_out_ = dnnl::reorder(bdst_, dst_);
    impls_ = std::string("plain ") + plain_pd.impl_info_str() + ", blocked " + blocked_pd.impl_info_str();
  }

  /// y = conv(x, w) with the plain tensors.
  void plain() {
    plain_.execute(stream_, {{DNNL_ARG_SRC, src_}, {DNNL_ARG_WEIGHTS, wei_}, {DNNL_ARG_DST, dst_}});
    stream_.wait();
  }
  /// The blocked convolution alone, on activations already in oneDNN's layout.
  void blocked() {
    blocked_.execute(stream_, {{DNNL_ARG_SRC, bsrc_}, {DNNL_ARG_WEIGHTS, bwei_}, {DNNL_ARG_DST, bdst_}});
    stream_.wait();
  }
  /// x reordered in, the blocked convolution, y reordered out: y = conv(x, w) in NCHW.
  void blocked_with_reorders() {
    src_in_.execute(stream_, src_, bsrc_);
    blocked_.execute(stream_, {{DNNL_ARG_SRC, bsrc_}, {DNNL_ARG_WEIGHTS, bwei_}, {DNNL_ARG_DST, bdst_}});
    dst_out_.execute(stream_, bdst_, dst_);
    stream_.wait();
  }
  /// "plain x64:gemm:jit, blocked brgconv:avx512_core": the implementations oneDNN chose.
  const std::string& implementations() const { return impls_; }

 private:
  dnnl::stream& stream_;
  dnnl::memory src_, wei_, dst_, bsrc_, bwei_, bdst_;
  dnnl::convolution_forward plain_, blocked_;
  dnnl::reorder src_in_, dst_out_;
  std::string impls_;
};

}  // namespace galley::bench
