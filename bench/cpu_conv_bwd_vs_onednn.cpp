// Times Galley's cpu backward-convolution solvers beside oneDNN's, in one program and one run.
//
//   cpu_conv_bwd_vs_onednn PROBLEMS_FILE [--batch N] [--min-time S] [--rounds R] [--only TAG]
//                          [--pass data|weights|both]
//
// For every problem of the file (MIOpenDriver syntax, shared/bench/conv_problems.txt) at batch N
// (default 2), fp32 NCHW, and for each backward pass (backward data: dx from dy and w; backward
// weights: dw from x and dy): each Galley cpu solver of that pass that accepts it (through the
// public Stream path), oneDNN with plain NCHW/OIHW tensors, and oneDNN with its blocked layouts
// (format_tag::any) timed on inputs already reordered, its kernel alone. Every output is checked
// against the double-precision backward reference before anything is timed. Prints a Markdown
// table and geomeans for bench/RESULTS.md.
//
// Timing as bench/cpu_conv_vs_onednn: every candidate sampled in R rounds (default 3) taken in
// turn, S seconds per candidate in all (default 0.6), the median over all samples reported.
// oneDNN runs in the calling thread (wall clock around execute + wait); Galley ops run on a cpu
// Stream and are timed by events around each op, enqueued back to back.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "backends/cpu/conv_isa.hpp"
#include "bench_util.hpp"
#include "dnn/conv_backward_args.hpp"
#include "dnn/ref_conv_backward.hpp"
#include "dnn/tensor_data.hpp"
#include "galley/dnn/conv_solver.hpp"
#include "galley/runtime/device.hpp"
#include "galley/runtime/stream.hpp"
#include "onednn_conv_bwd.hpp"

namespace {

using galley::dnn::ConvDirection;
using galley::dnn::ConvProblem;
namespace gb = galley::bench;

struct Options {
  std::string file;
  std::int64_t batch = 2;
  double min_time = 0.6;
  int rounds = 3;
  std::string only;
  std::string pass = "both";
};

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
    } else if (a == "--only") {
      o.only = next();
    } else if (a == "--pass") {
      o.pass = next();
      if (o.pass != "data" && o.pass != "weights" && o.pass != "both") {
        throw std::runtime_error("--pass '" + o.pass + "' (valid: data, weights, both)");
      }
    } else if (!a.empty() && a[0] != '-' && o.file.empty()) {
      o.file = a;
    } else {
      throw std::runtime_error("unknown argument '" + a + "'");
    }
  }
  if (o.file.empty()) {
    throw std::runtime_error(
        "usage: cpu_conv_bwd_vs_onednn PROBLEMS_FILE [--batch N] [--min-time S] [--rounds R] [--only TAG] "
        "[--pass data|weights|both]");
  }
  return o;
}

struct Totals {
  std::vector<double> best, plain, blocked, best_over_blocked;
  std::map<std::string, std::vector<double>> per_solver;
};

