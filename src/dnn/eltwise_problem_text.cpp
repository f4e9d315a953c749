// EltwiseProblem as text: the canonical key (find-db rows, logs), shapes as "32x256x56x56", and
// the `galley bench eltwise` line that reproduces a call.
#include <charconv>
#include <string>
#include <vector>

#include "core/quoted_input.hpp"
#include "dnn/key_text.hpp"
#include "galley/core/error.hpp"
#include "galley/dnn/eltwise.hpp"

namespace galley::dnn {
namespace {

[[noreturn]] void bad(const std::string& message) { throw Error(Status::invalid_argument, message); }

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
  for (std::string_view part : detail::split_text(text, 'x')) {
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
  // alpha and beta may be negative ("al-0.5"): the reader finds them from the key's end.
  detail::KeyReader r("eltwise", key, "eltwise-F-add-f32-nchw-a32x256x56x56-b1x256x1x1-al1-be1",
                      {"al", "be"});
  EltwiseProblem p;
  p.direction = r.direction() == 'F' ? EltwiseDirection::forward : EltwiseDirection::backward;
  p.op = r.parsed_word("op", parse_eltwise_op);
  p.dtype = r.dtype();
  p.layout = r.layout();
  const auto shape = [&](std::string_view prefix, std::string_view what) {
    const std::string_view text = r.field(prefix, "shape");
    try {
      return parse_shape(text, what);
    } catch (const Error& e) {
      r.fail(e.what());
    }
  };
  p.a = shape("a", "shape a");
  p.b = shape("b", "shape b");
  p.alpha = r.field<float>("al", "float in shortest form", parse_float);
  p.beta = r.field<float>("be", "float in shortest form", parse_float);
  r.end();
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
