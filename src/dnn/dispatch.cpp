#include "dnn/dispatch.hpp"

#include <atomic>
#include <cstdio>
#include <string>

#include "core/config.hpp"
#include "dnn/traced_key.hpp"
#include "galley/core/error.hpp"
#include "galley/core/log.hpp"
#include "galley/memory/buffer.hpp"
#include "profile/tracer.hpp"

namespace galley::dnn {
namespace {

std::atomic<SolverPicker> g_picker{nullptr};

thread_local bool t_cmd_log_suppressed = false;
thread_local bool t_reference_only = false;

// The first reference solver of the device's list that accepts the problem.
const SolverBase& select_reference(ProblemRef problem, const runtime::Device& device) {
  std::string refused;
  for (const SolverBase* s : solvers_of(device.backend(), problem.kind())) {
    if (!s->is_reference()) continue;
    const Applicability a = s->check_any(problem, device);
    if (a) return *s;
    refused += "; " + std::string(s->name()) + ": " + a.reason;
  }
  throw Error(Status::unsupported, "no reference solver of " + device.name() + " accepts " + problem.key() + refused);
}

}  // namespace

detail::SuppressCmdLog::SuppressCmdLog() : previous_(t_cmd_log_suppressed) { t_cmd_log_suppressed = true; }
detail::ReferenceSolversOnly::ReferenceSolversOnly() : previous_(t_reference_only) { t_reference_only = true; }
detail::ReferenceSolversOnly::~ReferenceSolversOnly() { t_reference_only = previous_; }
detail::SuppressCmdLog::~SuppressCmdLog() { t_cmd_log_suppressed = previous_; }

void set_solver_picker(SolverPicker picker) { g_picker.store(picker, std::memory_order_release); }

const SolverBase& select_solver(ProblemRef problem, const runtime::Device& device) {
  const auto solvers = solvers_of(device.backend(), problem.kind());
  std::string reasons;
  for (const SolverBase* s : solvers) {
    const Applicability a = s->check_any(problem, device);
    if (a) return *s;
    if (log::enabled(log::Level::debug)) {
      log::debug(problem.key() + ": " + std::string(s->name()) + " rejected: " + a.reason);
    }
    reasons += "\n  " + std::string(s->name()) + ": " + a.reason;
  }
  throw Error(Status::unsupported, std::string("no ") + to_string(problem.kind()) + " solver on " + device.name() +
                                       " accepts " + problem.key() +
                                       (solvers.empty() ? std::string(" (backend has no such solvers)") : reasons));
}

namespace {

void log_command(ProblemRef problem, const runtime::Device& device, const SolverBase& solver) {
  if (!t_cmd_log_suppressed && env::config().log_cmd) {
    // One whole line per call, written at once so concurrent callers do not interleave.
    const std::string line = "galley[cmd]: " + problem.ops->bench_command(problem.problem, device, solver.name()) + "\n";
    std::fputs(line.c_str(), stderr);
  }
}

profile::OpInfo op_info(const char* op, runtime::Stream& stream, ProblemRef problem) {
  return profile::OpInfo{profile::Text::interned(op), profile::Text::interned(stream.device().name()), stream.id(),
                         traced_key(problem)};
}

void run_choice(runtime::Stream& stream, ProblemRef problem, OpArgs& args, const Choice& choice) {
  const std::size_t ws_bytes = choice.solver->workspace_bytes_any(problem, stream.device(), choice.config.get());
  // Stream-ordered: freed when this returns, reused only by work enqueued after the solver's.
  const memory::Buffer workspace = memory::allocate(stream, ws_bytes);
  args.workspace = workspace.data();
  args.workspace_bytes = ws_bytes;
  choice.solver->run_any(stream, problem, args, choice.config.get());
}

}  // namespace

const SolverBase& execute(const char* op, runtime::Stream& stream, ProblemRef problem, OpArgs args,
                          const SolverBase* solver, CallReport* report) {
  problem.validate();
  profile::OpScope trace([&] { return op_info(op, stream, problem); });
  for (const TensorArg& t : problem.tensors()) {
    if (args.get(t.id) == nullptr) {
      throw Error(Status::invalid_argument,
                  std::string(op) + ": " + std::string(t.name) + " is null for problem " + problem.key());
    }
  }
  const runtime::Device& device = stream.device();
  Choice choice;
  if (solver == nullptr && t_reference_only) {
    choice.solver = &select_reference(problem, device);
    if (report != nullptr) *report = CallReport{std::string(choice.solver->name()), {}, false, "reference"};
  } else if (solver == nullptr) {
    const SolverPicker picker = g_picker.load(std::memory_order_acquire);
    if (picker != nullptr) {
      choice = picker(problem, device, report);
    } else {
      choice.solver = &select_solver(problem, device);
      if (report != nullptr) *report = CallReport{std::string(choice.solver->name()), {}, false, "list order"};
    }
  } else {
    if (solver->kind() != problem.kind() ||
        find_solver(device.backend(), problem.kind(), solver->name()) != solver) {
      throw Error(Status::unsupported, std::string(to_string(problem.kind())) + " solver '" +
                                           std::string(solver->name()) + "' is not a solver of backend '" +
                                           device.backend() + "' (device " + device.name() + ")");
    }
    const Applicability a = solver->check_any(problem, device);
    if (!a) {
      throw Error(Status::unsupported,
                  "solver '" + std::string(solver->name()) + "' cannot do " + problem.key() + ": " + a.reason);
    }
    choice.solver = solver;
    if (report != nullptr) *report = CallReport{std::string(solver->name()), {}, false, "explicit"};
  }
  trace.set_solver(choice.solver->name());
  log_command(problem, device, *choice.solver);
  run_choice(stream, problem, args, choice);
  return *choice.solver;
}

void execute_choice(const char* op, runtime::Stream& stream, ProblemRef problem, OpArgs args, const Choice& choice) {
  // The same checks a user's call with a named solver pays, so that timing sees that host work.
  problem.validate();
  profile::OpScope trace([&] { return op_info(op, stream, problem); });
  trace.set_solver(choice.solver->name());
  for (const TensorArg& t : problem.tensors()) {
    if (args.get(t.id) == nullptr) {
      throw Error(Status::invalid_argument,
                  std::string(op) + ": " + std::string(t.name) + " is null for problem " + problem.key());
    }
  }
  const Applicability a = choice.solver->check_any(problem, stream.device());
  if (!a) {
    throw Error(Status::unsupported,
                "solver '" + std::string(choice.solver->name()) + "' cannot do " + problem.key() + ": " + a.reason);
  }
  log_command(problem, stream.device(), *choice.solver);
  run_choice(stream, problem, args, choice);
}

const SolverBase& execute(const char* op, runtime::Stream& stream, ProblemRef problem,
                          std::initializer_list<std::pair<ArgId, const Tensor*>> tensors, const SolverBase* solver,
                          CallReport* report, std::shared_ptr<PreparedWeights> prepared) {
  problem.validate();
  OpArgs args;
  args.prepared = std::move(prepared);
  for (const TensorArg& want : problem.tensors()) {
    const Tensor* t = nullptr;
    for (const auto& [id, given] : tensors) {
      if (id == want.id) t = given;
    }
    const std::string what = std::string(op) + ": " + std::string(want.name);
    if (t == nullptr || !t->defined()) throw Error(Status::invalid_argument, what + " is missing (an empty tensor)");
    if (!(t->device() == stream.device())) {
      throw Error(Status::invalid_argument,
                  what + " is on " + t->device().name() + ", but the stream is on " + stream.device().name());
    }
    if (t->desc() != want.desc) {
      throw Error(Status::invalid_argument,
                  what + " is " + t->desc().to_string() + ", the problem needs " + want.desc.to_string());
    }
    if (t->storage_bytes() < want.desc.bytes()) {
      throw Error(Status::invalid_argument, what + " holds " + std::to_string(t->storage_bytes()) +
                                                " bytes, the problem needs " + std::to_string(want.desc.bytes()));
    }
    if (reinterpret_cast<std::uintptr_t>(t->data()) % size_of(want.desc.dtype) != 0) {
      throw Error(Status::invalid_argument, what + " is not aligned to its " +
                                                std::to_string(size_of(want.desc.dtype)) + "-byte elements");
    }
    args.set(want.id, t->data());
  }
  return execute(op, stream, problem, args, solver, report);
}

}  // namespace galley::dnn
