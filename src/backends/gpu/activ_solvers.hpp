// The single-source gpu.activ.* solvers a GPU plugin brings, as factories; each GPU backend's
// activ_list.cpp sets their order.
#pragma once

#include <memory>
#include <string_view>

#include "galley/dnn/activation.hpp"

namespace galley::backends::gpu {

/// gpu.activ.eltwise for `backend` ("cuda" or "hip"): every activation, both directions, every
/// dtype and shape; claims every problem, so it closes a GPU list.
std::unique_ptr<dnn::ActivSolver> make_activ_eltwise(std::string_view backend);

}  // namespace galley::backends::gpu
