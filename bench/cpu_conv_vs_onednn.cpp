// Times Galley's cpu conv solvers beside oneDNN and a naive loop, in one program and one run.
//
//   cpu_conv_vs_onednn PROBLEMS_FILE [--batch N] [--min-time S] [--rounds R] [--no-naive]
//                      [--only TAG] [--onednn-isa all|avx2] [--galley-isa avx512|avx2|scalar] [--wall]
//
// For every problem of the file (MIOpenDriver syntax, shared/bench/conv_problems.txt) at batch N
// (default 2), fp32 NCHW: each Galley cpu solver that accepts it (through the public Stream
// path), oneDNN with plain NCHW/OIHW tensors, oneDNN with its blocked layouts (format_tag::any)
// with and without the activation reorders, and a naive 7-loop. Every output is checked against
// the double-precision reference before anything is timed. Prints a Markdown table and geomeans
// for bench/RESULTS.md.
//
// Timing: every candidate of a problem is sampled in R rounds (default 3) taken in turn, for
// S seconds per candidate in all (default 0.6), and the median over all samples is reported, so
// a disturbance that lasts one sampling window (other work on a shared machine) moves one round,
// not the result. oneDNN runs in the calling thread: wall clock around execute + wait. Galley
// ops run on a cpu Stream (a worker thread) and are timed as `galley bench conv` and GPU
// benchmarks time kernels, by events around each op with the ops enqueued back to back, so the
// host-to-stream handoff is not counted (--wall: run + synchronize per op, handoff included).
//
// --onednn-isa avx2 caps oneDNN at AVX2 (dnnl::set_max_cpu_isa), the instruction set of Galley's
// cpu kernels, for a like-for-like comparison on a CPU that also has AVX-512. --galley-isa caps
// Galley's kernels the same way (default: all the CPU has; below avx512 the GEMM solvers call
// OpenBLAS, at avx512 Galley's packed kernel).
#include <cblas.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "dnn/ref_conv_direct.hpp"
#include "dnn/tensor_data.hpp"
#include "galley/dnn/conv_solver.hpp"
#include "galley/runtime/device.hpp"
#include "backends/cpu/conv_isa.hpp"
#include "galley/runtime/stream.hpp"
#include "onednn_conv.hpp"

namespace {

using galley::dnn::ConvProblem;
namespace gb = galley::bench;

struct Options {
  std::string file;
  std::int64_t batch = 2;
  double min_time = 0.6;  // seconds of samples per candidate, over all rounds
  int rounds = 3;
  bool naive = true;
  std::string only;       // run only problems whose tag contains this
  std::string onednn_isa = "all";
  std::string galley_isa = "avx512";  // a cap: the CPU's own level when lower
  bool wall = false;      // time Galley ops by run + synchronize instead of events
};

// The textbook loop nest: n, k, oh, ow, c, r, s; one thread, f32 accumulation.
void naive_conv(const ConvProblem& p, const float* x, const float* w, float* y) {
  const std::int64_t ho = p.out_h(), wo = p.out_w(), cg = p.c / p.groups, kg = p.k / p.groups;
  for (std::int64_t n = 0; n < p.n; ++n)
    for (std::int64_t k = 0; k < p.k; ++k)
      for (std::int64_t oh = 0; oh < ho; ++oh)
        for (std::int64_t ow = 0; ow < wo; ++ow) {
          float acc = 0.0f;
          const std::int64_t g = k / kg;
          for (std::int64_t c = 0; c < cg; ++c)
            for (std::int64_t r = 0; r < p.y; ++r)
              for (std::int64_t s = 0; s < p.x; ++s) {
                const std::int64_t ih = oh * p.stride_h - p.pad_h + r * p.dilation_h;
                const std::int64_t iw = ow * p.stride_w - p.pad_w + s * p.dilation_w;
                if (ih < 0 || ih >= p.h || iw < 0 || iw >= p.w) continue;
                acc += x[((n * p.c + g * cg + c) * p.h + ih) * p.w + iw] * w[((k * cg + c) * p.y + r) * p.x + s];
              }
          y[((n * p.k + k) * ho + oh) * wo + ow] = acc;
        }
}

// One column of the table: how to sample it, and what came out.
struct Candidate {
  std::string name;
  std::function<std::vector<double>(double seconds)> sample;
  std::vector<double> ms;
  bool verified = true;
  std::optional<double> gflops;
};

std::string cell(const std::optional<double>& gflops, bool verified) {
  if (!gflops) return "-";
  char text[48];
  std::snprintf(text, sizeof text, "%.1f%s", *gflops, verified ? "" : " FAIL");
  return text;
}

std::string short_name(std::string_view solver) {
  const std::string prefix = "cpu.conv.";
  std::string s(solver);
  return s.rfind(prefix, 0) == 0 ? s.substr(prefix.size()) : s;
}

// GALLEY_NUM_THREADS or the hardware threads, as the cpu backend's pool reads it.
int galley_pool_threads() {
  const char* v = std::getenv("GALLEY_NUM_THREADS");
  return v != nullptr && *v != '\0' ? std::atoi(v) : static_cast<int>(std::thread::hardware_concurrency());
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error(a + " needs a value");
      return argv[++i];
    };
    if (a == "--batch") {
      o.batch = std::stoll(next());
    } else if (a == "--min-time") {
      o.min_time = std::stod(next());
    } else if (a == "--rounds") {
      o.rounds = std::max(1, std::stoi(next()));
    } else if (a == "--wall") {
      o.wall = true;
    } else if (a == "--no-naive") {
      o.naive = false;
    } else if (a == "--only") {
      o.only = next();
    } else if (a == "--onednn-isa") {
      o.onednn_isa = next();
      if (o.onednn_isa != "all" && o.onednn_isa != "avx2") {
        throw std::runtime_error("--onednn-isa '" + o.onednn_isa + "' (valid: all, avx2)");
      }
    } else if (a == "--galley-isa") {
      o.galley_isa = next();
      galley::backends::cpu::parse_cpu_isa(o.galley_isa);  // throws naming a bad value
    } else if (!a.empty() && a[0] != '-' && o.file.empty()) {
      o.file = a;
    } else {
      throw std::runtime_error("unknown argument '" + a + "'");
    }
  }
  if (o.file.empty()) {
    throw std::runtime_error(
        "usage: cpu_conv_vs_onednn PROBLEMS_FILE [--batch N] [--min-time S] [--rounds R] [--no-naive] "
        "[--only TAG] [--onednn-isa all|avx2] [--galley-isa avx512|avx2|scalar] [--wall]");
  }
  return o;
}

