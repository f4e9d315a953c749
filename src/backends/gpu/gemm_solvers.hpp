// The single-source gpu.gemm.* solvers a GPU plugin brings, as factories; each GPU backend's
// gemm_list.cpp sets their order.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dnn/gemm_lowering.hpp"
#include "galley/dnn/gemm_solver.hpp"
#include "gemm_kernels.hpp"

namespace galley::backends::gpu {

/// gpu.gemm.tc: f16/bf16 on tensor cores (mma.sync, sm_80 and newer; not on hip), its tile
/// shapes the tuner's inner choices.
std::unique_ptr<dnn::GemmSolver> make_gemm_tc(std::string_view backend);
/// Why gpu.gemm.tc's kernel cannot run `call` in `dtype` on `device`, empty when it can: the
/// solver's own check past its backend and dtype, for other ops' solvers that run GEMMs on it.
std::string gemm_tc_refusal(const dnn::GemmCall& call, DType dtype, const runtime::Device& device);
/// gpu.gemm.tc's tiles for `call` in `dtype` on `device`, the untuned default first (the tuner's
/// candidates), in the order of their estimated time: the waves of blocks each needs over the
/// device's slots, each wave priced by the tile's pace (gemm_tc_tile_pace()).
std::vector<GemmTile> gemm_tc_candidates(const dnn::GemmCall& call, DType dtype,
                                         const runtime::Device& device);
/// gpu.gemm.simt: f32 FMA (any dtype, shape, transpose and alignment): the list's safety net.
std::unique_ptr<dnn::GemmSolver> make_gemm_simt(std::string_view backend);

}  // namespace galley::backends::gpu
