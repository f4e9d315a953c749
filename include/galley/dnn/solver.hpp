// The op-generic solver interface and the ordered per-backend solver lists (oneDNN's
// implementation lists): one base for every op kind, typed per problem by Solver<P>.
#pragma once

#include <concepts>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "galley/core/error.hpp"
#include "galley/dnn/problem.hpp"
#include "galley/runtime/device.hpp"
#include "galley/runtime/stream.hpp"

namespace galley::dnn {

/// The answer of a cheap check(): yes, or no with a reason a person can read.
struct Applicability {
  bool ok = true;
  std::string reason;  ///< empty when ok
  static Applicability yes() { return {}; }
  static Applicability no(std::string why) { return {false, std::move(why)}; }
  explicit operator bool() const { return ok; }
};

/// A parsed inner choice of one solver (a tile plan, a vendor engine config), opaque to all but
/// that solver. Null for a solver without inner choices.
using ConfigHandle = std::shared_ptr<const void>;

/// One algorithm for one op kind. Stateless after construction: check() is cheap and has no side
/// effects; run() is const and thread-safe, and only enqueues work on the stream. The registry,
/// dispatcher and tuner use the type-erased `*_any` entry points; solvers implement Solver<P>.
class SolverBase {
 public:
  virtual ~SolverBase() = default;
  /// The one name used in code, logs, find-db rows, traces and CLI filters ("cpu.conv.im2col_gemm").
  virtual std::string_view name() const = 0;
  virtual OpKind kind() const = 0;
  /// Reference solvers are slow and exist for verification; the tuner never times them when
  /// another solver applies.
  virtual bool is_reference() const { return false; }
  /// Naive fallbacks (one thread per output) claim every problem of their kind so that one solver
  /// always runs, and are far slower than the others wherever those apply: the tuner times them
  /// only when no other non-reference solver applies, as MIOpen leaves its naive kernels out of
  /// its search.
  virtual bool is_fallback() const { return false; }

  virtual Applicability check_any(ProblemRef problem, const runtime::Device& device) const = 0;
  /// `config` null: the solver's default choice.
  virtual std::size_t workspace_bytes_any(ProblemRef problem, const runtime::Device& device,
                                          const void* config = nullptr) const = 0;
  virtual void run_any(runtime::Stream& stream, ProblemRef problem, const OpArgs& args,
                       const void* config = nullptr) const = 0;
  /// The inner choices for a problem as text, the solver's preferred first; empty for a solver
  /// without any. The tuner times each; the find-db stores the winner's text beside the solver.
  virtual std::vector<std::string> configs_any(ProblemRef problem, const runtime::Device& device) const = 0;
  /// Parses a config text (from configs_any(), or a find-db row of an earlier process): nullopt when
  /// malformed or not valid for the problem here; a null handle for "" on a solver without configs.
  virtual std::optional<ConfigHandle> parse_config_any(ProblemRef problem, const runtime::Device& device,
                                                       std::string_view text) const = 0;
  virtual std::string detail_any(ProblemRef problem, const runtime::Device& device) const = 0;
};

/// A solver of problems of type P.
template <OpProblem P>
class Solver : public SolverBase {
 public:
  using Problem = P;
  using Args = typename P::Args;

  OpKind kind() const final { return P::kKind; }

  /// Can this solver do `problem` on `device`? A "no" always carries a reason.
  virtual Applicability check(const P& problem, const runtime::Device& device) const = 0;
  virtual std::size_t workspace_bytes(const P& /*problem*/, const runtime::Device& /*device*/) const { return 0; }
  /// Enqueues the op on `stream`. Preconditions: check() said yes, the problem is valid, the
  /// pointers are device memory of stream.device() of the problem's sizes.
  virtual void run(runtime::Stream& stream, const P& problem, const Args& args) const = 0;
  /// Extra detail for results (e.g. the cuDNN engine chosen); empty by default.
  virtual std::string detail(const P& /*problem*/, const runtime::Device& /*device*/) const { return {}; }

