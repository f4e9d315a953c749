// The cuda backend's convolution list, all three directions, fastest first (each solver refuses the
// directions it does not do). The specialised own kernels lead for the shapes they claim
// (depthwise, grouped); cuDNN is the first choice when nothing has been measured, its graph API
// before the legacy one because it reaches more engines; the implicit GEMMs and cuBLAS follow, and
// the direct kernels, which claim everything of their direction, close the list.
#include "backends/cuda/vendor_conv_solvers.hpp"
#include "backends/gpu/conv_solvers.hpp"
#include "backends/gpu/op_lists.hpp"
#include "dnn/conv_unfused.hpp"

namespace galley::backends::gpu {

namespace {

void register_conv_list() {
  constexpr std::string_view b = "cuda";
  std::vector<std::unique_ptr<dnn::SolverBase>> list;
  list.push_back(make_conv_depthwise(b));
  list.push_back(make_conv_grouped(b));
  list.push_back(make_conv_bwd_data_depthwise(b));
  list.push_back(make_conv_bwd_weights_depthwise(b));
  list.push_back(cuda::make_cudnn_graph_conv_solver());
  list.push_back(cuda::make_cudnn_conv_solver());
  list.push_back(cuda::make_cudnn_bwd_data_conv_solver());
  list.push_back(cuda::make_cudnn_bwd_weights_conv_solver());
  // Backward, the legacy API's heuristic pick stays the untuned default; the tuner times the graph
  // API's engine configs beside it.
  list.push_back(cuda::make_cudnn_graph_bwd_data_conv_solver());
  list.push_back(cuda::make_cudnn_graph_bwd_weights_conv_solver());
  list.push_back(make_conv_gemm_1x1_tc(b));
  list.push_back(make_conv_igemm_tc(b));
  list.push_back(make_conv_igemm_tc_nchw(b));
  list.push_back(cuda::make_cublas_gemm_conv_solver());
  list.push_back(cuda::make_cublas_bwd_data_conv_solver());
  list.push_back(cuda::make_cublas_bwd_weights_conv_solver());
  list.push_back(make_conv_winograd(b));
  list.push_back(make_conv_gemm_1x1(b));
  list.push_back(make_conv_igemm_f32_nchw(b));
  list.push_back(make_conv_igemm_f32(b));
  // Backward-data by the own forward kernels on a flipped view of the filter (unit stride, 1x1 grids).
  for (const char* forward :
       {"gpu.conv.grouped", "gpu.conv.igemm_tc", "gpu.conv.igemm_tc_nchw", "gpu.conv.winograd",
        "gpu.conv.gemm_1x1", "gpu.conv.igemm_f32_nchw", "gpu.conv.igemm_f32"})
    list.push_back(make_conv_bwd_data_as_forward(b, forward));
  list.push_back(make_conv_bwd_weights_via_igemm_tc(b));
  list.push_back(make_conv_bwd_weights_winograd(b));
  list.push_back(make_conv_bwd_data_igemm(b));
  list.push_back(make_conv_bwd_weights_igemm(b));
  list.push_back(make_conv_direct(b));
  list.push_back(make_conv_bwd_data_direct(b));
  list.push_back(make_conv_bwd_weights_direct(b));
  // A fused epilogue that no kernel above takes runs as the unfused sequence.
  list.push_back(dnn::make_conv_unfused(b));
  dnn::register_solvers(b, dnn::OpKind::conv, std::move(list));
}

const bool kListAdded = add_list_registrar(&register_conv_list);

}  // namespace

}  // namespace galley::backends::gpu
