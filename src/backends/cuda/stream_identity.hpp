// Which stream a vendor handle was last set to, so that a call on the same stream skips the set.
#pragma once

#include <cuda_runtime.h>

namespace galley::backends::cuda {

/// A stream as the handle saw it: the pointer alone is not enough, since a destroyed stream's
/// address can come back for a new stream; CUDA's stream ID is never reused within a process.
struct StreamIdentity {
  cudaStream_t stream = nullptr;
  unsigned long long id = 0;
  bool known = false;  // false: nothing set yet, or the ID could not be read (then always set)

  /// Whether `s` is the stream last recorded; records it when it is not (the caller then sets it).
  bool same_as(cudaStream_t s) {
    unsigned long long sid = 0;
    const bool has_id = cudaStreamGetId(s, &sid) == cudaSuccess;
    if (!has_id) (void)cudaGetLastError();
    if (known && has_id && s == stream && sid == id) return true;
    stream = s;
    id = sid;
    known = has_id;
    return false;
  }
  /// The set failed: the handle's stream is unknown again.
  void forget() { known = false; }
};

}  // namespace galley::backends::cuda
