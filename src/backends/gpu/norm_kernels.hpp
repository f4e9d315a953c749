// Host-side entry points of the single-source normalisation kernels (norm_planes.cu for batch and
// group norm, norm_rows.cu for layer norm). Every launcher enqueues on `stream` (a cudaStream_t /
// hipStream_t) and throws Error(backend_error) naming `what` when a launch fails.
#pragma once

#include <cstddef>
#include <cstdint>

#include "galley/core/dtype.hpp"
#include "galley/dnn/norm_args.hpp"

// The geometry's helpers run on host and device.
#if defined(__CUDACC__) || defined(__HIPCC__)
#define GALLEY_NORM_HD __host__ __device__
#else
#define GALLEY_NORM_HD
#endif

namespace galley::backends::gpu {

/// Batch or group norm over a packed 4-D tensor seen as n x c planes of hw pixels. A statistic
/// gathers planes: batch norm (groups == 0) channel c's planes of every image, group norm the
/// planes of one image's group. The pixels are cut into `segments` of segment_len() values per
/// channel, each cut into `splits` ranges of `split_len` that blocks reduce independently to one
/// partial per (range, segment, channel); partials are merged in a fixed order, so results are
/// deterministic (no floating-point atomics). nchw: a segment is a plane (segments == n).
/// nhwc: a segment is rows of c contiguous channels, an image's (group norm) or every image's
/// (batch norm: one segment, so a batch of one still spreads over many blocks).
struct PlaneGeometry {
  std::int64_t n = 1, c = 1, hw = 1;
  std::int64_t groups = 0;
  bool nhwc = false;
  DType dtype = DType::f32;
  std::int64_t splits = 1, split_len = 1;
  std::int64_t segments = 1;

  GALLEY_NORM_HD std::int64_t planes() const { return n * c; }
  GALLEY_NORM_HD std::int64_t segment_len() const { return n * hw / segments; }
  /// Partials per range: one per channel of every segment.
  GALLEY_NORM_HD std::int64_t partial_planes() const { return segments * c; }
  GALLEY_NORM_HD std::int64_t stats() const { return groups == 0 ? c : n * groups; }
  /// Values per statistic.
  GALLEY_NORM_HD std::int64_t count() const { return groups == 0 ? n * hw : (c / groups) * hw; }
};
/// The geometry with its split chosen (from the shape alone); groups 0 for batch norm.
PlaneGeometry plane_geometry(std::int64_t n, std::int64_t c, std::int64_t hw, std::int64_t groups, bool nhwc,
                             DType dtype);
/// Why the kernels cannot take the shape (a grid dimension or count too large), empty when they can.
const char* plane_geometry_limit(const PlaneGeometry& g);
std::size_t plane_workspace_bytes(const PlaneGeometry& g);

/// Training forward (batch or group norm): statistics, saved_mean/saved_invstd, y; with
/// `update_running` (batch norm) the running statistics with `momentum`.
void launch_plane_forward_training(const PlaneGeometry& g, const dnn::NormArgs& a, double epsilon,
                                   bool update_running, double momentum, void* stream, const char* what);
/// Batch norm inference: y from the running statistics (one pass over x).
void launch_plane_forward_inference(const PlaneGeometry& g, const dnn::NormArgs& a, double epsilon,
                                    void* stream, const char* what);
/// Backward: dx, dscale, dshift from dy, x, scale and the saved statistics.
void launch_plane_backward(const PlaneGeometry& g, const dnn::NormArgs& a, void* stream, const char* what);

/// Layer norm: `rows` rows of `len` contiguous elements. Rows of a multiple of 8 up to
/// 32 * kMaxLaneVectors * 8 elements (the backward: kMaxBackwardLaneVectors) take the register path
/// (norm_rows_lanes.cu): `lanes` lanes per row, each keeping `lane_vectors` 8-element vectors of it
/// in registers, so x (and dy) are read once. Other rows take the generic path (norm_rows.cu,
/// lanes == 0), which reads a row twice.
struct RowGeometry {
  std::int64_t rows = 1, len = 1;
  DType dtype = DType::f32;
  std::int64_t col_splits = 1;  ///< row ranges the generic backward's column sums are cut into
  int lanes = 0;
  int lane_vectors = 0;

  /// Rows a group of `lanes` lanes holds at once on the register path: two short ones, so each
  /// lane has two 16-byte loads in flight.
  GALLEY_NORM_HD int rows_per_group() const { return lane_vectors == 1 ? 2 : 1; }
};
constexpr int kMaxLaneVectors = 4;
/// The backward's register path keeps x, dy, scale and two column sums: rows up to 512 elements.
constexpr int kMaxBackwardLaneVectors = 2;
RowGeometry row_geometry(std::int64_t rows, std::int64_t len, DType dtype);
const char* row_geometry_limit(const RowGeometry& g);
std::size_t row_workspace_bytes(const RowGeometry& g, bool backward);
void launch_row_forward(const RowGeometry& g, const dnn::NormArgs& a, double epsilon, void* stream,
                        const char* what);
void launch_row_backward(const RowGeometry& g, const dnn::NormArgs& a, void* stream, const char* what);

/// The register path's kernels (lanes > 0), called by the two launchers above. The backward runs at
/// most `max_blocks` blocks, writes one (dscale, dshift) partial per column per block into
/// `partial` and returns how many blocks ran.
void launch_row_forward_lanes(const RowGeometry& g, const dnn::NormArgs& a, double epsilon, void* stream,
                              const char* what);
std::int64_t launch_row_backward_lanes(const RowGeometry& g, const dnn::NormArgs& a, std::int64_t max_blocks,
                                       float* partial, void* stream, const char* what);

}  // namespace galley::backends::gpu
