// The data-movement problems as text: canonical keys (find-db rows, logs), read back exactly by
// parse_key, and the `galley bench` lines that reproduce a call.
#include <charconv>
#include <cmath>
#include <string>
#include <vector>

#include "core/quoted_input.hpp"
#include "dnn/key_text.hpp"
#include "galley/core/error.hpp"
#include "galley/dnn/datamove_problem.hpp"

namespace galley::dnn {
namespace {

std::string join(const std::vector<std::int64_t>& v, char sep) {
  std::string out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) out += sep;
    out += std::to_string(v[i]);
  }
  return out;
}
std::string join(const std::vector<int>& v, char sep) {
  return join(std::vector<std::int64_t>(v.begin(), v.end()), sep);
}

// A problem read from a key must give the same key back (and be valid), else the key was not
// canonical; both failures are the key's fault, named as such.
template <class P>
P checked(const detail::KeyReader& r, std::string_view key, P p) {
  r.end();
  try {
    p.validate();
  } catch (const Error& e) {
    r.fail(e.what());
  }
  if (p.key() != key) r.fail("is not canonical (expected " + quoted_input(p.key()) + ")");
  return p;
}

template <class P>
std::string parts_key(const char* kind, const P& p) {
  return std::string(kind) + "-" + to_string(p.dtype) + "-" + to_string(p.layout) + "-a" +
         std::to_string(p.axis) + "-d" + join(p.dims, 'x') + "-s" + join(p.sizes, '.');
}

template <class P>
P parse_parts_key(const char* kind, std::string_view key, std::string_view example) {
  detail::KeyReader r(kind, key, example);
  P p;
  p.dtype = r.dtype();
  p.layout = r.layout();
  const std::int64_t axis = r.count("a");
  if (axis > kMaxRank) r.bad_field("axis");
  p.axis = static_cast<int>(axis);
  p.dims = r.counts("d", 'x', "dims");
  p.sizes = r.counts("s", '.', "sizes");
  return checked(r, key, std::move(p));
}

template <class P>
std::string parts_command(const char* kind, const P& p, const runtime::Device& device,
                          std::string_view solver) {
  std::string line = std::string("galley bench ") + kind + " --dims " + join(p.dims, ',') + " --axis " +
                     std::to_string(p.axis) + " --sizes " + join(p.sizes, ',') + " --dtype " +
                     to_string(p.dtype) + " --layout " + to_string(p.layout) + " --device " + device.name();
  if (!solver.empty()) line += " --solver " + std::string(solver);
  return line;
}

// Keys split on '-', so the minus signs of a value (sign and exponent) are written 'm':
// -1e-05 is "m1em05", -inf "minf".
std::string value_text(double v) {
  char buf[64];
  const auto [ptr, ec] = std::to_chars(buf, buf + sizeof buf, v == 0 ? 0.0 : v);  // -0 pads as 0
  std::string out(buf, ec == std::errc() ? ptr : buf);
  for (char& c : out) {
    if (c == '-') c = 'm';
  }
  return out;
}

}  // namespace

std::string ConcatProblem::key() const { return parts_key("concat", *this); }
ConcatProblem ConcatProblem::parse_key(std::string_view key) {
  return parse_parts_key<ConcatProblem>("concat", key, "concat-f32-nchw-a1-d2x3-s1.2");
}
std::string ConcatProblem::bench_command(const runtime::Device& device, std::string_view solver) const {
  return parts_command("concat", *this, device, solver);
}

std::string SplitProblem::key() const { return parts_key("split", *this); }
SplitProblem SplitProblem::parse_key(std::string_view key) {
  return parse_parts_key<SplitProblem>("split", key, "split-f32-nchw-a1-d2x3-s1.2");
}
std::string SplitProblem::bench_command(const runtime::Device& device, std::string_view solver) const {
  return parts_command("split", *this, device, solver);
}

