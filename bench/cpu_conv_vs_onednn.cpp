// Times Galley's cpu conv solvers beside oneDNN and a naive loop, in one program and one run.
//
//   cpu_conv_vs_onednn PROBLEMS_FILE [--batch N] [--min-time S] [--no-naive] [--only TAG]
//                      [--onednn-isa all|avx2]
//
// For every problem of the file (MIOpenDriver syntax, shared/bench/conv_problems.txt) at batch N
// (default 2), fp32 NCHW: each Galley cpu solver that accepts it (run through the public
// Stream path), oneDNN with plain NCHW/OIHW tensors, oneDNN with its blocked layouts
// (format_tag::any) with and without the activation reorders, and a naive 7-loop. Every output
// is checked against the double-precision reference before it is timed. Medians after warm-up;
// prints a Markdown table and geomeans for bench/RESULTS.md.
//
// Timing: oneDNN executes in the calling thread and is timed by the wall clock around execute +
// stream.wait(). Galley ops run on a cpu Stream (a worker thread) and are timed as `galley bench
// conv` and GPU benchmarks time kernels: events recorded before and after each op, ops enqueued
// back to back, so the host-to-stream handoff is not counted (--wall times each op with
// run + synchronize instead, handoff included).
//
// --onednn-isa avx2 caps oneDNN at AVX2 (dnnl::set_max_cpu_isa), the instruction set Galley's
// cpu kernels use, so the comparison is like for like on a CPU that also has AVX-512.
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <deque>
#include <fstream>
#include <functional>
#include <map>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "dnn/ref_conv_direct.hpp"
#include "dnn/tensor_data.hpp"
#include "galley/dnn/solver.hpp"
#include "galley/runtime/device.hpp"
#include "galley/runtime/stream.hpp"

