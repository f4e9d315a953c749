// ActivProblem as text: the canonical key (find-db rows, logs) and the `galley bench activ` line.
#include <charconv>
#include <string>
#include <vector>

#include "core/quoted_input.hpp"
#include "galley/core/error.hpp"
#include "galley/dnn/activation.hpp"

namespace galley::dnn {
namespace {

[[noreturn]] void bad(const std::string& message) { throw Error(Status::invalid_argument, message); }

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

// The shortest text that reads back as the same double; -0 is written as 0 (they compare equal).
std::string shortest(double v) {
  if (v == 0) return "0";
  char text[64];
  const auto [end, ec] = std::to_chars(text, text + sizeof text, v);
  return ec == std::errc() ? std::string(text, end) : std::string("nan");
}

// In a key '-' separates fields, so a parameter's minus signs are written as 'm'.
std::string key_number(double v) {
  std::string s = shortest(v);
  for (char& c : s) {
    if (c == '-') c = 'm';
  }
  return s;
}

bool parse_key_number(std::string_view text, double& out) {
  std::string s(text);
  for (char& c : s) {
    if (c == 'm') c = '-';
  }
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  // Only the canonical spelling, so one problem never has two keys.
  return ec == std::errc() && ptr == s.data() + s.size() && key_number(out) == text;
}

bool parse_dim(std::string_view text, std::int64_t& out) {
  if (text.empty() || (text.size() > 1 && text.front() == '0') || text.front() == '-') return false;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && ptr == text.data() + text.size();
}

constexpr char kDimLetters[4] = {'n', 'c', 'h', 'w'};

}  // namespace

std::string ActivProblem::key() const {
  std::string out = "activ-";
  out += direction == ActivDirection::forward ? 'F' : 'B';
  out += '-';
  out += galley::to_string(dtype);
  out += '-';
  out += rank == 4 ? to_string(layout) : "row";
  out += '-';
  out += to_string(activation);
  out += "-a";
  out += key_number(alpha);
  out += "-b";
  out += key_number(beta);
  if (rank == 4) {
    for (int i = 0; i < 4; ++i) {
      out += '-';
      out += kDimLetters[i];
      out += std::to_string(dims[static_cast<std::size_t>(i)]);
    }
  } else {
    out += "-d";
    for (int i = 0; i < rank; ++i) {
      if (i > 0) out += 'x';
      out += std::to_string(dims[static_cast<std::size_t>(i)]);
    }
  }
  return out;
}

ActivProblem ActivProblem::parse_key(std::string_view key) {
  const auto fail = [&](const std::string& why) -> void {
    bad("malformed activ key " + quoted_input(key) + ": " + why +
        " (expected e.g. activ-F-f32-nchw-relu-a0-b0-n32-c64-h56-w56 or activ-B-f16-row-clip-am1-b1-d7x129)");
  };
  const auto parts = split(key, '-');
  if (parts.size() < 8) fail("has " + std::to_string(parts.size()) + " '-'-separated parts, want 8 or 11");
  ActivProblem p;
  if (parts[0] != "activ") fail("does not start with 'activ'");
  if (parts[1] == "F") {
    p.direction = ActivDirection::forward;
  } else if (parts[1] == "B") {
    p.direction = ActivDirection::backward;
  } else {
    fail("direction " + quoted_input(parts[1]) + " is not F or B");
  }
  try {
    p.dtype = parse_dtype(parts[2]);
    p.activation = parse_activation(parts[4]);
  } catch (const Error& e) {
    fail(e.what());
  }
  if (parts[5].empty() || parts[5].front() != 'a' || !parse_key_number(parts[5].substr(1), p.alpha)) {
    fail("field 6 " + quoted_input(parts[5]) + " is not 'a<number>'");
  }
  if (parts[6].empty() || parts[6].front() != 'b' || !parse_key_number(parts[6].substr(1), p.beta)) {
    fail("field 7 " + quoted_input(parts[6]) + " is not 'b<number>'");
  }
  if (parts[3] == "row") {
    if (parts.size() != 8) fail("a row-major key has 8 parts, not " + std::to_string(parts.size()));
    if (parts[7].empty() || parts[7].front() != 'd') fail("field 8 " + quoted_input(parts[7]) + " is not 'd<dims>'");
    const auto dims = split(parts[7].substr(1), 'x');
    if (dims.size() > static_cast<std::size_t>(kMaxRank) || dims.size() == 4) {
      fail("a row-major key has 1 to " + std::to_string(kMaxRank) + " dims other than 4 (rank 4 is written n-c-h-w)");
    }
    p.rank = static_cast<int>(dims.size());
    for (std::size_t i = 0; i < dims.size(); ++i) {
      if (!parse_dim(dims[i], p.dims[i])) fail("dim " + quoted_input(dims[i]) + " is not a decimal integer");
    }
  } else {
    if (parts[3] != "nchw" && parts[3] != "nhwc") fail("layout " + quoted_input(parts[3]) + " is not nchw, nhwc or row");
    p.layout = parts[3] == "nchw" ? Layout::nchw : Layout::nhwc;
    if (parts.size() != 11) fail("a 4-D key has 11 parts, not " + std::to_string(parts.size()));
    p.rank = 4;
    for (std::size_t i = 0; i < 4; ++i) {
      const std::string_view part = parts[7 + i];
      if (part.empty() || part.front() != kDimLetters[i] || !parse_dim(part.substr(1), p.dims[i])) {
        fail("field " + std::to_string(8 + i) + " " + quoted_input(part) + " is not '" + kDimLetters[i] +
             "<integer>'");
      }
    }
  }
  p.validate();
  return p;
}

std::string ActivProblem::bench_command(const runtime::Device& device, std::string_view solver) const {
  std::string line = std::string("galley bench activ -m ") + to_string(activation) + " -A " + shortest(alpha) +
                     " -B " + shortest(beta);
  if (rank == 4) {
    line += " -n " + std::to_string(dims[0]) + " -c " + std::to_string(dims[1]) + " -H " + std::to_string(dims[2]) +
            " -W " + std::to_string(dims[3]);
  } else {
    line += " --shape ";
    for (int i = 0; i < rank; ++i) {
      if (i > 0) line += ',';
      line += std::to_string(dims[static_cast<std::size_t>(i)]);
    }
  }
  line += std::string(" -F ") + (direction == ActivDirection::forward ? "1" : "2") + " --dtype " +
          galley::to_string(dtype);
  if (rank == 4) line += std::string(" --layout ") + to_string(layout);
  line += " --device " + device.name();
  if (!solver.empty()) line += " --solver " + std::string(solver);
  return line;
}

}  // namespace galley::dnn
