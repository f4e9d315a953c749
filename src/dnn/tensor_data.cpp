#include "tensor_data.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

#include "galley/core/error.hpp"

namespace galley::dnn {
namespace {

void require_float_type(DType dtype, const char* what) {
  if (dtype != DType::f32 && dtype != DType::f16 && dtype != DType::bf16) {
    throw Error(Status::invalid_argument, std::string(what) + ": dtype " + to_string(dtype) +
                                              " is not a float type (valid: f32, f16, bf16)");
  }
}

// splitmix64: tiny, fast and specified bit for bit, unlike std::uniform_real_distribution.
std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

float element(DType dtype, const void* data, std::int64_t i) {
  switch (dtype) {
    case DType::f32: {
      float v;
      std::memcpy(&v, static_cast<const std::byte*>(data) + i * 4, 4);
      return v;
    }
    case DType::f16: {
      std::uint16_t b;
      std::memcpy(&b, static_cast<const std::byte*>(data) + i * 2, 2);
      return half_to_float(b);
    }
    default: {
      std::uint16_t b;
      std::memcpy(&b, static_cast<const std::byte*>(data) + i * 2, 2);
      return bfloat16_to_float(b);
    }
  }
}

}  // namespace

void to_float(DType dtype, const void* src, float* dst, std::int64_t count) {
  require_float_type(dtype, "to_float");
  if (dtype == DType::f32) {
    // An empty vector's data() may be null, and memcpy's pointers must be valid even for 0 bytes.
    if (count > 0) std::memcpy(dst, src, static_cast<std::size_t>(count) * sizeof(float));
    return;
  }
  const auto* bits = static_cast<const std::uint16_t*>(src);
  if (dtype == DType::f16) {
    for (std::int64_t i = 0; i < count; ++i) dst[i] = half_to_float(bits[i]);
  } else {
    for (std::int64_t i = 0; i < count; ++i) dst[i] = bfloat16_to_float(bits[i]);
  }
}

void from_float(DType dtype, const float* src, void* dst, std::int64_t count) {
  require_float_type(dtype, "from_float");
  if (dtype == DType::f32) {
    // An empty vector's data() may be null, and memcpy's pointers must be valid even for 0 bytes.
    if (count > 0) std::memcpy(dst, src, static_cast<std::size_t>(count) * sizeof(float));
    return;
  }
  auto* bits = static_cast<std::uint16_t*>(dst);
  if (dtype == DType::f16) {
    for (std::int64_t i = 0; i < count; ++i) bits[i] = float_to_half(src[i]);
  } else {
    for (std::int64_t i = 0; i < count; ++i) bits[i] = float_to_bfloat16(src[i]);
  }
}

std::vector<std::byte> random_tensor(DType dtype, std::int64_t count, std::uint64_t seed) {
  require_float_type(dtype, "random_tensor");
  std::vector<float> values(static_cast<std::size_t>(count));
  std::uint64_t state = seed;
  for (auto& v : values) {
    // 24 random bits -> a float in [-1, 1) that f32 holds exactly.
    v = static_cast<float>(static_cast<double>(splitmix64(state) >> 40) * (2.0 / 16777216.0) - 1.0);
  }
  std::vector<std::byte> out(static_cast<std::size_t>(count) * size_of(dtype));
  from_float(dtype, values.data(), out.data(), count);
  return out;
}

Comparison compare_outputs(DType dtype, const void* got, const void* ref, std::int64_t count,
                           double tolerance) {
  require_float_type(dtype, "compare_outputs");
  Comparison c;
  std::int64_t ref_bad = 0;
  for (std::int64_t i = 0; i < count; ++i) {
    const double r = element(dtype, ref, i);
    if (!std::isfinite(r)) {
      ++ref_bad;
    } else {
      c.ref_norm = std::max(c.ref_norm, std::abs(r));
    }
  }
  std::int64_t first_nan = -1;
  for (std::int64_t i = 0; i < count; ++i) {
    const double g = element(dtype, got, i);
    const double r = element(dtype, ref, i);
    if (!std::isfinite(g)) {
      if (c.nan_count++ == 0) first_nan = i;
      continue;
    }
    const double err = std::abs(g - r);
    if (err > c.max_abs_err || c.worst_index < 0) {
      c.max_abs_err = std::max(c.max_abs_err, err);
      c.worst_index = i;
    }
  }
  // An all-zero reference (e.g. zero weights) still demands an exact match.
  const double norm = c.ref_norm > 0 ? c.ref_norm : 1.0;
  c.max_rel_err = c.max_abs_err / norm;
  std::ostringstream s;
  s.precision(6);
  if (c.nan_count > 0 || ref_bad > 0) {
    c.max_rel_err = std::numeric_limits<double>::infinity();
    c.passed = false;
    if (c.nan_count > 0) {
      c.worst_index = first_nan;
      s << c.nan_count << " of " << count << " outputs NaN/inf (unwritten or overflowed), first at element "
        << first_nan;
    }
    if (ref_bad > 0) s << (c.nan_count > 0 ? "; " : "") << ref_bad << " reference outputs NaN/inf";
  } else {
    c.passed = c.max_rel_err <= tolerance;
    s << "max_rel_err " << c.max_rel_err << (c.passed ? " <= " : " > ") << tolerance;
    if (c.worst_index >= 0) {
      s << " at element " << c.worst_index << " (got " << element(dtype, got, c.worst_index) << ", want "
        << element(dtype, ref, c.worst_index) << ", |want|max " << c.ref_norm << ")";
    }
  }
  c.summary = s.str();
  return c;
}

double conv_tolerance(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return 1e-5;
    case DType::f16:
      return 1e-2;
    case DType::bf16:
      return 1e-2;
    default:
      break;
  }
  throw Error(Status::invalid_argument, std::string("conv_tolerance: dtype ") + to_string(dtype) +
                                            " is not a float type (valid: f32, f16, bf16)");
}

