// The single-source gpu data-movement solvers: check / run glue over the launchers of
// datamove_kernels.hpp.
#include <string>

#include "conv_device.cuh"
#include "datamove_kernels.hpp"
#include "datamove_solvers.hpp"
#include "galley/runtime/device.hpp"
#include "galley/runtime/stream.hpp"

namespace galley::backends::gpu {
namespace {

using dnn::Applicability;
using dnn::DataMoveArgs;

template <class P>
class GpuMoveSolver : public dnn::Solver<P> {
 public:
  GpuMoveSolver(std::string name, std::string backend)
      : name_(std::move(name)), backend_(std::move(backend)) {}
  std::string_view name() const override { return name_; }
  Applicability check(const P&, const runtime::Device& device) const override {
    if (device.backend() != backend_)
      return Applicability::no("runs on " + backend_ + " devices, not " + device.name());
    return Applicability::yes();
  }

 protected:
  template <class Body>
  void enqueue(runtime::Stream& stream, Body body) const {
    stream.launch(name_, [&] {
      ScopedDevice device(stream.device().index());
      body(stream.native_handle());
    });
  }

 private:
  std::string name_, backend_;
};

class ConcatCopy final : public GpuMoveSolver<dnn::ConcatProblem> {
 public:
  explicit ConcatCopy(std::string backend) : GpuMoveSolver("gpu.concat.copy", std::move(backend)) {}
  void run(runtime::Stream& stream, const dnn::ConcatProblem& p, const DataMoveArgs& a) const override {
    const dnn::PartsPlan plan = dnn::parts_plan(p);
    enqueue(stream, [&](void* s) { launch_parts(plan, true, a.dst, a.multi.data(), s); });
  }
  std::string detail(const dnn::ConcatProblem&, const runtime::Device&) const override {
    return "one launch for all inputs, 16-byte vectors where every run allows";
  }
};

class SplitCopy final : public GpuMoveSolver<dnn::SplitProblem> {
 public:
  explicit SplitCopy(std::string backend) : GpuMoveSolver("gpu.split.copy", std::move(backend)) {}
  void run(runtime::Stream& stream, const dnn::SplitProblem& p, const DataMoveArgs& a) const override {
    const dnn::PartsPlan plan = dnn::parts_plan(p);
    enqueue(stream, [&](void* s) { launch_parts(plan, false, const_cast<void*>(a.src), a.multi.data(), s); });
  }
  std::string detail(const dnn::SplitProblem&, const runtime::Device&) const override {
    return "one launch for all outputs, 16-byte vectors where every run allows";
  }
};

class TransposeTiled final : public GpuMoveSolver<dnn::TransposeProblem> {
 public:
  explicit TransposeTiled(std::string backend) : GpuMoveSolver("gpu.transpose.tiled", std::move(backend)) {}
  void run(runtime::Stream& stream, const dnn::TransposeProblem& p, const DataMoveArgs& a) const override {
    const dnn::CopyPlan plan = dnn::copy_plan(p);
    enqueue(stream, [&](void* s) { launch_copy_plan(plan, a.src, a.dst, s); });
  }
  std::string detail(const dnn::TransposeProblem& p, const runtime::Device&) const override {
    return std::string("path ") + copy_plan_path(dnn::copy_plan(p));
  }
};

class ReorderTiled final : public GpuMoveSolver<dnn::ReorderProblem> {
 public:
  explicit ReorderTiled(std::string backend) : GpuMoveSolver("gpu.reorder.tiled", std::move(backend)) {}
  void run(runtime::Stream& stream, const dnn::ReorderProblem& p, const DataMoveArgs& a) const override {
    const dnn::CopyPlan plan = dnn::copy_plan(p);
    enqueue(stream, [&](void* s) { launch_copy_plan(plan, a.src, a.dst, s); });
  }
  std::string detail(const dnn::ReorderProblem& p, const runtime::Device&) const override {
    return std::string("path ") + copy_plan_path(dnn::copy_plan(p));
  }
};

// gpu.transpose.regs / gpu.reorder.regs: launch_register_transpose where its plan conditions
// hold (checked here; pointers it cannot take go to the tiled path at run time). Another algorithm
// than the shared-memory tiles for the same problems, so the tuner times both.
template <class P>
class RegisterTranspose final : public GpuMoveSolver<P> {
 public:
  RegisterTranspose(std::string name, std::string backend)
      : GpuMoveSolver<P>(std::move(name), std::move(backend)) {}
  Applicability check(const P& p, const runtime::Device& device) const override {
    if (Applicability a = GpuMoveSolver<P>::check(p, device); !a) return a;
    std::string why;
    if (!register_transpose_applies(dnn::copy_plan(p), &why)) return Applicability::no(why);
    return Applicability::yes();
  }
  void run(runtime::Stream& stream, const P& p, const DataMoveArgs& a) const override {
    const dnn::CopyPlan plan = dnn::copy_plan(p);
    this->enqueue(stream, [&](void* s) { launch_register_transpose(plan, a.src, a.dst, s); });
  }
  std::string detail(const P&, const runtime::Device&) const override {
    return "8x8 blocks of halves (4x4 of words) a thread through registers";
  }
};

class PadCopy final : public GpuMoveSolver<dnn::PadProblem> {
 public:
  explicit PadCopy(std::string backend) : GpuMoveSolver("gpu.pad.copy", std::move(backend)) {}
  void run(runtime::Stream& stream, const dnn::PadProblem& p, const DataMoveArgs& a) const override {
    if (p.direction == dnn::PadDirection::forward) {
      const dnn::PadPlan plan = dnn::pad_plan(p);
      enqueue(stream, [&](void* s) { launch_pad(plan, a.src, a.dst, s); });
    } else {
      const dnn::CopyPlan plan = dnn::crop_plan(p);
      enqueue(stream, [&](void* s) { launch_copy_plan(plan, a.src, a.dst, s); });
    }
  }
};

}  // namespace

std::unique_ptr<dnn::Solver<dnn::ConcatProblem>> make_concat_copy(std::string_view backend) {
  return std::make_unique<ConcatCopy>(std::string(backend));
}
std::unique_ptr<dnn::Solver<dnn::SplitProblem>> make_split_copy(std::string_view backend) {
  return std::make_unique<SplitCopy>(std::string(backend));
}
std::unique_ptr<dnn::Solver<dnn::TransposeProblem>> make_transpose_tiled(std::string_view backend) {
  return std::make_unique<TransposeTiled>(std::string(backend));
}
std::unique_ptr<dnn::Solver<dnn::TransposeProblem>> make_transpose_regs(std::string_view backend) {
  return std::make_unique<RegisterTranspose<dnn::TransposeProblem>>("gpu.transpose.regs",
                                                                    std::string(backend));
}
std::unique_ptr<dnn::Solver<dnn::ReorderProblem>> make_reorder_regs(std::string_view backend) {
  return std::make_unique<RegisterTranspose<dnn::ReorderProblem>>("gpu.reorder.regs", std::string(backend));
}
std::unique_ptr<dnn::Solver<dnn::PadProblem>> make_pad_copy(std::string_view backend) {
  return std::make_unique<PadCopy>(std::string(backend));
}
std::unique_ptr<dnn::Solver<dnn::ReorderProblem>> make_reorder_tiled(std::string_view backend) {
  return std::make_unique<ReorderTiled>(std::string(backend));
}

}  // namespace galley::backends::gpu
