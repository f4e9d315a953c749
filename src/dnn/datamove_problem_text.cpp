// The data-movement problems as text: canonical keys (find-db rows, logs), read back exactly by
// parse_key, and the `galley bench` lines that reproduce a call.
#include <charconv>
#include <cmath>
#include <string>
#include <vector>

#include "core/quoted_input.hpp"
#include "galley/core/error.hpp"
#include "galley/dnn/datamove_problem.hpp"

namespace galley::dnn {
namespace {

[[noreturn]] void bad_key(std::string_view kind, std::string_view key, const std::string& why) {
  throw Error(Status::invalid_argument, std::string(kind) + " key " + quoted_input(key) + ": " + why);
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

// Canonical non-negative decimal: digits without leading zeros, so one problem has one key.
bool parse_count(std::string_view text, std::int64_t& out) {
  if (text.empty() || (text.size() > 1 && text.front() == '0')) return false;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && ptr == text.data() + text.size();
}

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

// Reads the fields of a key one '-'-separated word at a time.
class KeyReader {
 public:
  KeyReader(std::string_view kind, std::string_view key) : kind_(kind), key_(key), words_(split(key, '-')) {
    if (words_.empty() || words_[0] != kind) fail("does not start with '" + std::string(kind) + "-'");
    next_ = 1;
  }
  [[noreturn]] void fail(const std::string& why) const { bad_key(kind_, key_, why); }
  std::string_view word(const char* what) {
    if (next_ >= words_.size()) fail(std::string("ends before its ") + what);
    return words_[next_++];
  }
  // The text after a one-letter prefix.
  std::string_view field(char prefix, const char* what) {
    const std::string_view w = word(what);
    if (w.empty() || w.front() != prefix)
      fail(std::string("expected ") + what + " ('" + prefix + "...'), got '" + std::string(w) + "'");
    return w.substr(1);
  }
  std::vector<std::int64_t> list(char prefix, char sep, const char* what) {
    std::vector<std::int64_t> out;
    for (std::string_view p : split(field(prefix, what), sep)) {
      std::int64_t v = 0;
      if (!parse_count(p, v)) fail(std::string("bad ") + what + " entry '" + std::string(p) + "'");
      out.push_back(v);
    }
    return out;
  }
  std::int64_t number(char prefix, const char* what) {
    const std::vector<std::int64_t> v = list(prefix, ',', what);
    if (v.size() != 1) fail(std::string("bad ") + what);
    return v[0];
  }
  DType dtype() {
    const std::string_view w = word("dtype");
    try {
      return parse_dtype(w);
    } catch (const Error&) {
      fail("bad dtype '" + std::string(w) + "'");
    }
  }
  Layout layout() {
    const std::string_view w = word("layout");
    if (w == "nchw") return Layout::nchw;
    if (w == "nhwc") return Layout::nhwc;
    fail("bad layout '" + std::string(w) + "' (nchw or nhwc)");
  }
  void end() const {
    if (next_ != words_.size()) fail("has extra words after its last field");
  }

 private:
  std::string_view kind_, key_;
  std::vector<std::string_view> words_;
  std::size_t next_ = 0;
};

// A problem read from a key must give the same key back (and be valid), else the key was not
// canonical; both failures are the key's fault, named as such.
template <class P>
P checked(std::string_view kind, std::string_view key, P p) {
  try {
    p.validate();
  } catch (const Error& e) {
    bad_key(kind, key, e.what());
  }
  if (p.key() != key) bad_key(kind, key, "is not canonical (expected '" + p.key() + "')");
  return p;
}

template <class P>
std::string parts_key(const char* kind, const P& p) {
  return std::string(kind) + "-" + to_string(p.dtype) + "-" + to_string(p.layout) + "-a" +
         std::to_string(p.axis) + "-d" + join(p.dims, 'x') + "-s" + join(p.sizes, '.');
}

template <class P>
P parse_parts_key(const char* kind, std::string_view key) {
  KeyReader r(kind, key);
  P p;
  p.dtype = r.dtype();
  p.layout = r.layout();
  const std::int64_t axis = r.number('a', "axis");
  if (axis > kMaxRank) r.fail("axis out of range");
  p.axis = static_cast<int>(axis);
  p.dims = r.list('d', 'x', "dims");
  p.sizes = r.list('s', '.', "sizes");
  r.end();
  return checked(kind, key, std::move(p));
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
  return parse_parts_key<ConcatProblem>("concat", key);
}
std::string ConcatProblem::bench_command(const runtime::Device& device, std::string_view solver) const {
  return parts_command("concat", *this, device, solver);
}

std::string SplitProblem::key() const { return parts_key("split", *this); }
SplitProblem SplitProblem::parse_key(std::string_view key) {
  return parse_parts_key<SplitProblem>("split", key);
}
std::string SplitProblem::bench_command(const runtime::Device& device, std::string_view solver) const {
  return parts_command("split", *this, device, solver);
}

std::string TransposeProblem::key() const {
  return std::string("transpose-") + to_string(dtype) + "-d" + join(dims, 'x') + "-p" + join(perm, '.');
}
TransposeProblem TransposeProblem::parse_key(std::string_view key) {
  KeyReader r("transpose", key);
  TransposeProblem p;
  p.dtype = r.dtype();
  p.dims = r.list('d', 'x', "dims");
  for (std::int64_t v : r.list('p', '.', "perm")) {
    if (v > kMaxRank) r.fail("perm entry out of range");
    p.perm.push_back(static_cast<int>(v));
  }
  r.end();
  return checked("transpose", key, std::move(p));
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
  KeyReader r("pad", key);
  PadProblem p;
  const std::string_view d = r.word("direction");
  if (d == "F") {
    p.direction = PadDirection::forward;
  } else if (d == "B") {
    p.direction = PadDirection::backward;
  } else {
    r.fail("bad direction '" + std::string(d) + "' (F or B)");
  }
  p.dtype = r.dtype();
  p.layout = r.layout();
  p.dims = r.list('d', 'x', "dims");
  p.before = r.list('b', '.', "before");
  p.after = r.list('e', '.', "after");
  std::string v(r.field('v', "value"));
  for (char& c : v) {
    if (c == 'm') c = '-';
  }
  double value = 0;
  const auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), value);
  if (v.empty() || ec != std::errc() || ptr != v.data() + v.size()) r.fail("bad value '" + v + "'");
  p.value = value;
  r.end();
  return checked("pad", key, std::move(p));
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
  KeyReader r("reorder", key);
  ReorderProblem p;
  p.src_dtype = r.dtype();
  p.src_layout = r.layout();
  p.dst_dtype = r.dtype();
  p.dst_layout = r.layout();
  p.dims = r.list('d', 'x', "dims");
  r.end();
  return checked("reorder", key, std::move(p));
}
std::string ReorderProblem::bench_command(const runtime::Device& device, std::string_view solver) const {
  std::string line = "galley bench reorder --dims " + join(dims, ',') + " --dtype " + to_string(src_dtype) +
                     " --layout " + to_string(src_layout) + " --to-dtype " + to_string(dst_dtype) +
                     " --to-layout " + to_string(dst_layout) + " --device " + device.name();
  if (!solver.empty()) line += " --solver " + std::string(solver);
  return line;
}

}  // namespace galley::dnn
