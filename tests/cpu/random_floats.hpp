// Seeded uniform floats in [-1, 1) for the cpu kernel tests (the GEMM and the conv kernels).
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace galley::test {

inline std::vector<float> random_floats(std::size_t count, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(count);
  for (auto& f : v) f = dist(gen);
  return v;
}

}  // namespace galley::test
