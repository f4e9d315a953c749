// The tuner: find modes, the in-process cache in front of the find-db, hit validation and tuning.
#include "galley/tuning/tuner.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <map>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <unordered_map>

#include "dnn/dispatch.hpp"
#include "dnn/traced_key.hpp"
#include "galley/core/error.hpp"
#include "galley/core/log.hpp"
#include "galley/memory/buffer.hpp"
#include "profile/tracer.hpp"
#include "solver_benchmark.hpp"

namespace galley::tuning {
namespace {

using dnn::ProblemRef;
using dnn::SolverBase;

// The cache is keyed by the problem itself, not by its key text: formatting the key costs more
// than the whole lookup may (<= 1 us). A lookup uses a view (no copy of the problem); an entry
// owns a copy. Problems of different kinds are never equal.
struct CacheKeyView {
  std::string_view device;
  ProblemRef problem;
  std::size_t hash;
  CacheKeyView(std::string_view d, ProblemRef p)
      : device(d), problem(p), hash(std::hash<std::string_view>{}(d) * 31 + p.hash()) {}
};

struct CacheKey {
  std::string device;
  dnn::AnyProblem problem;
  std::size_t hash;
  explicit CacheKey(const CacheKeyView& v)
      : device(v.device), problem(dnn::AnyProblem::copy_of(v.problem)), hash(v.hash) {}
  CacheKeyView view() const { return CacheKeyView(device, problem.ref()); }
};

struct CacheKeyHash {
  using is_transparent = void;
  std::size_t operator()(const CacheKey& k) const noexcept { return k.hash; }
  std::size_t operator()(const CacheKeyView& k) const noexcept { return k.hash; }
};

struct CacheKeyEqual {
  using is_transparent = void;
  static bool same(const CacheKeyView& a, const CacheKeyView& b) {
    return a.hash == b.hash && a.device == b.device && a.problem.ops == b.problem.ops &&
           a.problem.ops->equal(a.problem.problem, b.problem.problem);
  }
  bool operator()(const CacheKey& a, const CacheKey& b) const { return same(a.view(), b.view()); }
  bool operator()(const CacheKeyView& a, const CacheKey& b) const { return same(a, b.view()); }
  bool operator()(const CacheKey& a, const CacheKeyView& b) const { return same(a.view(), b); }
};

struct CacheEntry {
  const SolverBase* solver = nullptr;
  dnn::ConfigHandle config;  // the stored or tuned inner choice; null: none or the default
  std::string config_text;
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
  std::unordered_map<CacheKey, CacheEntry, CacheKeyHash, CacheKeyEqual> cache;
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

  std::optional<CacheEntry> cached(const CacheKeyView& key) {
    std::shared_lock lock(cache_mutex);
    auto it = cache.find(key);
    if (it == cache.end()) return std::nullopt;
    return it->second;
  }

  // The hit path's lookup: no copy of the ranked list (its strings would cost heap allocations).
  struct Hit {
    const SolverBase* solver = nullptr;
    bool hit = false;
    dnn::ConfigHandle config;
    const std::string* config_text = nullptr;  // entries are never erased while a hit is served... see pick()
  };
  AnyPick cached_pick(const CacheKeyView& key) {
    std::shared_lock lock(cache_mutex);
    auto it = cache.find(key);
    if (it == cache.end()) return {};
    const CacheEntry& e = it->second;
    return AnyPick{e.solver, e.hit, PickSource::cache, e.config_text, e.config};
  }

  void remember(const CacheKeyView& key, CacheEntry entry) {
    std::unique_lock lock(cache_mutex);
    if (auto it = cache.find(key); it != cache.end()) {
      it->second = std::move(entry);
    } else {
      cache.emplace(CacheKey(key), std::move(entry));
    }
  }

  void forget(const CacheKeyView& key) {
    std::unique_lock lock(cache_mutex);
    if (auto it = cache.find(key); it != cache.end()) cache.erase(it);
  }

