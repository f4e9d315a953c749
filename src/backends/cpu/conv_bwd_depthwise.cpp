// NCHW works one channel plane per task: the data gradient scatters each tap's weighted dy rows
// onto the plane (which stays in L1/L2 while all R*S taps pass over it), the weight gradient sums
// dy x shifted x rows over the batch for each tap in 16 independent lanes (so the compiler keeps
// them in one vector register) folded into double per row. NHWC works rows of pixels, vectorised
// over the channels: the data gradient gathers per input pixel, the weight gradient sums per
// worker into a private [R*S][C] copy, reduced at the end.
#include "backends/cpu/conv_bwd_depthwise.hpp"

#include <algorithm>
#include <cstring>

#include "backends/cpu/thread_pool.hpp"

namespace galley::backends::cpu::bwd {
namespace {

constexpr std::int64_t kLanes = 16;

// Output columns [lo, hi) of tap q whose input column ow*sw + shift lies in [0, W).
void columns_inside(const ConvShape& s, std::int64_t q, std::int64_t* shift, std::int64_t* lo, std::int64_t* hi) {
  *shift = q * s.dw - s.pw;
  *lo = std::min(s.wo, std::max<std::int64_t>(0, (-*shift + s.sw - 1) / s.sw));
  const std::int64_t last = s.w - 1 - *shift;
  *hi = last < 0 ? *lo : std::max(*lo, std::min(s.wo, last / s.sw + 1));
}

// The output index o along one axis whose tap t read input i, or -1 (see the reference).
std::int64_t output_of(std::int64_t i, std::int64_t t, std::int64_t pad, std::int64_t stride, std::int64_t dil,
                       std::int64_t out) {
  const std::int64_t num = i + pad - t * dil;
  if (num < 0 || num % stride != 0) return -1;
  const std::int64_t o = num / stride;
  return o < out ? o : -1;
}

void data_plane_nchw(const ConvShape& s, const float* dyc, const float* wc, float* dxc) {
  std::fill(dxc, dxc + s.h * s.w, 0.0f);
  for (std::int64_t oh = 0; oh < s.ho; ++oh) {
    const float* g = dyc + oh * s.wo;
    for (std::int64_t r = 0; r < s.r; ++r) {
      const std::int64_t ih = oh * s.sh - s.ph + r * s.dh;
      if (ih < 0 || ih >= s.h) continue;
      for (std::int64_t q = 0; q < s.s; ++q) {
        std::int64_t shift, lo, hi;
        columns_inside(s, q, &shift, &lo, &hi);
        const float wv = wc[r * s.s + q];
        if (lo >= hi) continue;
        // out[i] is input column (lo + i) * sw + shift, read by output column lo + i.
        float* out = dxc + ih * s.w + lo * s.sw + shift;
        const float* in = g + lo;
        const std::int64_t count = hi - lo;
        if (s.sw == 1) {
          for (std::int64_t i = 0; i < count; ++i) out[i] += wv * in[i];
        } else {
          for (std::int64_t i = 0; i < count; ++i) out[i * s.sw] += wv * in[i];
        }
      }
    }
  }
}

// One input row (n, ih) of an NHWC image: dx_row[W][C]; `wt` is the filter tap-major ([R*S][C]).
void data_row_nhwc(const ConvShape& s, const float* dyn, const float* wt, std::int64_t ih, float* dx_row) {
  for (std::int64_t iw = 0; iw < s.w; ++iw) {
    float* o = dx_row + iw * s.c;
    std::fill(o, o + s.c, 0.0f);
    for (std::int64_t r = 0; r < s.r; ++r) {
      const std::int64_t oh = output_of(ih, r, s.ph, s.sh, s.dh, s.ho);
      if (oh < 0) continue;
      for (std::int64_t q = 0; q < s.s; ++q) {
        const std::int64_t ow = output_of(iw, q, s.pw, s.sw, s.dw, s.wo);
        if (ow < 0) continue;
        const float* g = dyn + (oh * s.wo + ow) * s.c;
        const float* wv = wt + (r * s.s + q) * s.c;
        for (std::int64_t c = 0; c < s.c; ++c) o[c] += wv[c] * g[c];
      }
    }
  }
}

// sum over i in [0, count) of g[i] * in[i * stride], in kLanes independent partial sums.
double row_dot(const float* g, const float* in, std::int64_t stride, std::int64_t count) {
  float lanes[kLanes] = {};
  const std::int64_t hi = count;
  std::int64_t ow = 0;
  if (stride == 1) {
    for (; ow + kLanes <= hi; ow += kLanes) {
      for (std::int64_t j = 0; j < kLanes; ++j) lanes[j] += g[ow + j] * in[ow + j];
    }
  } else {
    for (; ow + kLanes <= hi; ow += kLanes) {
      for (std::int64_t j = 0; j < kLanes; ++j) lanes[j] += g[ow + j] * in[(ow + j) * stride];
    }
  }
  double sum = 0;
  for (; ow < hi; ++ow) sum += static_cast<double>(g[ow]) * in[ow * stride];
  for (float v : lanes) sum += v;
  return sum;
}

// The R*S weight gradients of channel c of an NCHW problem, summed over the batch.
void weights_channel_nchw(const ConvShape& s, const float* x, const float* dy, std::int64_t c, float* dwc,
                          bool accumulate) {
  for (std::int64_t r = 0; r < s.r; ++r) {
    for (std::int64_t q = 0; q < s.s; ++q) {
      std::int64_t shift, lo, hi;
      columns_inside(s, q, &shift, &lo, &hi);
      double sum = 0;
      for (std::int64_t n = 0; n < s.n; ++n) {
        const float* xc = x + (n * s.c + c) * s.h * s.w;
        const float* dyc = dy + (n * s.c + c) * s.ho * s.wo;
        for (std::int64_t oh = 0; oh < s.ho; ++oh) {
          const std::int64_t ih = oh * s.sh - s.ph + r * s.dh;
          if (ih < 0 || ih >= s.h || lo >= hi) continue;
          sum += row_dot(dyc + oh * s.wo + lo, xc + ih * s.w + lo * s.sw + shift, s.sw, hi - lo);
        }
      }
      float& out = dwc[r * s.s + q];
      out = static_cast<float>(accumulate ? out + sum : sum);
    }
  }
}

// acc[R*S][C] += the weight gradients of one output row (n, oh) of an NHWC problem.
void weights_row_nhwc(const ConvShape& s, const float* x, const float* dy, std::int64_t n, std::int64_t oh,
                      float* acc) {
  const float* dyr = dy + (n * s.ho + oh) * s.wo * s.c;
  for (std::int64_t r = 0; r < s.r; ++r) {
    const std::int64_t ih = oh * s.sh - s.ph + r * s.dh;
    if (ih < 0 || ih >= s.h) continue;
    const float* xr = x + (n * s.h + ih) * s.w * s.c;
    for (std::int64_t q = 0; q < s.s; ++q) {
      float* a = acc + (r * s.s + q) * s.c;
      for (std::int64_t ow = 0; ow < s.wo; ++ow) {
        const std::int64_t iw = ow * s.sw - s.pw + q * s.dw;
        if (iw < 0 || iw >= s.w) continue;
        const float* g = dyr + ow * s.c;
        const float* xv = xr + iw * s.c;
        for (std::int64_t c = 0; c < s.c; ++c) a[c] += g[c] * xv[c];
      }
    }
  }
}

std::size_t tap_major_bytes(const ConvShape& s) {
  return align_up64(static_cast<std::size_t>(s.r * s.s * s.c) * sizeof(float));
}

}  // namespace

std::size_t data_depthwise_workspace(const ConvShape& s) { return s.nhwc ? tap_major_bytes(s) : 0; }

void data_depthwise(const ConvShape& s, const float* dy, const float* w, float* dx, void* ws) {
  const std::int64_t taps = s.r * s.s;
  if (!s.nhwc) {
    parallel_for(0, s.n * s.c, [&](std::int64_t lo, std::int64_t hi) {
      for (std::int64_t nc = lo; nc < hi; ++nc) {
        data_plane_nchw(s, dy + nc * s.ho * s.wo, w + nc % s.c * taps, dx + nc * s.h * s.w);
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
      data_row_nhwc(s, dy + n * s.ho * s.wo * s.c, wt, ih, dx + row * s.w * s.c);
    }
  });
}

std::size_t weights_depthwise_workspace(const ConvShape& s) {
  if (!s.nhwc) return 0;
  // Per worker: its running sum and the current row's sum (rows are summed apart so that no
  // single f32 sum runs over the whole batch).
  return static_cast<std::size_t>(slot_count(s.n * s.ho)) * 2 * tap_major_bytes(s) +
         align_up64(static_cast<std::size_t>(slot_count(s.n * s.ho)));
}

void weights_depthwise(const ConvShape& s, const float* x, const float* dy, float* dw, bool accumulate, void* ws) {
  const std::int64_t taps = s.r * s.s;
  if (!s.nhwc) {
    parallel_for(0, s.c, [&](std::int64_t lo, std::int64_t hi) {
      for (std::int64_t c = lo; c < hi; ++c) weights_channel_nchw(s, x, dy, c, dw + c * taps, accumulate);
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
    weights_row_nhwc(s, x, dy, row / s.ho, row % s.ho, part);
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