  /// A problem may carry fused parts that only some solvers implement (a convolution's epilogue):
  /// P says so with `std::string fused_parts() const`, empty when it has none. check_any() refuses
  /// such a problem for every solver that does not return true here, so a part added to a problem
  /// can never be dropped silently by a solver written before it. Solvers that return true check
  /// the parts themselves in check().
  virtual bool implements_fused_parts() const { return false; }

  Applicability check_any(ProblemRef p, const runtime::Device& d) const final {
    const P& problem = p.as<P>();
    if constexpr (requires { { problem.fused_parts() } -> std::convertible_to<std::string>; }) {
      if (!implements_fused_parts()) {
        if (std::string parts = problem.fused_parts(); !parts.empty()) {
          return Applicability::no("does not implement the " + std::move(parts));
        }
      }
    }
    return check(problem, d);
  }
  std::size_t workspace_bytes_any(ProblemRef p, const runtime::Device& d, const void* config) const final {
    return workspace_bytes_with(p.as<P>(), d, config);
  }
  void run_any(runtime::Stream& stream, ProblemRef p, const OpArgs& args, const void* config) const final {
    run_with(stream, p.as<P>(), Args::from(args), config);
  }
  std::vector<std::string> configs_any(ProblemRef p, const runtime::Device& d) const final {
    return config_texts(p.as<P>(), d);
  }
  std::optional<ConfigHandle> parse_config_any(ProblemRef p, const runtime::Device& d,
                                               std::string_view text) const final {
    return parse_config(p.as<P>(), d, text);
  }
  std::string detail_any(ProblemRef p, const runtime::Device& d) const final { return detail(p.as<P>(), d); }

 protected:
  // The config-aware entry points, overridden by TunableSolver; here there is no config.
  virtual std::size_t workspace_bytes_with(const P& p, const runtime::Device& d, const void* /*config*/) const {
    return workspace_bytes(p, d);
  }
  virtual void run_with(runtime::Stream& stream, const P& p, const Args& args, const void* /*config*/) const {
    run(stream, p, args);
  }
  virtual std::vector<std::string> config_texts(const P& /*p*/, const runtime::Device& /*d*/) const { return {}; }
  virtual std::optional<ConfigHandle> parse_config(const P& /*p*/, const runtime::Device& /*d*/,
                                                   std::string_view text) const {
    if (text.empty()) return ConfigHandle{};
    return std::nullopt;
  }
};

/// A solver with inner choices of type Config (a tile plan, a vendor engine config), which the
/// tuner searches inside its time box: the solver only lists them and runs the one it is given;
/// it never times them itself. Config is a value type with `std::string to_string() const` and
/// `static std::optional<Config> parse(std::string_view)`, whose text round-trips.
template <OpProblem P, class Config>
class TunableSolver : public Solver<P> {
 public:
  using Args = typename P::Args;

  /// The choices for `problem` (non-empty whenever check() says yes), preferred first: a call
  /// without a tuned choice runs the first.
  virtual std::vector<Config> candidates(const P& problem, const runtime::Device& device) const = 0;
  /// Whether `config` (perhaps from an older process or another build) can run `problem` here.
  /// By default: when it is one of candidates().
  virtual bool valid(const P& problem, const runtime::Device& device, const Config& config) const {
    for (const Config& c : candidates(problem, device)) {
      if (c == config) return true;
    }
    return false;
  }
  virtual std::size_t workspace_bytes(const P& /*problem*/, const runtime::Device& /*device*/,
                                      const Config& /*config*/) const {
    return 0;
  }
  virtual void run(runtime::Stream& stream, const P& problem, const Args& args, const Config& config) const = 0;

  // Calls without a config (a solver named by the caller, the list order) take the first candidate.
  std::size_t workspace_bytes(const P& p, const runtime::Device& d) const final {
    return workspace_bytes(p, d, first(p, d));
  }
  void run(runtime::Stream& stream, const P& p, const Args& args) const final {
    run(stream, p, args, first(p, stream.device()));
  }

