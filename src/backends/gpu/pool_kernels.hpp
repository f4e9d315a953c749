// Host-side view of one pooling problem for the single-source GPU kernels, and their launchers.
// Vendor-neutral (streams are `void*`).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "galley/core/dtype.hpp"

namespace galley::dnn {
struct PoolProblem;
}

namespace galley::backends::gpu {

/// The problem as kernels see it, 64-bit sizes. Adaptive and global windows have `adaptive` set
/// (a global window is adaptive to 1x1); kernel windows use kh/kw, stride and padding.
struct PoolParams {
  std::int64_t n = 1, c = 1, h = 1, w = 1, oh = 1, ow = 1;
  std::int64_t kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0;
  bool adaptive = false;
  int mode = 0;  ///< 0 max, 1 average with padding counted, 2 average without
  bool nhwc = false;
  DType dtype = DType::f32;

  std::int64_t in_elems() const { return n * c * h * w; }
  std::int64_t out_elems() const { return n * c * oh * ow; }
};

PoolParams make_pool_params(const dnn::PoolProblem& problem);

/// Channels per thread of the nhwc kernels: 16 bytes of them when c and every pointer allow it.
int pool_vector_width(const PoolParams& p, const void* const* pointers, int count);

/// Forward, one thread per output (nhwc: per `vec` channels of one output pixel). `y` or `idx` may
/// be null: finding the maxima for backward writes indices only.
void launch_pool_forward(const PoolParams& p, const void* x, void* y, std::int32_t* idx, int vec,
                         void* stream);
/// Backward as a gather, one thread per input element (nhwc: per `vec` channels): the outputs whose
/// windows hold it add their gradient (average) or theirs when their index names it (max, idx).
void launch_pool_backward(const PoolParams& p, const void* dy, const std::int32_t* idx, void* dx, int vec,
                          void* stream);

/// Max backward without kept indices over a square 2x2 or 3x3 window at most twice the stride:
/// finds each window's maximum as its tap number, one byte per output in `taps` (out_elems()
/// bytes, aligned as `vec` needs), then gathers; the same gradient as finding the int32 indices.
bool pool_backward_by_taps_applies(const PoolParams& p);
void launch_pool_backward_by_taps(const PoolParams& p, const void* x, const void* dy, std::uint8_t* taps,
                                  void* dx, int vec, void* stream);
/// launch_pool_backward_by_taps' second half: the gather from tap numbers already in `taps`.
void launch_pool_backward_gather_taps(const PoolParams& p, const void* dy, const std::uint8_t* taps, void* dx,
                                      int vec, void* stream);

/// gpu.pool.strips (pool_strips.cu): whether its strip walkers take `p` (nhwc, channels a multiple of 8,
/// a square 2x2 or 3x3 window at stride 1 or 2, forward; max at stride 2, backward), else false with
/// the reason in `why` (when not null). Its launchers need every pointer 16-byte aligned.
bool pool_strips_apply(const PoolParams& p, bool backward, std::string* why);
/// Forward into y (or idx as well, the maxima's positions in the plane, when not null).
void launch_pool_strips_forward(const PoolParams& p, const void* x, void* y, std::int32_t* idx, void* stream);
/// The maxima of max pooling as window tap numbers, one byte per output in `taps` (out_elems()
/// bytes), for launch_pool_strips_taps_backward.
void launch_pool_strips_find_taps(const PoolParams& p, const void* x, std::uint8_t* taps, void* stream);
/// Max backward from the kept positions `idx` or from the tap numbers `taps`, each gradient and
/// pick read once.
void launch_pool_strips_kept_backward(const PoolParams& p, const std::int32_t* idx, const void* dy, void* dx,
                                      void* stream);
void launch_pool_strips_taps_backward(const PoolParams& p, const std::uint8_t* taps, const void* dy, void* dx,
                                      void* stream);

/// Global pooling (one window over the whole plane) forward: nchw reduces each plane with one warp;
/// nhwc splits each plane into shares over blocks, which leave partials in `workspace`
/// (pool_global_workspace_bytes), then merges them.
std::size_t pool_global_workspace_bytes(const PoolParams& p);
void launch_pool_global_forward(const PoolParams& p, const void* x, void* y, std::int32_t* idx,
                                void* workspace, void* stream);
/// Global pooling backward as a broadcast write: each input gets its plane's gradient over the
/// plane size (average), or the gradient where `idx` names it and 0 elsewhere (max).
void launch_pool_global_backward(const PoolParams& p, const void* dy, const std::int32_t* idx, void* dx,
                                 void* stream);

}  // namespace galley::backends::gpu