  // Why a stored solver cannot be trusted now, or nothing when it can. Its stored config is parsed
  // first, so that check() and the workspace are those of the config that will run.
  std::optional<std::string> invalid(const FindRecord& record, ProblemRef problem, const runtime::Device& device,
                                     const SolverBase*& solver, dnn::ConfigHandle* config) {
    const std::string& name = record.solver;
    solver = dnn::find_solver(device.backend(), problem.kind(), name);
    if (solver == nullptr) return "solver '" + name + "' no longer exists on backend " + device.backend();
    if (!options.only_solvers.empty() &&
        std::find(options.only_solvers.begin(), options.only_solvers.end(), name) == options.only_solvers.end()) {
      return "solver '" + name + "' is excluded by the solver filter";
    }
    // A config the tuner chose (TunableSolver) parses back. A row of a solver without configs may
    // carry the text of an inner choice that an earlier build searched for itself: the solver is
    // still the stored best, and runs as it does without a tuned choice.
    std::optional<dnn::ConfigHandle> parsed = solver->parse_config_any(problem, device, record.params);
    if (!parsed) {
      if (!solver->configs_any(problem, device).empty()) {
        return "stored config '" + record.params + "' of " + name + " is not valid here";
      }
      log::info("stored inner choice '" + record.params + "' of " + name + " for " + problem.key() +
                " is not a config of the solver now; it runs without one");
      parsed = dnn::ConfigHandle{};
    }
    const dnn::Applicability a = solver->check_any(problem, device);
    if (!a) return "solver '" + name + "' no longer applies: " + a.reason;
    const std::size_t ws = solver->workspace_bytes_any(problem, device, parsed->get());
    if (config != nullptr) *config = *parsed;
    if (ws > workspace_limit(device)) return "solver '" + name + "' needs more workspace than the limit";
    return std::nullopt;
  }

  // A find-db hit whose best entry is still valid. With `check_all` every runner-up is checked too
  // and invalid ones dropped; without (pick()), runners-up are only looked up by name: their check()
  // may build a vendor library's plans, which a pick that runs the best alone must not pay for.
  std::optional<CacheEntry> db_hit(ProblemRef problem, const runtime::Device& device, const std::string& key,
                                   bool check_all) {
    bool from_system = false;
    const auto records = find_db().lookup(key, identity(device), &from_system);
    if (records.empty()) return std::nullopt;
    CacheEntry entry;
    entry.hit = true;
    entry.origin = from_system ? PickSource::system_db : PickSource::user_db;
    entry.ranked_checked = check_all;
    for (const FindRecord& r : records) {
      const SolverBase* solver = nullptr;
      dnn::ConfigHandle config;
      if (entry.solver != nullptr && !check_all) {
        solver = dnn::find_solver(device.backend(), problem.kind(), r.solver);
        if (solver == nullptr) continue;
      } else if (const auto why = invalid(r, problem, device, solver, &config)) {
        if (entry.solver == nullptr) {
          // The best stored choice is gone: the whole list is re-tuned and replaced, never trusted.
          log::info("find-db row for " + key + " on " + device.name() + " ignored: " + *why + "; re-tuning");
          return std::nullopt;
        }
        continue;
      }
      if (entry.solver == nullptr) {
        entry.solver = solver;
        entry.config = config;
        entry.config_text = config ? r.params : std::string();
      }
      entry.ranked.push_back(RankedSolver{r.solver, r.ms, r.workspace_bytes, r.params});
    }
    return entry;
  }

