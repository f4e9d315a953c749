// The conformance grid: small convolution geometries that together take every value of every axis
// the issue names (stride 1/2, pad 0/1/2, dilation 1/2, groups 1/2/32/depthwise, filters 1x1 3x3
// 5x5 7x7 1x7 7x1, batch 1, channels 3/17/23, odd 31x29 images). The cartesian product is far too
// big for a 2-core CI machine, so the list is hand-picked cases for the shapes solvers special-case,
// plus a seeded random sample of the product, capped in cost. Each geometry runs in every dtype and
// layout. conv_grid_test.cpp checks the coverage claim.
#pragma once

#include <cstdint>
#include <vector>

#include "galley/dnn/conv_problem.hpp"

namespace galley::test {

inline dnn::ConvProblem geometry(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w,
                                 std::int64_t k, std::int64_t y, std::int64_t x, std::int64_t p,
                                 std::int64_t q, std::int64_t u, std::int64_t v, std::int64_t l,
                                 std::int64_t j, std::int64_t g) {
  return dnn::ConvProblem{.n = n,
                          .c = c,
                          .h = h,
                          .w = w,
                          .k = k,
                          .y = y,
                          .x = x,
                          .pad_h = p,
                          .pad_w = q,
                          .stride_h = u,
                          .stride_w = v,
                          .dilation_h = l,
                          .dilation_w = j,
                          .groups = g};
}

/// Multiply-adds budget per random geometry (x2 = flops), so the reference stays in milliseconds.
inline constexpr double kMaxGridFlops = 12e6;

inline std::vector<dnn::ConvProblem> conv_grid() {
  //                  n   c   h   w   k  y  x  p  q  u  v  l  j   g
  std::vector<dnn::ConvProblem> grid = {
      // 1x1: plain GEMM, strided, padded (padding rows must come out as zero-input results)
      geometry(1, 17, 31, 29, 23, 1, 1, 0, 0, 1, 1, 1, 1, 1),
      geometry(1, 23, 31, 29, 17, 1, 1, 0, 0, 2, 2, 1, 1, 1),
      geometry(1, 3, 9, 7, 17, 1, 1, 1, 1, 1, 1, 1, 1, 1),
      geometry(3, 23, 9, 7, 17, 1, 1, 0, 0, 1, 1, 1, 1, 1),
      geometry(1, 128, 9, 7, 64, 1, 1, 0, 0, 1, 1, 1, 1, 1),
      geometry(1, 17, 31, 1, 23, 1, 1, 0, 0, 1, 1, 1, 1, 1),
      // 1x1 with P*Q % 4 == 0 (gpu.conv.gemm_1x1's float4 pixels): channel steps cut short (c 36),
      // output channels and pixels past the block tiles (k 70, 136; 240 and 300 pixels), strided
      geometry(2, 36, 12, 10, 70, 1, 1, 0, 0, 1, 1, 1, 1, 1),
      geometry(3, 64, 10, 10, 136, 1, 1, 0, 0, 1, 1, 1, 1, 1),
      geometry(1, 20, 16, 16, 24, 1, 1, 0, 0, 2, 2, 1, 1, 1),
      // 3x3: same/valid padding, stride 2, dilation 2, Winograd tile remainders
      geometry(1, 17, 31, 29, 23, 3, 3, 1, 1, 1, 1, 1, 1, 1),
      geometry(1, 3, 31, 29, 17, 3, 3, 0, 0, 1, 1, 1, 1, 1),
      geometry(1, 23, 31, 29, 17, 3, 3, 1, 1, 2, 2, 1, 1, 1),
      geometry(1, 17, 31, 29, 23, 3, 3, 2, 2, 1, 1, 2, 2, 1),
      geometry(1, 3, 15, 13, 17, 3, 3, 2, 2, 1, 1, 1, 1, 1),
      geometry(1, 17, 7, 9, 23, 3, 3, 1, 1, 1, 1, 1, 1, 1),
      geometry(2, 23, 13, 11, 17, 3, 3, 0, 0, 1, 1, 1, 1, 1),
      geometry(2, 17, 15, 13, 23, 3, 3, 1, 1, 1, 1, 1, 1, 1),
      geometry(1, 64, 14, 14, 96, 3, 3, 1, 1, 1, 1, 1, 1, 1),
      geometry(1, 17, 31, 29, 23, 3, 3, 1, 1, 1, 2, 1, 1, 1),
      geometry(1, 17, 31, 29, 23, 3, 3, 2, 1, 1, 1, 2, 1, 1),
      geometry(1, 17, 3, 3, 23, 3, 3, 0, 0, 1, 1, 1, 1, 1),
      geometry(1, 17, 1, 1, 23, 3, 3, 1, 1, 1, 1, 1, 1, 1),
      // 5x5, 7x7 and the separable 1x7 / 7x1
      geometry(1, 17, 31, 29, 23, 5, 5, 2, 2, 1, 1, 1, 1, 1),
      geometry(1, 3, 31, 29, 17, 5, 5, 2, 2, 2, 2, 1, 1, 1),
      geometry(1, 3, 31, 29, 23, 7, 7, 2, 2, 2, 2, 1, 1, 1),
      geometry(1, 17, 15, 13, 23, 7, 7, 0, 0, 1, 1, 1, 1, 1),
      geometry(1, 3, 5, 5, 17, 7, 7, 2, 2, 1, 1, 1, 1, 1),
      geometry(1, 17, 31, 29, 23, 1, 7, 0, 2, 1, 1, 1, 1, 1),
      geometry(1, 23, 31, 29, 17, 7, 1, 2, 0, 1, 1, 1, 1, 1),
      // groups 2 and 32
      geometry(1, 46, 15, 13, 34, 3, 3, 1, 1, 1, 1, 1, 1, 2),
      geometry(1, 34, 31, 29, 46, 3, 3, 1, 1, 2, 2, 1, 1, 2),
      geometry(1, 34, 9, 7, 46, 1, 1, 0, 0, 1, 1, 1, 1, 2),
      geometry(1, 64, 15, 13, 32, 3, 3, 1, 1, 1, 1, 1, 1, 32),
      geometry(1, 32, 31, 29, 64, 1, 1, 0, 0, 1, 1, 1, 1, 32),
      geometry(1, 96, 15, 17, 64, 3, 3, 2, 2, 2, 2, 2, 2, 32),
      geometry(2, 256, 7, 9, 256, 3, 3, 1, 1, 1, 1, 1, 1, 32),
      // depthwise (g == c), with channel multiplier 2, dilated, strided, 1x1
      geometry(1, 17, 31, 29, 17, 3, 3, 1, 1, 1, 1, 1, 1, 17),
      geometry(1, 23, 31, 29, 23, 3, 3, 1, 1, 2, 2, 1, 1, 23),
      geometry(1, 32, 15, 13, 32, 5, 5, 2, 2, 1, 1, 1, 1, 32),
      geometry(1, 17, 31, 29, 17, 7, 7, 2, 2, 1, 1, 2, 2, 17),
      geometry(1, 17, 15, 13, 34, 3, 3, 1, 1, 1, 1, 1, 1, 17),
      geometry(1, 23, 9, 7, 23, 1, 1, 0, 0, 1, 1, 1, 1, 23),
      geometry(2, 144, 9, 11, 144, 3, 3, 1, 1, 1, 1, 1, 1, 144),
      geometry(1, 3, 31, 29, 3, 3, 3, 0, 0, 1, 1, 1, 1, 3),
  };

  // A seeded sample of the whole product (a fixed LCG, so every machine gets the same list).
  std::uint64_t state = 0x9a11e7ull;
  const auto pick = [&state](std::uint64_t count) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<std::int64_t>((state >> 33) % count);
  };
  constexpr std::int64_t kChannels[] = {3, 17, 23};
  constexpr std::int64_t kSizes[][2] = {{31, 29}, {15, 13}, {8, 7}, {5, 9}};
  constexpr std::int64_t kFilters[][2] = {{1, 1}, {3, 3}, {5, 5}, {7, 7}, {1, 7}, {7, 1}};
  int added = 0;
  while (added < 48) {
    const auto size = kSizes[pick(4)];
    const auto filter = kFilters[pick(6)];
    std::int64_t c = kChannels[pick(3)], k = kChannels[pick(3)], g = 1;
    switch (pick(4)) {
      case 0:
        break;
      case 1:
        g = 2, c *= 2, k *= 2;
        break;
      case 2:
        g = 32, c = 32 * (1 + pick(2)), k = 32 * (1 + pick(2));
        break;
      default:
        g = c, k = c * (1 + pick(2));
        break;  // depthwise, multiplier 1 or 2
    }
    dnn::ConvProblem p = geometry(1 + pick(2), c, size[0], size[1], k, filter[0], filter[1], pick(3), pick(3),
                                  1 + pick(2), 1 + pick(2), 1 + pick(2), 1 + pick(2), g);
    if (p.out_h() <= 0 || p.out_w() <= 0 || p.flops() > kMaxGridFlops) continue;
    grid.push_back(p);
    ++added;
  }
  return grid;
}

}  // namespace galley::test
