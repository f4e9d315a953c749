#include "backends/cpu/datamove_solvers.hpp"

#include <string>

#include "backends/cpu/datamove_kernels.hpp"
#include "dnn/datamove_plan.hpp"

namespace galley::backends::cpu {
namespace {

using dnn::Applicability;
using dnn::DataMoveArgs;

template <class P>
class CpuSolver : public dnn::Solver<P> {
 public:
  explicit CpuSolver(const char* name) : name_(name) {}
  std::string_view name() const override { return name_; }
  Applicability check(const P&, const runtime::Device& device) const override {
    if (!device.is_cpu()) return Applicability::no("runs on the cpu backend only, not " + device.name());
    return Applicability::yes();
  }

 protected:
  template <class Fn>
  void enqueue(runtime::Stream& stream, Fn fn) const {
    stream.launch(name_, [&] { stream.host_task(std::move(fn)); });
  }

 private:
  const char* name_;
};

class ConcatCopy final : public CpuSolver<dnn::ConcatProblem> {
 public:
  ConcatCopy() : CpuSolver("cpu.concat.copy") {}
  void run(runtime::Stream& stream, const dnn::ConcatProblem& p, const DataMoveArgs& a) const override {
    enqueue(stream, [plan = dnn::parts_plan(p), a] { run_parts(plan, true, a.dst, a.multi.data()); });
  }
};

class SplitCopy final : public CpuSolver<dnn::SplitProblem> {
 public:
  SplitCopy() : CpuSolver("cpu.split.copy") {}
  void run(runtime::Stream& stream, const dnn::SplitProblem& p, const DataMoveArgs& a) const override {
    enqueue(stream, [plan = dnn::parts_plan(p), a] {
      run_parts(plan, false, const_cast<void*>(a.src), a.multi.data());
    });
  }
};

class TransposeBlocked final : public CpuSolver<dnn::TransposeProblem> {
 public:
  TransposeBlocked() : CpuSolver("cpu.transpose.blocked") {}
  void run(runtime::Stream& stream, const dnn::TransposeProblem& p, const DataMoveArgs& a) const override {
    enqueue(stream, [plan = dnn::copy_plan(p), a] { run_copy_plan(plan, a.src, a.dst); });
  }
};

class ReorderBlocked final : public CpuSolver<dnn::ReorderProblem> {
 public:
  ReorderBlocked() : CpuSolver("cpu.reorder.blocked") {}
  void run(runtime::Stream& stream, const dnn::ReorderProblem& p, const DataMoveArgs& a) const override {
    enqueue(stream, [plan = dnn::copy_plan(p), a] { run_copy_plan(plan, a.src, a.dst); });
  }
};

class PadCopy final : public CpuSolver<dnn::PadProblem> {
 public:
  PadCopy() : CpuSolver("cpu.pad.copy") {}
  void run(runtime::Stream& stream, const dnn::PadProblem& p, const DataMoveArgs& a) const override {
    if (p.direction == dnn::PadDirection::forward) {
      enqueue(stream, [plan = dnn::pad_plan(p), a] { run_pad(plan, a.src, a.dst); });
    } else {
      enqueue(stream, [plan = dnn::crop_plan(p), a] { run_copy_plan(plan, a.src, a.dst); });
    }
  }
};

}  // namespace

std::unique_ptr<dnn::Solver<dnn::ConcatProblem>> make_concat_copy() { return std::make_unique<ConcatCopy>(); }
std::unique_ptr<dnn::Solver<dnn::SplitProblem>> make_split_copy() { return std::make_unique<SplitCopy>(); }
std::unique_ptr<dnn::Solver<dnn::TransposeProblem>> make_transpose_blocked() {
  return std::make_unique<TransposeBlocked>();
}
std::unique_ptr<dnn::Solver<dnn::ReorderProblem>> make_reorder_blocked() {
  return std::make_unique<ReorderBlocked>();
}
std::unique_ptr<dnn::Solver<dnn::PadProblem>> make_pad_copy() { return std::make_unique<PadCopy>(); }

}  // namespace galley::backends::cpu
