// What the three normalisation ops (batch, layer and group norm) share: their direction and the
// device pointers of one call, by role.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "galley/dnn/op.hpp"

namespace galley::dnn {

/// Forward (y from x) or backward (dx, dscale, dshift from dy and what the forward saved).
enum class NormDirection : std::uint8_t { forward, backward };
const char* to_string(NormDirection direction) noexcept;

/// Device pointers of one normalisation call. Forward reads x, scale, shift (and, for inference
/// batch norm, the running mean and variance) and writes y and, when training, saved_mean and
/// saved_invstd (and batch norm's running statistics, read and updated in place). Backward reads
/// dy, x, scale, saved_mean, saved_invstd and writes dx, dscale, dshift. Statistics, scale and
/// shift are f32 whatever the data's dtype.
struct NormArgs {
  const void* x = nullptr;
  const void* scale = nullptr;
  const void* shift = nullptr;
  void* y = nullptr;
  void* running_mean = nullptr;
  void* running_var = nullptr;
  void* saved_mean = nullptr;
  void* saved_invstd = nullptr;
  const void* dy = nullptr;
  void* dx = nullptr;
  void* dscale = nullptr;
  void* dshift = nullptr;
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;

  static NormArgs from(const OpArgs& args);
};

}  // namespace galley::dnn
