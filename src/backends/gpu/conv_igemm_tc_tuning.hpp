// gpu.conv.igemm_tc's measured plans as text, for ConvSolver::tuned_params / use_tuned_params (the
// tuner stores the text in the find-db's `params` column, MIOpen perf-db style). The measuring itself
// happens inside plan_igemm_tc() (conv_igemm_tc.cu): its first call for a problem in a process times a
// few tile x split-K candidates on the current device and keeps the fastest.
#pragma once

#include <string>
#include <string_view>

#include "conv_params.hpp"

namespace galley::backends::gpu {

/// The plan plan_igemm_tc() uses for `p` as text ("tile=5,splits=2"; empty on HIP), measuring now if
/// this process has not yet.
std::string igemm_tc_tuned_params(const ConvParams& p, int sm_count);

/// Adopts text igemm_tc_tuned_params() gave in an earlier process, so that plan_igemm_tc() measures
/// nothing for `p`. Returns false, changing nothing, when `params` is malformed or names a tile or
/// split count this build does not have (on HIP: true only for empty text).
bool igemm_tc_use_tuned_params(const ConvParams& p, int sm_count, std::string_view params);

}  // namespace galley::backends::gpu
