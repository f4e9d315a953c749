// The per-backend ordered conv solver lists. Filled by static initialisers in libgalley (cpu) and by
// plugins while they load, possibly from several threads, so every access takes one mutex.
#include <algorithm>
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
  int rank;
  std::uint64_t order;  // registration order, the tie-break among equal ranks
  std::unique_ptr<ConvSolver> solver;
};

struct Registry {
  std::mutex mutex;
  std::deque<Entry> entries;  // a deque so solver pointers and entries never move
  std::uint64_t next_order = 0;
};

// Function-local static: safe to use from other translation units' static initialisers.
Registry& registry() {
  static Registry r;
  return r;
}

// Plugins register their solvers while they load; make sure that has happened before a lookup,
// so `conv_solvers("cuda")` is never empty merely because nobody asked for a device yet.
// Called without the registry lock held: loading a plugin re-enters register_conv_solver.
void ensure_plugins_loaded() { (void)runtime::devices(); }

}  // namespace

void register_conv_solver(std::string_view backend, int rank, std::unique_ptr<ConvSolver> solver) {
  if (solver == nullptr) throw Error(Status::invalid_argument, "register_conv_solver: null solver");
  const std::string name(solver->name());
  if (name.empty()) throw Error(Status::invalid_argument, "register_conv_solver: solver with an empty name");
  if (backend.empty()) {
    throw Error(Status::invalid_argument, "register_conv_solver: empty backend name for solver " + name);
  }
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  for (const Entry& e : r.entries) {
    if (e.backend == backend && e.solver->name() == name) {
      throw Error(Status::invalid_argument, "conv solver '" + name + "' is already registered on backend '" +
                                                std::string(backend) + "'");
    }
  }
  r.entries.push_back(Entry{std::string(backend), rank, r.next_order++, std::move(solver)});
}

std::vector<const ConvSolver*> conv_solvers(std::string_view backend) {
  ensure_plugins_loaded();
  Registry& r = registry();
  std::vector<const Entry*> matching;
  {
    std::lock_guard lock(r.mutex);
    for (const Entry& e : r.entries) {
      if (e.backend == backend) matching.push_back(&e);
    }
  }
  // Entries are never removed or changed after insertion, so sorting outside the lock is safe.
  std::stable_sort(matching.begin(), matching.end(), [](const Entry* a, const Entry* b) {
    return a->rank != b->rank ? a->rank < b->rank : a->order < b->order;
  });
  std::vector<const ConvSolver*> out;
  out.reserve(matching.size());
  for (const Entry* e : matching) out.push_back(e->solver.get());
  return out;
}

const ConvSolver* find_conv_solver(std::string_view name) {
  ensure_plugins_loaded();
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  for (const Entry& e : r.entries) {
    if (e.solver->name() == name) return e.solver.get();
  }
  return nullptr;
}

const ConvSolver* find_conv_solver(std::string_view backend, std::string_view name) {
  ensure_plugins_loaded();
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  for (const Entry& e : r.entries) {
    if (e.backend == backend && e.solver->name() == name) return e.solver.get();
  }
  return nullptr;
}

std::vector<std::string> conv_solver_names() {
  ensure_plugins_loaded();
  Registry& r = registry();
  std::vector<std::string> names;
  {
    std::lock_guard lock(r.mutex);
    for (const Entry& e : r.entries) names.emplace_back(e.solver->name());
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

}  // namespace galley::dnn
