#include "backends/cpu/conv_bwd_columns.hpp"

#include <algorithm>
#include <cstring>

#include "backends/cpu/conv_isa.hpp"
#include "backends/cpu/im2col_avx512.hpp"

namespace galley::backends::cpu::bwd {
namespace {

// The output columns [lo, hi) of one filter tap `q` whose input column ow*sw + shift lies inside
// the image, where shift = q*dw - pw.
struct ColumnRange {
  std::int64_t shift, lo, hi;
};

ColumnRange columns_inside(const ConvShape& s, std::int64_t q) {
  const std::int64_t shift = q * s.dw - s.pw;
  const std::int64_t lo = std::min(s.wo, std::max<std::int64_t>(0, (-shift + s.sw - 1) / s.sw));
  const std::int64_t last = s.w - 1 - shift;  // largest ow * sw that stays inside
  const std::int64_t hi = last < 0 ? lo : std::max(lo, std::min(s.wo, last / s.sw + 1));
  return {shift, lo, hi};
}

void im2col_nchw_baseline(const ConvShape& s, const float* xn, std::int64_t p0, std::int64_t p1, float* col,
                          std::int64_t ld) {
  const std::int64_t oh_first = p0 / s.wo, ow_first = p0 % s.wo;
  for (std::int64_t c = 0; c < s.cg; ++c) {
    const float* xc = xn + c * s.h * s.w;
    for (std::int64_t r = 0; r < s.r; ++r) {
      for (std::int64_t q = 0; q < s.s; ++q) {
        float* row = col + ((c * s.r + r) * s.s + q) * ld;
        const ColumnRange range = columns_inside(s, q);
        std::int64_t oh = oh_first, ow0 = ow_first;
        for (std::int64_t p = p0; p < p1; ++oh, ow0 = 0) {
          const std::int64_t ow1 = std::min(s.wo, ow0 + (p1 - p));
          float* out = row + (p - p0);  // out[ow - ow0] is pixel (oh, ow)
          const std::int64_t ih = oh * s.sh - s.ph + r * s.dh;
          if (ih < 0 || ih >= s.h) {
            std::fill(out, out + (ow1 - ow0), 0.0f);
          } else {
            const float* in = xc + ih * s.w;
            const std::int64_t a = std::clamp(range.lo, ow0, ow1), b = std::clamp(range.hi, ow0, ow1);
            std::fill(out, out + (a - ow0), 0.0f);
            for (std::int64_t ow = a; ow < b; ++ow) out[ow - ow0] = in[ow * s.sw + range.shift];
            std::fill(out + (b - ow0), out + (ow1 - ow0), 0.0f);
          }
          p += ow1 - ow0;
        }
      }
    }
  }
}

}  // namespace

void im2col_nchw(const ConvShape& s, const float* xn, std::int64_t p0, std::int64_t p1, float* col,
                 std::int64_t ld) {
  if (cpu_has_avx512()) {
    avx512::im2col_nchw(s, xn, p0, p1, col, ld);
  } else {
    im2col_nchw_baseline(s, xn, p0, p1, col, ld);
  }
}

void im2col_nhwc(const ConvShape& s, const float* x, std::int64_t gi, std::int64_t p0, std::int64_t p1,
                 float* col) {
  const std::int64_t patch = s.r * s.s * s.cg;
  const auto bytes = static_cast<std::size_t>(s.cg) * sizeof(float);
  for (std::int64_t p = p0; p < p1; ++p) {
    const std::int64_t n = p / (s.ho * s.wo), rem = p % (s.ho * s.wo);
    const std::int64_t oh = rem / s.wo, ow = rem % s.wo;
    float* out = col + (p - p0) * patch;
    for (std::int64_t r = 0; r < s.r; ++r) {
      const std::int64_t ih = oh * s.sh - s.ph + r * s.dh;
      for (std::int64_t q = 0; q < s.s; ++q, out += s.cg) {
        const std::int64_t iw = ow * s.sw - s.pw + q * s.dw;
        if (ih < 0 || ih >= s.h || iw < 0 || iw >= s.w) {
          std::memset(out, 0, bytes);
        } else {
          std::memcpy(out, x + ((n * s.h + ih) * s.w + iw) * s.c + gi * s.cg, bytes);
        }
      }
    }
  }
}

void col2im_add_nchw(const ConvShape& s, const float* col, std::int64_t ld, std::int64_t channels,
                     std::int64_t p0, std::int64_t p1, float* dxn) {
  const std::int64_t oh_first = p0 / s.wo, ow_first = p0 % s.wo;
  for (std::int64_t c = 0; c < channels; ++c) {
    float* dxc = dxn + c * s.h * s.w;
    for (std::int64_t r = 0; r < s.r; ++r) {
      for (std::int64_t q = 0; q < s.s; ++q) {
        const float* row = col + ((c * s.r + r) * s.s + q) * ld;
        const ColumnRange range = columns_inside(s, q);
        std::int64_t oh = oh_first, ow0 = ow_first;
        for (std::int64_t p = p0; p < p1; ++oh, ow0 = 0) {
          const std::int64_t ow1 = std::min(s.wo, ow0 + (p1 - p));
          const std::int64_t ih = oh * s.sh - s.ph + r * s.dh;
          if (ih >= 0 && ih < s.h) {
            const std::int64_t a = std::clamp(range.lo, ow0, ow1), b = std::clamp(range.hi, ow0, ow1);
            if (a < b) {
              // in[i] is pixel (oh, a + i), read by input column (a + i) * sw + shift.
              const float* in = row + (p - p0) + (a - ow0);
              float* out = dxc + ih * s.w + a * s.sw + range.shift;
              const std::int64_t count = b - a;
              if (s.sw == 1) {
                for (std::int64_t i = 0; i < count; ++i) out[i] += in[i];
              } else {
                for (std::int64_t i = 0; i < count; ++i) out[i * s.sw] += in[i];
              }
            }
          }
          p += ow1 - ow0;
        }
      }
    }
  }
}

void col2im_add_nchw_transposed(const ConvShape& s, const float* col, std::int64_t ld, std::int64_t channels,
                                std::int64_t p0, std::int64_t p1, float* dxn) {
  for (std::int64_t p = p0; p < p1; ++p) {
    const std::int64_t oh = p / s.wo, ow = p % s.wo;
    const float* in = col + (p - p0) * ld;
    for (std::int64_t c = 0; c < channels; ++c) {
      float* dxc = dxn + c * s.h * s.w;
      for (std::int64_t r = 0; r < s.r; ++r) {
        const std::int64_t ih = oh * s.sh - s.ph + r * s.dh;
        if (ih < 0 || ih >= s.h) continue;
        for (std::int64_t q = 0; q < s.s; ++q) {
          const std::int64_t iw = ow * s.sw - s.pw + q * s.dw;
          if (iw >= 0 && iw < s.w) dxc[ih * s.w + iw] += in[(c * s.r + r) * s.s + q];
        }
      }
    }
  }
}

void col2im_add_nhwc(const ConvShape& s, const float* col, std::int64_t ld, std::int64_t n, std::int64_t c0,
                     std::int64_t channels, std::int64_t p0, std::int64_t p1, float* dx) {
  for (std::int64_t p = p0; p < p1; ++p) {
    const std::int64_t oh = p / s.wo, ow = p % s.wo;
    const float* in = col + (p - p0) * ld;
    for (std::int64_t r = 0; r < s.r; ++r) {
      const std::int64_t ih = oh * s.sh - s.ph + r * s.dh;
      if (ih < 0 || ih >= s.h) {
        in += s.s * channels;
        continue;
      }
      for (std::int64_t q = 0; q < s.s; ++q, in += channels) {
        const std::int64_t iw = ow * s.sw - s.pw + q * s.dw;
        if (iw < 0 || iw >= s.w) continue;
        float* out = dx + ((n * s.h + ih) * s.w + iw) * s.c + c0;
        for (std::int64_t c = 0; c < channels; ++c) out[c] += in[c];
      }
    }
  }
}

}  // namespace galley::backends::cpu::bwd
