// The NHWC tensor-core path of gpu.conv.bwd_weights_igemm (conv_bwd_weights_nhwc_tc.cu): what it
// takes, its plan and its launcher. conv_bwd_igemm_weights.cu routes the problems it takes here.
#pragma once

#include <optional>
#include <vector>

#include "conv_bwd_kernels.hpp"

namespace galley::backends::gpu {

/// f16/bf16 NHWC with channels per group (in and out) a multiple of 8, on a build with mma.sync.
bool bwd_weights_nhwc_tc_applies(const ConvParams& p);
/// The plans (tile of its own table, split-K, groups a tile; nhwc_tc set) worth timing for a problem
/// that bwd_weights_nhwc_tc_applies to, the cost model's best first. Never empty.
std::vector<BwdIgemmPlan> bwd_weights_nhwc_tc_plans(const ConvParams& p, int sm_count);
/// The plan of `tile` with `splits`; nullopt where no such plan runs the problem.
std::optional<BwdIgemmPlan> bwd_weights_nhwc_tc_plan_for(const ConvParams& p, int sm_count, int tile,
                                                         int splits);
/// Enqueues the path; false (nothing enqueued) when a tensor is not 16-byte aligned.
bool launch_bwd_weights_nhwc_tc(const ConvParams& p, const BwdIgemmPlan& plan, const void* x, const void* dy,
                                void* dw, void* workspace, void* stream);

}  // namespace galley::backends::gpu