int run(int argc, char** argv) {
  const Options o = parse(argc, argv);
  // Must happen before oneDNN creates any primitive.
  if (o.onednn_isa == "avx2" && dnnl::set_max_cpu_isa(dnnl::cpu_isa::avx2) != dnnl::status::success) {
    throw std::runtime_error("oneDNN refused to cap its ISA at AVX2");
  }
  galley::backends::cpu::set_cpu_isa_cap(galley::backends::cpu::parse_cpu_isa(o.galley_isa));
  std::ifstream in(o.file);
  if (!in) throw std::runtime_error("cannot open problems file '" + o.file + "'");
  const galley::runtime::Device cpu = galley::runtime::device("cpu");
  galley::runtime::Stream stream(cpu);
  std::vector<const galley::dnn::ConvSolver*> solvers;
  for (const auto* s : galley::dnn::conv_solvers("cpu")) {
    if (!s->is_reference()) solvers.push_back(s);
  }
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream dstream(engine);

  std::string cmdline;
  for (int i = 0; i < argc; ++i) cmdline += (i ? " " : "") + std::string(argv[i]);
  const std::time_t now = std::time(nullptr);
  char date[64];
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  const dnnl_version_t* dv = dnnl_version();
  std::printf("command: `%s`\n\ndate: %s; machine: %s; load average at start %s; oneDNN %d.%d.%d (ISA %s); %s; "
              "Galley kernels %s; Galley pool %d threads, timed by %s; batch %lld, fp32, NCHW; %d rounds, %.2f s per candidate; "
              "GFLOP/s = 2*N*K*Ho*Wo*(C/g)*R*S / median time\n\n",
              cmdline.c_str(), date, gb::machine().c_str(), gb::load_average().c_str(), dv->major, dv->minor,
              dv->patch, o.onednn_isa == "avx2" ? "capped at AVX2" : "all the CPU has", openblas_get_config(),
              std::string(galley::backends::cpu::to_string(galley::backends::cpu::cpu_isa())).c_str(),
              galley_pool_threads(), o.wall ? "run + synchronize" : "stream events", static_cast<long long>(o.batch),
              o.rounds, o.min_time);

  std::printf("| problem | GFLOP | own best | solver |");
  for (const auto* s : solvers) std::printf(" %s |", short_name(s->name()).c_str());
  std::printf(" oneDNN nchw | oneDNN blocked | blocked+reorders | naive | best/blocked |\n|---|---:|---:|---|");
  for (std::size_t i = 0; i < solvers.size(); ++i) std::printf("---:|");
  std::printf("---:|---:|---:|---:|---:|\n");
  std::fflush(stdout);

  std::vector<double> g_best, g_plain, g_blocked, g_reord, g_naive, g_best_over_naive;
  std::map<std::string, std::vector<double>> g_solver;
  std::vector<std::pair<std::string, std::string>> impl_list;
  std::vector<std::string> failures, depthwise_notes;
  std::string line;
  std::uint64_t seed = 1;
  while (std::getline(in, line)) {
    const auto first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#') continue;
    std::string tag;
    ConvProblem p = ConvProblem::parse_driver_line(line, &tag);
    if (!o.only.empty() && tag.find(o.only) == std::string::npos) continue;
    p.n = o.batch;
    p.dtype = galley::DType::f32;
    p.layout = galley::dnn::Layout::nchw;
    p.validate();
    const double flop = p.flops();
    const auto xb = galley::dnn::random_tensor(galley::DType::f32, p.x_desc().elements(), seed++);
    const auto wb = galley::dnn::random_tensor(galley::DType::f32, p.w_desc().elements(), seed++);
    std::vector<float> x(static_cast<std::size_t>(p.x_desc().elements()));
    std::vector<float> w(static_cast<std::size_t>(p.w_desc().elements()));
    std::memcpy(x.data(), xb.data(), xb.size());
    std::memcpy(w.data(), wb.data(), wb.size());
    std::vector<float> ref(static_cast<std::size_t>(p.y_desc().elements())), y(ref.size());
    galley::dnn::reference_conv_forward(p, x.data(), w.data(), ref.data());
    // Poisons y, runs `step` once and checks y against the reference.
    auto verify = [&](const std::string& who, const std::function<void()>& step) {
      std::fill(y.begin(), y.end(), NAN);
      step();
      const auto cmp = galley::dnn::compare_outputs(galley::DType::f32, y.data(), ref.data(),
                                                    static_cast<std::int64_t>(y.size()),
                                                    galley::dnn::conv_tolerance(galley::DType::f32));
      if (!cmp.passed) failures.push_back(tag + " " + who + ": " + cmp.summary);
      return cmp.passed;
    };

    // Galley's solvers, each with its own workspace, then oneDNN's three ways.
    std::vector<Candidate> candidates;
    std::vector<std::vector<float>> workspaces(solvers.size());
    std::vector<int> solver_column(solvers.size(), -1);
    for (std::size_t i = 0; i < solvers.size(); ++i) {
      const auto* s = solvers[i];
      if (!s->check(p, cpu)) continue;
      const std::size_t bytes = s->workspace_bytes(p, cpu);
      workspaces[i].resize((bytes + sizeof(float) - 1) / sizeof(float));
      const galley::dnn::ConvArgs args{x.data(), w.data(), y.data(), workspaces[i].data(), bytes};
      auto run_sync = [&stream, &p, s, args] {
        s->run(stream, p, args);
        stream.synchronize();
      };
      Candidate c{std::string(s->name()), {}, {}, true, {}};
      c.verified = verify(c.name, run_sync);
      if (o.wall) {
        c.sample = [run_sync](double sec) { return gb::sample_wall_ms(sec, run_sync); };
      } else {
        c.sample = [&stream, &p, s, args](double sec) {
          return gb::sample_event_ms(sec, stream, [&] { s->run(stream, p, args); });
        };
      }
      solver_column[i] = static_cast<int>(candidates.size());
      candidates.push_back(std::move(c));
    }
    gb::OneDnnConv onednn(engine, dstream, p, x.data(), w.data(), y.data());
    impl_list.emplace_back(tag, onednn.implementations());
    const std::size_t first_onednn = candidates.size();
    candidates.push_back({"oneDNN nchw", [&](double sec) { return gb::sample_wall_ms(sec, [&] { onednn.plain(); }); },
                          {}, verify("oneDNN nchw", [&] { onednn.plain(); }), {}});
    candidates.push_back({"oneDNN blocked",
                          [&](double sec) { return gb::sample_wall_ms(sec, [&] { onednn.blocked(); }); }, {}, true, {}});
    candidates.push_back({"oneDNN blocked+reorders",
                          [&](double sec) { return gb::sample_wall_ms(sec, [&] { onednn.blocked_with_reorders(); }); },
                          {}, verify("oneDNN blocked", [&] { onednn.blocked_with_reorders(); }), {}});
    candidates[first_onednn + 1].verified = candidates[first_onednn + 2].verified;

    for (int round = 0; round < o.rounds; ++round) {
      for (auto& c : candidates) {
        const auto ms = c.sample(o.min_time / o.rounds);
        c.ms.insert(c.ms.end(), ms.begin(), ms.end());
      }
    }
    for (auto& c : candidates) c.gflops = flop / gb::median(c.ms) / 1e6;

    std::optional<double> naive;
    bool naive_ok = true;
    if (o.naive) {
      const auto t0 = gb::Clock::now();
      naive_ok = verify("naive", [&] { naive_conv(p, x.data(), w.data(), y.data()); });
      naive = flop / std::chrono::duration<double, std::milli>(gb::Clock::now() - t0).count() / 1e6;
    }

    std::optional<double> best;
    std::string best_name = "-";
    for (std::size_t i = 0; i < solvers.size(); ++i) {
      if (solver_column[i] < 0) continue;
      const Candidate& c = candidates[static_cast<std::size_t>(solver_column[i])];
      if (!c.verified) continue;
      g_solver[short_name(c.name)].push_back(*c.gflops);
      if (!best || *c.gflops > *best) {
        best = c.gflops;
        best_name = short_name(c.name);
      }
    }
    const Candidate& plain = candidates[first_onednn];
    const Candidate& blocked = candidates[first_onednn + 1];
    const Candidate& reord = candidates[first_onednn + 2];
    if (best) g_best.push_back(*best);
    if (plain.verified) g_plain.push_back(*plain.gflops);
    if (blocked.verified) g_blocked.push_back(*blocked.gflops);
    if (reord.verified) g_reord.push_back(*reord.gflops);
    if (naive && naive_ok) g_naive.push_back(*naive);
    if (naive && naive_ok && best) g_best_over_naive.push_back(*best / *naive);
    if (p.is_depthwise() && best) {
      char text[200];
      std::snprintf(text, sizeof text,
                    "%s: own best %.1f = %.2fx oneDNN nchw, %.2fx oneDNN blocked, %.2fx blocked+reorders",
                    tag.c_str(), *best, *best / *plain.gflops, *best / *blocked.gflops, *best / *reord.gflops);
      depthwise_notes.emplace_back(text);
    }

    std::printf("| %s | %.3f | %s | %s |", tag.c_str(), flop / 1e9, cell(best, true).c_str(), best_name.c_str());
    for (std::size_t i = 0; i < solvers.size(); ++i) {
      if (solver_column[i] < 0) {
        std::printf(" - |");
      } else {
        const Candidate& c = candidates[static_cast<std::size_t>(solver_column[i])];
        std::printf(" %s |", cell(c.gflops, c.verified).c_str());
      }
    }
    std::printf(" %s | %s | %s | %s | %.2f |\n", cell(plain.gflops, plain.verified).c_str(),
                cell(blocked.gflops, blocked.verified).c_str(), cell(reord.gflops, reord.verified).c_str(),
                cell(naive, naive_ok).c_str(), best ? *best / *blocked.gflops : NAN);
    std::fflush(stdout);
  }

  const double gbest = gb::geomean(g_best), gblk = gb::geomean(g_blocked);
  std::printf("\n**Geomean GFLOP/s over %zu problems:** own best %.1f; oneDNN nchw %.1f; oneDNN blocked %.1f; "
              "blocked+reorders %.1f; naive %.2f\n\n",
              g_best.size(), gbest, gb::geomean(g_plain), gblk, gb::geomean(g_reord), gb::geomean(g_naive));
  std::printf("Per solver (geomean over the problems it accepts):");
  for (const auto& [name, v] : g_solver) std::printf(" %s %.1f (%zu);", name.c_str(), gb::geomean(v), v.size());
  std::printf("\n\nTargets: own best / oneDNN blocked = %.2f (target >= 0.6); own best / oneDNN nchw = %.2f; "
              "own best / naive = %.0fx (geomean of per-problem ratios, target >= 50x)\n",
              gbest / gblk, gbest / gb::geomean(g_plain), gb::geomean(g_best_over_naive));
  for (const auto& d : depthwise_notes) std::printf("\nDepthwise %s (target >= 1.0x)\n", d.c_str());
  std::printf("\nLoad average at the end: %s\n", gb::load_average().c_str());
  std::printf("\noneDNN implementations:\n");
  for (const auto& [tag, impl] : impl_list) std::printf("- %s: %s\n", tag.c_str(), impl.c_str());
  if (!failures.empty()) {
    std::printf("\nVERIFICATION FAILURES:\n");
    for (const auto& f : failures) std::printf("- %s\n", f.c_str());
    return 1;
  }
  std::printf("\nAll outputs verified against the double-precision reference (max_rel_err <= %g).\n",
              galley::dnn::conv_tolerance(galley::DType::f32));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cpu_conv_vs_onednn: %s\n", e.what());
    return 2;
  }
}