 protected:
  std::size_t workspace_bytes_with(const P& p, const runtime::Device& d, const void* config) const final {
    return config ? workspace_bytes(p, d, *static_cast<const Config*>(config)) : workspace_bytes(p, d);
  }
  void run_with(runtime::Stream& stream, const P& p, const Args& args, const void* config) const final {
    if (config) {
      run(stream, p, args, *static_cast<const Config*>(config));
    } else {
      run(stream, p, args);
    }
  }
  std::vector<std::string> config_texts(const P& p, const runtime::Device& d) const final {
    std::vector<std::string> out;
    for (const Config& c : candidates(p, d)) out.push_back(c.to_string());
    return out;
  }
  std::optional<ConfigHandle> parse_config(const P& p, const runtime::Device& d, std::string_view text) const final {
    std::optional<Config> c = Config::parse(text);
    if (!c || !valid(p, d, *c)) return std::nullopt;
    return ConfigHandle(std::make_shared<const Config>(std::move(*c)));
  }

 private:
  Config first(const P& p, const runtime::Device& d) const {
    std::vector<Config> all = candidates(p, d);
    if (all.empty()) {
      throw Error(Status::unsupported, "solver '" + std::string(this->name()) + "' has no config for " + p.key());
    }
    return std::move(all.front());
  }
};

/// A solver with the inner choice to run it with (null: its default).
struct Choice {
  const SolverBase* solver = nullptr;
  ConfigHandle config;
};

/// What one op call did, for a caller that asks (the entry points' `report` argument).
struct CallReport {
  std::string solver;  ///< the solver that ran
  std::string config;  ///< its inner choice as text; empty when it has none or ran its default
  bool tuner_hit = false;  ///< the choice came from stored tuning (find-db or this process's cache)
  std::string source;  ///< "explicit" (the caller named the solver), "cache", "user find-db",
                       ///< "system find-db", "tuned", "list order"
};

/// Appends `solvers`, in order, to `backend`'s list for their op kind ("cpu", "cuda", "hip"): a
/// backend's list file calls this once per op kind, fastest first and the reference last, so the
/// order lives in that file alone. Thread-safe. A null solver, an empty name or backend, a solver
/// of another kind, or a name already registered on the backend throws Error(invalid_argument).
/// The same name may exist on two backends (the single-source gpu.* solvers are on cuda and hip).
/// A plugin registers from galley_plugin_register but must not call the lookups below from there:
/// they wait for plugin loading to finish.
void register_solvers(std::string_view backend, OpKind kind, std::vector<std::unique_ptr<SolverBase>> solvers);

/// The ordered list of `kind` for a backend (empty for an unknown backend). Pointers stay valid for
/// the life of the process.
std::vector<const SolverBase*> solvers_of(std::string_view backend, OpKind kind);
/// A solver of `kind` by name on one backend, or nullptr.
const SolverBase* find_solver(std::string_view backend, OpKind kind, std::string_view name);
/// A solver of `kind` by name on any backend (the first backend that registered it), or nullptr.
const SolverBase* find_solver(OpKind kind, std::string_view name);
/// The names of every registered solver of `kind`, sorted, for messages and `--solver` help.
std::vector<std::string> solver_names(OpKind kind);

/// Typed views of the lists.
template <OpProblem P>
std::vector<const Solver<P>*> solvers_for(std::string_view backend) {
  std::vector<const Solver<P>*> out;
  for (const SolverBase* s : solvers_of(backend, P::kKind)) out.push_back(static_cast<const Solver<P>*>(s));
  return out;
}
template <OpProblem P>
const Solver<P>* find_solver_for(std::string_view backend, std::string_view name) {
  return static_cast<const Solver<P>*>(find_solver(backend, P::kKind, name));
}
template <OpProblem P>
const Solver<P>* find_solver_for(std::string_view name) {
  return static_cast<const Solver<P>*>(find_solver(P::kKind, name));
}

}  // namespace galley::dnn
