// The NCHW column gather of cpu.conv.im2col_gemm with AVX-512 (im2col_avx512.cpp, entered only
// after cpu_has_avx512()): one masked 16-float load and store per step does the padding zeros and
// the copy of a row segment together, where the baseline build's loops store 16 bytes at a time
// (the gather took ~60% of rx50.grouped with them).
#pragma once

#include <cstdint>

#include "backends/cpu/conv_base.hpp"

namespace galley::backends::cpu::avx512 {

/// Rows (c, r, s) of the group's channels x output pixels [p0, p1) of image `xn` into `col`,
/// rows `ld` floats apart: col[(c*R + r)*S + s][p - p0] = x[c][oh*sh - ph + r*dh][ow*sw - pw + s*dw],
/// zero outside the image.
void im2col_nchw(const ConvShape& s, const float* xn, std::int64_t p0, std::int64_t p1, float* col,
                 std::int64_t ld);

}  // namespace galley::backends::cpu::avx512
