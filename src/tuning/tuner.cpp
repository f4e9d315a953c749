// The tuner: find modes, the in-process cache in front of the find-db, hit validation and tuning.
#include "galley/tuning/tuner.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <unordered_map>

#include "conv_benchmark.hpp"
#include "dnn/convolution_internal.hpp"
#include "galley/core/error.hpp"
#include "galley/core/log.hpp"
#include "galley/dnn/convolution.hpp"
#include "galley/memory/buffer.hpp"

namespace galley::tuning {
namespace {

using dnn::ConvProblem;
using dnn::ConvSolver;

// The cache is keyed by the problem itself, not by its key text: formatting the key costs more
// than the whole lookup may (<= 1 us).
struct CacheKey {
  std::string device;
  ConvProblem problem;
  friend bool operator==(const CacheKey&, const CacheKey&) = default;
};

struct CacheKeyHash {
  std::size_t operator()(const CacheKey& k) const noexcept {
    return std::hash<std::string>{}(k.device) * 31 + dnn::ConvProblemHash{}(k.problem);
  }
};

struct CacheEntry {
  const ConvSolver* solver = nullptr;
  bool hit = false;         // stored tuning result (db or this process's tuning), not a list-order guess
  PickSource origin = PickSource::list_order;
  std::vector<RankedSolver> ranked;  // empty for list-order entries
  // False when the runners-up of a find-db list were taken on trust (see db_hit): ranked() and
  // lookup() check them before handing the list out.
  bool ranked_checked = true;
};

}  // namespace

const char* to_string(PickSource source) noexcept {
  switch (source) {
    case PickSource::cache: return "cache";
    case PickSource::user_db: return "user find-db";
    case PickSource::system_db: return "system find-db";
    case PickSource::tuned: return "tuned";
    case PickSource::list_order: return "list order";
  }
  return "?";
}

TunerOptions TunerOptions::from_env() {
  TunerOptions options;
  options.find = FindOptions::from_env();
  options.db_paths = default_find_db_paths();
  return options;
}

struct Tuner::Impl {
  TunerOptions options;
  std::shared_mutex cache_mutex;
  std::unordered_map<CacheKey, CacheEntry, CacheKeyHash> cache;
  std::mutex slow_mutex;  // one db access or tuning at a time; hits never take it
  std::unique_ptr<FindDb> db;
  std::map<std::string, DeviceIdentity> identities;
  std::map<std::string, std::size_t> workspace_limits;

  FindDb& find_db() {
    if (!db) db = std::make_unique<FindDb>(options.db_paths);
    return *db;
  }

  const DeviceIdentity& identity(const runtime::Device& device) {
    auto it = identities.find(device.name());
    if (it == identities.end()) it = identities.emplace(device.name(), DeviceIdentity::of(device)).first;
    return it->second;
  }

  std::size_t workspace_limit(const runtime::Device& device) {
    if (options.workspace_limit != 0) return options.workspace_limit;
    auto it = workspace_limits.find(device.name());
    if (it == workspace_limits.end()) {
      const std::size_t total = device.properties().memory_total;
      const std::size_t limit = std::min<std::size_t>(std::size_t{4} << 30, total / 4);
      it = workspace_limits.emplace(device.name(), limit == 0 ? std::size_t{4} << 30 : limit).first;
    }
    return it->second;
  }

  std::optional<CacheEntry> cached(const CacheKey& key) {
    std::shared_lock lock(cache_mutex);
    auto it = cache.find(key);
    if (it == cache.end()) return std::nullopt;
    return it->second;
  }

  // The hit path's lookup: no copy of the ranked list (its strings would cost heap allocations).
  struct Hit {
    const ConvSolver* solver = nullptr;
    bool hit = false;
  };
  Hit cached_hit(const CacheKey& key) {
    std::shared_lock lock(cache_mutex);
    auto it = cache.find(key);
    if (it == cache.end()) return {};
    return Hit{it->second.solver, it->second.hit};
  }

  void remember(const CacheKey& key, CacheEntry entry) {
    std::unique_lock lock(cache_mutex);
    cache.insert_or_assign(key, std::move(entry));
  }

