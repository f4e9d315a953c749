#include "solver_benchmark.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <vector>

#include "dnn/dispatch.hpp"
#include "dnn/tensor_data.hpp"
#include "galley/core/dtype.hpp"
#include "galley/core/error.hpp"
#include "galley/core/log.hpp"
#include "galley/dnn/prepared_weights.hpp"
#include "galley/memory/buffer.hpp"
#include "galley/runtime/stream.hpp"

namespace galley::tuning::detail {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kMinRuns = 5;            // before a pace is trusted at all
constexpr int kMaxRuns = 100;          // a noisy machine must not keep one solver forever
constexpr double kStableRel = 0.01;    // the pace moved by <= 1% ...
constexpr int kStableChecks = 2;       // ... this many runs in a row: stable
// A best run this much slower than the best pace cannot win: a solver's runs vary by a few
// percent, not by half. A solver with many configs (cuDNN's engine configs) brings many candidates
// within 2x of each other, and timing each of them to a stable pace would cost more than it
// could find.
constexpr double kAbandonFactor = 1.5;
constexpr int kDropAfterRounds = 2;    // ... judged after this many runs, so one unlucky run cannot
// A candidate whose cold and warm runs were both this much slower than the best warm run is dropped
// before the timed rounds and ranked by its warm run: a general kernel can be a thousand times
// slower than the best one on a large problem, and its timed runs would spend the whole time box.
// The smaller of two single runs, so that one run the host delayed cannot drop a solver.
constexpr double kWarmupAbandonFactor = 4.0;
// A cold run beyond that factor by more than this is not timed warm at all: no one-time cost (a
// vendor library's start, loading a kernel module) is that large, so the solver is slow, and its
// warm run would only spend the time box (a general kernel on a large problem: 300 ms a run).
constexpr double kOneTimeCostMs = 100.0;
// Candidates whose paces end within this of the best are near-ties: they get kRunoffRounds more
// interleaved runs (in the box) before the ranking, since a stable pace of 5-9 samples still
// moves by a few percent for 10-20 us calls whose rate the host's launch work sets.
constexpr double kTieRel = 0.03;
constexpr int kRunoffRounds = 12;
// At most this many near-ties go to the runoff, the best paces first: configs of one engine
// with different knobs can tie by the dozen, and which of them wins is worth little.
constexpr int kMaxRunoff = 4;
// One sample is a batch of back-to-back runs lasting about this long, divided by its size: a single
// short run (tens of microseconds) timed alone carries the host's launch work and the event
// round trip, which differ between solvers more than their kernels do; a batch measures the rate at
// which a solver's calls complete when issued one after another, as a user's layers are.
constexpr double kSampleMs = 0.25;
constexpr int kMaxBatch = 64;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

double median(std::vector<double> v) {
  const std::size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  if (v.size() % 2 == 1) return v[mid];
  const double upper = v[mid];
  return (upper + *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid))) / 2;
}

// The figure a candidate is timed and ranked by ("its pace" below). On the host, other processes'
// work only ever adds to a sample (a descheduled pool worker stalls the whole parallel loop for
// its time slice), so the fastest sample is the solver's own pace, while the median follows the
// machine's load and can rank two solvers the wrong way round when a busy period lands on one of
// them more than on the other. A GPU runs its kernels unshared, and there the median resists the
// host's launch jitter, which moves samples both ways.
double pace(const std::vector<double>& times, bool host) {
  return host ? *std::min_element(times.begin(), times.end()) : median(times);
}

std::string size_text(std::size_t bytes) {
  return std::to_string(bytes) + " B";
}

// Elements of random values made on the host for one input; the rest of the input repeats them.
constexpr std::int64_t kRandomBlock = 1 << 16;