  TuneResult run_tuning(ProblemRef problem, const runtime::Device& device, const CacheKeyView& cache_key,
                        CacheEntry* chosen = nullptr) {
    problem.validate();
    const auto start = std::chrono::steady_clock::now();
    TuneResult result;
    auto candidates = detail::find_candidates(problem, device, workspace_limit(device), options.only_solvers);
    result.rejected = candidates.rejected;
    if (!candidates.any()) detail::throw_no_solver(problem, device, result.rejected);
    result.list_order_choice = std::string(candidates.list_first.solver->name());

    CacheEntry best{nullptr, {}, {}, true, PickSource::tuned, {}};
    if (candidates.timed.empty()) {
      // Only a reference applies: nothing to compare, so nothing is timed.
      best.solver = candidates.list_first.solver;
      result.ranked.push_back(RankedSolver{std::string(best.solver->name()), std::nan(""),
                                           best.solver->workspace_bytes_any(problem, device), {}});
    } else {
      // The box runs from the start: the candidates' check() and workspace_bytes() above can be
      // a vendor library's planning (cudnn_graph finalizing its engine plans, runtime-compiled ones
      // included), seconds on a large problem, and a time box that leaves them out does not bound tuning.
      const auto timings = detail::time_solvers(problem, device, candidates.timed, options.find.time_box_ms, start,
                                                result.rejected, result.time_box_hit);
      if (timings.empty()) detail::throw_no_solver(problem, device, result.rejected);
      const detail::Candidate& winner = timings.front().candidate;
      best.solver = winner.solver;
      best.config = winner.config;
      best.config_text = winner.config_text;
      // One entry per solver, its fastest config: the find-db keeps a ranked list of solvers.
      std::vector<const SolverBase*> seen;
      for (const auto& t : timings) {
        const SolverBase* s = t.candidate.solver;
        if (std::find(seen.begin(), seen.end(), s) != seen.end()) continue;
        seen.push_back(s);
        result.ranked.push_back(RankedSolver{std::string(s->name()), t.ms, t.workspace_bytes,
                                             t.candidate.config ? t.candidate.config_text : std::string()});
      }
    }
    result.tune_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (log::enabled(log::Level::info)) {
      log::info("tuned " + problem.key() + " on " + device.name() + " in " + std::to_string(result.tune_ms) +
                " ms: " + std::string(best.solver->name()) + (best.config_text.empty() ? "" : "[" + best.config_text + "]"));
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
    best.ranked = result.ranked;
    remember(cache_key, best);
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

const SolverBase& Tuner::list_order_choice(ProblemRef problem, const runtime::Device& device) {
  std::size_t limit = 0;
  {
    std::lock_guard lock(impl_->slow_mutex);
    limit = impl_->workspace_limit(device);
  }
  const auto candidates = detail::find_candidates(problem, device, limit, impl_->options.only_solvers, false);
  if (!candidates.any()) detail::throw_no_solver(problem, device, candidates.rejected);
  return *candidates.list_first.solver;
}

AnyPick Tuner::pick(ProblemRef problem, const runtime::Device& device) {
  if (!profile::enabled()) return pick_untraced(problem, device);
  const std::int64_t started_ns = profile::now_ns();
  AnyPick p = pick_untraced(problem, device);
  using profile::Text;
  profile::record_tune(started_ns, Text::interned(device.name()), dnn::traced_key(problem),
                       Text::interned(p.solver->name()), Text::interned(p.config), Text::interned(to_string(p.source)),
                       p.hit);
  return p;
}

AnyPick Tuner::pick_untraced(ProblemRef problem, const runtime::Device& device) {
  const CacheKeyView key(device.name(), problem);
  // The hit path: one shared-lock hash lookup and the solver's own cheap check().
  if (AnyPick hit = impl_->cached_pick(key); hit.solver != nullptr) {
    const dnn::Applicability a = hit.solver->check_any(problem, device);
    if (a) return hit;
    log::info("cached choice " + std::string(hit.solver->name()) + " for " + problem.key() +
              " no longer applies (" + a.reason + ")");
    impl_->forget(key);
  }

  std::lock_guard lock(impl_->slow_mutex);
  if (AnyPick hit = impl_->cached_pick(key); hit.solver != nullptr) return hit;  // another thread
  problem.validate();
  const FindMode mode = impl_->options.find.mode;
  auto list_order = [&] {
    const auto c = detail::find_candidates(problem, device, impl_->workspace_limit(device), impl_->options.only_solvers);
    if (!c.any()) detail::throw_no_solver(problem, device, c.rejected);
    impl_->remember(key, CacheEntry{c.list_first.solver, {}, {}, false, PickSource::list_order, {}});
    return AnyPick{c.list_first.solver, false, PickSource::list_order, {}, {}};
  };
  if (mode == FindMode::off) return list_order();
  const std::string text_key = problem.key();
  if (impl_->trusts_db()) {
    if (auto entry = impl_->db_hit(problem, device, text_key, false)) {
      impl_->remember(key, *entry);
      return AnyPick{entry->solver, true, entry->origin, entry->config_text, entry->config};
    }
    if (mode == FindMode::fast) return list_order();
  }
  CacheEntry best;
  impl_->run_tuning(problem, device, key, &best);
  return AnyPick{best.solver, false, PickSource::tuned, best.config_text, best.config};
}

std::vector<RankedSolver> Tuner::lookup(ProblemRef problem, const runtime::Device& device) {
  if (impl_->options.find.mode == FindMode::off) return {};
  const CacheKeyView key(device.name(), problem);
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

std::vector<RankedSolver> Tuner::ranked(ProblemRef problem, const runtime::Device& device) {
  const CacheKeyView key(device.name(), problem);
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

TuneResult Tuner::tune(ProblemRef problem, const runtime::Device& device) {
  const CacheKeyView key(device.name(), problem);
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
      const dnn::AnyProblem parsed = dnn::parse_problem_key(key);
      const ProblemRef problem = parsed.ref();
      const CacheKeyView cache_key(device.name(), problem);
      const SolverBase* solver = nullptr;
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
      // One call on scratch tensors through the path a user's call takes (pick, then the one
      // dispatch path): what a first call pays once (kernel loading, vendor handles and plans,
      // first touch of workspace, the host code of the call itself) is paid here. Zeroed inputs:
      // leftover bytes of a reused block could be denormals, which are slow on some CPUs.
      std::vector<memory::Buffer> buffers;
      dnn::OpArgs args;
      for (const dnn::TensorArg& t : problem.tensors()) {
        buffers.push_back(memory::allocate(stream, t.desc.bytes()));
        if (!t.output) memory::memset(stream, buffers.back(), 0, t.desc.bytes());
        args.set(t.id, buffers.back().data());
      }
      {
        const dnn::detail::SuppressCmdLog quiet;
        const AnyPick p = pick(problem, device);
        dnn::execute_choice("preload", stream, problem, args, dnn::Choice{p.solver, p.config_handle});
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

namespace {

struct DefaultTuner {
  std::mutex mutex;
  std::optional<TunerOptions> configured;
  std::atomic<Tuner*> built{nullptr};
  std::unique_ptr<Tuner> owner;
};

DefaultTuner& default_tuner_state() {
  static DefaultTuner state;
  return state;
}

}  // namespace

Tuner& default_tuner() {
  DefaultTuner& d = default_tuner_state();
  if (Tuner* t = d.built.load(std::memory_order_acquire)) return *t;  // the per-call path: one load
  std::lock_guard lock(d.mutex);
  if (!d.owner) {
    d.owner = std::make_unique<Tuner>(d.configured ? std::move(*d.configured) : TunerOptions::from_env());
    d.built.store(d.owner.get(), std::memory_order_release);
  }
  return *d.owner;
}

void configure_default_tuner(TunerOptions options) {
  DefaultTuner& d = default_tuner_state();
  std::lock_guard lock(d.mutex);
  if (d.owner) {
    throw Error(Status::invalid_argument,
                "configure_default_tuner: the default tuner is already in use (an op ran or default_tuner() "
                "was called); configure it before the first op");
  }
  d.configured = std::move(options);
}

namespace {

dnn::Choice pick_with_default_tuner(ProblemRef problem, const runtime::Device& device, dnn::CallReport* report) {
  AnyPick p = default_tuner().pick(problem, device);
  if (report != nullptr) *report = dnn::CallReport{std::string(p.solver->name()), p.config, p.hit, to_string(p.source)};
  return dnn::Choice{p.solver, std::move(p.config_handle)};
}

// Every op's dispatch asks the tuner through this hook: dnn sits above tuning and may not include
// it, so tuning installs itself when libgalley loads.
const bool g_picker_installed = (dnn::set_solver_picker(&pick_with_default_tuner), true);

}  // namespace

}  // namespace galley::tuning