  // Why a stored solver cannot be trusted now, or nothing when it can. Its stored inner choice is
  // handed back first, so that check() of a solver with an inner search (a vendor library's plans)
  // costs a plan build, not the search again.
  std::optional<std::string> invalid(const FindRecord& record, const ConvProblem& problem,
                                     const runtime::Device& device, const ConvSolver*& solver) {
    const std::string& name = record.solver;
    solver = dnn::find_conv_solver(device.backend(), name);
    if (solver == nullptr) return "solver '" + name + "' no longer exists on backend " + device.backend();
    if (!options.only_solvers.empty() &&
        std::find(options.only_solvers.begin(), options.only_solvers.end(), name) == options.only_solvers.end()) {
      return "solver '" + name + "' is excluded by the solver filter";
    }
    if (!solver->use_tuned_params(problem, device, record.params)) {
      log::info("stored inner choice '" + record.params + "' of " + name + " for " + problem.key() +
                " cannot be used here; the solver searches again");
    }
    const dnn::Applicability a = solver->check(problem, device);
    if (!a) return "solver '" + name + "' no longer applies: " + a.reason;
    const std::size_t ws = solver->workspace_bytes(problem, device);
    if (ws > workspace_limit(device)) return "solver '" + name + "' needs more workspace than the limit";
    return std::nullopt;
  }

  // A find-db hit whose best entry is still valid. With `check_all` every runner-up is checked too
  // and invalid ones dropped; without (pick()), runners-up are only looked up by name: their check()
  // may build a vendor library's plans, which a pick that runs the best alone must not pay for.
  std::optional<CacheEntry> db_hit(const ConvProblem& problem, const runtime::Device& device, const std::string& key,
                                   bool check_all) {
    bool from_system = false;
    const auto records = find_db().lookup(key, identity(device), &from_system);
    if (records.empty()) return std::nullopt;
    CacheEntry entry;
    entry.hit = true;
    entry.origin = from_system ? PickSource::system_db : PickSource::user_db;
    entry.ranked_checked = check_all;
    for (const FindRecord& r : records) {
      const ConvSolver* solver = nullptr;
      if (entry.solver != nullptr && !check_all) {
        solver = dnn::find_conv_solver(device.backend(), r.solver);
        if (solver == nullptr) continue;
      } else if (const auto why = invalid(r, problem, device, solver)) {
        if (entry.solver == nullptr) {
          // The best stored choice is gone: the whole list is re-tuned and replaced, never trusted.
          log::info("find-db row for " + key + " on " + device.name() + " ignored: " + *why + "; re-tuning");
          return std::nullopt;
        }
        continue;
      }
      if (entry.solver == nullptr) entry.solver = solver;
      entry.ranked.push_back(RankedSolver{r.solver, r.ms, r.workspace_bytes, r.params});
    }
    return entry;
  }

  TuneResult run_tuning(const ConvProblem& problem, const runtime::Device& device, const CacheKey& cache_key,
                        const ConvSolver** chosen = nullptr) {
    problem.validate();
    const auto start = std::chrono::steady_clock::now();
    TuneResult result;
    auto candidates = detail::find_candidates(problem, device, workspace_limit(device), options.only_solvers);
    result.rejected = candidates.rejected;
    if (candidates.list_first == nullptr) detail::throw_no_solver(problem, device, result.rejected);
    result.list_order_choice = std::string(candidates.list_first->name());

    const ConvSolver* best = nullptr;
    if (candidates.timed.empty()) {
      // Only a reference applies: nothing to compare, so nothing is timed.
      best = candidates.list_first;
      result.ranked.push_back(
          RankedSolver{std::string(best->name()), std::nan(""), best->workspace_bytes(problem, device), {}});
    } else {
      // The box runs from the start: the candidates' check() and workspace_bytes() above can be
      // a vendor library's own search (cudnn_graph timing its engine plans, cudnnFind), 1-2 s for
      // deeplab.dilated on the H200, and a time box that leaves them out does not bound tuning.
      const auto timings = detail::time_solvers(problem, device, candidates.timed, options.find.time_box_ms, start,
                                                result.rejected, result.time_box_hit);
      if (timings.empty()) detail::throw_no_solver(problem, device, result.rejected);
      best = timings.front().solver;
      for (const auto& t : timings) {
        result.ranked.push_back(RankedSolver{std::string(t.solver->name()), t.median_ms, t.workspace_bytes,
                                             t.solver->tuned_params(problem, device)});
      }
    }
    result.tune_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (log::enabled(log::Level::info)) {
      log::info("tuned " + problem.key() + " on " + device.name() + " in " + std::to_string(result.tune_ms) +
                " ms: " + std::string(best->name()));
    }
    if (options.find.mode != FindMode::off) {
      std::vector<FindRecord> records;
      for (const RankedSolver& r : result.ranked) {
        records.push_back(FindRecord{r.solver, r.ms, r.workspace_bytes, 0, r.params});
      }
      // The db has warned once; callers that report saving ask FindDb::unsaved_stores().
      if (const WriteResult saved = find_db().store(problem.key(), identity(device), records); !saved) {
        log::info("tuning result for " + problem.key() + " not saved: " + saved.reason);
      }
    }
    remember(cache_key, CacheEntry{best, true, PickSource::tuned, result.ranked});
    if (chosen != nullptr) *chosen = best;
    return result;
  }

