// The NCHW column gather of cpu.conv.im2col_gemm with AVX-512 (im2col_avx512.cpp, entered only
// after cpu_has_avx512()): one masked 16-float load and store per step does the padding zeros and
// the copy of a row segment together, where the baseline build's loops store 16 bytes at a time
// (with them the gather dominates layers of few channels per group).
#pragma once

#include <cstdint>

#include "backends/cpu/conv_base.hpp"

namespace galley::backends::cpu::avx512 {

/// Rows (c, r, s) of the group's channels x output pixels [p0, p1) of image `xn` into `col`,
/// rows `ld` floats apart: col[(c*R + r)*S + s][p - p0] = x[c][oh*sh - ph + r*dh][ow*sw - pw + s*dw],
/// zero outside the image.
void im2col_nchw(const ConvShape& s, const float* xn, std::int64_t p0, std::int64_t p1, float* col,
                 std::int64_t ld);

/// out[i] = in[2 * i] for i in [0, count): one phase of a stride-2 row (the depthwise solver's
/// padded, phase-split planes), a plain loop the compiler vectorises with AVX-512.
void copy_every_second(const float* in, std::int64_t count, float* out);

/// True when implicit_gemm_nchw() can run `s`: NCHW, unit strides, Wo == W >= 16 and Ho == H
/// (a "same" padded convolution), at most 16 output channels per group.
bool implicit_gemm_fits(const ConvShape& s);

/// The convolution of image n, group gi, output pixels [p0, p1) straight from x, no column
/// buffer: each input vector the flat run would have copied is loaded once and feeds every
/// output channel of the group (8 at a time x 48 pixels, 24 accumulators). For groups with few
/// channels (ResNeXt's 8 per group) the column copy and the packing cost more than this GEMM's
/// arithmetic.
void implicit_gemm_nchw(const ConvShape& s, const float* x, const float* w, float* y, std::int64_t n,
                        std::int64_t gi, std::int64_t p0, std::int64_t p1);

}  // namespace galley::backends::cpu::avx512
