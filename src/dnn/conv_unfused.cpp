#include "dnn/conv_unfused.hpp"

#include <optional>
#include <string>
#include <vector>

#include "dnn/dispatch.hpp"
#include "galley/core/error.hpp"
#include "galley/dnn/activation.hpp"
#include "galley/dnn/eltwise.hpp"

namespace galley::dnn {
namespace {

/// The plain solver that runs the convolution, by name.
struct InnerSolver {
  std::string solver;
  std::string to_string() const { return solver; }
  static std::optional<InnerSolver> parse(std::string_view text) {
    if (text.empty()) return std::nullopt;
    return InnerSolver{std::string(text)};
  }
  friend bool operator==(const InnerSolver&, const InnerSolver&) = default;
};

// The epilogue's ops, in the order they run, each in place on y.
EltwiseProblem bias_add(const ConvProblem& p) {
  return EltwiseProblem{.op = EltwiseOp::add,
                        .a = {p.n, p.k, p.out_h(), p.out_w()},
                        .b = {1, p.k, 1, 1},
                        .dtype = p.dtype,
                        .layout = p.layout};
}
EltwiseProblem residual_add(const ConvProblem& p) {
  return EltwiseProblem{.op = EltwiseOp::add,
                        .a = {p.n, p.k, p.out_h(), p.out_w()},
                        .b = {p.n, p.k, p.out_h(), p.out_w()},
                        .dtype = p.dtype,
                        .layout = p.layout};
}
ActivProblem activation_of(const ConvProblem& p) {
  ActivProblem a =
      ActivProblem::packed(*p.epilogue.activation, p.dtype, p.layout, p.n, p.k, p.out_h(), p.out_w());
  a.alpha = p.epilogue.alpha;
  a.beta = p.epilogue.beta;
  return a;
}

class ConvUnfused final : public TunableSolver<ConvProblem, InnerSolver> {
 public:
  explicit ConvUnfused(std::string_view backend)
      : backend_(backend), name_(std::string(backend) + ".conv.unfused") {}

  std::string_view name() const override { return name_; }
  bool implements_fused_parts() const override { return true; }

  Applicability check(const ConvProblem& p, const runtime::Device& device) const override {
    if (device.backend() != backend_)
      return Applicability::no("runs on backend " + backend_ + " only, not " + device.name());
    if (p.direction != ConvDirection::forward) {
      return Applicability::no(std::string("forward only, not ") + to_string(p.direction));
    }
    if (!p.has_epilogue()) return Applicability::no("no epilogue: the plain solvers run a plain convolution");
    if (first_plain(p, device) == nullptr) {
      return Applicability::no("no plain solver of " + device.name() + " accepts " + p.plain().key());
    }
    // The epilogue ops must have solvers here too (select_solver says which refuse, and why).
    try {
      if (p.epilogue.bias) select_solver(ProblemRef::of(bias_add(p)), device);
      if (p.epilogue.residual) select_solver(ProblemRef::of(residual_add(p)), device);
      if (p.epilogue.activation) select_solver(ProblemRef::of(activation_of(p)), device);
    } catch (const Error& e) {
      return Applicability::no(std::string("an epilogue op has no solver: ") + e.what());
    }
    return Applicability::yes();
  }

  std::vector<InnerSolver> candidates(const ConvProblem& p, const runtime::Device& device) const override {
    const ConvProblem plain = p.plain();
    std::vector<InnerSolver> out;
    const SolverBase* reference = nullptr;
    for (const SolverBase* s : solvers_of(device.backend(), OpKind::conv)) {
      if (!s->check_any(ProblemRef::of(plain), device)) continue;
      if (s->is_reference()) {
        if (reference == nullptr) reference = s;
        continue;
      }
      out.push_back({std::string(s->name())});
    }
    // The reference only when nothing faster accepts the problem.
    if (out.empty() && reference != nullptr) out.push_back({std::string(reference->name())});
    return out;
  }

  std::size_t workspace_bytes(const ConvProblem& p, const runtime::Device& device,
                              const InnerSolver& config) const override {
    return inner(device, config).workspace_bytes_any(ProblemRef::of(p.plain()), device, nullptr);
  }

  void run(runtime::Stream& stream, const ConvProblem& p, const ConvArgs& args,
           const InnerSolver& config) const override {
    const runtime::Device& device = stream.device();
    const ConvProblem plain = p.plain();
    OpArgs conv;
    conv.set(ArgId::src, args.x);
    conv.set(ArgId::wei, args.w);
    conv.set(ArgId::dst, args.y);
    conv.workspace = args.workspace;
    conv.workspace_bytes = args.workspace_bytes;
    conv.prepared = args.prepared;
    inner(device, config).run_any(stream, ProblemRef::of(plain), conv, nullptr);

    // Each op of the epilogue in place on y, through its list's first solver (never the tuner:
    // this runs inside the tuner's own timing of this solver).
    const detail::SuppressCmdLog quiet;
    const auto binary = [&](const EltwiseProblem& e, const void* b) {
      const ProblemRef ref = ProblemRef::of(e);
      OpArgs a;
      a.set(ArgId::src, args.y);
      a.set(ArgId::src1, b);
      a.set(ArgId::dst, args.y);
      execute(name_.c_str(), stream, ref, a, &select_solver(ref, device));
    };
    if (p.epilogue.bias) binary(bias_add(p), args.bias);
    if (p.epilogue.residual) binary(residual_add(p), args.residual);
    if (p.epilogue.activation) {
      const ActivProblem act = activation_of(p);
      const ProblemRef ref = ProblemRef::of(act);
      OpArgs a;
      a.set(ArgId::src, args.y);
      a.set(ArgId::dst, args.y);
      execute(name_.c_str(), stream, ref, a, &select_solver(ref, device));
    }
  }

 private:
  // The first plain solver of the list, for check(): whether any runs the convolution at all.
  const SolverBase* first_plain(const ConvProblem& p, const runtime::Device& device) const {
    const ConvProblem plain = p.plain();
    for (const SolverBase* s : solvers_of(device.backend(), OpKind::conv)) {
      if (s->check_any(ProblemRef::of(plain), device)) return s;
    }
    return nullptr;
  }

  const SolverBase& inner(const runtime::Device& device, const InnerSolver& config) const {
    const SolverBase* s = find_solver(device.backend(), OpKind::conv, config.solver);
    if (s == nullptr) {
      throw Error(Status::not_found, name_ + ": no conv solver '" + config.solver + "' on " + device.name());
    }
    return *s;
  }

  std::string backend_;
  std::string name_;
};

}  // namespace

std::unique_ptr<ConvSolver> make_conv_unfused(std::string_view backend) {
  return std::make_unique<ConvUnfused>(backend);
}

}  // namespace galley::dnn
