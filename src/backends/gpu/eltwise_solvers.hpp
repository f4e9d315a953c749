// The single-source gpu.eltwise.* solvers, as factories; each GPU backend's eltwise_list.cpp sets
// their order.
#pragma once

#include <memory>
#include <string_view>

#include "galley/dnn/eltwise.hpp"

namespace galley::backends::gpu {

/// gpu.eltwise.dense: forward when dst is one flat range (equal shapes, or an input that is a
/// single value), backward when a and b both have dst's shape; 16-byte vector loads.
std::unique_ptr<dnn::EltwiseSolver> make_eltwise_dense(std::string_view backend);
/// gpu.eltwise.broadcast: every problem, forward and backward (reductions over broadcast axes).
std::unique_ptr<dnn::EltwiseSolver> make_eltwise_broadcast(std::string_view backend);

}  // namespace galley::backends::gpu
