// NCHW works one channel plane per task. The data gradient with unit strides is a forward
// depthwise convolution of dy with the filter turned by 180 degrees and padding (R-1)*dil - pad,
// so it runs cpu.conv.depthwise's in-place plane kernels (AVX2 / AVX-512); other strides scatter
// each tap's weighted dy rows onto the plane. The weight gradient with unit strides copies each
// image's x plane zero-padded and dy at the same row width (zero in the extra columns), so every
// tap is one contiguous dot product over the plane, in 16 lanes folded into double per image;
// other strides sum row by row. NHWC works rows of
// pixels, vectorised over the channels: the data gradient gathers per input pixel, the weight
// gradient sums per worker into a private [R*S][C] copy, reduced at the end.
#include "backends/cpu/conv_bwd_depthwise.hpp"

#include <algorithm>
#include <cstring>

#include "backends/cpu/conv_bwd_depthwise_kernels.hpp"
#include "backends/cpu/conv_bwd_depthwise_row_ops.hpp"
#include "backends/cpu/conv_depthwise_kernels.hpp"
#include "backends/cpu/conv_isa.hpp"
#include "backends/cpu/thread_pool.hpp"

namespace galley::backends::cpu::bwd {

DepthwiseKernels depthwise_kernels_baseline() { return this_isa_kernels(); }

namespace {

DepthwiseKernels kernels() {
  if (cpu_has_avx512()) return depthwise_kernels_avx512();
  if (cpu_has_avx2_fma()) return depthwise_kernels_avx2();
  return depthwise_kernels_baseline();
}

std::size_t tap_major_bytes(const ConvShape& s) {
  return align_up64(static_cast<std::size_t>(s.r * s.s * s.c) * sizeof(float));
}

// The forward problem whose output is dx: input dy (Ho x Wo), padding (R-1)*dil - pad, unit
// strides, the same dilation; its output is H x W.
ConvShape as_forward(const ConvShape& s) {
  ConvShape f = s;
  f.h = s.ho, f.w = s.wo, f.ho = s.h, f.wo = s.w;
  f.ph = (s.r - 1) * s.dh - s.ph, f.pw = (s.s - 1) * s.dw - s.pw;
  return f;
}

// Unit strides and padding within the filter's reach (else the turned problem's padding would be
// negative), on a CPU with the forward plane kernels.
bool data_as_forward(const ConvShape& s) {
  return !s.nhwc && s.sh == 1 && s.sw == 1 && s.ph <= (s.r - 1) * s.dh && s.pw <= (s.s - 1) * s.dw &&
         cpu_has_avx2_fma();
}

// Filters of more taps than this sum on the row kernel instead (no per-tap sums to hold).
constexpr std::int64_t kMaxPlaneTaps = 49;  // up to 7x7

bool weights_by_planes(const ConvShape& s) { return s.sh == 1 && s.sw == 1 && s.r * s.s <= kMaxPlaneTaps; }

// The padded x plane (with slack for the last tap's reach) and dy at its row width.
std::size_t weights_plane_bytes(const ConvShape& s) {
  if (!weights_by_planes(s)) return 0;
  const std::int64_t wp = s.wo + (s.s - 1) * s.dw, hp = s.ho + (s.r - 1) * s.dh;
  return align_up64(static_cast<std::size_t>(hp * wp + (s.s - 1) * s.dw + s.ho * wp) * sizeof(float));
}

}  // namespace

std::size_t data_depthwise_workspace(const ConvShape& s) {
  return s.nhwc || data_as_forward(s) ? tap_major_bytes(s) : 0;
}

void data_depthwise(const ConvShape& s, const float* dy, const float* w, float* dx, void* ws) {
  const DepthwiseKernels k = kernels();
  const std::int64_t taps = s.r * s.s;
  if (data_as_forward(s)) {
    auto* turned = static_cast<float*>(ws);  // [C][R*S], each filter turned by 180 degrees
    for (std::int64_t c = 0; c < s.c; ++c) {
      for (std::int64_t t = 0; t < taps; ++t) turned[c * taps + t] = w[c * taps + taps - 1 - t];
    }
    const ConvShape f = as_forward(s);
    const bool avx512 = cpu_has_avx512();
    parallel_for(0, s.n * s.c, [&](std::int64_t lo, std::int64_t hi) {
      for (std::int64_t nc = lo; nc < hi; ++nc) {
        const float* dyc = dy + nc * s.ho * s.wo;
        const float* turned_c = turned + nc % s.c * taps;
        float* dxc = dx + nc * s.h * s.w;
        if (avx512) {
          depthwise::nchw_plane_s1_avx512(f, dyc, turned_c, dxc, nullptr);
        } else {
          depthwise::nchw_plane_s1_avx2(f, dyc, turned_c, dxc);
        }
      }
    });
    return;
  }
  if (!s.nhwc) {
    parallel_for(0, s.n * s.c, [&](std::int64_t lo, std::int64_t hi) {
      for (std::int64_t nc = lo; nc < hi; ++nc) {
        k.data_plane_nchw(s, dy + nc * s.ho * s.wo, w + nc % s.c * taps, dx + nc * s.h * s.w);
      }
    });
    return;
  }
  // KYXC with one input channel per group is [C][R*S]; transpose it to [R*S][C].
  auto* wt = static_cast<float*>(ws);
  for (std::int64_t c = 0; c < s.c; ++c) {
    for (std::int64_t t = 0; t < taps; ++t) wt[t * s.c + c] = w[c * taps + t];
  }
  parallel_for(0, s.n * s.h, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t row = lo; row < hi; ++row) {
      const std::int64_t n = row / s.h, ih = row % s.h;
      k.data_row_nhwc(s, dy + n * s.ho * s.wo * s.c, wt, ih, dx + row * s.w * s.c);
    }
  });
}

