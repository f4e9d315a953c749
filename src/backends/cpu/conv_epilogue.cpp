#include "backends/cpu/conv_epilogue.hpp"

#include <algorithm>
#include <cstddef>
#include <vector>

#include "backends/cpu/activ_vector_math.hpp"
#include "backends/cpu/conv_base.hpp"
#include "backends/cpu/conv_blas.hpp"
#include "backends/cpu/conv_convert.hpp"
#include "backends/cpu/datamove_shares.hpp"
#include "backends/cpu/thread_pool.hpp"
#include "dnn/activation_dispatch.hpp"

namespace galley::backends::cpu {
namespace {

struct EpilogueIsa {};
using Math = VectorMath<EpilogueIsa>;

struct Identity {
  float forward(float v) const { return v; }
};

// The SGEMM's name for an epilogue activation it applies in registers; nullopt for the others.
std::optional<avx512::PostOps::Activation> gemm_activation(const std::optional<dnn::Activation>& a) {
  using A = avx512::PostOps::Activation;
  if (!a) return A::none;
  switch (*a) {
    case dnn::Activation::relu:
      return A::relu;
    case dnn::Activation::leaky_relu:
      return A::leaky_relu;
    case dnn::Activation::clip:
      return A::clip;
    default:
      return std::nullopt;
  }
}

// Elements handled as one run (NHWC: rounded down to whole pixels, at least one): a low-precision
// residual is converted run by run, and the result rounded run by run while it is in cache.
constexpr std::int64_t kRow = 512;

// y[i] = f(y[i] + bias + residual[i]) over one contiguous run, where bias is one channel's value
// (NCHW: kVectorBias false, bias[0]) or a vector over channels (NHWC: bias[i]). Each case its own
// loop with unit strides only, so the compiler vectorises all of them. `f` is taken by value: a
// reference could alias y, so every store would force its parameters to be read again and keep
// the loop scalar.
template <bool kVectorBias, class F>
void run_row(const F f, float* __restrict y, std::int64_t len, const float* __restrict bias,
             const float* __restrict residual) {
  if (bias != nullptr && residual != nullptr) {
    if constexpr (kVectorBias) {
      for (std::int64_t i = 0; i < len; ++i) y[i] = f.forward(y[i] + bias[i] + residual[i]);
    } else {
      const float b = bias[0];
      for (std::int64_t i = 0; i < len; ++i) y[i] = f.forward(y[i] + b + residual[i]);
    }
  } else if (bias != nullptr) {
    if constexpr (kVectorBias) {
      for (std::int64_t i = 0; i < len; ++i) y[i] = f.forward(y[i] + bias[i]);
    } else {
      const float b = bias[0];
      for (std::int64_t i = 0; i < len; ++i) y[i] = f.forward(y[i] + b);
    }
  } else if (residual != nullptr) {
    for (std::int64_t i = 0; i < len; ++i) y[i] = f.forward(y[i] + residual[i]);
  } else {
    for (std::int64_t i = 0; i < len; ++i) y[i] = f.forward(y[i]);
  }
}

}  // namespace

ConvEpilogueRunner::ConvEpilogueRunner(const dnn::ConvProblem& problem, const void* bias,
                                       const void* residual)
    : problem_(problem),
      pixels_(problem.out_h() * problem.out_w()),
      residual_(problem.epilogue.residual ? residual : nullptr) {
  if (problem.epilogue.bias) {
    bias_.resize(static_cast<std::size_t>(problem.k));
    convert_to_f32(problem.dtype, bias, bias_.data(), bias_.size());
  }
  const auto activation = gemm_activation(problem.epilogue.activation);
  if (problem.dtype == DType::f32 && activation && sgemm_applies_post_ops()) {
    gemm_post_.emplace();
    gemm_post_->bias_per_row = problem.layout == dnn::Layout::nchw;
    gemm_post_->ld_residual = problem.layout == dnn::Layout::nchw ? pixels_ : problem.k;
    gemm_post_->activation = *activation;
    // Rounded to f32 as with_activation rounds them for the per-tile path.
    gemm_post_->act_alpha = static_cast<float>(problem.epilogue.alpha);
    gemm_post_->act_beta = static_cast<float>(problem.epilogue.beta);
  }
}

std::optional<avx512::PostOps> ConvEpilogueRunner::gemm_post_ops(std::int64_t n, std::int64_t k0,
                                                                 std::int64_t p0) const {
  if (!gemm_post_ || empty()) return std::nullopt;
  avx512::PostOps post = *gemm_post_;
  const dnn::ConvProblem& p = problem_;
  const std::int64_t k = p.k, pixels = pixels_;
  const bool nchw = p.layout == dnn::Layout::nchw;
  if (!bias_.empty()) post.bias = bias_.data() + k0;
  if (residual_ != nullptr) {
    const auto* residual = static_cast<const float*>(residual_);
    post.residual = residual + (nchw ? (n * k + k0) * pixels + p0 : p0 * k + k0);
  }
  return post;
}

void ConvEpilogueRunner::apply(std::int64_t n0, std::int64_t count, float* y32, void* out) const {
  const dnn::ConvProblem& p = problem_;
  const std::int64_t k = p.k, pixels = pixels_;
  const bool nchw = p.layout == dnn::Layout::nchw;
  const std::size_t esize = size_of(p.dtype);
  const bool f32 = p.dtype == DType::f32;
  // Work items: rows of one channel (NCHW) or of whole pixels (NHWC), cut into runs of <= kRow
  // elements (whole pixels for NHWC, so a run's bias index starts at channel 0).
  const std::int64_t run_len = nchw ? kRow : std::max<std::int64_t>(1, kRow / k) * k;
  const std::int64_t plane = nchw ? pixels : pixels * k;  // elements of one row (n, k) or image n
  const std::int64_t rows = nchw ? count * k : count;
  const std::int64_t runs_per_row = (plane + run_len - 1) / run_len;
  const auto body = [&](const auto& f) {
    parallel_for(0, rows * runs_per_row, [&](std::int64_t lo, std::int64_t hi) {
      std::vector<float> res(f32 || residual_ == nullptr ? 0 : static_cast<std::size_t>(run_len));
      for (std::int64_t t = lo; t < hi; ++t) {
        const std::int64_t row = t / runs_per_row, start = t % runs_per_row * run_len;
        const std::int64_t len = std::min(run_len, plane - start);
        const std::int64_t at = row * plane + start;  // element index within these images
        float* y = y32 + at;
        const float* residual = nullptr;
        if (residual_ != nullptr) {
          const std::size_t global = static_cast<std::size_t>(n0 * (nchw ? k * pixels : pixels * k) + at);
          if (f32) {
            residual = static_cast<const float*>(residual_) + global;
          } else {
            convert_to_f32(p.dtype, static_cast<const char*>(residual_) + global * esize, res.data(),
                           static_cast<std::size_t>(len));
            residual = res.data();
          }
        }
        const float* bias =
            bias_.empty() ? nullptr : (nchw ? &bias_[static_cast<std::size_t>(row % k)] : bias_.data());
        // NHWC runs are whole pixels: the bias index is i % k, unrolled as pixels of k channels.
        if (nchw || bias == nullptr) {
          run_row<false>(f, y, len, bias, residual);
        } else {
          for (std::int64_t px = 0; px < len; px += k) {
            run_row<true>(f, y + px, k, bias, residual != nullptr ? residual + px : nullptr);
          }
        }
        if (out != static_cast<void*>(y32)) {
          convert_from_f32(p.dtype, y, static_cast<char*>(out) + static_cast<std::size_t>(at) * esize,
                           static_cast<std::size_t>(len));
        }
      }
    });
  };
  if (p.epilogue.activation) {
    dnn::with_activation<float, Math>(*p.epilogue.activation, p.epilogue.alpha, p.epilogue.beta,
                                      [&](const auto& f) { body(f); });
  } else {
    body(Identity{});
  }
}

void ConvEpilogueRunner::apply_tile(float* y, std::int64_t ld, std::int64_t n, std::int64_t k0,
                                    std::int64_t p0, std::int64_t rows, std::int64_t cols) const {
  if (const auto post = gemm_post_ops(n, k0, p0)) {
    avx512::apply_post_ops(rows, cols, y, ld, *post);
    return;
  }
  const dnn::ConvProblem& p = problem_;
  const std::int64_t k = p.k, pixels = pixels_;
  const bool nchw = p.layout == dnn::Layout::nchw;
  const auto* residual = static_cast<const float*>(residual_);
  const auto body = [&](const auto& f) {
    for (std::int64_t r = 0; r < rows; ++r) {
      float* row = y + r * ld;
      if (nchw) {
        const std::int64_t kk = k0 + r;
        const float* res = residual != nullptr ? residual + (n * k + kk) * pixels + p0 : nullptr;
        run_row<false>(f, row, cols, bias_.empty() ? nullptr : &bias_[static_cast<std::size_t>(kk)], res);
      } else {
        const float* res = residual != nullptr ? residual + (p0 + r) * k + k0 : nullptr;
        run_row<true>(f, row, cols, bias_.empty() ? nullptr : bias_.data() + k0, res);
      }
    }
  };
  if (p.epilogue.activation) {
    dnn::with_activation<float, Math>(*p.epilogue.activation, p.epilogue.alpha, p.epilogue.beta,
                                      [&](const auto& f) { body(f); });
  } else {
    body(Identity{});
  }
}

void gemm_image_rows(std::int64_t rows, std::int64_t row_blocks, std::int64_t cols, std::int64_t depth,
                     const float* w, const float* b, float* y, std::int64_t n, std::int64_t k_first,
                     const ConvEpilogueRunner* epilogue) {
  const auto body = [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t block = lo; block < hi; ++block) {
      const std::int64_t k0 = row_block_start(rows, block, row_blocks);
      const std::int64_t k1 = row_block_start(rows, block + 1, row_blocks);
      float* const tile = y + k0 * cols;
      const auto post = epilogue != nullptr ? epilogue->gemm_post_ops(n, k_first + k0, 0) : std::nullopt;
      sgemm(false, false, k1 - k0, cols, depth, 1.0f, w + k0 * depth, depth, b, cols, 0.0f, tile, cols,
            post ? &*post : nullptr);
      if (epilogue != nullptr && !post) epilogue->apply_tile(tile, cols, n, k_first + k0, 0, k1 - k0, cols);
    }
  };
  if (blas_threaded()) {
    for_gemm_tasks(0, row_blocks, body);
    return;
  }
  // Output rows by thread share where the image fits the caches (datamove_shares.hpp), so the op
  // after it, split the same way, finds each thread's channels in that thread's cache.
  parallel_for_shares(row_blocks, (rows + depth) * cols * static_cast<std::int64_t>(sizeof(float)), body);
}

}  // namespace galley::backends::cpu