double conv_tolerance(const ConvProblem& p) {
  double base = conv_tolerance(p.dtype);
  if (p.dtype != DType::f32) return base;
  // Errors are judged relative to the largest output. An activation with bounded outputs (clip,
  // sigmoid, tanh, hardsigmoid) makes that several times smaller than the convolution's own values,
  // whose rounding (a Winograd transform's, a split sum's) the error still carries.
  if (const auto& a = p.epilogue.activation;
      a && (*a == Activation::clip || *a == Activation::sigmoid || *a == Activation::tanh ||
            *a == Activation::hardsigmoid)) {
    base *= 8;
  }
  // Winograd's transforms (any solver may run a 3x3 stride-1 problem that way, cuDNN's fused
  // engines among them) round each input and filter tile before the sum, about twice the rounding
  // of a direct sum in fp32. Backward-data of any undilated 3x3 is a 3x3 stride-1 correlation of dy
  // (spread onto the stride grid first when strided), so it may take the same path; so may the weight
  // gradient of a 3x3 stride-1 layer, as the transposed algorithm F(3x3, 4x4).
  const bool undilated_3x3 = p.y == 3 && p.x == 3 && p.dilation_h == 1 && p.dilation_w == 1;
  const bool unit_stride = p.stride_h == 1 && p.stride_w == 1;
  if (undilated_3x3 && (p.direction == ConvDirection::backward_data || unit_stride)) {
    base *= 2;
  }
  // Each output is a sum of this many products; a correct fp32 sum in another order (a vendor's
  // split reduction, an FFT algorithm) differs from the double reference by about sqrt(terms) ulps.
  const double terms = p.direction == ConvDirection::backward_weights
                           ? static_cast<double>(p.n) * static_cast<double>(p.out_h()) * static_cast<double>(p.out_w())
                           : static_cast<double>(p.c / p.groups) * static_cast<double>(p.y) * static_cast<double>(p.x);
  return base * std::max(1.0, std::sqrt(terms / 1024.0));
}

}  // namespace galley::dnn
