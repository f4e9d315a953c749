// Settings of the caching allocator: parsed from GALLEY_ALLOC_CONF ("key:value,...") and
// GALLEY_NO_CACHING, with PyTorch's PYTORCH_CUDA_ALLOC_CONF as the model for the keys.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace galley::memory {

/// How a CachingAllocator rounds, splits and caps its memory. Defaults match PyTorch's.
struct AllocatorConfig {
  /// Cached blocks at least this large are never split, and a request below it never takes one
  /// (GALLEY_ALLOC_CONF key max_split_mb, >= 20). Limits fragmentation of big blocks. Default: no limit.
  std::size_t max_split_size = SIZE_MAX;
  /// A request >= max_split_size may take a cached unsplittable block only when the block exceeds
  /// the request by less than this (key max_non_split_rounding_mb). Default 20 MiB.
  std::size_t max_non_split_rounding = std::size_t{20} << 20;
  /// Rounds requests above 512 B * N up to the next 1/N step between powers of two, so that
  /// similar sizes share blocks (key roundup_power2_divisions, a power of two up to 64; 0 = off).
  std::size_t roundup_power2_divisions = 0;
  /// Reserved memory never exceeds this fraction of the device's total (key memory_fraction, (0, 1]).
  double memory_fraction = 1.0;
  /// False with GALLEY_NO_CACHING=1: every allocation and free goes to the backend (memory checkers).
  bool caching = true;
  /// When not empty, an out-of-memory error first writes the allocator's snapshot (segments and
  /// blocks, as memory_snapshot_json) to this file (key snapshot_on_oom; a path without commas).
  std::string snapshot_on_oom;

  /// Parses "max_split_mb:512,roundup_power2_divisions:4". Empty text gives the defaults. An unknown
  /// key, a missing ':' or a bad value throws Error(invalid_argument) naming it and listing valid keys.
  static AllocatorConfig parse(std::string_view text);
  /// GALLEY_ALLOC_CONF and GALLEY_NO_CACHING as set in the environment now.
  static AllocatorConfig from_env();
  /// The settings in GALLEY_ALLOC_CONF syntax, defaults omitted (empty when all are defaults).
  std::string to_string() const;
};

/// The valid GALLEY_ALLOC_CONF keys with their meaning, one per line (for errors and `galley info --env`).
std::string alloc_conf_help();

}  // namespace galley::memory
