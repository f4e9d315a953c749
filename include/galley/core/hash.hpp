// Stable (cross-process, cross-platform) hashing for keys and caches.
#pragma once

#include <cstdint>
#include <string_view>

namespace galley {

/// 64-bit FNV-1a: stable across runs and machines, unlike std::hash.
constexpr std::uint64_t fnv1a64(std::string_view text) noexcept {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (char c : text) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace galley