int run(int argc, char** argv) {
  const Options o = parse(argc, argv);
  std::ifstream in(o.file);
  if (!in) throw std::runtime_error("cannot open problems file '" + o.file + "'");
  const galley::runtime::Device cpu = galley::runtime::device("cpu");
  galley::runtime::Stream stream(cpu);
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream dstream(engine);

  std::vector<ConvDirection> passes;
  if (o.pass != "weights") passes.push_back(ConvDirection::backward_data);
  if (o.pass != "data") passes.push_back(ConvDirection::backward_weights);
  std::vector<const galley::dnn::ConvSolver*> solvers;  // every non-reference solver of a backward pass
  {
    ConvProblem probe{.c = 2, .h = 3, .w = 3, .k = 2, .y = 3, .x = 3, .pad_h = 1, .pad_w = 1, .groups = 2};
    for (const auto* s : galley::dnn::conv_solvers("cpu")) {
      if (s->is_reference()) continue;
      for (ConvDirection d : passes) {
        probe.direction = d;
        if (s->check(probe, cpu)) solvers.push_back(s);
      }
    }
  }

  std::string cmdline;
  for (int i = 0; i < argc; ++i) cmdline += (i ? " " : "") + std::string(argv[i]);
  const std::time_t now = std::time(nullptr);
  char date[64];
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  const dnnl_version_t* dv = dnnl_version();
  std::printf(
      "command: `%s`\n\ndate: %s; machine: %s; load average at start %s; oneDNN %d.%d.%d; Galley kernels %s; "
      "batch %lld, fp32, NCHW; %d rounds, %.2f s per candidate; GFLOP/s = 2*N*K*Ho*Wo*(C/g)*R*S / median "
      "time\n\n",
      cmdline.c_str(), date, gb::machine().c_str(), gb::load_average().c_str(), dv->major, dv->minor,
      dv->patch, std::string(galley::backends::cpu::to_string(galley::backends::cpu::cpu_isa())).c_str(),
      static_cast<long long>(o.batch), o.rounds, o.min_time);
  std::printf("| problem | pass | GFLOP | own best | solver |");
  for (const auto* s : solvers) std::printf(" %s |", short_name(s->name()).c_str());
  std::printf(" oneDNN nchw | oneDNN blocked | best/blocked |\n|---|---|---:|---:|---|");
  for (std::size_t i = 0; i < solvers.size(); ++i) std::printf("---:|");
  std::printf("---:|---:|---:|\n");
  std::fflush(stdout);

  std::map<ConvDirection, Totals> totals;
  std::vector<std::pair<std::string, std::string>> impl_list;
  std::vector<std::string> failures;
  std::string line;
  std::uint64_t seed = 1;
  while (std::getline(in, line)) {
    const auto first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#') continue;
    std::string tag;
    ConvProblem base = ConvProblem::parse_driver_line(line, &tag);
    if (!o.only.empty() && tag.find(o.only) == std::string::npos) continue;
    base.n = o.batch;
    base.dtype = galley::DType::f32;
    base.layout = galley::dnn::Layout::nchw;
    for (ConvDirection dir : passes) {
      ConvProblem p = base;
      p.direction = dir;
      p.validate();
      const bool data = dir == ConvDirection::backward_data;
      const char* pass_name = data ? "data" : "weights";
      const double flop = p.flops();
      const std::int64_t na = data ? p.y_desc().elements() : p.x_desc().elements();
      const std::int64_t nb = data ? p.w_desc().elements() : p.y_desc().elements();
      const std::int64_t nout = data ? p.x_desc().elements() : p.w_desc().elements();
      std::vector<float> a(static_cast<std::size_t>(na)), b(static_cast<std::size_t>(nb));
      const auto ab = galley::dnn::random_tensor(galley::DType::f32, na, seed++);
      const auto bb = galley::dnn::random_tensor(galley::DType::f32, nb, seed++);
      std::memcpy(a.data(), ab.data(), ab.size());
      std::memcpy(b.data(), bb.data(), bb.size());
      std::vector<float> ref(static_cast<std::size_t>(nout)), out(ref.size());
      if (data) {
        galley::dnn::reference_conv_backward_data(p, a.data(), b.data(), ref.data());
      } else {
        galley::dnn::reference_conv_backward_weights(p, a.data(), b.data(), ref.data());
      }
      auto verify = [&](const std::string& who, const std::function<void()>& step) {
        std::fill(out.begin(), out.end(), NAN);
        step();
        const auto cmp = galley::dnn::compare_outputs(galley::DType::f32, out.data(), ref.data(), nout,
                                                      galley::dnn::conv_tolerance(galley::DType::f32));
        if (!cmp.passed) failures.push_back(tag + " " + pass_name + " " + who + ": " + cmp.summary);
        return cmp.passed;
      };

      std::vector<Candidate> candidates;
      std::vector<std::vector<float>> workspaces(solvers.size());
      std::vector<int> column(solvers.size(), -1);
      for (std::size_t i = 0; i < solvers.size(); ++i) {
        const auto* s = solvers[i];
        if (!s->check(p, cpu)) continue;
        const std::size_t bytes = s->workspace_bytes(p, cpu);
        workspaces[i].resize((bytes + sizeof(float) - 1) / sizeof(float));
        const galley::dnn::ConvArgs args =
            data ? galley::dnn::conv_args(galley::dnn::BackwardDataArgs{a.data(), b.data(), out.data()},
                                          workspaces[i].data(), bytes)
                 : galley::dnn::conv_args(galley::dnn::BackwardWeightsArgs{a.data(), b.data(), out.data()},
                                          workspaces[i].data(), bytes);
        Candidate c{std::string(s->name()), {}, {}, true, {}};
        c.verified = verify(c.name, [&stream, &p, s, args] {
          s->run(stream, p, args);
          stream.synchronize();
        });
        c.sample = [&stream, &p, s, args](double sec) {
          return gb::sample_event_ms(sec, stream, [&] { s->run(stream, p, args); });
        };
        column[i] = static_cast<int>(candidates.size());
        candidates.push_back(std::move(c));
      }
      gb::OneDnnConvBwd onednn(engine, dstream, p, a.data(), b.data(), out.data());
      impl_list.emplace_back(tag + " " + pass_name, onednn.implementations());
      const std::size_t first_onednn = candidates.size();
      candidates.push_back({"oneDNN nchw",
                            [&](double sec) { return gb::sample_wall_ms(sec, [&] { onednn.plain(); }); },
                            {},
                            verify("oneDNN nchw", [&] { onednn.plain(); }),
                            {}});
      candidates.push_back({"oneDNN blocked",
                            [&](double sec) { return gb::sample_wall_ms(sec, [&] { onednn.blocked(); }); },
                            {},
                            verify("oneDNN blocked", [&] { onednn.blocked_to_plain(); }),
                            {}});
      for (int round = 0; round < o.rounds; ++round) {
        for (auto& c : candidates) {
          const auto ms = c.sample(o.min_time / o.rounds);
          c.ms.insert(c.ms.end(), ms.begin(), ms.end());
        }
      }
      for (auto& c : candidates) c.gflops = flop / gb::median(c.ms) / 1e6;

      Totals& t = totals[dir];
      std::optional<double> best;
      std::string best_name = "-";
      for (std::size_t i = 0; i < solvers.size(); ++i) {
        if (column[i] < 0) continue;
        const Candidate& c = candidates[static_cast<std::size_t>(column[i])];
        if (!c.verified) continue;
        t.per_solver[short_name(c.name)].push_back(*c.gflops);
        if (!best || *c.gflops > *best) {
          best = c.gflops;
          best_name = short_name(c.name);
        }
      }
      const Candidate& plain = candidates[first_onednn];
      const Candidate& blocked = candidates[first_onednn + 1];
      if (best) t.best.push_back(*best);
      if (plain.verified) t.plain.push_back(*plain.gflops);
      if (blocked.verified) t.blocked.push_back(*blocked.gflops);
      if (best && blocked.verified) t.best_over_blocked.push_back(*best / *blocked.gflops);

      std::printf("| %s | %s | %.3f | %s | %s |", tag.c_str(), pass_name, flop / 1e9,
                  cell(best, true).c_str(), best_name.c_str());
      for (std::size_t i = 0; i < solvers.size(); ++i) {
        if (column[i] < 0) {
          std::printf(" - |");
        } else {
          const Candidate& c = candidates[static_cast<std::size_t>(column[i])];
          std::printf(" %s |", cell(c.gflops, c.verified).c_str());
        }
      }
      std::printf(" %s | %s | %.2f |\n", cell(plain.gflops, plain.verified).c_str(),
                  cell(blocked.gflops, blocked.verified).c_str(), best ? *best / *blocked.gflops : NAN);
      std::fflush(stdout);
    }
  }

  std::vector<double> all_ratios;
  for (const auto& [dir, t] : totals) {
    const char* pass_name = dir == ConvDirection::backward_data ? "backward data" : "backward weights";
    std::printf(
        "\n**%s, geomean GFLOP/s over %zu problems:** own best %.1f; oneDNN nchw %.1f; oneDNN blocked %.1f; "
        "own best / oneDNN blocked %.2f (geomean of per-problem ratios); own best / oneDNN nchw %.2f\n",
        pass_name, t.best.size(), gb::geomean(t.best), gb::geomean(t.plain), gb::geomean(t.blocked),
        gb::geomean(t.best_over_blocked), gb::geomean(t.best) / gb::geomean(t.plain));
    std::printf("Per solver (geomean over the problems it accepts):");
    for (const auto& [name, v] : t.per_solver)
      std::printf(" %s %.1f (%zu);", name.c_str(), gb::geomean(v), v.size());
    std::printf("\n");
    all_ratios.insert(all_ratios.end(), t.best_over_blocked.begin(), t.best_over_blocked.end());
  }
  std::printf("\nTarget: own best / oneDNN blocked >= 0.6 (geomean): %.2f over both passes\n",
              gb::geomean(all_ratios));
  std::printf("\nLoad average at the end: %s\n", gb::load_average().c_str());
  std::printf("\noneDNN implementations:\n");
  for (const auto& [tag, impl] : impl_list) std::printf("- %s: %s\n", tag.c_str(), impl.c_str());
  if (!failures.empty()) {
    std::printf("\nVERIFICATION FAILURES:\n");
    for (const auto& f : failures) std::printf("- %s\n", f.c_str());
    return 1;
  }
  std::printf(
      "\nAll outputs verified against the double-precision backward references (max_rel_err <= %g).\n",
      galley::dnn::conv_tolerance(galley::DType::f32));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cpu_conv_bwd_vs_onednn: %s\n", e.what());
    return 2;
  }
}