std::size_t weights_depthwise_workspace(const ConvShape& s) {
  if (!s.nhwc) return static_cast<std::size_t>(slot_count(s.c)) * weights_plane_bytes(s);
  // Per worker: its running sum and the current row's sum (rows are summed apart so that no
  // single f32 sum runs over the whole batch).
  return static_cast<std::size_t>(slot_count(s.n * s.ho)) * 2 * tap_major_bytes(s) +
         align_up64(static_cast<std::size_t>(slot_count(s.n * s.ho)));
}

void weights_depthwise(const ConvShape& s, const float* x, const float* dy, float* dw, bool accumulate,
                       void* ws) {
  const DepthwiseKernels k = kernels();
  const std::int64_t taps = s.r * s.s;
  if (!s.nhwc) {
    // Unit strides: dy copied with rows as wide as a zero-padded x plane (zeros in the extra
    // columns), so that each tap's sum is one contiguous dot product over the whole plane.
    const std::int64_t wp = s.wo + (s.s - 1) * s.dw, hp = s.ho + (s.r - 1) * s.dh;
    const std::size_t plane_bytes = weights_plane_bytes(s);
    run_slotted(s.c, slot_count(s.c), [&](std::int64_t slot, std::int64_t c) {
      if (!weights_by_planes(s)) {
        k.weights_channel_nchw(s, x, dy, c, dw + c * taps, accumulate);
        return;
      }
      auto* xp =
          reinterpret_cast<float*>(static_cast<char*>(ws) + static_cast<std::size_t>(slot) * plane_bytes);
      float* dyp = xp + hp * wp + (s.s - 1) * s.dw;
      double sums[kMaxPlaneTaps] = {};
      std::int64_t offsets[kMaxPlaneTaps];
      for (std::int64_t t = 0; t < taps; ++t) offsets[t] = t / s.s * s.dh * wp + t % s.s * s.dw;
      for (std::int64_t n = 0; n < s.n; ++n) {
        const std::int64_t nc = n * s.c + c;
        const float* xc = x + nc * s.h * s.w;
        const float* dyc = dy + nc * s.ho * s.wo;
        // Row i, column j of the padded plane holds x[i - ph][j - pw]; columns [j0, j1) are inside.
        const std::int64_t j0 = std::min(wp, s.pw), j1 = std::clamp<std::int64_t>(s.pw + s.w, j0, wp);
        // Plain loops, not memcpy/fill: rows are a few dozen floats, where a library call costs
        // more than the copy.
        for (std::int64_t i = 0; i < hp; ++i) {
          float* row = xp + i * wp;
          const std::int64_t ih = i - s.ph;
          if (ih < 0 || ih >= s.h) {
            for (std::int64_t j = 0; j < wp; ++j) row[j] = 0.0f;
            continue;
          }
          const float* in = xc + ih * s.w;
          for (std::int64_t j = 0; j < j0; ++j) row[j] = 0.0f;
          for (std::int64_t j = j0; j < j1; ++j) row[j] = in[j - s.pw];
          for (std::int64_t j = j1; j < wp; ++j) row[j] = 0.0f;
        }
        for (std::int64_t j = hp * wp; j < hp * wp + (s.s - 1) * s.dw; ++j) xp[j] = 0.0f;
        for (std::int64_t oh = 0; oh < s.ho; ++oh) {
          float* row = dyp + oh * wp;
          const float* in = dyc + oh * s.wo;
          for (std::int64_t j = 0; j < s.wo; ++j) row[j] = in[j];
          for (std::int64_t j = s.wo; j < wp; ++j) row[j] = 0.0f;
        }
        float lanes[kMaxPlaneTaps * kLanes] = {};
        k.dot_taps(lanes, dyp, xp, offsets, taps, s.ho * wp);
        for (std::int64_t t = 0; t < taps; ++t) {
          for (std::int64_t j = 0; j < kLanes; ++j) sums[t] += lanes[t * kLanes + j];
        }
      }
      for (std::int64_t t = 0; t < taps; ++t) {
        float& out = dw[c * taps + t];
        out = static_cast<float>(accumulate ? out + sums[t] : sums[t]);
      }
    });
    return;
  }
  const std::int64_t rows = s.n * s.ho, slots = slot_count(rows);
  const std::size_t bytes = tap_major_bytes(s);
  auto* base = static_cast<char*>(ws);
  auto* used = reinterpret_cast<unsigned char*>(base + static_cast<std::size_t>(slots) * 2 * bytes);
  std::memset(used, 0, static_cast<std::size_t>(slots));
  const auto sum_of = [&](std::int64_t slot) {
    return reinterpret_cast<float*>(base + static_cast<std::size_t>(slot) * 2 * bytes);
  };
  run_slotted(rows, slots, [&](std::int64_t slot, std::int64_t row) {
    float* sum = sum_of(slot);
    float* part = reinterpret_cast<float*>(reinterpret_cast<char*>(sum) + bytes);
    std::fill(part, part + taps * s.c, 0.0f);
    k.weights_row_nhwc(s, x, dy, row / s.ho, row % s.ho, part);
    if (used[slot] == 0) {
      std::memcpy(sum, part, static_cast<std::size_t>(taps * s.c) * sizeof(float));
      used[slot] = 1;
    } else {
      for (std::int64_t i = 0; i < taps * s.c; ++i) sum[i] += part[i];
    }
  });
  // dw[c][t] (+)= the workers' sums at [t][c].
  parallel_for(0, s.c, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t c = lo; c < hi; ++c) {
      for (std::int64_t t = 0; t < taps; ++t) {
        float v = accumulate ? dw[c * taps + t] : 0.0f;
        for (std::int64_t slot = 0; slot < slots; ++slot) {
          if (used[slot] != 0) v += sum_of(slot)[t * s.c + c];
        }
        dw[c * taps + t] = v;
      }
    }
  });
}

}  // namespace galley::backends::cpu::bwd
