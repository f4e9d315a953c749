// cuda.eltwise.cudnn: cudnnOpTensor, C = op(alpha1 A, alpha2 B), as the vendor baseline of the
// forward elementwise ops. What cuDNN cannot do is refused with the reason: its ops are ADD and MUL
// (sub is ADD with alpha2 = -beta; there is no division), A must have C's shape and only B may be
// broadcast (a broadcast a is swapped into B's place, as is a b that dst overwrites), dims and strides are
// 32-bit, and there is no backward. The descriptors are made per call: host microseconds next to a
// bandwidth-bound kernel, and no cache to keep in step with the devices.
#include <cudnn.h>

#include <climits>
#include <string>
#include <utility>
#include <vector>

#include "backends/cuda/cudnn_handle.hpp"
#include "backends/cuda/runtime_check.hpp"
#include "backends/cuda/vendor_dtypes.hpp"
#include "backends/cuda/vendor_eltwise_solvers.hpp"
#include "galley/runtime/device.hpp"
#include "galley/runtime/stream.hpp"

namespace galley::backends::cuda {
namespace {

using dnn::Applicability;
using dnn::EltwiseOp;
using dnn::EltwiseProblem;

constexpr const char* kName = "cuda.eltwise.cudnn";

void check_status(cudnnStatus_t status, const char* call) { check_cudnn_status(status, kName, call); }

// The descriptors of a call: which problem input cuDNN sees as A (dst-shaped) and which as B.
struct OpTensorForm {
  bool swapped = false;  // cuDNN's A is the problem's b
  cudnnOpTensorOp_t op = CUDNN_OP_TENSOR_ADD;
  float alpha1 = 1, alpha2 = 1;
};

// The form for `p`, or the reason there is none. `dst_is_b`: the call writes over b, and cuDNN
// allows C to be B only when it is A too, so b (of dst's shape then) takes A's place.
std::pair<OpTensorForm, std::string> form_of(const EltwiseProblem& p, bool dst_is_b = false) {
  OpTensorForm f;
  if (p.op == EltwiseOp::div) return {f, "cudnnOpTensor has no division"};
  const std::vector<std::int64_t> out = p.dst_shape();
  const bool a_full = p.a == out, b_full = p.b == out;
  if (!a_full && !b_full) {
    return {f, "cudnnOpTensor broadcasts B only: one input must have dst's shape " + dnn::shape_text(out)};
  }
  // A lower-rank input is described with leading 1s (TensorDescriptor), the same tensor by NumPy's rules.
  f.swapped = !a_full || (dst_is_b && b_full);
  f.op = p.op == EltwiseOp::mul ? CUDNN_OP_TENSOR_MUL : CUDNN_OP_TENSOR_ADD;
  const float sign = p.op == EltwiseOp::sub ? -1.0f : 1.0f;
  f.alpha1 = f.swapped ? sign * p.beta : p.alpha;
  f.alpha2 = f.swapped ? p.alpha : sign * p.beta;
  return {f, {}};
}

// An Nd descriptor of `desc` padded with leading 1s to `rank` (cuDNN wants at least 4 dims).
class TensorDescriptor {
 public:
  TensorDescriptor(const dnn::TensorDesc& desc, int rank) {
    check_status(cudnnCreateTensorDescriptor(&d_), "cudnnCreateTensorDescriptor");
    std::vector<int> dims(static_cast<std::size_t>(rank), 1), strides(static_cast<std::size_t>(rank), 1);
    const int shift = rank - desc.rank;
    std::int64_t outer = 1;
    for (int i = 0; i < desc.rank; ++i) outer = std::max(outer, desc.strides[i] * desc.dims[i]);
    for (int i = 0; i < rank; ++i) {
      if (i < shift) {
        strides[static_cast<std::size_t>(i)] = static_cast<int>(outer);
      } else {
        dims[static_cast<std::size_t>(i)] = static_cast<int>(desc.dims[i - shift]);
        strides[static_cast<std::size_t>(i)] = static_cast<int>(desc.strides[i - shift]);
      }
    }
    const cudnnStatus_t st =
        cudnnSetTensorNdDescriptor(d_, cudnn_data_type(desc.dtype, kName), rank, dims.data(), strides.data());
    if (st != CUDNN_STATUS_SUCCESS) {
      cudnnDestroyTensorDescriptor(d_);
      check_status(st, "cudnnSetTensorNdDescriptor");
    }
  }
  ~TensorDescriptor() { cudnnDestroyTensorDescriptor(d_); }
  TensorDescriptor(const TensorDescriptor&) = delete;
  TensorDescriptor& operator=(const TensorDescriptor&) = delete;
  cudnnTensorDescriptor_t get() const { return d_; }

