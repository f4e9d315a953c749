// EltwiseProblem as text: the canonical key (find-db rows, logs), shapes as "32x256x56x56", and
// the `galley bench eltwise` line that reproduces a call.
#include <charconv>
#include <string>
#include <vector>

#include "core/quoted_input.hpp"
#include "galley/core/error.hpp"
#include "galley/dnn/eltwise.hpp"

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

// Positive decimal without leading zeros, so one shape has one spelling.
bool parse_dim(std::string_view text, std::int64_t& out) {
  if (text.empty() || text.front() == '0') return false;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && ptr == text.data() + text.size() && out > 0;
}

// Shortest text that reads back as the same float; 0 for both zeros (they compare equal).
std::string float_text(float v) {
  if (v == 0.0f) return "0";
  char buf[32];
  const auto [ptr, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return ec == std::errc() ? std::string(buf, ptr) : std::string("nan");
}

bool parse_float(std::string_view text, float& out) {
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && ptr == text.data() + text.size() && float_text(out) == text;
}

char direction_letter(EltwiseDirection d) { return d == EltwiseDirection::forward ? 'F' : 'B'; }

}  // namespace

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string out;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) out += 'x';
    out += std::to_string(shape[i]);
  }
  return out;
}

std::vector<std::int64_t> parse_shape(std::string_view text, std::string_view what) {
  std::vector<std::int64_t> shape;
  for (std::string_view part : split(text, 'x')) {
    std::int64_t d = 0;
    if (!parse_dim(part, d)) {
      bad(std::string(what) + " " + quoted_input(text) +
          " is not a shape: want 1 to 6 positive dims joined by 'x', e.g. 32x256x56x56");
    }
    shape.push_back(d);
  }
  if (shape.size() > static_cast<std::size_t>(kMaxRank)) {
    bad(std::string(what) + " " + quoted_input(text) + " has " + std::to_string(shape.size()) +
        " dims, at most " + std::to_string(kMaxRank));
  }
  return shape;
}

std::string EltwiseProblem::key() const {
  std::string out = "eltwise-";
  out += direction_letter(direction);
  out += '-';
  out += to_string(op);
  out += '-';
  out += galley::to_string(dtype);
  out += '-';
  out += to_string(layout);
  out += "-a" + shape_text(a) + "-b" + shape_text(b) + "-al" + float_text(alpha) + "-be" + float_text(beta);
  return out;
}

EltwiseProblem EltwiseProblem::parse_key(std::string_view key) {
  const auto fail = [&](const std::string& why) {
    bad("malformed eltwise key " + quoted_input(key) + ": " + why +
        " (expected e.g. eltwise-F-add-f32-nchw-a32x256x56x56-b1x256x1x1-al1-be1)");
  };
  // alpha and beta may be negative ("al-0.5"), so the last two fields are found by their prefixes.
  const std::size_t al = key.rfind("-al");
  const std::size_t be = key.rfind("-be");
  if (al == std::string_view::npos || be == std::string_view::npos || be < al)
    fail("no -al<alpha>-be<beta> at its end");
  const auto parts = split(key.substr(0, al), '-');
  if (parts.size() != 7)
    fail("has " + std::to_string(parts.size()) + " '-'-separated parts before -al, want 7");
  EltwiseProblem p;
  if (parts[0] != "eltwise") fail("does not start with 'eltwise'");
  if (parts[1] == "F") {
    p.direction = EltwiseDirection::forward;
  } else if (parts[1] == "B") {
    p.direction = EltwiseDirection::backward;
  } else {
    fail("direction " + quoted_input(parts[1]) + " is not F or B");
  }
  try {
    p.op = parse_eltwise_op(parts[2]);
    p.dtype = parse_dtype(parts[3]);
    p.layout = parse_layout(parts[4]);
  } catch (const Error& e) {
    fail(e.what());
  }
  if (parts[4] != to_string(p.layout)) fail("layout " + quoted_input(parts[4]) + " must be lower case");
  if (parts[5].substr(0, 1) != "a" || parts[6].substr(0, 1) != "b")
    fail("shapes must be a<dims> and b<dims>");
  try {
    p.a = parse_shape(parts[5].substr(1), "shape a");
    p.b = parse_shape(parts[6].substr(1), "shape b");
  } catch (const Error& e) {
    fail(e.what());
  }
  if (!parse_float(key.substr(al + 3, be - al - 3), p.alpha)) fail("alpha is not a float in shortest form");
  if (!parse_float(key.substr(be + 3), p.beta)) fail("beta is not a float in shortest form");
  p.validate();
  return p;
}

std::string EltwiseProblem::bench_command(const runtime::Device& device, std::string_view solver) const {
  std::string line = "galley bench eltwise --op " + std::string(to_string(op)) + " --shape " + shape_text(a) +
                     " --shape1 " + shape_text(b);
  if (alpha != 1.0f) line += " --alpha " + float_text(alpha);
  if (beta != 1.0f) line += " --beta " + float_text(beta);
  line += std::string(" -F ") + (direction == EltwiseDirection::forward ? "1" : "2") + " --dtype " +
          galley::to_string(dtype) + " --layout " + to_string(layout) + " --device " + device.name();
  if (!solver.empty()) line += " --solver " + std::string(solver);
  return line;
}

}  // namespace galley::dnn
