// The cpu backend's shared thread pool: kernels inside one stream task parallelise over it.
#pragma once

#include <cstdint>
#include <functional>

namespace galley::backends::cpu {

/// Threads in the pool including the caller (GALLEY_NUM_THREADS, default hardware threads).
int pool_size();

/// Splits [begin, end) into contiguous chunks and runs body(chunk_begin, chunk_end) on the pool,
/// the calling thread included; returns when all chunks are done. Rethrows the first exception a
/// chunk threw. Nested calls from inside a body run serially on the calling thread, so a kernel
/// may call parallel_for without knowing whether it is already parallel.
void parallel_for(std::int64_t begin, std::int64_t end,
                  const std::function<void(std::int64_t, std::int64_t)>& body);

/// True on a pool worker or inside a parallel_for body.
bool in_parallel_region();

}  // namespace galley::backends::cpu
