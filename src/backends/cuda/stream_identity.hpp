// Which stream a vendor handle was last set to, so that a call on the same stream skips the set.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace galley::backends::cuda {

/// A stream as the handle saw it. The pointer alone is not enough: a destroyed stream's address can
/// come back for a new stream, so Galley's Stream::id(), never reused, goes with it. (CUDA's own
/// stream ID would do too, but cudaStreamGetId is refused on a capturing stream and breaks the
/// user's graph capture; and it is a runtime call on every vendor call.)
struct StreamIdentity {
  cudaStream_t stream = nullptr;
  std::uint64_t id = 0;  // 0: nothing recorded, or a stream Galley does not own (then always set)

  /// Whether `s` (Galley's stream `galley_id`, or 0 for a private stream) is the stream last
  /// recorded; records it when it is not (the caller then sets it).
  bool same_as(cudaStream_t s, std::uint64_t galley_id) {
    if (galley_id != 0 && s == stream && galley_id == id) return true;
    stream = s;
    id = galley_id;
    return false;
  }
  /// The set failed: the handle's stream is unknown again.
  void forget() { id = 0; }
};

}  // namespace galley::backends::cuda
