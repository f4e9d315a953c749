// PoolProblem as text: the canonical key (find-db rows, logs) and the `galley bench pool` line.
#include <charconv>
#include <string>
#include <vector>

#include "core/quoted_input.hpp"
#include "galley/core/error.hpp"
#include "galley/dnn/pool.hpp"

namespace galley::dnn {
namespace {

[[noreturn]] void bad(const std::string& message) { throw Error(Status::invalid_argument, message); }

// Canonical decimal (no sign, no leading zero), so that two spellings never make two keys.
bool parse_count(std::string_view text, std::int64_t& out) {
  if (text.empty() || (text.size() > 1 && text.front() == '0') || text.front() == '-') return false;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && ptr == text.data() + text.size();
}

std::vector<std::string_view> split(std::string_view text, char sep) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  while (true) {
    const std::size_t end = text.find(sep, start);
    parts.push_back(text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return parts;
}

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
  const auto fail = [&](const std::string& why) {
    bad("malformed pool key " + quoted_input(key) + ": " + why + " (expected e.g. " + kExample + ")");
  };
  const auto parts = split(key, '-');
  constexpr std::size_t kParts = 6 + std::size(kIntFields) + 4;
  if (parts.size() != kParts) {
    fail("has " + std::to_string(parts.size()) + " '-'-separated parts, want " + std::to_string(kParts));
  }
  PoolProblem p;
  if (parts[0] != "pool") fail("does not start with 'pool'");
  if (parts[1] == "F") {
    p.direction = PoolDirection::forward;
  } else if (parts[1] == "B") {
    p.direction = PoolDirection::backward;
  } else {
    fail("direction " + quoted_input(parts[1]) + " is not F or B");
  }
  try {
    p.dtype = parse_dtype(parts[2]);
    p.layout = parse_layout(parts[3]);
    p.mode = parse_pool_mode(parts[4]);
  } catch (const Error& e) {
    fail(e.what());
  }
  if (parts[3] != to_string(p.layout)) fail("layout " + quoted_input(parts[3]) + " must be lower case");
  if (parts[5] == "kernel") {
    p.window = PoolWindow::kernel;
  } else if (parts[5] == "global") {
    p.window = PoolWindow::global;
  } else if (parts[5] == "adaptive") {
    p.window = PoolWindow::adaptive;
  } else {
    fail("window " + quoted_input(parts[5]) + " is not kernel, global or adaptive");
  }
  std::size_t i = 6;
  const auto number = [&](std::string_view prefix) {
    const std::string_view part = parts[i];
    std::int64_t value = 0;
    if (!part.starts_with(prefix) || !parse_count(part.substr(prefix.size()), value)) {
      fail("field " + std::to_string(i + 1) + " " + quoted_input(part) + " is not '" + std::string(prefix) +
           "<count>'");
    }
    ++i;
    return value;
  };
  for (const IntField& f : kIntFields) p.*f.member = number(f.prefix);
  const auto flag = [&](std::string_view prefix) {
    const std::string_view part = parts[i];
    if (part != std::string(prefix) + "0" && part != std::string(prefix) + "1") {
      fail("field " + std::to_string(i + 1) + " " + quoted_input(part) + " is not '" + std::string(prefix) +
           "0' or '" + std::string(prefix) + "1'");
    }
    ++i;
    return part.back() == '1';
  };
  p.ceil_mode = flag(kCeil.prefix);
  p.adaptive_h = number("ah");
  p.adaptive_w = number("aw");
  p.keep_indices = flag(kIndices.prefix);
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
