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
// 24x16 or 12x32 tiles so it still keeps 24 accumulators busy.
#pragma once

#include <cstdint>

namespace galley::backends::cpu::avx512 {

constexpr std::int64_t kMr = 6;    ///< rows of the register tile
constexpr std::int64_t kNr = 64;   ///< columns of the register tile (4 zmm)
constexpr std::int64_t kKc = 256;  ///< depth of one packed slice
constexpr std::int64_t kMc = 96;   ///< rows of A packed at a time (multiple of kMr)
constexpr std::int64_t kNc = 512;  ///< columns of B packed at a time (multiple of kNr)

/// Floats of the packing buffer sgemm() needs: one A block and one B block.
constexpr std::int64_t kPackFloats = kMc * kKc + kKc * kNc;

/// Row-major C[m x n] = alpha * op(A)[m x k] * op(B)[k x n] + beta * C, single-threaded, the same
/// contract as conv_blas.hpp's sgemm (C is not read when beta == 0). `pack` holds kPackFloats
/// floats, 64-byte aligned, private to the calling thread.
void sgemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
           std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc, float* pack);

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
                    const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc, float* pack);

}  // namespace galley::backends::cpu::avx512
