// The reference backward convolutions (`ref.conv.bwd_data`, `ref.conv.bwd_weights`): the ground
// truth that every backward solver, the conformance tests and `galley bench conv -V 1` are checked
// against, as ref_conv_direct.hpp is for forward. Internal to libgalley, tests and the CLI.
//
// `problem` describes the forward convolution (x, w, y shapes); dx has x's shape and layout, dw
// has w's (KCYX for nchw, KYXC for nhwc), dy has y's. The functions accept any value of
// problem.direction: which pass runs is said by the function called, so a caller holding the
// forward problem need not copy it to change one field. The solvers registered under these names
// do check the direction, as every solver does.
#pragma once

#include <memory>

#include "galley/dnn/conv_solver.hpp"

namespace galley::dnn {

/// Names of the reference solvers, the last entries of the cpu conv list.
inline constexpr const char* kRefConvBackwardDataName = "ref.conv.bwd_data";
inline constexpr const char* kRefConvBackwardWeightsName = "ref.conv.bwd_weights";

/// dx = conv_backward_data(dy, w): dx[n][c][ih][iw] = sum over the (k, r, s) whose forward
/// output pixel (oh, ow) read input pixel (ih, iw) of dy[n][k][oh][ow] * w[k][c][r][s]. Every
/// element of dx is written (zero where no output pixel read it). Host memory, packed in
/// problem.layout and problem.dtype; products and sums in double, rounded once at the end (to
/// f32, then to the storage type, as the forward reference). Parallel over host threads
/// (GALLEY_NUM_THREADS, else all hardware threads). Validates the problem first.
void reference_conv_backward_data(const ConvProblem& problem, const void* dy, const void* w, void* dx);

/// dw = conv_backward_weights(x, dy): dw[k][c][r][s] = sum over n, oh, ow of
/// dy[n][k][oh][ow] * x[n][g*C/g + c][oh*u - p + r*l][ow*v - q + s*j] (zero outside the image).
/// Every element of dw is overwritten, never accumulated into. Otherwise as above.
void reference_conv_backward_weights(const ConvProblem& problem, const void* x, const void* dy, void* dw);

/// The references as solvers, for the cpu conv list.
std::unique_ptr<ConvSolver> make_ref_conv_bwd_data();
std::unique_ptr<ConvSolver> make_ref_conv_bwd_weights();

}  // namespace galley::dnn
