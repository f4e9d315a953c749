// The cpu backend's normalisation solvers, as factories; bnorm_list.cpp, lnorm_list.cpp and
// gnorm_list.cpp set their order.
#pragma once

#include <memory>

#include "galley/dnn/normalization.hpp"

namespace galley::backends::cpu {

/// cpu.bnorm.planes: every mode, both layouts, f32/f16/bf16.
std::unique_ptr<dnn::BatchNormSolver> make_bnorm_planes();
/// cpu.gnorm.planes: forward and backward, both layouts, f32/f16/bf16.
std::unique_ptr<dnn::GroupNormSolver> make_gnorm_planes();
/// cpu.lnorm.rows: forward and backward, f32/f16/bf16.
std::unique_ptr<dnn::LayerNormSolver> make_lnorm_rows();

}  // namespace galley::backends::cpu
