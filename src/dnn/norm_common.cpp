#include "dnn/norm_common.hpp"

#include <charconv>
#include <cmath>

#include "galley/core/error.hpp"

namespace galley::dnn {

const char* to_string(NormDirection direction) noexcept {
  return direction == NormDirection::forward ? "forward" : "backward";
}

NormArgs NormArgs::from(const OpArgs& args) {
  NormArgs a;
  a.x = args.get(ArgId::src);
  a.scale = args.get(ArgId::scale);
  a.shift = args.get(ArgId::shift);
  a.y = args.get(ArgId::dst);
  a.running_mean = args.get(ArgId::mean);
  a.running_var = args.get(ArgId::variance);
  a.saved_mean = args.get(ArgId::saved_mean);
  a.saved_invstd = args.get(ArgId::saved_invstd);
  a.dy = args.get(ArgId::diff_dst);
  a.dx = args.get(ArgId::diff_src);
  a.dscale = args.get(ArgId::diff_scale);
  a.dshift = args.get(ArgId::diff_shift);
  a.workspace = args.workspace;
  a.workspace_bytes = args.workspace_bytes;
  return a;
}

namespace norm {

void bad(const std::string& message) { throw Error(Status::invalid_argument, message); }

std::string format_real(double value) {
  char text[512];
  const auto [end, ec] = std::to_chars(text, text + sizeof text, value, std::chars_format::fixed);
  if (ec != std::errc()) return std::to_string(value);
  return std::string(text, end);
}

bool parse_real_canonical(std::string_view text, double& out) {
  if (text.empty() || text.size() > 400) return false;
  double value = 0;
  const auto [ptr, ec] =
      std::from_chars(text.data(), text.data() + text.size(), value, std::chars_format::fixed);
  if (ec != std::errc() || ptr != text.data() + text.size() || !std::isfinite(value)) return false;
  if (format_real(value) != text) return false;
  out = value;
  return true;
}

char direction_letter(NormDirection d) { return d == NormDirection::forward ? 'F' : 'B'; }

NormDirection direction_of(char letter) {
  return letter == 'B' ? NormDirection::backward : NormDirection::forward;
}

void check_dtype_epsilon(const char* what, DType dtype, double epsilon) {
  if (dtype != DType::f32 && dtype != DType::f16 && dtype != DType::bf16) {
    bad(std::string(what) + ": dtype " + to_string(dtype) + " is not supported (valid: f32, f16, bf16)");
  }
  if (!std::isfinite(epsilon) || epsilon <= 0) {
    bad(std::string(what) + ": epsilon = " + std::to_string(epsilon) + " must be finite and > 0");
  }
}

std::int64_t checked_product(const char* what, const std::int64_t* values, int count,
                             std::size_t element_bytes) {
  std::int64_t product = 1;
  for (int i = 0; i < count; ++i) {
    if (__builtin_mul_overflow(product, values[i], &product)) bad(std::string(what) + " overflows 64 bits");
  }
  std::int64_t bytes = 0;
  if (__builtin_mul_overflow(product, static_cast<std::int64_t>(element_bytes), &bytes)) {
    bad(std::string(what) + " in bytes overflows 64 bits");
  }
  return product;
}

double tensor_bytes(const std::vector<TensorArg>& tensors) {
  double bytes = 0;
  for (const TensorArg& t : tensors) {
    bytes += static_cast<double>(t.desc.bytes()) * (t.output && t.also_read ? 2 : 1);
  }
  return bytes;
}

double norm_tolerance(DType dtype, double f32) { return dtype == DType::f32 ? f32 : 1e-2; }

}  // namespace norm
}  // namespace galley::dnn
