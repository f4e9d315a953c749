// The cpu backend's eltwise solvers, as factories; cpu/eltwise_list.cpp sets their order.
#pragma once

#include <memory>

#include "galley/dnn/eltwise.hpp"

namespace galley::backends::cpu {

/// cpu.eltwise.direct: every eltwise problem, forward and backward, threaded.
std::unique_ptr<dnn::EltwiseSolver> make_eltwise_direct();

}  // namespace galley::backends::cpu
