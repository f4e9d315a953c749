// A tensor for users: a descriptor plus storage on one device, either owned (from the caching
// allocator) or wrapping memory the caller owns, with its size, so an op can refuse a buffer that
// is too small, misaligned or on another device instead of running past its end.
//
//   galley::Tensor x = galley::Tensor::empty(stream, problem.x_desc());
//   x.copy_from_host(stream, host.data(), host.size() * sizeof(float));
//   galley::dnn::convolution_forward(stream, problem, x, w, y);
//   std::vector<float> out = y.to_host<float>(stream);
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "galley/core/dtype.hpp"
#include "galley/dnn/tensor.hpp"
#include "galley/runtime/device.hpp"
#include "galley/runtime/stream.hpp"

namespace galley {

namespace memory {
class Buffer;
}

/// Descriptor + device storage. Copies share the storage (as torch::Tensor does); the storage of
/// an owning tensor goes back to the caching allocator when the last copy is destroyed, ordered
/// after the work of the stream it was allocated on.
class Tensor {
 public:
  /// An empty tensor: no device, no storage; every op refuses it.
  Tensor() = default;

  /// A new tensor of `desc` on stream.device(), from the caching allocator (contents undefined).
  /// Throws Error(invalid_argument) for an invalid descriptor and Error(out_of_memory) when the
  /// device cannot hold it.
  static Tensor empty(runtime::Stream& stream, const dnn::TensorDesc& desc);
  /// Wraps `bytes` bytes of memory at `data` on `device`, owned by the caller, who keeps it alive
  /// while work that uses it is queued. `bytes` may exceed what `desc` spans, not fall short:
  /// a too-small buffer throws Error(invalid_argument) naming both sizes.
  static Tensor wrap(const runtime::Device& device, const dnn::TensorDesc& desc, void* data, std::size_t bytes);

  bool defined() const { return data_ != nullptr; }
  const dnn::TensorDesc& desc() const { return desc_; }
  DType dtype() const { return desc_.dtype; }
  /// The storage's address and size in bytes (at least desc().bytes()).
  void* data() const { return data_; }
  std::size_t storage_bytes() const { return storage_bytes_; }
  /// The device the storage is on; throws Error(invalid_argument) for an empty tensor.
  const runtime::Device& device() const;
  /// True when the storage came from empty(), false for wrap().
  bool owns_storage() const { return owned_ != nullptr; }

  /// Copies desc().bytes() bytes from host memory. As CUDA's pageable copies: the source may be
  /// reused as soon as this returns, on every backend (the cpu backend finishes the copy first).
  /// `bytes` must equal desc().bytes().
  void copy_from_host(runtime::Stream& stream, const void* src, std::size_t bytes);
  /// Copies the tensor to host memory and waits for it; `bytes` must equal desc().bytes().
  void copy_to_host(runtime::Stream& stream, void* dst, std::size_t bytes) const;
  /// The elements as a host vector of T (float for f32, std::uint16_t bit patterns for f16/bf16,
  /// std::int32_t for i32, std::int8_t for i8); waits for the copy. A T of another size throws.
  template <class T>
  std::vector<T> to_host(runtime::Stream& stream) const {
    static_assert(std::is_trivially_copyable_v<T>);
    check_host_type(sizeof(T), "to_host");
    std::vector<T> out(static_cast<std::size_t>(desc_.elements()));
    copy_to_host(stream, out.data(), out.size() * sizeof(T));
    return out;
  }

  /// A view of the same storage with row-major `dims` (one entry may be -1: inferred), as
  /// torch's view(): the elements must be row-major contiguous and their count unchanged, else
  /// Error(invalid_argument) says so (a permuted or NHWC tensor needs a copy by dnn::transpose or
  /// dnn::reorder first). The view shares ownership of the storage.
  Tensor reshaped(const std::vector<std::int64_t>& dims) const;

  /// "x f32[2,3,31,29] strides [...] on cpu (owned, 21576 bytes)" for messages.
  std::string to_string() const;

 private:
  void check_host_type(std::size_t element_bytes, const char* what) const;

  dnn::TensorDesc desc_;
  runtime::Device device_;
  void* data_ = nullptr;
  std::size_t storage_bytes_ = 0;
  std::shared_ptr<memory::Buffer> owned_;
};

/// Converts `src` into `dst`: any dtype to any dtype of f32, f16 and bf16 (round to nearest even),
/// and any strides to any strides (so NCHW <-> NHWC), as one op on `stream`. Both must be on
/// stream.device() with the same dims. Returns before the work is done, as every stream op.
void convert(runtime::Stream& stream, const Tensor& src, Tensor& dst);

}  // namespace galley
