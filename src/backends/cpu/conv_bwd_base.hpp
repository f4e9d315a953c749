// The common frame of the cpu backward-convolution solvers, the backward twin of conv_base.hpp:
// device, direction and dtype checks, f16/bf16 staging through f32 workspace, argument checks and
// the host-task launch. A solver supplies its f32 algorithm only; the algorithms themselves are
// free functions (conv_bwd_gemm.hpp, conv_bwd_depthwise.hpp) so they do not depend on this class.
//
// Tensors travel in ConvArgs as dnn/conv_backward_args.hpp maps them (backward_data writes the x
// slot, backward_weights the w slot).
#pragma once

#include <cstddef>
#include <cstdint>

#include "galley/dnn/conv_solver.hpp"

namespace galley::backends::cpu {

class CpuConvBwdSolver : public dnn::ConvSolver {
 public:
  /// Says no for: a non-cpu device, a direction other than this solver's, a dtype other than
  /// f32, f16, bf16; otherwise asks check_f32.
  dnn::Applicability check(const dnn::ConvProblem& problem, const runtime::Device& device) const final;
  /// f32: the algorithm's own workspace. f16/bf16: f32 copies of the whole weights (or weight
  /// gradient) and of a chunk of images of the two activation tensors, plus the algorithm's
  /// workspace for that chunk.
  std::size_t workspace_bytes(const dnn::ConvProblem& problem, const runtime::Device& device) const final;
  /// Checks the arguments now (Error(invalid_argument) naming the bad one) and enqueues the work
  /// as one host task on `stream`.
  void run(runtime::Stream& stream, const dnn::ConvProblem& problem, const dnn::ConvArgs& args) const final;

  /// The whole pass, synchronously on the calling thread and the pool. run() calls this from its
  /// host task; benchmarks and tests may call it directly.
  void compute(const dnn::ConvProblem& problem, const dnn::ConvArgs& args) const;

  /// Bytes the f16/bf16 staging holds per chunk of images.
  static constexpr std::size_t kLowPrecisionChunkBytes = std::size_t{32} << 20;

 protected:
  explicit CpuConvBwdSolver(dnn::ConvDirection direction) : direction_(direction) {}

  /// Algorithm limits only (filter, stride, groups, layout); dtype, device and direction are fine.
  virtual dnn::Applicability check_f32(const dnn::ConvProblem& problem) const = 0;
  /// Exact workspace of the f32 algorithm for this problem (its dtype reads as f32).
  virtual std::size_t f32_workspace_bytes(const dnn::ConvProblem& /*problem*/) const { return 0; }
  /// backward_data on packed f32 tensors: writes every element of dx.
  virtual void compute_data_f32(const dnn::ConvProblem& problem, const float* dy, const float* w, float* dx,
                                void* ws) const;
  /// backward_weights on packed f32 tensors: dw = sum over the batch, or dw += that sum when
  /// `accumulate` (the f16/bf16 staging feeds the batch in chunks).
  virtual void compute_weights_f32(const dnn::ConvProblem& problem, const float* x, const float* dy,
                                   float* dw, bool accumulate, void* ws) const;

 private:
  std::int64_t images_per_chunk(const dnn::ConvProblem& problem) const;
  void compute_data_staged(const dnn::ConvProblem& problem, const dnn::ConvArgs& args) const;
  void compute_weights_staged(const dnn::ConvProblem& problem, const dnn::ConvArgs& args) const;

  dnn::ConvDirection direction_;
};

}  // namespace galley::backends::cpu