namespace {

using galley::dnn::ConvProblem;
using Clock = std::chrono::steady_clock;

struct Options {
  std::string file;
  std::int64_t batch = 2;
  double min_time = 0.3;  // seconds of timed repeats per measurement (after warm-up)
  bool naive = true;
  std::string only;       // run only problems whose tag contains this
  std::string onednn_isa = "all";
  bool wall = false;      // time Galley ops by run + synchronize instead of events
};

// Median milliseconds of fn(): two warm-up calls, then repeats until min_time has passed and at
// least 5 ran (at most 200).
double median_ms(const Options& o, const std::function<void()>& fn) {
  fn();
  fn();
  std::vector<double> ms;
  const auto start = Clock::now();
  while (ms.size() < 200 && (ms.size() < 5 || std::chrono::duration<double>(Clock::now() - start).count() < o.min_time)) {
    const auto t0 = Clock::now();
    fn();
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// Median milliseconds of one Galley op on `stream`, measured between events recorded around it;
// the ops of a round are enqueued back to back (as `galley bench conv` does), so the median is
// the time the op takes on the stream.
double median_event_ms(const Options& o, galley::runtime::Stream& stream, const std::function<void()>& enqueue) {
  enqueue();
  enqueue();
  stream.synchronize();
  const auto t0 = Clock::now();
  enqueue();
  stream.synchronize();
  const double once = std::chrono::duration<double>(Clock::now() - t0).count();
  const int reps = static_cast<int>(std::clamp(o.min_time / std::max(once, 1e-6), 5.0, 200.0));
  std::deque<galley::runtime::Event> starts, stops;  // events must not move once recorded
  for (int i = 0; i < reps; ++i) {
    starts.emplace_back(stream.device()).record(stream);
    enqueue();
    stops.emplace_back(stream.device()).record(stream);
  }
  stream.synchronize();
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) ms.push_back(stops[i].elapsed_ms_since(starts[i]));
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

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

struct Result {
  std::optional<double> gflops;  // empty: not applicable
  bool verified = true;
  std::string note;
};

class OneDnn {
 public:
  OneDnn() : engine_(dnnl::engine::kind::cpu, 0), stream_(engine_) {}

  // plain: nchw/oihw tensors straight from the user; blocked: format_tag::any, measured once
  // for the convolution alone and once with the src reorder in and the dst reorder out (the
  // weights are reordered once outside the timing, as a framework caches them).
  void run(const Options& o, const ConvProblem& p, const std::vector<float>& x, const std::vector<float>& w,
           const std::vector<float>& ref, Result& plain, Result& blocked, Result& with_reorders, std::string& impls) {
    using tag = dnnl::memory::format_tag;
    using dt = dnnl::memory::data_type;
    const dnnl::memory::dims src_dims{p.n, p.c, p.h, p.w}, dst_dims{p.n, p.k, p.out_h(), p.out_w()};
    const dnnl::memory::dims wei_dims = p.groups == 1
                                            ? dnnl::memory::dims{p.k, p.c, p.y, p.x}
                                            : dnnl::memory::dims{p.groups, p.k / p.groups, p.c / p.groups, p.y, p.x};
    const tag wei_plain = p.groups == 1 ? tag::oihw : tag::goihw;
    const dnnl::memory::dims strides{p.stride_h, p.stride_w}, dilates{p.dilation_h - 1, p.dilation_w - 1};
    const dnnl::memory::dims pad_l{p.pad_h, p.pad_w};
    const dnnl::memory::dims pad_r{(p.out_h() - 1) * p.stride_h - p.h + (p.y - 1) * p.dilation_h + 1 - p.pad_h,
                                   (p.out_w() - 1) * p.stride_w - p.w + (p.x - 1) * p.dilation_w + 1 - p.pad_w};
    const double flop = p.flops();
    const dnnl::memory::desc user_src({src_dims}, dt::f32, tag::nchw), user_dst({dst_dims}, dt::f32, tag::nchw);
    const dnnl::memory::desc user_wei({wei_dims}, dt::f32, wei_plain);
    dnnl::memory src_mem(user_src, engine_, const_cast<float*>(x.data()));
    dnnl::memory wei_mem(user_wei, engine_, const_cast<float*>(w.data()));
    std::vector<float> y(ref.size());

    auto make_pd = [&](const dnnl::memory::desc& s, const dnnl::memory::desc& wd, const dnnl::memory::desc& d) {
      const dnnl::convolution_forward::desc desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                                 s, wd, d, strides, dilates, pad_l, pad_r);
      return dnnl::convolution_forward::primitive_desc(desc, engine_);
    };
    auto verify = [&](Result& r) {
      const auto cmp = galley::dnn::compare_outputs(galley::DType::f32, y.data(), ref.data(),
                                                    static_cast<std::int64_t>(y.size()), galley::dnn::conv_tolerance(galley::DType::f32));
      r.verified = cmp.passed;
      if (!cmp.passed) r.note = cmp.summary;
    };

    {  // plain
      const auto pd = make_pd(user_src, user_wei, user_dst);
      dnnl::convolution_forward conv(pd);
      dnnl::memory dst_mem(user_dst, engine_, y.data());
      auto step = [&] {
        conv.execute(stream_, {{DNNL_ARG_SRC, src_mem}, {DNNL_ARG_WEIGHTS, wei_mem}, {DNNL_ARG_DST, dst_mem}});
        stream_.wait();
      };
      std::fill(y.begin(), y.end(), NAN);
      step();
      verify(plain);
      plain.gflops = flop / median_ms(o, step) / 1e6;
      impls = std::string("plain ") + pd.impl_info_str();
    }
    {  // blocked
      const dnnl::memory::desc any_src({src_dims}, dt::f32, tag::any), any_dst({dst_dims}, dt::f32, tag::any);
      const dnnl::memory::desc any_wei({wei_dims}, dt::f32, tag::any);
      const auto pd = make_pd(any_src, any_wei, any_dst);
      dnnl::convolution_forward conv(pd);
      dnnl::memory bsrc(pd.src_desc(), engine_), bwei(pd.weights_desc(), engine_), bdst(pd.dst_desc(), engine_);
      dnnl::memory dst_mem(user_dst, engine_, y.data());
      dnnl::reorder(wei_mem, bwei).execute(stream_, wei_mem, bwei);
      dnnl::reorder src_in(src_mem, bsrc), dst_out(bdst, dst_mem);
      auto conv_only = [&] {
        conv.execute(stream_, {{DNNL_ARG_SRC, bsrc}, {DNNL_ARG_WEIGHTS, bwei}, {DNNL_ARG_DST, bdst}});
        stream_.wait();
      };
      auto with_reorder = [&] {
        src_in.execute(stream_, src_mem, bsrc);
        conv.execute(stream_, {{DNNL_ARG_SRC, bsrc}, {DNNL_ARG_WEIGHTS, bwei}, {DNNL_ARG_DST, bdst}});
        dst_out.execute(stream_, bdst, dst_mem);
        stream_.wait();
      };
      std::fill(y.begin(), y.end(), NAN);
      with_reorder();
      verify(blocked);
      with_reorders.verified = blocked.verified;
      blocked.gflops = flop / median_ms(o, conv_only) / 1e6;
      with_reorders.gflops = flop / median_ms(o, with_reorder) / 1e6;
      impls += std::string(", blocked ") + pd.impl_info_str();
    }
  }

 private:
  dnnl::engine engine_;
  dnnl::stream stream_;
};

std::string short_name(std::string_view solver) {
  const std::string prefix = "cpu.conv.";
  std::string s(solver);
  return s.rfind(prefix, 0) == 0 ? s.substr(prefix.size()) : s;
}

std::string cell(const Result& r) {
  if (!r.gflops) return "-";
  char text[48];
  std::snprintf(text, sizeof text, "%.1f%s", *r.gflops, r.verified ? "" : " FAIL");
  return text;
}

double geomean(const std::vector<double>& v) {
  if (v.empty()) return NAN;
  double s = 0;
  for (double x : v) s += std::log(x);
  return std::exp(s / static_cast<double>(v.size()));
}

// "0.42 0.61 0.70": the 1/5/15-minute load averages, so a reader can see whether other work
// shared the cores during the run.
std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return a + " " + b + " " + c;
}

std::string machine() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, model = "unknown cpu";
  bool avx2 = false, avx512 = false;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0 && model == "unknown cpu") model = line.substr(line.find(':') + 2);
    if (line.rfind("flags", 0) == 0) {
      avx2 = line.find(" avx2") != std::string::npos;
      avx512 = line.find(" avx512f") != std::string::npos;
    }
  }
  return model + ", " + std::to_string(std::thread::hardware_concurrency()) + " threads" + (avx2 ? ", AVX2" : "") +
         (avx512 ? ", AVX-512" : "");
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
    } else if (!a.empty() && a[0] != '-' && o.file.empty()) {
      o.file = a;
    } else {
      throw std::runtime_error("unknown argument '" + a + "'");
    }
  }
  if (o.file.empty()) {
    throw std::runtime_error(
        "usage: cpu_conv_vs_onednn PROBLEMS_FILE [--batch N] [--min-time S] [--no-naive] [--only TAG] "
        "[--onednn-isa all|avx2] [--wall]");
  }
  return o;
}

