// Graph passes: rewrites of a Graph that keep what it computes (within the dtype's rounding) and
// make it cheaper to run. Each pass has a name and can be turned off to compare; run_passes() runs
// the pipeline in a fixed order and re-infers every value's type and shape afterwards.
//
//   model::Graph g = model::import_onnx("resnet50.onnx");
//   model::PassOptions options;
//   options.dtype = model::ElemType::f16;          // f32 interface, f16 inside
//   options.disabled.insert("conv-fusion");         // compare with and without
//   const model::PassReport report = model::run_passes(g, options);
//   model::Executor exec(std::move(g), device);
//
// Pipeline, in order (pass_names()):
//   constant-folding    nodes whose inputs are all constants, evaluated once on the cpu
//   batch-norm-folding  Conv [+ bias] -> BatchNormalization (constant statistics) into one Conv
//   conv-fusion         x * Sigmoid(x) into "galley.Silu"; then Conv -> [Add bias] -> [Add residual]
//                       -> [activation] into "galley.FusedConv"
//   dead-node-removal   nodes whose outputs reach no graph output; constants nothing reads
//   dtype-conversion    float values and constants in PassOptions::dtype (runs only when set)
//   layout              which conv/pool/norm/activation/add nodes run NHWC, reorders at the edges
//
// Private ops the passes introduce (lowered by the executor like any ONNX op):
//   "galley.FusedConv"  inputs (X, W, [B], [R]) and Conv's attributes, plus "activation" (the
//                       ONNX op name of the epilogue activation, "" for none) with
//                       "activation_alpha" / "activation_beta" (LeakyRelu/Elu alpha, Clip min/max):
//                       Y = activation(conv(X, W) + B + R).
//   "galley.Silu"       one input X, one output X * sigmoid(X) (SiLU, as ONNX exports it in two nodes).
//   "galley.Reorder"    one input, one output of the same logical shape, attribute "layout"
//                       ("NCHW" or "NHWC") naming the output's memory order.
// A node with attribute "galley.layout" = "NHWC" stores every rank-4 input and output channels-last
// (a conv's constant weights as K, Y, X, C); its value infos keep the logical N, C, H, W shape.
#pragma once

#include <cstddef>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "galley/model/graph.hpp"

namespace galley::model {

/// Which memory layout the layout pass gives activations.
enum class LayoutChoice {
  automatic,  ///< NHWC where it pays: f16/bf16 graphs on a GPU; NCHW otherwise
  nchw,       ///< leave every node NCHW
  nhwc,       ///< every node that can runs NHWC (any device and dtype; for tests and comparisons)
};

struct PassOptions {
  /// Names of passes not to run (each must be one of pass_names()).
  std::set<std::string> disabled;
  /// f16 or bf16: convert the graph's float values and constants (inputs and outputs stay f32
  /// through a Cast at the boundary; batch-norm statistics stay f32). Unset or f32: no conversion.
  std::optional<ElemType> dtype;
  /// The graph will run on a GPU (the automatic layout choice depends on it).
  bool gpu = false;
  LayoutChoice layout = LayoutChoice::automatic;
};

/// What one pass did.
struct PassRecord {
  std::string name;
  bool ran = false;  ///< false: turned off, or not applicable (see `note`)
  std::string note;  ///< "turned off", "no --dtype", "NCHW on this device", ...
  int rewrites = 0;  ///< nodes folded, fused, removed, converted ... by this pass
  std::size_t nodes_before = 0, nodes_after = 0;
  std::size_t constants_before = 0, constants_after = 0;
};

struct PassReport {
  std::vector<PassRecord> passes;  ///< one per pass of pass_names(), in order
};

/// The pass names in pipeline order.
std::vector<std::string> pass_names();
/// Throws Error(invalid_argument) naming `name` and listing the valid names when it is not a pass.
void check_pass_name(const std::string& name);

/// Runs every pass not disabled, in pipeline order, then re-infers shapes and validates the graph.
/// Throws Error(invalid_argument) for an unknown disabled name or a dtype other than f16/bf16/f32.
PassReport run_passes(Graph& graph, const PassOptions& options = {});

// The passes one by one; each leaves `graph` valid with every value re-inferred and returns how
// many rewrites it made (0: the graph is unchanged).

/// Evaluates on the cpu (reference solvers) every node whose inputs are all constants and whose
/// op runs there, replacing it by its outputs as constants. Outputs over `max_elements` each stay.
int fold_constants(Graph& graph, std::int64_t max_elements = std::int64_t{1} << 24);
/// Folds BatchNormalization (inference, constant scale/bias/mean/var) into the Conv feeding it
/// when the conv's output has no other reader: new weights and bias, the BN node removed.
int fold_batch_norm(Graph& graph);
/// Rewrites Mul(x, Sigmoid(x)) (the Sigmoid's output read by the Mul only) into "galley.Silu"(x),
/// then Conv -> [Add per-channel constant] -> [Add residual] -> [Relu, Clip, LeakyRelu, Elu,
/// Sigmoid, Tanh, HardSwish] chains (each intermediate value read once, not a graph output) into
/// one "galley.FusedConv" node. A Conv with nothing to fuse is left as it is.
/// Returns the number of SiLUs and chains rewritten.
int fuse_conv_epilogues(Graph& graph);
/// Removes nodes none of whose outputs reaches a graph output, nodes already folded into
/// constants, and constants nothing reads.
int remove_dead_nodes(Graph& graph);
/// Converts f32 constants and values to `dtype` (f16 or bf16), keeping f32 graph inputs and outputs
/// through Cast nodes and BatchNormalization's statistics in f32. Error(invalid_argument) for
/// another dtype.
int convert_dtype(Graph& graph, ElemType dtype);
/// Marks every node that can run NHWC (Conv, galley.FusedConv, pools, BatchNormalization,
/// activations, same-shape Add/Sub/Mul/Div) with "galley.layout" = "NHWC", re-lays its constant
/// weights, and inserts galley.Reorder nodes where NHWC and NCHW values meet.
int use_nhwc(Graph& graph);

}  // namespace galley::model
