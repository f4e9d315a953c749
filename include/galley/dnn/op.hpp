// What every op shares: its kind, the roles of its tensors (oneDNN's DNNL_ARG_*), and the pointers
// a call passes, keyed by role.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "galley/dnn/tensor.hpp"

namespace galley::dnn {

/// The op families. A problem key starts with the kind's name ("conv-F-f32-..."), so find-db rows,
/// solver lists and repro lines of different ops never mix.
enum class OpKind : std::uint8_t { conv };
/// "conv"
const char* to_string(OpKind kind) noexcept;
/// The kind named by the text before a key's first '-'; throws Error(invalid_argument) naming the
/// text and the known kinds.
OpKind op_kind_of_key(std::string_view key);

/// The role of a tensor in a call. Forward ops read src (and wei, bias) and write dst; backward ops
/// read diff_dst (and what the forward read) and write diff_src or diff_wei.
enum class ArgId : std::uint8_t { src, wei, bias, dst, diff_src, diff_wei, diff_bias, diff_dst };
inline constexpr std::size_t kArgIdCount = 8;
/// "src", "wei", ...
const char* to_string(ArgId id) noexcept;

/// One tensor a problem needs: its role, its packed descriptor and whether the call writes it.
struct TensorArg {
  ArgId id = ArgId::src;
  TensorDesc desc;
  bool output = false;
  /// A person's name for messages: "x (input)", "dw (weight gradient)".
  std::string_view name;
};

/// Device pointers of one call, by role, plus the workspace the dispatcher allocated.
struct OpArgs {
  std::array<void*, kArgIdCount> ptr{};
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;

  void set(ArgId id, const void* p) { ptr[static_cast<std::size_t>(id)] = const_cast<void*>(p); }
  void* get(ArgId id) const { return ptr[static_cast<std::size_t>(id)]; }
};

}  // namespace galley::dnn
