// The single-source GPU normalisation solvers, as factories; each GPU backend's bnorm_list.cpp,
// lnorm_list.cpp and gnorm_list.cpp sets their order.
#pragma once

#include <memory>
#include <string_view>

#include "galley/dnn/normalization.hpp"

namespace galley::backends::gpu {

/// Each makes one solver for `backend` ("cuda" or "hip"), whose devices it checks against.
/// gpu.bnorm.planes: every batch norm mode, both layouts.
std::unique_ptr<dnn::BatchNormSolver> make_bnorm_planes(std::string_view backend);
/// gpu.gnorm.planes: group norm forward and backward, both layouts.
std::unique_ptr<dnn::GroupNormSolver> make_gnorm_planes(std::string_view backend);
/// gpu.lnorm.rows: layer norm forward and backward.
std::unique_ptr<dnn::LayerNormSolver> make_lnorm_rows(std::string_view backend);

}  // namespace galley::backends::gpu
