// The per-backend, per-op ordered solver lists. Filled by each backend's list files (libgalley's
// cpu lists at load time, plugins while they load, possibly from several threads), so every access
// takes one mutex.
#include <algorithm>
#include <atomic>
#include <deque>
#include <mutex>
#include <string>

#include "galley/core/error.hpp"
#include "galley/dnn/solver.hpp"
#include "galley/runtime/device.hpp"

namespace galley::dnn {
namespace {

struct Entry {
  std::string backend;
  OpKind kind;
  std::unique_ptr<SolverBase> solver;
};

struct Registry {
  std::mutex mutex;
  std::deque<Entry> entries;  // a deque so solver pointers and entries never move; list order is insertion order
};

// Function-local static: safe to use from other translation units' static initialisers.
Registry& registry() {
  static Registry r;
  return r;
}

// Plugins register their solvers while they load; make sure that has happened before a lookup,
// so `solvers_of("cuda", ...)` is never empty merely because nobody asked for a device yet.
// Called without the registry lock held: loading a plugin re-enters register_solvers. Once the
// devices have been listed the plugins stay loaded, so later lookups (solvers find their helper
// solvers on every call) skip the device list's copy.
void ensure_plugins_loaded() {
  static std::atomic<bool> loaded{false};
  if (loaded.load(std::memory_order_acquire)) return;
  (void)runtime::devices();
  loaded.store(true, std::memory_order_release);
}

}  // namespace

void register_solvers(std::string_view backend, OpKind kind, std::vector<std::unique_ptr<SolverBase>> solvers) {
  if (backend.empty()) throw Error(Status::invalid_argument, "register_solvers: empty backend name");
  for (std::size_t i = 0; i < solvers.size(); ++i) {
    const SolverBase* s = solvers[i].get();
    const std::string where = "register_solvers(" + std::string(backend) + ", " + to_string(kind) + "): entry " +
                              std::to_string(i);
    if (s == nullptr) throw Error(Status::invalid_argument, where + " is null");
    if (s->name().empty()) throw Error(Status::invalid_argument, where + " has an empty name");
    if (s->kind() != kind) {
      throw Error(Status::invalid_argument, where + " '" + std::string(s->name()) + "' is a " +
                                                to_string(s->kind()) + " solver");
    }
    for (std::size_t j = 0; j < i; ++j) {
      if (solvers[j]->name() == s->name()) {
        throw Error(Status::invalid_argument, where + ": '" + std::string(s->name()) + "' is listed twice");
      }
    }
  }
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  for (const Entry& e : r.entries) {
    for (const auto& s : solvers) {
      if (e.backend == backend && e.solver->name() == s->name()) {
        throw Error(Status::invalid_argument, "solver '" + std::string(s->name()) +
                                                  "' is already registered on backend '" + std::string(backend) + "'");
      }
    }
  }
  for (auto& s : solvers) r.entries.push_back(Entry{std::string(backend), kind, std::move(s)});
}

std::vector<const SolverBase*> solvers_of(std::string_view backend, OpKind kind) {
  ensure_plugins_loaded();
  Registry& r = registry();
  std::vector<const SolverBase*> out;
  std::lock_guard lock(r.mutex);
  for (const Entry& e : r.entries) {
    if (e.backend == backend && e.kind == kind) out.push_back(e.solver.get());
  }
  return out;
}

const SolverBase* find_solver(std::string_view backend, OpKind kind, std::string_view name) {
  ensure_plugins_loaded();
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  for (const Entry& e : r.entries) {
    if (e.backend == backend && e.kind == kind && e.solver->name() == name) return e.solver.get();
  }
  return nullptr;
}

const SolverBase* find_solver(OpKind kind, std::string_view name) {
  ensure_plugins_loaded();
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  for (const Entry& e : r.entries) {
    if (e.kind == kind && e.solver->name() == name) return e.solver.get();
  }
  return nullptr;
}

std::vector<std::string> solver_names(OpKind kind) {
  ensure_plugins_loaded();
  Registry& r = registry();
  std::vector<std::string> names;
  {
    std::lock_guard lock(r.mutex);
    for (const Entry& e : r.entries) {
      if (e.kind == kind) names.emplace_back(e.solver->name());
    }
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

}  // namespace galley::dnn
