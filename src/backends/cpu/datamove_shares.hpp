// How a bandwidth-bound kernel splits its units of work over the thread pool. A tensor that fits
// the cores' L2 caches is split into one contiguous share per thread, the same on every call: a
// thread then finds its share where it left it, in its own L2, instead of fetching the lines the
// other core wrote last time (a 1 MB softmax or broadcast runs at L2 speed only so). Larger
// tensors stream from memory whoever reads them, so there every unit is its own piece and the
// pool balances the load when one thread is late (these machines may be shared).
#pragma once

#include <algorithm>
#include <cstdint>

#include "backends/cpu/thread_pool.hpp"

namespace galley::backends::cpu {

/// Tensors of at most this many bytes (inputs and outputs together) are split by thread.
inline constexpr std::int64_t kThreadShareBytes = std::int64_t{4} << 20;

/// The pieces of [0, units) for parallel_for: pool_size() shares for a cache-sized tensor of
/// `bytes`, else `units`.
inline std::int64_t thread_shares(std::int64_t units, std::int64_t bytes) {
  return bytes <= kThreadShareBytes ? std::min<std::int64_t>(pool_size(), units) : units;
}

/// The first unit of piece `share` of `shares` over [0, units).
inline std::int64_t share_begin(std::int64_t units, std::int64_t shares, std::int64_t share) {
  return shares == units ? share : units * share / shares;
}

/// parallel_for over [0, units) in the pieces thread_shares() gives for a tensor of `bytes`: body
/// gets ranges of units.
template <class Body>
void parallel_for_shares(std::int64_t units, std::int64_t bytes, const Body& body) {
  const std::int64_t shares = thread_shares(units, bytes);
  parallel_for(0, shares, [&](std::int64_t lo, std::int64_t hi) {
    body(share_begin(units, shares, lo), share_begin(units, shares, hi));
  });
}

}  // namespace galley::backends::cpu
