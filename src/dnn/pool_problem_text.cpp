// PoolProblem as text: the canonical key (find-db rows, logs) and the `galley bench pool` line.
#include <string>

#include "dnn/key_text.hpp"
#include "galley/dnn/pool.hpp"

namespace galley::dnn {
namespace {

// The integer fields in key order: key prefix and member. Flags are 0/1 fields read into bools.
struct IntField {
  const char* prefix;
  std::int64_t PoolProblem::*member;
};
constexpr IntField kIntFields[] = {
    {"n", &PoolProblem::n},        {"c", &PoolProblem::c},        {"h", &PoolProblem::h},
    {"w", &PoolProblem::w},        {"y", &PoolProblem::kernel_h}, {"x", &PoolProblem::kernel_w},
    {"p", &PoolProblem::pad_h},    {"q", &PoolProblem::pad_w},    {"u", &PoolProblem::stride_h},
    {"v", &PoolProblem::stride_w},
};
struct FlagField {
  const char* prefix;
  bool PoolProblem::*member;
};
constexpr FlagField kCeil{"ceil", &PoolProblem::ceil_mode};
constexpr FlagField kIndices{"idx", &PoolProblem::keep_indices};
constexpr const char* kExample =
    "pool-F-f32-nchw-max-kernel-n32-c64-h112-w112-y3-x3-p1-q1-u2-v2-ceil0-ah0-aw0-idx0";

}  // namespace

std::string PoolProblem::key() const {
  std::string out = "pool-";
  out += direction == PoolDirection::forward ? 'F' : 'B';
  out += '-';
  out += galley::to_string(dtype);
  out += '-';
  out += to_string(layout);
  out += '-';
  out += to_string(mode);
  out += '-';
  out += to_string(window);
  for (const IntField& f : kIntFields) {
    out += '-';
    out += f.prefix;
    out += std::to_string(this->*f.member);
  }
  out += std::string("-") + kCeil.prefix + (ceil_mode ? "1" : "0");
  out += "-ah" + std::to_string(adaptive_h) + "-aw" + std::to_string(adaptive_w);
  out += std::string("-") + kIndices.prefix + (keep_indices ? "1" : "0");
  return out;
}

PoolProblem PoolProblem::parse_key(std::string_view key) {
  detail::KeyReader r("pool", key, kExample);
  PoolProblem p;
  p.direction = r.direction() == 'F' ? PoolDirection::forward : PoolDirection::backward;
  p.dtype = r.dtype();
  p.layout = r.layout();
  p.mode = r.parsed_word("mode", parse_pool_mode);
  constexpr PoolWindow kWindows[] = {PoolWindow::kernel, PoolWindow::global, PoolWindow::adaptive};
  p.window = kWindows[r.one_of("window", {"kernel", "global", "adaptive"})];
  for (const IntField& f : kIntFields) p.*f.member = r.count(f.prefix);
  p.ceil_mode = r.flag(kCeil.prefix);
  p.adaptive_h = r.count("ah");
  p.adaptive_w = r.count("aw");
  p.keep_indices = r.flag(kIndices.prefix);
  r.end();
  p.validate();
  return p;
}

std::string PoolProblem::bench_command(const runtime::Device& device, std::string_view solver) const {
  std::string line = "galley bench pool -n " + std::to_string(n) + " -c " + std::to_string(c) + " -H " +
                     std::to_string(h) + " -W " + std::to_string(w);
  if (window == PoolWindow::kernel) {
    line += " -y " + std::to_string(kernel_h) + " -x " + std::to_string(kernel_w) + " -p " +
            std::to_string(pad_h) + " -q " + std::to_string(pad_w) + " -u " + std::to_string(stride_h) +
            " -v " + std::to_string(stride_w);
    if (ceil_mode) line += " --ceil";
  } else if (window == PoolWindow::global) {
    line += " --global";
  } else {
    line += " --adaptive " + std::to_string(adaptive_h) + "x" + std::to_string(adaptive_w);
  }
  line += std::string(" -m ") + to_string(mode);
  if (keep_indices) line += " --keep-indices";
  line += std::string(" -F ") + (direction == PoolDirection::forward ? "1" : "2") + " --dtype " +
          galley::to_string(dtype) + " --layout " + to_string(layout) + " --device " + device.name();
  if (!solver.empty()) line += " --solver " + std::string(solver);
  return line;
}

}  // namespace galley::dnn
