// gpu.conv.igemm_tc's tile plans as the tuner's configs: the solver lists the plans worth timing for a
// problem and runs the one it is handed; the tuner times them (the cost model misses the best tile by
// up to 1.25x: it sees neither occupancy nor L2 reuse) and the find-db keeps the winner's text in its
// `params` column, in the form rows stored before the tuner took this over ("tile=5,splits=2").
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "conv_params.hpp"

namespace galley::backends::gpu {

/// One plan of the implicit GEMM: a tile (an index of the kernel's tile table, the Hopper wgmma
/// tiles after the mma.sync ones) and a split-K count.
struct IgemmTcConfig {
  int tile = 0;
  int splits = 1;

  /// "tile=5,splits=2"
  std::string to_string() const;
  /// The text to_string() gives, nothing else (no spaces, no other order); nullopt otherwise.
  static std::optional<IgemmTcConfig> parse(std::string_view text);
  friend bool operator==(const IgemmTcConfig&, const IgemmTcConfig&) = default;
};

/// The plans worth timing for `p` (an NHWC view), the cost model's first: what a call without a
/// tuned choice runs. GALLEY_DEBUG_IGEMM_TC_PLAN makes its plan the only one, and
/// GALLEY_DEBUG_IGEMM_TC_TUNE=0 the model's. On HIP (no mma.sync) the SIMT implicit GEMM's plan alone.
std::vector<IgemmTcConfig> igemm_tc_candidates(const ConvParams& p, int sm_count);

/// Whether `config` (perhaps from a find-db row of another build or device) names a plan this build
/// runs on this device: a tile of the table (wgmma ones only where the device has wgmma) and 1-64
/// splits. On HIP: the one plan igemm_tc_candidates() lists.
bool igemm_tc_config_usable(const ConvParams& p, int sm_count, const IgemmTcConfig& config);

}  // namespace galley::backends::gpu
