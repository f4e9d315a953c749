// ActivProblem as text: the canonical key (find-db rows, logs) and the `galley bench activ` line.
#include <charconv>
#include <string>

#include "dnn/key_text.hpp"
#include "galley/dnn/activation.hpp"

namespace galley::dnn {
namespace {

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
  detail::KeyReader r("activ", key,
                      "activ-F-f32-nchw-relu-a0-b0-n32-c64-h56-w56 or activ-B-f16-row-clip-am1-b1-d7x129");
  ActivProblem p;
  p.direction = r.direction() == 'F' ? ActivDirection::forward : ActivDirection::backward;
  p.dtype = r.dtype();
  const bool row_major = r.accept("row");
  if (!row_major) p.layout = r.layout();
  p.activation = r.parsed_word("activation", parse_activation);
  p.alpha = r.field<double>("a", "number", parse_key_number);
  p.beta = r.field<double>("b", "number", parse_key_number);
  if (row_major) {
    r.dims("d", p.dims, p.rank);
    if (p.rank == 4) r.fail("a row-major key has 1 to 6 dims other than 4 (rank 4 is written n-c-h-w)");
  } else {
    p.rank = 4;
    for (std::size_t i = 0; i < 4; ++i) p.dims[i] = r.count(std::string_view(&kDimLetters[i], 1));
  }
  r.end();
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