// x and w get seeded random data in [-1, 1) so that data-dependent fast paths (zeros) cannot flatter
// a solver. The values only need to be ordinary numbers, not a fixed stream: one block is made on
// the host (a xorshift generator, not dnn::random_tensor) and repeated across the buffer by device
// copies that double the filled part, so a large input costs a few copies, not a host pass over
// every element (about 10 ns each, a quarter of a second for a 25M-element activation).
memory::Buffer random_buffer(runtime::Stream& stream, DType dtype, std::int64_t elements, std::uint64_t seed) {
  const std::size_t element_bytes = size_of(dtype);
  const std::size_t bytes = static_cast<std::size_t>(elements) * element_bytes;
  memory::Buffer buffer = memory::allocate(stream, bytes);
  // Integer inputs (max pooling's kept indices) stay zero: any value is as fast as another, and
  // random ones would not be valid indices.
  const bool is_float = dtype == DType::f32 || dtype == DType::f16 || dtype == DType::bf16;
  if (!is_float) {
    memory::memset(stream, buffer, 0, bytes);
    return buffer;
  }
  const std::int64_t block = std::min(elements, kRandomBlock);
  std::vector<float> values(static_cast<std::size_t>(block));
  std::uint64_t state = seed * 0x9e3779b97f4a7c15ull + 1;
  for (float& v : values) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    v = static_cast<float>(state >> 40) * (2.0f / 16777216.0f) - 1.0f;
  }
  std::vector<std::byte> host(static_cast<std::size_t>(block) * element_bytes);
  dnn::from_float(dtype, values.data(), host.data(), block);
  memory::copy_from_host(stream, buffer, host.data(), host.size());
  auto* base = static_cast<std::byte*>(buffer.data());
  for (std::size_t filled = host.size(); filled < bytes;) {
    const std::size_t n = std::min(filled, bytes - filled);
    stream.copy_d2d(base + filled, base, n);
    filled += n;
  }
  stream.synchronize();  // `host` dies at the end of this function
  return buffer;
}

}  // namespace

ScratchTensors::ScratchTensors(runtime::Stream& stream, dnn::ProblemRef problem) {
  std::uint64_t seed = 1;
  for (const dnn::TensorArg& t : problem.tensors()) {
    buffers.push_back(t.output ? memory::allocate(stream, t.desc.bytes())
                               : random_buffer(stream, t.desc.dtype, t.desc.elements(), seed++));
    args.set(t.id, buffers.back().data());
  }
}

std::string Candidate::label() const {
  std::string out(solver->name());
  if (!config_text.empty()) out += "[" + config_text + "]";
  return out;
}

Candidates find_candidates(dnn::ProblemRef problem, const runtime::Device& device,
                           std::size_t workspace_limit, const std::vector<std::string>& only_solvers,
                           bool log_rejections) {
  Candidates out;
  std::vector<const dnn::SolverBase*> references;
  std::vector<Candidate> fallbacks;
  const bool debug = log_rejections && log::enabled(log::Level::debug);
  auto reject = [&](std::string label, std::string why) {
    if (debug) log::debug("tune " + problem.key() + " on " + device.name() + ": " + label + " rejected: " + why);
    out.rejected.push_back(Rejection{std::move(label), std::move(why)});
  };
  for (const dnn::SolverBase* s : dnn::solvers_of(device.backend(), problem.kind())) {
    if (!only_solvers.empty() &&
        std::find(only_solvers.begin(), only_solvers.end(), s->name()) == only_solvers.end()) {
      continue;  // filtered out by the caller, not a property of the solver: not reported
    }
    // check(), configs and workspace_bytes() can be a solver's own search (a vendor library's
    // plans, cudnnFind): with GALLEY_LOG_LEVEL=debug each accepting solver's share is logged.
    const Clock::time_point prepared_from = Clock::now();
    const dnn::Applicability a = s->check_any(problem, device);
    if (!a) {
      reject(std::string(s->name()), a.reason.empty() ? std::string("check() said no") : a.reason);
      continue;
    }
    // A solver without configs is one candidate; one with configs is one candidate per config.
    std::vector<Candidate> mine;
    const std::vector<std::string> texts = s->configs_any(problem, device);
    if (texts.empty()) {
      mine.push_back(Candidate{s, nullptr, {}});
    } else {
      for (const std::string& text : texts) {
        std::optional<dnn::ConfigHandle> config = s->parse_config_any(problem, device, text);
        if (!config) {
          reject(std::string(s->name()) + "[" + text + "]", "its own config text does not parse back");
          continue;
        }
        mine.push_back(Candidate{s, std::move(*config), text});
      }
    }
    for (Candidate& c : mine) {
      const std::size_t ws = s->workspace_bytes_any(problem, device, c.config.get());
      if (ws > workspace_limit) {
        reject(c.label(), "workspace " + size_text(ws) + " exceeds the limit " + size_text(workspace_limit));
        continue;
      }
      if (out.list_first.solver == nullptr) out.list_first = Candidate{s, nullptr, {}};
      if (s->is_reference()) {
        if (references.empty() || references.back() != s) references.push_back(s);
      } else if (s->is_fallback()) {
        fallbacks.push_back(std::move(c));
      } else {
        out.timed.push_back(std::move(c));
      }
    }
    if (debug) {
      log::debug("tune " + problem.key() + " on " + device.name() + ": " + std::string(s->name()) + " prepared " +
                 std::to_string(mine.size()) + " candidate(s) in " + std::to_string(ms_since(prepared_from)) + " ms");
    }
  }
  if (out.timed.empty()) {
    out.timed = std::move(fallbacks);
  } else {
    for (const Candidate& f : fallbacks) reject(f.label(), "naive fallback, not timed when another solver applies");
  }
  if (!out.timed.empty()) {
    for (const dnn::SolverBase* r : references) {
      reject(std::string(r->name()), "reference solver, not timed when another applies");
    }
  }
  // With only references applicable nothing is timed: the first reference is the answer anyway.
  return out;
}