std::string TransposeProblem::key() const {
  return std::string("transpose-") + to_string(dtype) + "-d" + join(dims, 'x') + "-p" + join(perm, '.');
}
TransposeProblem TransposeProblem::parse_key(std::string_view key) {
  detail::KeyReader r("transpose", key, "transpose-f32-d2x3-p1.0");
  TransposeProblem p;
  p.dtype = r.dtype();
  p.dims = r.counts("d", 'x', "dims");
  for (std::int64_t v : r.counts("p", '.', "perm")) {
    if (v > kMaxRank) r.bad_field("perm");
    p.perm.push_back(static_cast<int>(v));
  }
  return checked(r, key, std::move(p));
}
std::string TransposeProblem::bench_command(const runtime::Device& device, std::string_view solver) const {
  std::string line = "galley bench transpose --dims " + join(dims, ',') + " --perm " + join(perm, ',') +
                     " --dtype " + to_string(dtype) + " --device " + device.name();
  if (!solver.empty()) line += " --solver " + std::string(solver);
  return line;
}

std::string PadProblem::key() const {
  return std::string("pad-") + (direction == PadDirection::forward ? "F" : "B") + "-" + to_string(dtype) +
         "-" + to_string(layout) + "-d" + join(dims, 'x') + "-b" + join(before, '.') + "-e" +
         join(after, '.') + "-v" + value_text(value);
}
PadProblem PadProblem::parse_key(std::string_view key) {
  detail::KeyReader r("pad", key, "pad-F-f32-nchw-d2x3x4x5-b0.0.1.1-e0.0.1.1-v0");
  PadProblem p;
  p.direction = r.direction() == 'F' ? PadDirection::forward : PadDirection::backward;
  p.dtype = r.dtype();
  p.layout = r.layout();
  p.dims = r.counts("d", 'x', "dims");
  p.before = r.counts("b", '.', "before");
  p.after = r.counts("e", '.', "after");
  p.value = r.field<double>("v", "value", [](std::string_view text, double& value) {
    std::string v(text);
    for (char& c : v) {
      if (c == 'm') c = '-';
    }
    const auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), value);
    return !v.empty() && ec == std::errc() && ptr == v.data() + v.size();
  });
  return checked(r, key, std::move(p));
}
std::string PadProblem::bench_command(const runtime::Device& device, std::string_view solver) const {
  char value_buf[64];
  const auto [ptr, ec] = std::to_chars(value_buf, value_buf + sizeof value_buf, value == 0 ? 0.0 : value);
  std::string line = "galley bench pad --dims " + join(dims, ',') + " --before " + join(before, ',') +
                     " --after " + join(after, ',') + " --value " +
                     std::string(value_buf, ec == std::errc() ? ptr : value_buf) + " -F " +
                     (direction == PadDirection::forward ? "1" : "2") + " --dtype " + to_string(dtype) +
                     " --layout " + to_string(layout) + " --device " + device.name();
  if (!solver.empty()) line += " --solver " + std::string(solver);
  return line;
}

std::string ReorderProblem::key() const {
  return std::string("reorder-") + to_string(src_dtype) + "-" + to_string(src_layout) + "-" +
         to_string(dst_dtype) + "-" + to_string(dst_layout) + "-d" + join(dims, 'x');
}
ReorderProblem ReorderProblem::parse_key(std::string_view key) {
  detail::KeyReader r("reorder", key, "reorder-f32-nchw-f16-nhwc-d2x3x4x5");
  ReorderProblem p;
  p.src_dtype = r.dtype();
  p.src_layout = r.layout();
  p.dst_dtype = r.dtype();
  p.dst_layout = r.layout();
  p.dims = r.counts("d", 'x', "dims");
  return checked(r, key, std::move(p));
}
std::string ReorderProblem::bench_command(const runtime::Device& device, std::string_view solver) const {
  std::string line = "galley bench reorder --dims " + join(dims, ',') + " --dtype " + to_string(src_dtype) +
                     " --layout " + to_string(src_layout) + " --to-dtype " + to_string(dst_dtype) +
                     " --to-layout " + to_string(dst_layout) + " --device " + device.name();
  if (!solver.empty()) line += " --solver " + std::string(solver);
  return line;
}

}  // namespace galley::dnn
