// Galley's own packed single-precision GEMM for AVX-512 (sgemm_avx512.cpp, compiled with
// AVX-512 F/BW/VL/DQ and entered only after cpu_has_avx512()). conv_blas.cpp's sgemm() calls it
// instead of OpenBLAS, whose Debian build runs only its AVX2 (Haswell) kernels on AVX-512 CPUs.
//
// Blocking (in the manner of BLIS, written from the idea, not the code): C is cut into kNc-wide
// column blocks; for each kKc-deep slice of the product a block of B is packed into kNr-wide
// panels that stay in L2, then kMc-row blocks of A are packed into kMr-high panels; one A panel
// (kMr x kKc, 6 KiB) stays in L1 while the micro-kernel sweeps it across the B panels, holding a
// kMr x kNr tile of C (24 zmm registers) and doing 24 FMAs per 4 vector loads and 6 broadcasts.
// Where packing does not pay it is skipped: a plain B is read in place when A has at most 128 rows,
// a plain A when N is at most two panels; a ragged last column panel (<= 32 columns) takes
// 24x16 or 12x32 tiles so it still keeps 24 accumulators busy, and a 49-column panel (a 7x7
// plane) with A in place takes 6x48 tiles and its last column as dot products over k. One row of A times a transposed B (a
// fully connected layer at batch 1) is dot products over B's rows instead, with nothing packed.
//
// A PostOps descriptor makes the kernel finish C in registers as it stores the result of the last
// kKc slice: add a bias per row or per column and a residual shaped as C, then an activation. A
// fused convolution epilogue then costs no pass of its own over C (one more read of the residual
// only), where applying it after the GEMM reads and writes every tile of C again.
#pragma once

#include <cstdint>

namespace galley::backends::cpu::avx512 {

constexpr std::int64_t kMr = 6;    ///< rows of the register tile
constexpr std::int64_t kNr = 64;   ///< columns of the register tile (4 zmm)
constexpr std::int64_t kKc = 256;  ///< depth of one packed slice
constexpr std::int64_t kMc = 96;   ///< rows of A packed at a time (multiple of kMr)
constexpr std::int64_t kNc = 512;  ///< columns of B packed at a time (multiple of kNr)

/// What the kernel applies to each element of C after alpha * A * B + beta * C, in this order:
/// c += bias, c += residual, c = activation(c), with the definitions of dnn::Activation. Pointers
/// address element (0, 0) of the whole C; a null one skips its step.
struct PostOps {
  /// The activations that are a compare and a select in a vector register; the others stay with
  /// the caller.
  enum class Activation : std::uint8_t { none, relu, leaky_relu, clip };

  const float* bias = nullptr;      ///< bias[i] for row i (bias_per_row), else bias[j] for column j
  bool bias_per_row = true;         ///< NCHW conv: rows are output channels; NHWC: columns are
  const float* residual = nullptr;  ///< residual[i * ld_residual + j]
  std::int64_t ld_residual = 0;
  Activation activation = Activation::none;
  float act_alpha = 0;  ///< leaky_relu's slope, clip's lower bound
  float act_beta = 0;   ///< clip's upper bound
  // No member functions: an inline one compiled into sgemm_avx512.cpp with AVX-512 could be the
  // copy the linker keeps for every caller.
};

/// Floats of the packing buffer sgemm() needs: one A block and one B block.
constexpr std::int64_t kPackFloats = kMc * kKc + kKc * kNc;

/// Row-major C[m x n] = alpha * op(A)[m x k] * op(B)[k x n] + beta * C, single-threaded, the same
/// contract as conv_blas.hpp's sgemm (C is not read when beta == 0). `pack` holds kPackFloats
/// floats, 64-byte aligned, private to the calling thread. `post` (null: none) is applied as the
/// last slice of the product is stored.
void sgemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
           std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc, float* pack,
           const PostOps* post = nullptr);

/// Applies `post` in place to a stored C[m x n] (rows ldc apart), as sgemm() would have applied it
/// to a product: for a convolution's output tile that another kernel wrote (depthwise, direct,
/// Winograd), 16 lanes at a time where a scalar pass would compare and branch per element.
void apply_post_ops(std::int64_t m, std::int64_t n, float* c, std::int64_t ldc, const PostOps& post);

/// Floats that pack_a_rows() writes for a plain A[m x k] packed whole (rows rounded up to kMr,
/// every kKc slice, and a little zeroed slack the kernels may read past the last rows).
std::int64_t packed_a_floats(std::int64_t m, std::int64_t k);

/// Rows [r0, r1) of a plain row-major A[m x k] into `out` (packed_a_floats(m, k) floats), in the
/// layout sgemm_packed_a() reads. r0 must be a multiple of kMr; disjoint row ranges may be packed
/// by different threads at once. Lets a caller pack A once and share it between the GEMMs of
/// many threads instead of each GEMM packing it again.
void pack_a_rows(const float* a, std::int64_t lda, std::int64_t m, std::int64_t k, std::int64_t r0, std::int64_t r1,
                 float* out);

/// sgemm(false, false, ...) with A given packed whole by pack_a_rows() (all rows packed). `pack`
/// holds kKc * kNc floats, 64-byte aligned, private to the calling thread.
void sgemm_packed_a(std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a_packed,
                    const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc, float* pack,
                    const PostOps* post = nullptr);

/// sgemm_packed_a() on rows [r0, r0 + m) of an A of `whole_rows` rows packed whole by
/// pack_a_rows() (r0 a multiple of kMr): one row block of a product whose A is packed once and
/// shared by every block. C is that block's first row.
void sgemm_packed_a_rows(std::int64_t whole_rows, std::int64_t r0, std::int64_t m, std::int64_t n, std::int64_t k,
                         float alpha, const float* a_packed, const float* b, std::int64_t ldb, float beta, float* c,
                         std::int64_t ldc, float* pack, const PostOps* post = nullptr);

}  // namespace galley::backends::cpu::avx512