void throw_no_solver(dnn::ProblemRef problem, const runtime::Device& device,
                     const std::vector<Rejection>& rejected) {
  std::string reasons;
  for (const Rejection& r : rejected) reasons += "\n  " + r.solver + ": " + r.reason;
  throw Error(Status::unsupported, std::string("no ") + dnn::to_string(problem.kind()) + " solver on " + device.name() + " accepts " + problem.key() +
                                       (reasons.empty() ? std::string(" (no candidate solvers)") : reasons));
}

std::vector<Timing> time_solvers(dnn::ProblemRef problem, const runtime::Device& device,
                                 const std::vector<Candidate>& solvers, double time_box_ms,
                                 Clock::time_point box_start, std::vector<Rejection>& rejected, bool& time_box_hit) {
  time_box_hit = false;
  std::vector<Timing> timings;
  if (solvers.empty()) return timings;
  const std::string key = problem.key();
  const bool debug = log::enabled(log::Level::debug);
  const bool host = device.is_cpu();

  runtime::Stream stream(device);
  const Clock::time_point scratch_from = Clock::now();
  ScratchTensors scratch(stream, problem);
  if (debug) log::debug("tune " + key + ": inputs made in " + std::to_string(ms_since(scratch_from)) + " ms");
  runtime::Event before(device), after(device);
  auto out_of_time = [&] { return ms_since(box_start) >= time_box_ms; };

  struct Timed {
    Timed(const Candidate& c, std::size_t ws) : candidate(c), label(c.label()), ws_bytes(ws) {}
    Candidate candidate;
    std::string label;
    std::size_t ws_bytes;
    int batch = 1;  // runs per sample, set from a warm run after the cold warm-up
    std::vector<double> times;
    double cold_ms = 0;    // the first run, one-time costs included
    double warmup_ms = 0;  // the last untimed run: ranks a solver the box or the warm-up drop left untimed
    bool ran_warm = false;  // had a warm run after its cold one
    double last_pace = -1;
    int stable = 0;
    bool active = true;   // still timed in the rounds
    bool in_runoff = false;  // a near-tie, timed in the runoff rounds
    bool failed = false;  // a run failed: not ranked at all
    // The candidate's own prepared-weights slot: its cold run fills it (a one-time cost, like a
    // plan), its later runs read it, so a solver that packs or transforms its weights is timed as
    // it runs for a model's constant weights, the calls the executor gives a slot.
    std::shared_ptr<dnn::PreparedWeights> prepared = std::make_shared<dnn::PreparedWeights>();
  };
  std::vector<Timed> candidates;

  // One run of `c`; the workspace comes from the caching allocator each time (a cached block after
  // the first), so the candidates never hold all their workspaces at once. Returns false when the
  // solver failed, after recording why.
  auto run_once = [&](Timed& c, bool timed) {
    try {
      const int runs = timed ? c.batch : 1;
      // Each call goes through dnn::execute with the solver named, the path users
      // pay for: when calls are issued back to back its host work (checks, workspace, a vendor
      // library's own launch work) is part of a solver's cost and can decide between two solvers
      // whose kernels take 10-30 us. Its GALLEY_LOG_CMD line is not printed for timed calls.
      const dnn::detail::SuppressCmdLog quiet;
      // A sample of short calls starts with one untimed call: the candidates take turns, so each
      // sample's first call finds the solver's host path cold (another library's code ran since),
      // which costs a vendor call tens of microseconds. Spread over a 0.5 ms sample that cost would
      // decide between solvers within a few percent, which a steady stream of calls does not pay.
      dnn::OpArgs args = scratch.args;
      args.prepared = c.prepared;
      if (timed && runs > 1) dnn::execute_choice("tune", stream, problem, args, c.candidate.choice());
      before.record(stream);
      for (int i = 0; i < runs; ++i) dnn::execute_choice("tune", stream, problem, args, c.candidate.choice());
      after.record(stream);
      after.synchronize();
      const double t = after.elapsed_ms_since(before) / runs;
      if (timed) {
        c.times.push_back(t);
      } else {
        c.warmup_ms = t;
      }
      if (debug) log::debug("tune " + key + ": " + c.label +
                            (timed ? " run " + std::to_string(c.times.size()) : std::string(" warm-up")) + ": " +
                            std::to_string(t) + " ms");
      return true;
    } catch (const Error& e) {
      // A solver that fails at run time is not a candidate; the others still are.
      try {
        stream.synchronize();
      } catch (const Error&) {
      }
      if (debug) log::debug("tune " + key + ": " + c.label + " rejected: run failed: " + e.what());
      rejected.push_back(Rejection{c.label, std::string("run failed: ") + e.what()});
      c.active = false;
      c.failed = true;
      c.times.clear();
      return false;
    }
  };

  // Warm-up in list order (first touch of workspace, caches, lazy setup). Solvers not reached before
  // the box runs out are not run at all; the first one always is, so there is an answer.
  double best_warm = std::numeric_limits<double>::infinity();
  for (const Candidate& s : solvers) {
    if (!candidates.empty() && out_of_time()) {
      time_box_hit = true;
      if (debug) log::debug("tune " + key + ": " + s.label() + " not timed: time box of " +
                            std::to_string(time_box_ms) + " ms used up");
      continue;
    }
    Timed c(s, s.solver->workspace_bytes_any(problem, device, s.config.get()));
    // The cold run, then a warm one that sizes the batch (the cold run carries one-time costs).
    if (!run_once(c, false)) continue;
    c.cold_ms = c.warmup_ms;
    const bool hopeless = c.cold_ms > kWarmupAbandonFactor * best_warm + kOneTimeCostMs;
    if (hopeless && debug) {
      log::debug("tune " + key + ": " + c.label + " not run warm: its cold run took " + std::to_string(c.cold_ms) +
                 " ms against the best warm run's " + std::to_string(best_warm) + " ms");
    }
    if (!hopeless && !out_of_time() && run_once(c, false)) {
      c.batch = std::clamp(static_cast<int>(std::ceil(kSampleMs / std::max(c.warmup_ms, 1e-4))), 1, kMaxBatch);
      c.ran_warm = true;
      best_warm = std::min(best_warm, c.warmup_ms);
    }
    if (!c.failed) candidates.push_back(std::move(c));
  }
  for (Timed& c : candidates) {
    // A best warm run of 0 ms (below the clock's resolution) is no yardstick: nothing is dropped.
    const auto far_behind = [&] {
      return best_warm > 0 && std::min(c.cold_ms, c.warmup_ms) > kWarmupAbandonFactor * best_warm;
    };
    // On the host one warm run can still carry one-time costs (a pool thread's first touch of its
    // buffers, a prepared slot's first fill) or land on a busy machine: a candidate runs warm once
    // more before it is dropped, and keeps the faster of its warm runs. A device run is timed by
    // the device's own events, which other processes do not stretch, and a slow general kernel
    // there would spend a whole run (tens of milliseconds on a large problem) to confirm itself.
    if (host && far_behind() && c.ran_warm && !out_of_time()) {
      const double first_warm = c.warmup_ms;
      if (run_once(c, false)) c.warmup_ms = std::min(c.warmup_ms, first_warm);
    }
    if (!c.failed && far_behind()) {
      if (debug) log::debug("tune " + key + ": " + c.label + " dropped after its warm-up: " +
                            std::to_string(c.warmup_ms) + " ms against the best warm run's " +
                            std::to_string(best_warm) + " ms");
      c.active = false;
    }
  }

  // Timed rounds: every active candidate once per round, so that a shared machine's drifting load
  // hits all of them alike instead of favouring whoever ran in a quiet moment. Once the box is used
  // up nothing more runs: tuning overruns the box by at most the one run in flight.
  // Each round starts one candidate further along the list, so that no solver always runs right
  // after the same neighbour (whose work can leave the device or the host's caches warmer or colder).
  // Returns whether any candidate ran.
  auto run_round = [&](int round, const std::function<bool(const Timed&)>& takes_part) {
    bool any = false;
    const std::size_t n = candidates.size();
    for (std::size_t k = 0; k < n; ++k) {
      Timed& c = candidates[(k + static_cast<std::size_t>(round)) % n];
      if (!c.active || !takes_part(c)) continue;
      if (out_of_time()) {
        time_box_hit = true;
        break;
      }
      any = true;
      run_once(c, true);
    }
    return any;
  };
  auto everyone = [](const Timed&) { return true; };
  // The best pace of the candidates timed so far (a dropped one's is never the best).
  auto best_pace = [&] {
    double lowest = std::numeric_limits<double>::infinity();
    for (const Timed& c : candidates)
      if (!c.times.empty()) lowest = std::min(lowest, pace(c.times, host));
    return lowest;
  };
  for (int round = 1; round <= kMaxRuns && !time_box_hit; ++round) {
    if (!run_round(round, everyone)) break;
    for (Timed& c : candidates) {
      if (c.active && static_cast<int>(c.times.size()) >= kMinRuns) {
        const double m = pace(c.times, host);
        c.stable = (c.last_pace > 0 && std::abs(m - c.last_pace) <= kStableRel * m) ? c.stable + 1 : 0;
        c.last_pace = m;
      }
    }
    // Stop once every remaining candidate's pace is stable. They stop together, so each one's
    // runs stay interleaved with the others' to the end.
    bool all_stable = true;
    for (const Timed& c : candidates) all_stable = all_stable && (!c.active || c.stable >= kStableChecks);
    if (all_stable) break;
    // After a few rounds, a candidate whose best run is far behind the best pace cannot win.
    if (round >= kDropAfterRounds) {
      const double best = best_pace();
      for (Timed& c : candidates) {
        if (c.active && !c.times.empty() && *std::min_element(c.times.begin(), c.times.end()) > kAbandonFactor * best) {
          if (debug) log::debug("tune " + key + ": " + c.label + " dropped: more than " +
                                std::to_string(kAbandonFactor) + "x slower than the best");
          c.active = false;
        }
      }
    }
  }
  // Near-ties: more interleaved runs of the candidates whose paces ended within kTieRel of the
  // best one (chosen once, before the runoff).
  const double best = best_pace();
  std::string runoff_names;
  std::vector<Timed*> ties;
  for (Timed& c : candidates) {
    if (c.active && !c.times.empty() && pace(c.times, host) <= (1 + kTieRel) * best) ties.push_back(&c);
  }
  std::stable_sort(ties.begin(), ties.end(),
                   [&](const Timed* a, const Timed* b) { return pace(a->times, host) < pace(b->times, host); });
  if (ties.size() > static_cast<std::size_t>(kMaxRunoff)) ties.resize(kMaxRunoff);
  for (Timed* c : ties) {
    c->in_runoff = true;
    runoff_names += (runoff_names.empty() ? "" : ", ") + c->label;
  }
  if (ties.size() > 1 && !time_box_hit) {
    if (debug) log::debug("tune " + key + ": runoff of " + std::to_string(ties.size()) + " candidates within " +
                          std::to_string(static_cast<int>(kTieRel * 100)) + "% of the best (" + runoff_names +
                          "): " + std::to_string(kRunoffRounds) + " more rounds");
    auto in_runoff = [](const Timed& c) { return c.in_runoff; };
    for (int round = 1; round <= kRunoffRounds && !time_box_hit; ++round) {
      if (!run_round(round, in_runoff)) break;
    }
  }
  stream.synchronize();
  for (const Timed& c : candidates) {
    if (c.failed) continue;
    // Cut off by the box, or dropped after its warm-up, before any timed run: the warm-up (a
    // pessimistic sample) ranks it.
    const double m = c.times.empty() ? c.warmup_ms : pace(c.times, host);
    if (debug) log::debug("tune " + key + ": " + c.label +
                          (c.times.empty() ? " ranked by its warm-up run, " + std::to_string(m) + " ms"
                                           : (host ? " fastest " : " median ") + std::to_string(m) + " ms over " +
                                                 std::to_string(c.times.size()) + " runs"));
    timings.push_back(Timing{c.candidate, m, c.ws_bytes, static_cast<int>(c.times.size())});
  }
  if (out_of_time()) time_box_hit = true;
  std::stable_sort(timings.begin(), timings.end(),
                   [](const Timing& a, const Timing& b) { return a.ms < b.ms; });
  return timings;
}

}  // namespace galley::tuning::detail
