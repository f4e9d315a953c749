// The single-source gpu.eltwise.* solvers: check / workspace / run glue over eltwise_kernels.cu.
#include <string>

#include "conv_device.cuh"
#include "eltwise_kernels.hpp"
#include "eltwise_solvers.hpp"
#include "galley/runtime/device.hpp"
#include "galley/runtime/stream.hpp"

namespace galley::backends::gpu {
namespace {

using dnn::Applicability;
using dnn::EltwiseArgs;
using dnn::EltwiseProblem;

class EltwiseGpuSolver : public dnn::EltwiseSolver {
 public:
  EltwiseGpuSolver(std::string name, std::string_view backend, bool dense)
      : name_(std::move(name)), backend_(backend), dense_(dense) {}
  std::string_view name() const override { return name_; }

  Applicability check(const EltwiseProblem& p, const runtime::Device& device) const override {
    if (device.backend() != backend_)
      return Applicability::no("runs on " + backend_ + " devices, not " + device.name());
    const dnn::EltwiseGeometry g = dnn::eltwise_geometry(p);
    if (std::string why = eltwise_too_large(g); !why.empty()) return Applicability::no(why);
    if (dense_) {
      if (p.direction == dnn::EltwiseDirection::forward && g.rank != 1) {
        return Applicability::no("a " + dnn::shape_text(p.a) + " and b " + dnn::shape_text(p.b) +
                                 " broadcast along some axes: needs equal shapes or a single-value input");
      }
      if (p.direction == dnn::EltwiseDirection::backward && (!g.a_full() || !g.b_full())) {
        return Applicability::no("backward with a broadcast input needs a reduction: equal shapes only");
      }
    }
    return Applicability::yes();
  }

  std::size_t workspace_bytes(const EltwiseProblem& p, const runtime::Device&) const override {
    return eltwise_workspace_bytes(p, dnn::eltwise_geometry(p));
  }

  void run(runtime::Stream& stream, const EltwiseProblem& p, const EltwiseArgs& args) const override {
    const dnn::EltwiseGeometry g = dnn::eltwise_geometry(p);
    const std::size_t needed = eltwise_workspace_bytes(p, g);
    if (args.workspace_bytes < needed) {
      throw Error(Status::invalid_argument, name_ + ": workspace of " + std::to_string(args.workspace_bytes) +
                                                " bytes, needs " + std::to_string(needed));
    }
    stream.launch(name_, [&] {
      ScopedDevice device(stream.device().index());
      const EltwiseLaunch l{p,
                            g,
                            args.a,
                            args.b,
                            args.dst,
                            args.dy,
                            args.da,
                            args.db,
                            args.workspace,
                            stream.native_handle(),
                            name_.c_str()};
      if (p.direction == dnn::EltwiseDirection::forward) {
        launch_eltwise_forward(l, g.rank == 1);
      } else {
        launch_eltwise_backward(l);
      }
    });
  }

 private:
  std::string name_, backend_;
  bool dense_;
};

}  // namespace

std::unique_ptr<dnn::EltwiseSolver> make_eltwise_dense(std::string_view backend) {
  return std::make_unique<EltwiseGpuSolver>("gpu.eltwise.dense", backend, true);
}

std::unique_ptr<dnn::EltwiseSolver> make_eltwise_broadcast(std::string_view backend) {
  return std::make_unique<EltwiseGpuSolver>("gpu.eltwise.broadcast", backend, false);
}

}  // namespace galley::backends::gpu
