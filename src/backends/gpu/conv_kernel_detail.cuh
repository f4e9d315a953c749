// What the depthwise and grouped launchers will run for a problem, in words, for their solvers'
// detail() (bench output, find-db rows). The launchers choose among several kernels; these live
// beside them so the words cannot drift from the choice.
#pragma once

#include <string>

#include "conv_params.hpp"

namespace galley::backends::gpu {

std::string depthwise_detail(const ConvParams& p);
std::string grouped_detail(const ConvParams& p);

}  // namespace galley::backends::gpu
