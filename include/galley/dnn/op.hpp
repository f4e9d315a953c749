// What every op shares: its kind, the roles of its tensors (oneDNN's DNNL_ARG_*), and the pointers
// a call passes, keyed by role.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "galley/dnn/tensor.hpp"

namespace galley::dnn {

class PreparedWeights;

/// The op families, named as `galley bench` names them (MIOpenDriver's names where it has one). A
/// problem key starts with the kind's name ("conv-F-f32-..."), so find-db rows, solver lists and
/// repro lines of different ops never mix.
enum class OpKind : std::uint8_t {
  conv,
  pool,       ///< max, average, global and adaptive pooling
  activ,      ///< elementwise activations (relu, gelu, ...)
  bnorm,      ///< batch normalisation
  lnorm,      ///< layer normalisation
  gnorm,      ///< group normalisation
  softmax,    ///< softmax and log-softmax over one axis
  gemm,       ///< matrix multiply (linear, matmul), batched
  eltwise,    ///< binary elementwise ops with broadcasting
  reduce,     ///< sum and mean over axes
  concat,     ///< concatenation along one axis
  split,      ///< split along one axis
  transpose,  ///< permutation of axes
  pad,        ///< constant padding
  reorder,    ///< dtype and layout conversion
};
inline constexpr std::size_t kOpKindCount = 15;
/// "conv", "pool", ...
const char* to_string(OpKind kind) noexcept;
/// The kind named by the text before a key's first '-'; throws Error(invalid_argument) naming the
/// text and the known kinds.
OpKind op_kind_of_key(std::string_view key);
/// The kind named `name` ("pool"); throws Error(invalid_argument) naming it and the known kinds.
OpKind parse_op_kind(std::string_view name);

/// The role of a tensor in a call (oneDNN's DNNL_ARG_*). Forward ops read src (and wei, bias) and
/// write dst; backward ops read diff_dst (and what the forward read) and write diff_src, diff_wei.
/// src1 is a binary op's second input; scale/shift are a norm's gamma/beta; mean/variance its
/// statistics (running ones read, or written by training); saved_mean/saved_invstd what training
/// keeps for backward; indices where max pooling keeps its argmax. multi(i) is the i-th tensor of
/// a variadic op (concat's inputs, split's outputs).
enum class ArgId : std::uint8_t {
  src,
  wei,
  bias,
  dst,
  diff_src,
  diff_wei,
  diff_bias,
  diff_dst,
  src1,
  diff_src1,
  scale,
  shift,
  mean,
  variance,
  diff_scale,
  diff_shift,
  saved_mean,
  saved_invstd,
  indices,
  multi_first = 32,
};
/// How many tensors a variadic op may take or give (DenseNet-201's widest concat takes 49).
inline constexpr std::size_t kMaxMultiArgs = 96;
inline constexpr std::size_t kArgIdCount = static_cast<std::size_t>(ArgId::multi_first) + kMaxMultiArgs;
/// The i-th tensor of a variadic op; i < kMaxMultiArgs.
constexpr ArgId multi_arg(std::size_t i) {
  return static_cast<ArgId>(static_cast<std::size_t>(ArgId::multi_first) + i);
}
/// "src", "wei", ..., "multi[3]"
const char* to_string(ArgId id) noexcept;

/// What random data a benchmark or test fills an input with.
enum class Fill : std::uint8_t {
  uniform,   ///< uniform in [-1, 1)
  positive,  ///< uniform in [0.5, 1.5) (variances, divisors)
  zero,      ///< zeros (accumulators)
};

/// One tensor a problem needs: its role, its descriptor and whether the call writes it.
struct TensorArg {
  ArgId id = ArgId::src;
  TensorDesc desc;
  bool output = false;
  /// A person's name for messages: "x (input)", "dw (weight gradient)".
  std::string_view name;
  /// An output the call also reads (batch norm's running statistics, updated in place).
  bool also_read = false;
  /// How an input (or an also-read output) is filled with random data.
  Fill fill = Fill::uniform;
};

/// Device pointers of one call, by role, plus the workspace the dispatcher allocated.
struct OpArgs {
  std::array<void*, kArgIdCount> ptr{};
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
  /// The call site's slot for weights in a solver's own form (prepared_weights.hpp); null: none.
  std::shared_ptr<PreparedWeights> prepared = nullptr;

  void set(ArgId id, const void* p) { ptr[static_cast<std::size_t>(id)] = const_cast<void*>(p); }
  void* get(ArgId id) const { return ptr[static_cast<std::size_t>(id)]; }
};

}  // namespace galley::dnn
