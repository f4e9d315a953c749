// The cpu backend's activation solvers, as factories; activ_list.cpp sets their order.
#pragma once

#include <memory>

#include "galley/dnn/activation.hpp"

namespace galley::backends::cpu {

/// cpu.activ.blocked: every activation, both directions, every dtype; threaded over blocks.
std::unique_ptr<dnn::ActivSolver> make_activ_blocked();

}  // namespace galley::backends::cpu