  bool trusts_db() const {
    return !options.find.enforce_search &&
           (options.find.mode == FindMode::hybrid || options.find.mode == FindMode::fast);
  }
};

Tuner::Tuner(TunerOptions options) : impl_(std::make_unique<Impl>()) { impl_->options = std::move(options); }

Tuner::~Tuner() = default;

const TunerOptions& Tuner::options() const { return impl_->options; }

FindDb& Tuner::db() {
  std::lock_guard lock(impl_->slow_mutex);
  return impl_->find_db();
}

void Tuner::clear_cache() {
  std::unique_lock lock(impl_->cache_mutex);
  impl_->cache.clear();
}

const ConvSolver& Tuner::list_order_choice(const ConvProblem& problem, const runtime::Device& device) {
  std::size_t limit = 0;
  {
    std::lock_guard lock(impl_->slow_mutex);
    limit = impl_->workspace_limit(device);
  }
  const auto candidates = detail::find_candidates(problem, device, limit, impl_->options.only_solvers, false);
  if (candidates.list_first == nullptr) detail::throw_no_solver(problem, device, candidates.rejected);
  return *candidates.list_first;
}

Pick Tuner::pick(const ConvProblem& problem, const runtime::Device& device) {
  const CacheKey key{device.name(), problem};
  // The hit path: one shared-lock hash lookup and the solver's own cheap check().
  if (const auto entry = impl_->cached_hit(key); entry.solver != nullptr) {
    const dnn::Applicability a = entry.solver->check(problem, device);
    if (a) return Pick{entry.solver, entry.hit, PickSource::cache};
    log::info("cached choice " + std::string(entry.solver->name()) + " for " + problem.key() +
              " no longer applies (" + a.reason + ")");
    std::unique_lock lock(impl_->cache_mutex);
    impl_->cache.erase(key);
  }

  std::lock_guard lock(impl_->slow_mutex);
  if (auto entry = impl_->cached(key)) return Pick{entry->solver, entry->hit, PickSource::cache};  // another thread
  problem.validate();
  const FindMode mode = impl_->options.find.mode;
  auto list_order = [&] {
    const auto c = detail::find_candidates(problem, device, impl_->workspace_limit(device), impl_->options.only_solvers);
    if (c.list_first == nullptr) detail::throw_no_solver(problem, device, c.rejected);
    impl_->remember(key, CacheEntry{c.list_first, false, PickSource::list_order, {}});
    return Pick{c.list_first, false, PickSource::list_order};
  };
  if (mode == FindMode::off) return list_order();
  const std::string text_key = problem.key();
  if (impl_->trusts_db()) {
    if (auto entry = impl_->db_hit(problem, device, text_key, false)) {
      impl_->remember(key, *entry);
      return Pick{entry->solver, true, entry->origin};
    }
    if (mode == FindMode::fast) return list_order();
  }
  const ConvSolver* best = nullptr;
  impl_->run_tuning(problem, device, key, &best);
  return Pick{best, false, PickSource::tuned};
}

std::vector<RankedSolver> Tuner::lookup(const ConvProblem& problem, const runtime::Device& device) {
  if (impl_->options.find.mode == FindMode::off) return {};
  const CacheKey key{device.name(), problem};
  if (auto entry = impl_->cached(key); entry && entry->hit && entry->ranked_checked && !entry->ranked.empty()) {
    return entry->ranked;
  }
  std::lock_guard lock(impl_->slow_mutex);
  problem.validate();
  if (auto entry = impl_->db_hit(problem, device, problem.key(), true)) {
    impl_->remember(key, *entry);
    return entry->ranked;
  }
  return {};
}

std::vector<RankedSolver> Tuner::ranked(const ConvProblem& problem, const runtime::Device& device) {
  const CacheKey key{device.name(), problem};
  const FindMode mode = impl_->options.find.mode;
  if (auto entry = impl_->cached(key); entry && entry->hit && entry->ranked_checked && !entry->ranked.empty()) {
    // A db hit is reusable unless this process must re-measure; its own tuning always is.
    if (entry->origin == PickSource::tuned || impl_->trusts_db()) return entry->ranked;
  }
  std::lock_guard lock(impl_->slow_mutex);
  if (mode != FindMode::off && impl_->trusts_db()) {
    problem.validate();
    if (auto entry = impl_->db_hit(problem, device, problem.key(), true)) {
      impl_->remember(key, *entry);
      return entry->ranked;
    }
  }
  return impl_->run_tuning(problem, device, key).ranked;
}

TuneResult Tuner::tune(const ConvProblem& problem, const runtime::Device& device) {
  const CacheKey key{device.name(), problem};
  std::lock_guard lock(impl_->slow_mutex);
  return impl_->run_tuning(problem, device, key);
}

PreloadResult Tuner::preload(runtime::Stream& stream) {
  const auto start = std::chrono::steady_clock::now();
  PreloadResult result;
  const runtime::Device& device = stream.device();
  if (impl_->options.find.mode == FindMode::off || !impl_->trusts_db()) return result;
  std::vector<std::string> keys;
  {
    std::lock_guard lock(impl_->slow_mutex);
    keys = impl_->find_db().problems(impl_->identity(device));
  }
  result.problems = static_cast<int>(keys.size());
  for (const std::string& key : keys) {
    try {
      const ConvProblem problem = ConvProblem::parse_key(key);
      const CacheKey cache_key{device.name(), problem};
      const ConvSolver* solver = nullptr;
      {
        std::lock_guard lock(impl_->slow_mutex);
        if (auto entry = impl_->cached(cache_key); entry && entry->hit) {
          solver = entry->solver;
        } else if (auto hit = impl_->db_hit(problem, device, key, false)) {
          impl_->remember(cache_key, *hit);
          solver = hit->solver;
        }
      }
      if (solver == nullptr) {
        result.skipped.emplace_back(key, "no stored solver is valid here (see GALLEY_LOG_LEVEL=info)");
        continue;
      }
      // One call on scratch tensors through the path a user's call takes (pick, then
      // convolution_forward): what a first call pays once (kernel loading, vendor handles and
      // plans, first touch of workspace, the host code of the call itself) is paid here. Zeroed
      // inputs: leftover bytes of a reused block could be denormals, which are slow on some CPUs.
      memory::Buffer x = memory::allocate(stream, problem.x_desc().bytes());
      memory::Buffer w = memory::allocate(stream, problem.w_desc().bytes());
      memory::Buffer y = memory::allocate(stream, problem.y_desc().bytes());
      memory::memset(stream, x, 0, problem.x_desc().bytes());
      memory::memset(stream, w, 0, problem.w_desc().bytes());
      {
        const dnn::detail::SuppressCmdLog quiet;
        dnn::convolution_forward(stream, problem, x.data(), w.data(), y.data(), pick(problem, device).solver);
      }
      stream.synchronize();
      ++result.prepared;
    } catch (const Error& e) {
      result.skipped.emplace_back(key, e.what());
    }
  }
  result.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  log::info("preloaded " + std::to_string(result.prepared) + " of " + std::to_string(result.problems) +
            " stored problems on " + device.name() + " in " + std::to_string(result.ms) + " ms");
  return result;
}

Tuner& default_tuner() {
  static Tuner tuner(TunerOptions::from_env());
  return tuner;
}

namespace {

const dnn::ConvSolver& pick_for_convolution(const ConvProblem& problem, const runtime::Device& device) {
  return *default_tuner().pick(problem, device).solver;
}

// dnn::convolution_forward asks the tuner through this hook: dnn sits above tuning and may not
// include it, so tuning installs itself when libgalley loads.
const bool g_picker_installed = (dnn::set_conv_solver_picker(&pick_for_convolution), true);

}  // namespace

}  // namespace galley::tuning