 private:
  cudnnTensorDescriptor_t d_ = nullptr;
};

class OpTensorDescriptor {
 public:
  explicit OpTensorDescriptor(cudnnOpTensorOp_t op) {
    check_status(cudnnCreateOpTensorDescriptor(&d_), "cudnnCreateOpTensorDescriptor");
    const cudnnStatus_t st = cudnnSetOpTensorDescriptor(d_, op, CUDNN_DATA_FLOAT, CUDNN_PROPAGATE_NAN);
    if (st != CUDNN_STATUS_SUCCESS) {
      cudnnDestroyOpTensorDescriptor(d_);
      check_status(st, "cudnnSetOpTensorDescriptor");
    }
  }
  ~OpTensorDescriptor() { cudnnDestroyOpTensorDescriptor(d_); }
  OpTensorDescriptor(const OpTensorDescriptor&) = delete;
  OpTensorDescriptor& operator=(const OpTensorDescriptor&) = delete;
  cudnnOpTensorDescriptor_t get() const { return d_; }

 private:
  cudnnOpTensorDescriptor_t d_ = nullptr;
};

class CudnnEltwise final : public dnn::EltwiseSolver {
 public:
  std::string_view name() const override { return kName; }

  Applicability check(const EltwiseProblem& p, const runtime::Device& device) const override {
    if (device.backend() != "cuda") return Applicability::no("runs on cuda devices, not " + device.name());
    if (p.direction != dnn::EltwiseDirection::forward)
      return Applicability::no("forward only (cudnnOpTensor)");
    if (const std::string why = form_of(p).second; !why.empty()) return Applicability::no(why);
    if (p.dst_desc().elements() > INT_MAX)
      return Applicability::no("more than 2^31 - 1 elements (cuDNN's int dims)");
    return Applicability::yes();
  }

  void run(runtime::Stream& stream, const EltwiseProblem& p, const dnn::EltwiseArgs& args) const override {
    const auto [form, why] = form_of(p, args.b == args.dst && args.a != args.dst);
    if (!why.empty()) throw Error(Status::unsupported, std::string(kName) + ": " + why);
    const dnn::TensorDesc out = p.dst_desc();
    const int rank = std::max(4, out.rank);
    const dnn::TensorDesc in_a = form.swapped ? p.b_desc() : p.a_desc();
    const dnn::TensorDesc in_b = form.swapped ? p.a_desc() : p.b_desc();
    const void* ptr_a = form.swapped ? args.b : args.a;
    const void* ptr_b = form.swapped ? args.a : args.b;
    CudnnHandle& h = cudnn_handle(stream.device());
    stream.launch(kName, [&] {
      DeviceGuard guard(stream.device().index());
      const TensorDescriptor da(in_a, rank), db(in_b, rank), dc(out, rank);
      const OpTensorDescriptor op(form.op);
      std::lock_guard lock(h.mutex);
      check_status(h.set_stream(static_cast<cudaStream_t>(stream.native_handle()), stream.id()),
                   "cudnnSetStream");
      const float zero = 0.f;
      check_status(cudnnOpTensor(h.handle, op.get(), &form.alpha1, da.get(), ptr_a, &form.alpha2, db.get(),
                                 ptr_b, &zero, dc.get(), args.dst),
                   "cudnnOpTensor");
    });
  }
};

}  // namespace

std::unique_ptr<dnn::EltwiseSolver> make_cudnn_eltwise_solver() { return std::make_unique<CudnnEltwise>(); }

}  // namespace galley::backends::cuda