int run(int argc, char** argv) {
  const Options o = parse(argc, argv);
  // Must happen before oneDNN creates any primitive.
  if (o.onednn_isa == "avx2" && dnnl::set_max_cpu_isa(dnnl::cpu_isa::avx2) != dnnl::status::success) {
    throw std::runtime_error("oneDNN refused to cap its ISA at AVX2");
  }
  std::ifstream in(o.file);
  if (!in) throw std::runtime_error("cannot open problems file '" + o.file + "'");
  const galley::runtime::Device cpu = galley::runtime::device("cpu");
  galley::runtime::Stream stream(cpu);
  std::vector<const galley::dnn::ConvSolver*> solvers;
  for (const auto* s : galley::dnn::conv_solvers("cpu")) {
    if (!s->is_reference()) solvers.push_back(s);
  }
  OneDnn onednn;

  std::string cmdline;
  for (int i = 0; i < argc; ++i) cmdline += (i ? " " : "") + std::string(argv[i]);
  const std::time_t now = std::time(nullptr);
  char date[64];
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  const dnnl_version_t* dv = dnnl_version();
  std::printf("command: `%s`\n\ndate: %s; machine: %s; load average at start %s; oneDNN %d.%d.%d (ISA %s); %s; "
              "Galley pool %d threads, timed by %s; batch %lld, fp32, NCHW; GFLOP/s = 2*N*K*Ho*Wo*(C/g)*R*S / median time\n\n",
              cmdline.c_str(), date, machine().c_str(), load_average().c_str(), dv->major, dv->minor, dv->patch,
              o.onednn_isa == "avx2" ? "capped at AVX2" : "all the CPU has",
              openblas_get_config(), galley_pool_threads(), o.wall ? "run + synchronize" : "stream events",
              static_cast<long long>(o.batch));

  std::printf("| problem | GFLOP | own best | solver |");
  for (const auto* s : solvers) std::printf(" %s |", short_name(s->name()).c_str());
  std::printf(" oneDNN nchw | oneDNN blocked | blocked+reorders | naive | best/blocked |\n|---|---:|---:|---|");
  for (std::size_t i = 0; i < solvers.size(); ++i) std::printf("---:|");
  std::printf("---:|---:|---:|---:|---:|\n");
  std::fflush(stdout);

  std::vector<double> g_best, g_plain, g_blocked, g_reord, g_naive, g_best_over_naive;
  std::map<std::string, std::vector<double>> g_solver;
  std::vector<std::pair<std::string, std::string>> impl_list;
  std::vector<std::string> failures;
  std::vector<std::string> depthwise_notes;
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
    std::vector<float> x(static_cast<std::size_t>(p.x_desc().elements())), w(static_cast<std::size_t>(p.w_desc().elements()));
    std::memcpy(x.data(), xb.data(), xb.size());
    std::memcpy(w.data(), wb.data(), wb.size());
    std::vector<float> ref(static_cast<std::size_t>(p.y_desc().elements())), y(ref.size());
    galley::dnn::reference_conv_forward(p, x.data(), w.data(), ref.data());
    auto verify = [&](Result& r, const std::string& who) {
      const auto cmp = galley::dnn::compare_outputs(galley::DType::f32, y.data(), ref.data(),
                                                    static_cast<std::int64_t>(y.size()), galley::dnn::conv_tolerance(galley::DType::f32));
      r.verified = cmp.passed;
      if (!cmp.passed) failures.push_back(tag + " " + who + ": " + cmp.summary);
    };

    std::vector<Result> own(solvers.size());
    Result best;
    std::string best_name = "-";
    for (std::size_t i = 0; i < solvers.size(); ++i) {
      const auto* s = solvers[i];
      if (!s->check(p, cpu)) continue;
      const std::size_t bytes = s->workspace_bytes(p, cpu);
      std::vector<float> ws((bytes + sizeof(float) - 1) / sizeof(float));
      const galley::dnn::ConvArgs args{x.data(), w.data(), y.data(), ws.data(), bytes};
      auto step = [&] {
        s->run(stream, p, args);
        stream.synchronize();
      };
      std::fill(y.begin(), y.end(), NAN);
      step();
      verify(own[i], std::string(s->name()));
      const double ms = o.wall ? median_ms(o, step) : median_event_ms(o, stream, [&] { s->run(stream, p, args); });
      own[i].gflops = flop / ms / 1e6;
      if (own[i].verified) {
        g_solver[short_name(s->name())].push_back(*own[i].gflops);
        if (!best.gflops || *own[i].gflops > *best.gflops) {
          best = own[i];
          best_name = short_name(s->name());
        }
      }
    }

    Result plain, blocked, reord;
    std::string impls;
    onednn.run(o, p, x, w, ref, plain, blocked, reord, impls);
    if (!plain.verified) failures.push_back(tag + " oneDNN nchw: " + plain.note);
    if (!blocked.verified) failures.push_back(tag + " oneDNN blocked: " + blocked.note);
    impl_list.emplace_back(tag, impls);

    Result naive;
    if (o.naive) {
      std::fill(y.begin(), y.end(), NAN);
      const auto t0 = Clock::now();
      naive_conv(p, x.data(), w.data(), y.data());
      const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      naive.gflops = flop / ms / 1e6;
      verify(naive, "naive");
    }

    if (best.gflops) g_best.push_back(*best.gflops);
    if (plain.gflops && plain.verified) g_plain.push_back(*plain.gflops);
    if (blocked.gflops && blocked.verified) g_blocked.push_back(*blocked.gflops);
    if (reord.gflops && reord.verified) g_reord.push_back(*reord.gflops);
    if (naive.gflops) g_naive.push_back(*naive.gflops);
    if (naive.gflops && best.gflops) g_best_over_naive.push_back(*best.gflops / *naive.gflops);

    if (p.is_depthwise() && best.gflops && plain.gflops && blocked.gflops) {
      char text[200];
      std::snprintf(text, sizeof text, "%s: own best %.1f = %.2fx oneDNN nchw, %.2fx oneDNN blocked, %.2fx blocked+reorders",
                    tag.c_str(), *best.gflops, *best.gflops / *plain.gflops, *best.gflops / *blocked.gflops,
                    *best.gflops / *reord.gflops);
      depthwise_notes.emplace_back(text);
    }
    std::printf("| %s | %.3f | %s | %s |", tag.c_str(), flop / 1e9, cell(best).c_str(), best_name.c_str());
    for (const auto& r : own) std::printf(" %s |", cell(r).c_str());
    std::printf(" %s | %s | %s | %s | %.2f |\n", cell(plain).c_str(), cell(blocked).c_str(), cell(reord).c_str(),
                cell(naive).c_str(), best.gflops && blocked.gflops ? *best.gflops / *blocked.gflops : NAN);
    std::fflush(stdout);
  }

  const double gb = geomean(g_best), gblk = geomean(g_blocked);
  std::printf("\n**Geomean GFLOP/s over %zu problems:** own best %.1f; oneDNN nchw %.1f; oneDNN blocked %.1f; "
              "blocked+reorders %.1f; naive %.2f\n\n",
              g_best.size(), gb, geomean(g_plain), gblk, geomean(g_reord), geomean(g_naive));
  std::printf("Per solver (geomean over the problems it accepts):");
  for (const auto& [name, v] : g_solver) std::printf(" %s %.1f (%zu);", name.c_str(), geomean(v), v.size());
  std::printf("\n\nTargets: own best / oneDNN blocked = %.2f (target >= 0.6); own best / oneDNN nchw = %.2f; "
              "own best / naive = %.0fx (geomean of per-problem ratios, target >= 50x)\n",
              gb / gblk, gb / geomean(g_plain), geomean(g_best_over_naive));
  for (const auto& d : depthwise_notes) std::printf("\nDepthwise %s (target >= 1.0x)\n", d.c_str());
  std::printf("\nLoad average at the end: %s\n", load_average().c_str());
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
