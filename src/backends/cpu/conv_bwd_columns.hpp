// Column-buffer moves of the backward GEMM lowerings: im2col gathers the input patches of a block
// of output pixels (for the weight gradient), col2im adds a block of patch gradients back onto
// the input pixels they came from (for the data gradient). Row and column orders are those of
// cpu.conv.im2col_gemm, so the GEMMs see the weights in their stored layout:
//   NCHW: col[(c*R + r)*S + s][pixel]   (KCYX rows)
//   NHWC: col[pixel][(r*S + s)*Cg + c]  (KYXC columns)
#pragma once

#include <cstdint>

#include "backends/cpu/conv_base.hpp"

namespace galley::backends::cpu::bwd {

/// col[(c*R + r)*S + s][p - p0] = x[c][oh*sh - ph + r*dh][ow*sw - pw + s*dw] (zero outside the
/// image) for the group's channels of image `xn` and output pixels [p0, p1) of one image; rows
/// `ld` floats apart. AVX-512 where the CPU has it.
void im2col_nchw(const ConvShape& s, const float* xn, std::int64_t p0, std::int64_t p1, float* col,
                 std::int64_t ld);

/// col[p - p0][(r*S + s)*Cg + c] for group `gi` and global output pixels [p0, p1) of the batch
/// (n*Ho*Wo + oh*Wo + ow), rows R*S*Cg floats apart.
void im2col_nhwc(const ConvShape& s, const float* x, std::int64_t gi, std::int64_t p0, std::int64_t p1,
                 float* col);

/// The adjoint of im2col_nchw for `channels` channels: dx[c][ih][iw] += col[(c*R + r)*S + s][p - p0]
/// over output pixels [p0, p1) of one image; `dxn` points at the first of the channels' planes.
void col2im_add_nchw(const ConvShape& s, const float* col, std::int64_t ld, std::int64_t channels,
                     std::int64_t p0, std::int64_t p1, float* dxn);

/// col2im_add_nchw with the column buffer transposed: col[p - p0][(c*R + r)*S + s], rows `ld`
/// floats apart.
void col2im_add_nchw_transposed(const ConvShape& s, const float* col, std::int64_t ld, std::int64_t channels,
                                std::int64_t p0, std::int64_t p1, float* dxn);

/// The adjoint of an NHWC gather of `channels` channels starting at `c0` of image `n`:
/// dx[n][ih][iw][c0 + c] += col[p - p0][(r*S + s)*channels + c] over output pixels [p0, p1) of
/// that image, rows `ld` floats apart.
void col2im_add_nhwc(const ConvShape& s, const float* col, std::int64_t ld, std::int64_t n, std::int64_t c0,
                     std::int64_t channels, std::int64_t p0, std::int64_t p1, float* dx);

}  // namespace galley::backends::cpu::bwd
