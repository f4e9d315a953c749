// The single-source gpu.gemm.* solvers a GPU plugin brings, as factories; each GPU backend's
// gemm_list.cpp sets their order.
#pragma once

#include <memory>
#include <string_view>

#include "galley/dnn/gemm_solver.hpp"

namespace galley::backends::gpu {

/// gpu.gemm.tc: f16/bf16 on tensor cores (mma.sync, sm_80 and newer; not on hip), its tile
/// shapes the tuner's inner choices.
std::unique_ptr<dnn::GemmSolver> make_gemm_tc(std::string_view backend);
/// gpu.gemm.simt: f32 FMA (any dtype, shape, transpose and alignment): the list's safety net.
std::unique_ptr<dnn::GemmSolver> make_gemm_simt(std::string_view backend);

}  // namespace galley::backends::gpu
