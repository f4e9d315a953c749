// galley::Tensor: storage bookkeeping, host copies and dtype/layout conversion.
#include <cstring>
#include <string>
#include <vector>

#include "dnn/tensor_data.hpp"
#include "galley/core/error.hpp"
#include "galley/dnn/data_movement.hpp"
#include "galley/memory/buffer.hpp"
#include "galley/tensor.hpp"

namespace galley {
namespace {

[[noreturn]] void bad(const std::string& message) { throw Error(Status::invalid_argument, message); }

// Element offset of the i-th element in logical N, C, H, W order.
std::int64_t offset_of(const dnn::TensorDesc& d, std::int64_t i) {
  std::int64_t off = 0;
  for (int axis = 3; axis >= 0; --axis) {
    off += (i % d.dims[axis]) * d.strides[axis];
    i /= d.dims[axis];
  }
  return off;
}

// Host conversion of one whole tensor: read every element of `src` through its strides as float,
// write it to `dst` through its strides.
void convert_on_host(const dnn::TensorDesc& sd, const std::byte* src, const dnn::TensorDesc& dd, std::byte* dst) {
  const std::int64_t n = sd.elements();
  const std::size_t se = size_of(sd.dtype), de = size_of(dd.dtype);
  for (std::int64_t i = 0; i < n; ++i) {
    float v = 0;
    dnn::to_float(sd.dtype, src + offset_of(sd, i) * static_cast<std::int64_t>(se), &v, 1);
    dnn::from_float(dd.dtype, &v, dst + offset_of(dd, i) * static_cast<std::int64_t>(de), 1);
  }
}

bool convertible(DType t) { return t == DType::f32 || t == DType::f16 || t == DType::bf16; }

}  // namespace

Tensor Tensor::empty(runtime::Stream& stream, const dnn::TensorDesc& desc) {
  desc.validate("Tensor::empty");
  Tensor t;
  t.desc_ = desc;
  t.device_ = stream.device();
  t.owned_ = std::make_shared<memory::Buffer>(memory::allocate(stream, desc.bytes()));
  t.data_ = t.owned_->data();
  t.storage_bytes_ = desc.bytes();
  return t;
}

Tensor Tensor::wrap(const runtime::Device& device, const dnn::TensorDesc& desc, void* data, std::size_t bytes) {
  desc.validate("Tensor::wrap");
  if (data == nullptr) bad("Tensor::wrap: data is null for " + desc.to_string());
  if (bytes < desc.bytes()) {
    bad("Tensor::wrap: " + std::to_string(bytes) + " bytes at the pointer, but " + desc.to_string() + " spans " +
        std::to_string(desc.bytes()) + " bytes");
  }
  if (reinterpret_cast<std::uintptr_t>(data) % size_of(desc.dtype) != 0) {
    bad("Tensor::wrap: the pointer is not aligned to the " + std::to_string(size_of(desc.dtype)) + "-byte elements of " +
        desc.to_string());
  }
  Tensor t;
  t.desc_ = desc;
  t.device_ = device;
  t.data_ = data;
  t.storage_bytes_ = bytes;
  return t;
}

const runtime::Device& Tensor::device() const {
  if (!defined()) bad("empty Tensor has no device");
  return device_;
}

std::string Tensor::to_string() const {
  if (!defined()) return "empty tensor";
  return desc_.to_string() + " on " + device_.name() + " (" + (owned_ ? "owned" : "wrapped") + ", " +
         std::to_string(storage_bytes_) + " bytes)";
}

void Tensor::check_host_type(std::size_t element_bytes, const char* what) const {
  if (!defined()) bad(std::string("Tensor::") + what + ": empty tensor");
  if (element_bytes != size_of(desc_.dtype)) {
    bad(std::string("Tensor::") + what + ": a host element of " + std::to_string(element_bytes) + " bytes for " +
        galley::to_string(desc_.dtype) + " elements of " + std::to_string(size_of(desc_.dtype)) + " bytes");
  }
}

void Tensor::copy_from_host(runtime::Stream& stream, const void* src, std::size_t bytes) {
  if (!defined()) bad("Tensor::copy_from_host: empty tensor");
  if (bytes != desc_.bytes()) {
    bad("Tensor::copy_from_host: " + std::to_string(bytes) + " bytes given for " + desc_.to_string() + " of " +
        std::to_string(desc_.bytes()) + " bytes");
  }
  if (!(stream.device() == device_)) {
    bad("Tensor::copy_from_host: the tensor is on " + device_.name() + ", the stream on " + stream.device().name());
  }
  stream.copy_h2d(data_, src, bytes);
  // A cpu stream copies later, on its worker: finish now, so the caller may reuse `src` at once as
  // CUDA's pageable copies allow.
  if (device_.is_cpu()) stream.synchronize();
}

void Tensor::copy_to_host(runtime::Stream& stream, void* dst, std::size_t bytes) const {
  if (!defined()) bad("Tensor::copy_to_host: empty tensor");
  if (bytes != desc_.bytes()) {
    bad("Tensor::copy_to_host: " + std::to_string(bytes) + " bytes given for " + desc_.to_string() + " of " +
        std::to_string(desc_.bytes()) + " bytes");
  }
  if (!(stream.device() == device_)) {
    bad("Tensor::copy_to_host: the tensor is on " + device_.name() + ", the stream on " + stream.device().name());
  }
  stream.copy_d2h(dst, data_, bytes);
  stream.synchronize();
}

void convert(runtime::Stream& stream, const Tensor& src, Tensor& dst) {
  for (const Tensor* t : {&src, static_cast<const Tensor*>(&dst)}) {
    const char* name = t == &src ? "src" : "dst";
    if (!t->defined()) bad(std::string("convert: ") + name + " is an empty tensor");
    if (!(t->device() == stream.device())) {
      bad(std::string("convert: ") + name + " is on " + t->device().name() + ", the stream on " + stream.device().name());
    }
    if (!convertible(t->dtype())) {
      bad(std::string("convert: ") + name + " dtype " + galley::to_string(t->dtype()) + " (valid: f32, f16, bf16)");
    }
  }
  if (src.desc().dims != dst.desc().dims) {
    bad("convert: src " + src.desc().to_string() + " and dst " + dst.desc().to_string() + " differ in dims");
  }
  const dnn::TensorDesc sd = src.desc(), dd = dst.desc();
  // Row-major and packed NHWC tensors are the reorder op's: one kernel on a GPU, the threaded copy
  // on the cpu. Other strides take the element-wise path below.
  const auto reorderable = [](const dnn::TensorDesc& d) {
    return d.is_contiguous() || (d.rank == 4 && d.is_packed(dnn::Layout::nhwc));
  };
  if (reorderable(sd) && reorderable(dd)) {
    dnn::reorder(stream, src, dst);
    return;
  }
  if (stream.device().is_cpu()) {
    const std::byte* s = static_cast<const std::byte*>(src.data());
    std::byte* d = static_cast<std::byte*>(dst.data());
    stream.launch("convert", [&] { stream.host_task([sd, s, dd, d] { convert_on_host(sd, s, dd, d); }); });
    return;
  }
  // Other strides on other devices: through host memory, ordered on the stream.
  std::vector<std::byte> host_src(sd.bytes()), host_dst(dd.bytes());
  stream.copy_d2h(host_src.data(), src.data(), host_src.size());
  stream.copy_d2h(host_dst.data(), dst.data(), host_dst.size());  // keeps bytes between strided elements
  stream.synchronize();
  convert_on_host(sd, host_src.data(), dd, host_dst.data());
  stream.copy_h2d(dst.data(), host_dst.data(), host_dst.size());
  stream.synchronize();
}

}  // namespace galley
