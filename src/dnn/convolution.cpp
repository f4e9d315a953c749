#include "galley/dnn/convolution.hpp"

#include <atomic>
#include <cstdio>
#include <string>

#include "core/config.hpp"
#include "galley/core/error.hpp"
#include "galley/core/log.hpp"
#include "galley/memory/buffer.hpp"
#include "dnn/convolution_internal.hpp"

namespace galley::dnn {
namespace {

void require_pointer(const void* p, const char* what, const ConvProblem& problem) {
  if (p == nullptr) {
    throw Error(Status::invalid_argument,
                std::string("convolution_forward: ") + what + " is null for problem " + problem.key());
  }
}

std::atomic<ConvSolverPicker> g_picker{nullptr};

thread_local bool t_cmd_log_suppressed = false;

}  // namespace

detail::SuppressCmdLog::SuppressCmdLog() : previous_(t_cmd_log_suppressed) { t_cmd_log_suppressed = true; }
detail::SuppressCmdLog::~SuppressCmdLog() { t_cmd_log_suppressed = previous_; }

void set_conv_solver_picker(ConvSolverPicker picker) { g_picker.store(picker, std::memory_order_release); }

const ConvSolver& select_conv_solver(const ConvProblem& problem, const runtime::Device& device) {
  const auto solvers = conv_solvers(device.backend());
  std::string reasons;
  for (const ConvSolver* s : solvers) {
    const Applicability a = s->check(problem, device);
    if (a) return *s;
    if (log::enabled(log::Level::debug)) {
      log::debug("conv " + problem.key() + ": " + std::string(s->name()) + " rejected: " + a.reason);
    }
    reasons += "\n  " + std::string(s->name()) + ": " + a.reason;
  }
  throw Error(Status::unsupported,
              "no conv solver on " + device.name() + " accepts " + problem.key() +
                  (solvers.empty() ? std::string(" (backend has no conv solvers)") : reasons));
}

std::string conv_bench_command(const ConvProblem& problem, const runtime::Device& device,
                               std::string_view solver) {
  const char* direction = problem.direction == ConvDirection::forward         ? "1"
                          : problem.direction == ConvDirection::backward_data ? "2"
                                                                              : "4";
  std::string line = "galley bench conv " + problem.driver_flags() + " -F " + direction + " --dtype " +
                     to_string(problem.dtype) + " --layout " + to_string(problem.layout) + " --device " +
                     device.name();
  if (!solver.empty()) line += " --solver " + std::string(solver);
  return line;
}

const ConvSolver& convolution_forward(runtime::Stream& stream, const ConvProblem& problem,
                                      const TensorDesc& x_desc, const void* x, const TensorDesc& w_desc,
                                      const void* w, const TensorDesc& y_desc, void* y,
                                      const ConvSolver* solver) {
  if (problem.direction != ConvDirection::forward) {
    throw Error(Status::invalid_argument, std::string("convolution_forward: problem direction is ") +
                                              to_string(problem.direction) + ", not forward");
  }
  problem.check_tensors(x_desc, w_desc, y_desc);
  require_pointer(x, "x (input)", problem);
  require_pointer(w, "w (weights)", problem);
  require_pointer(y, "y (output)", problem);

  const runtime::Device& device = stream.device();
  if (solver == nullptr) {
    const ConvSolverPicker picker = g_picker.load(std::memory_order_acquire);
    solver = picker != nullptr ? &picker(problem, device) : &select_conv_solver(problem, device);
  } else {
    if (find_conv_solver(device.backend(), solver->name()) != solver) {
      throw Error(Status::unsupported, "conv solver '" + std::string(solver->name()) +
                                           "' is not a solver of backend '" + device.backend() +
                                           "' (device " + device.name() + ")");
    }
    const Applicability a = solver->check(problem, device);
    if (!a) {
      throw Error(Status::unsupported, "conv solver '" + std::string(solver->name()) + "' cannot do " +
                                           problem.key() + ": " + a.reason);
    }
  }

  if (!t_cmd_log_suppressed && env::config().log_cmd) {
    // One whole line per call, written at once so concurrent callers do not interleave.
    const std::string line = "galley[cmd]: " + conv_bench_command(problem, device, solver->name()) + "\n";
    std::fputs(line.c_str(), stderr);
  }

  const std::size_t ws_bytes = solver->workspace_bytes(problem, device);
  // Stream-ordered: freed when this returns, reused only by work enqueued after the solver's.
  const memory::Buffer workspace = memory::allocate(stream, ws_bytes);
  const ConvArgs args{x, w, y, workspace.data(), ws_bytes};
  solver->run(stream, problem, args);
  return *solver;
}

const ConvSolver& convolution_forward(runtime::Stream& stream, const ConvProblem& problem, const void* x,
                                      const void* w, void* y, const ConvSolver* solver) {
  problem.validate();
  return convolution_forward(stream, problem, problem.x_desc(), x, problem.w_desc(), w, problem.y_desc(), y,
                             solver);
}

}  // namespace galley::dnn
