#include "conv_benchmark.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>

#include "dnn/tensor_data.hpp"
#include "galley/core/error.hpp"
#include "galley/core/log.hpp"
#include "galley/memory/buffer.hpp"
#include "galley/runtime/stream.hpp"

namespace galley::tuning::detail {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kMinRuns = 5;            // before a median is trusted at all
constexpr int kMaxRuns = 100;          // a noisy machine must not keep one solver forever
constexpr double kStableRel = 0.01;    // the median moved by <= 1% ...
constexpr int kStableChecks = 2;       // ... this many runs in a row: stable
constexpr double kAbandonFactor = 1.5; // first runs this much slower than the best cannot win

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

std::string size_text(std::size_t bytes) {
  return std::to_string(bytes) + " B";
}

// x and w get seeded random data so that data-dependent fast paths (zeros) cannot flatter a solver.
memory::Buffer random_buffer(runtime::Stream& stream, DType dtype, std::int64_t elements, std::uint64_t seed) {
  const auto host = dnn::random_tensor(dtype, elements, seed);
  memory::Buffer buffer = memory::allocate(stream, host.size());
  memory::copy_from_host(stream, buffer, host.data(), host.size());
  stream.synchronize();  // `host` dies at the end of this function
  return buffer;
}

}  // namespace

Candidates find_candidates(const dnn::ConvProblem& problem, const runtime::Device& device,
                           std::size_t workspace_limit, const std::vector<std::string>& only_solvers) {
  Candidates out;
  std::vector<const dnn::ConvSolver*> references;
  const bool debug = log::enabled(log::Level::debug);
  auto reject = [&](const dnn::ConvSolver* s, std::string why) {
    if (debug) log::debug("tune " + problem.key() + " on " + device.name() + ": " + std::string(s->name()) +
                          " rejected: " + why);
    out.rejected.push_back(Rejection{std::string(s->name()), std::move(why)});
  };
  for (const dnn::ConvSolver* s : dnn::conv_solvers(device.backend())) {
    if (!only_solvers.empty() &&
        std::find(only_solvers.begin(), only_solvers.end(), s->name()) == only_solvers.end()) {
      continue;  // filtered out by the caller, not a property of the solver: not reported
    }
    const dnn::Applicability a = s->check(problem, device);
    if (!a) {
      reject(s, a.reason.empty() ? std::string("check() said no") : a.reason);
      continue;
    }
    const std::size_t ws = s->workspace_bytes(problem, device);
    if (ws > workspace_limit) {
      reject(s, "workspace " + size_text(ws) + " exceeds the limit " + size_text(workspace_limit));
      continue;
    }
    if (out.list_first == nullptr) out.list_first = s;
    if (s->is_reference()) {
      references.push_back(s);
    } else {
      out.timed.push_back(s);
    }
  }
  if (!out.timed.empty()) {
    for (const dnn::ConvSolver* r : references) reject(r, "reference solver, not timed when another applies");
  }
  // With only references applicable nothing is timed: the first reference is the answer anyway.
  return out;
}

void throw_no_solver(const dnn::ConvProblem& problem, const runtime::Device& device,
                     const std::vector<Rejection>& rejected) {
  std::string reasons;
  for (const Rejection& r : rejected) reasons += "\n  " + r.solver + ": " + r.reason;
  throw Error(Status::unsupported, "no conv solver on " + device.name() + " accepts " + problem.key() +
                                       (reasons.empty() ? std::string(" (no candidate solvers)") : reasons));
}

std::vector<Timing> time_solvers(const dnn::ConvProblem& problem, const runtime::Device& device,
                                 const std::vector<const dnn::ConvSolver*>& solvers, double time_box_ms,
                                 std::vector<Rejection>& rejected, bool& time_box_hit) {
  time_box_hit = false;
  std::vector<Timing> timings;
  if (solvers.empty()) return timings;
  const auto start = Clock::now();
  const std::string key = problem.key();
  const bool debug = log::enabled(log::Level::debug);

  runtime::Stream stream(device);
  memory::Buffer x = random_buffer(stream, problem.dtype, problem.x_desc().elements(), 1);
  memory::Buffer w = random_buffer(stream, problem.dtype, problem.w_desc().elements(), 2);
  memory::Buffer y = memory::allocate(stream, problem.y_desc().bytes());
  runtime::Event before(device), after(device);
  double best = 0;  // best median so far, 0 before the first

  for (std::size_t i = 0; i < solvers.size(); ++i) {
    const dnn::ConvSolver* s = solvers[i];
    const double left = time_box_ms - ms_since(start);
    if (left <= 0) {
      time_box_hit = true;
      for (std::size_t j = i; j < solvers.size(); ++j) {
        if (debug) log::debug("tune " + key + ": " + std::string(solvers[j]->name()) + " not timed: time box of " +
                              std::to_string(time_box_ms) + " ms used up");
      }
      break;
    }
    // Each remaining solver gets an equal share of what is left; unused shares pass on.
    const double share_ms = left / static_cast<double>(solvers.size() - i);
    try {
      const std::size_t ws_bytes = s->workspace_bytes(problem, device);
      memory::Buffer ws = memory::allocate(stream, ws_bytes);
      const dnn::ConvArgs args{x.data(), w.data(), y.data(), ws.data(), ws_bytes};
      const auto solver_start = Clock::now();
      s->run(stream, problem, args);  // warm-up: first-touch of workspace, caches, lazy setup
      stream.synchronize();

      std::vector<double> times;
      double last_median = -1;
      int stable = 0;
      for (;;) {
        before.record(stream);
        s->run(stream, problem, args);
        after.record(stream);
        after.synchronize();
        const double t = after.elapsed_ms_since(before);
        times.push_back(t);
        if (debug) log::debug("tune " + key + ": " + std::string(s->name()) + " run " + std::to_string(times.size()) +
                              ": " + std::to_string(t) + " ms");
        // Two runs, so that one hiccup of a loaded machine cannot discard the real winner.
        if (times.size() == 2 && best > 0 && std::min(times[0], times[1]) > kAbandonFactor * best) break;
        if (static_cast<int>(times.size()) >= kMinRuns) {
          const double m = median(times);
          stable = (last_median > 0 && std::abs(m - last_median) <= kStableRel * m) ? stable + 1 : 0;
          last_median = m;
          if (stable >= kStableChecks) break;
        }
        if (static_cast<int>(times.size()) >= kMaxRuns) break;
        if (ms_since(solver_start) >= share_ms) {
          if (ms_since(start) >= time_box_ms) time_box_hit = true;
          break;
        }
      }
      stream.synchronize();
      const double m = median(times);
      if (debug) log::debug("tune " + key + ": " + std::string(s->name()) + " median " + std::to_string(m) +
                            " ms over " + std::to_string(times.size()) + " runs");
      timings.push_back(Timing{s, m, ws_bytes, static_cast<int>(times.size())});
      if (best == 0 || m < best) best = m;
    } catch (const Error& e) {
      // A solver that fails at run time is not a candidate; the others still are.
      try {
        stream.synchronize();
      } catch (const Error&) {
      }
      if (debug) log::debug("tune " + key + ": " + std::string(s->name()) + " rejected: run failed: " + e.what());
      rejected.push_back(Rejection{std::string(s->name()), std::string("run failed: ") + e.what()});
    }
  }
  if (ms_since(start) >= time_box_ms) time_box_hit = true;
  std::stable_sort(timings.begin(), timings.end(),
                   [](const Timing& a, const Timing& b) { return a.median_ms < b.median_ms; });
  return timings;
}

}  // namespace galley::tuning::detail
