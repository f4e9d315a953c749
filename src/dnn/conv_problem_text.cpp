// ConvProblem as text: the canonical key (find-db rows, logs) and MIOpenDriver command lines.
#include <algorithm>
#include <charconv>
#include <string>
#include <vector>

#include "core/quoted_input.hpp"
#include "galley/core/error.hpp"
#include "galley/dnn/activation.hpp"
#include "galley/dnn/conv_problem.hpp"

namespace galley::dnn {
namespace {

[[noreturn]] void bad(const std::string& message) { throw Error(Status::invalid_argument, message); }

char direction_letter(ConvDirection d) {
  switch (d) {
    case ConvDirection::forward:
      return 'F';
    case ConvDirection::backward_data:
      return 'B';
    case ConvDirection::backward_weights:
      return 'W';
  }
  return '?';
}

// Strict decimal: optional '-', digits, no leading zeros, nothing else; so that text -> problem ->
// text is the identity and two spellings of one problem never make two keys.
bool parse_int(std::string_view text, std::int64_t& out, bool canonical) {
  if (text.empty()) return false;
  const char* first = text.data();
  const char* last = text.data() + text.size();
  if (canonical) {
    const std::string_view digits = text.front() == '-' ? text.substr(1) : text;
    if (digits.empty() || (digits.size() > 1 && digits.front() == '0')) return false;
  }
  const auto [ptr, ec] = std::from_chars(first, last, out);
  return ec == std::errc() && ptr == last;
}

// A word of a line in a message: as typed when short and printable, else quoted and shortened.
std::string bare(std::string_view word) {
  const bool printable = std::none_of(word.begin(), word.end(), [](char c) {
    return static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) == 0x7F;
  });
  return printable && word.size() <= kQuotedInputChars ? std::string(word) : quoted_input(word);
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

std::string_view trim(std::string_view s) {
  const auto not_space = [](char c) { return c != ' ' && c != '\t' && c != '\r' && c != '\n'; };
  while (!s.empty() && !not_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && !not_space(s.back())) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> tokens(std::string_view text) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t' || text[i] == '\r' || text[i] == '\n')) ++i;
    std::size_t j = i;
    while (j < text.size() && !(text[j] == ' ' || text[j] == '\t' || text[j] == '\r' || text[j] == '\n')) ++j;
    if (j > i) out.push_back(text.substr(i, j - i));
    i = j;
  }
  return out;
}

// The problem fields in key order: key letter, MIOpenDriver short flag, long flag, member.
struct FieldSpec {
  char key;
  const char* flag;
  const char* long_flag;
  std::int64_t ConvProblem::*member;
};
constexpr FieldSpec kFields[] = {
    {'n', "-n", "--batchsize", &ConvProblem::n},
    {'c', "-c", "--in_channels", &ConvProblem::c},
    {'h', "-H", "--in_h", &ConvProblem::h},
    {'w', "-W", "--in_w", &ConvProblem::w},
    {'k', "-k", "--out_channels", &ConvProblem::k},
    {'y', "-y", "--fil_h", &ConvProblem::y},
    {'x', "-x", "--fil_w", &ConvProblem::x},
    {'p', "-p", "--pad_h", &ConvProblem::pad_h},
    {'q', "-q", "--pad_w", &ConvProblem::pad_w},
    {'u', "-u", "--conv_stride_h", &ConvProblem::stride_h},
    {'v', "-v", "--conv_stride_w", &ConvProblem::stride_w},
    {'l', "-l", "--dilation_h", &ConvProblem::dilation_h},
    {'j', "-j", "--dilation_w", &ConvProblem::dilation_w},
    {'g', "-g", "--group_count", &ConvProblem::groups},
};

// An epilogue's activation parameter as the activ key writes it: the shortest text that reads back
// as the same double, 'm' for '-' (the key's separator); -0 is written as 0.
std::string key_number(double v) {
  std::string s = "0";
  if (v != 0) {
    char text[64];
    const auto [end, ec] = std::to_chars(text, text + sizeof text, v);
    s = ec == std::errc() ? std::string(text, end) : std::string("nan");
  }
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
  return ec == std::errc() && ptr == s.data() + s.size() && key_number(out) == text;
}

}  // namespace

std::string ConvProblem::key() const {
  std::string out = "conv-";
  out += direction_letter(direction);
  out += '-';
  out += galley::to_string(dtype);
  out += '-';
  out += to_string(layout);
  for (const FieldSpec& f : kFields) {
    out += '-';
    out += f.key;
    out += std::to_string(this->*f.member);
  }
  if (epilogue.bias) out += "-bias";
  if (epilogue.residual) out += "-res";
  if (epilogue.activation) {
    out += '-';
    out += to_string(*epilogue.activation);
    out += "-a" + key_number(epilogue.alpha);
    out += "-b" + key_number(epilogue.beta);
  }
  return out;
}

ConvProblem ConvProblem::parse_key(std::string_view key) {
  const auto fail = [&](const std::string& why) -> void {
    bad("malformed conv key " + quoted_input(key) + ": " + why +
        " (expected e.g. conv-F-f32-nchw-n32-c64-h56-w56-k64-y3-x3-p1-q1-u1-v1-l1-j1-g1)");
  };
  const auto parts = split(key, '-');
  constexpr std::size_t kParts = 4 + std::size(kFields);
  if (parts.size() < kParts) {
    fail("has " + std::to_string(parts.size()) + " '-'-separated parts, want " + std::to_string(kParts) +
         " (then the epilogue's)");
  }
  ConvProblem p;
  if (parts[0] != "conv") fail("does not start with 'conv'");
  if (parts[1] == "F") {
    p.direction = ConvDirection::forward;
  } else if (parts[1] == "B") {
    p.direction = ConvDirection::backward_data;
  } else if (parts[1] == "W") {
    p.direction = ConvDirection::backward_weights;
  } else {
    fail("direction " + quoted_input(parts[1]) + " is not F, B or W");
  }
  try {
    p.dtype = parse_dtype(parts[2]);
    p.layout = parse_layout(parts[3]);
  } catch (const Error& e) {
    fail(e.what());
  }
  if (parts[3] != to_string(p.layout)) fail("layout " + quoted_input(parts[3]) + " must be lower case");
  for (std::size_t i = 0; i < std::size(kFields); ++i) {
    const std::string_view part = parts[4 + i];
    std::int64_t value = 0;
    if (part.empty() || part.front() != kFields[i].key || !parse_int(part.substr(1), value, true)) {
      fail("field " + std::to_string(5 + i) + " " + quoted_input(part) + " is not '" + kFields[i].key +
           "<integer>'");
    }
    p.*kFields[i].member = value;
  }
  // The epilogue: "bias", "res", "<activation>" "a<alpha>" "b<beta>", each optional, in this order.
  std::size_t i = kParts;
  if (i < parts.size() && parts[i] == "bias") {
    p.epilogue.bias = true;
    ++i;
  }
  if (i < parts.size() && parts[i] == "res") {
    p.epilogue.residual = true;
    ++i;
  }
  if (i < parts.size()) {
    try {
      p.epilogue.activation = parse_activation(parts[i]);
    } catch (const Error& e) {
      fail("epilogue part " + quoted_input(parts[i]) + " is not bias, res or an activation: " + e.what());
    }
    if (i + 3 != parts.size()) {
      fail("the epilogue activation " + quoted_input(parts[i]) + " must be followed by exactly 'a<number>' and 'b<number>'");
    }
    const std::string_view a = parts[i + 1], b = parts[i + 2];
    if (a.empty() || a.front() != 'a' || !parse_key_number(a.substr(1), p.epilogue.alpha)) {
      fail("epilogue part " + quoted_input(a) + " is not 'a<number>'");
    }
    if (b.empty() || b.front() != 'b' || !parse_key_number(b.substr(1), p.epilogue.beta)) {
      fail("epilogue part " + quoted_input(b) + " is not 'b<number>'");
    }
  }
  p.validate();
  return p;
}

std::string ConvProblem::driver_flags() const {
  std::string out;
  for (const FieldSpec& f : kFields) {
    if (!out.empty()) out += ' ';
    out += f.flag;
    out += ' ';
    out += std::to_string(this->*f.member);
  }
  return out;
}

ConvProblem ConvProblem::parse_driver_line(std::string_view line, std::string* tag) {
  // The line as messages quote it: shortened, so a junk line of megabytes is not echoed whole.
  const std::string quoted = quoted_input(trim(line));
  std::string_view body = line;
  if (const std::size_t hash = line.find('#'); hash != std::string_view::npos) {
    body = line.substr(0, hash);
    if (tag != nullptr) *tag = std::string(trim(line.substr(hash + 1)));
  } else if (tag != nullptr) {
    tag->clear();
  }
  auto words = tokens(body);
  if (words.empty()) bad("no conv problem in line " + quoted);

  // MIOpenDriver's defaults for flags a line leaves out (conv_driver.hpp), so a pasted
  // MIOpenDriver command means the same problem here.
  ConvProblem p{.n = 100, .c = 3, .h = 32, .w = 32, .k = 32, .y = 3, .x = 3};
  std::size_t i = 0;
  if (words[0].front() != '-') {
    if (words[0] == "conv") {
      p.dtype = DType::f32;
    } else if (words[0] == "convfp16") {
      p.dtype = DType::f16;
    } else if (words[0] == "convbfp16") {
      p.dtype = DType::bf16;
    } else {
      bad("line " + quoted + " starts with " + quoted_input(words[0]) +
          ", not a flag or conv, convfp16, convbfp16");
    }
    i = 1;
  }

  std::vector<std::string> seen;
  for (; i < words.size(); ++i) {
    std::string_view flag = words[i];
    std::string_view value;
    bool inline_value = false;
    if (flag.starts_with("--")) {
      if (const std::size_t eq = flag.find('='); eq != std::string_view::npos) {
        value = flag.substr(eq + 1);
        flag = flag.substr(0, eq);
        inline_value = true;
      }
    }
    if (flag.size() < 2 || flag.front() != '-') {
      bad("line " + quoted + ": " + quoted_input(flag) + " is not a flag");
    }
    if (!inline_value) {
      if (i + 1 >= words.size()) bad("line " + quoted + ": flag " + bare(flag) + " has no value");
      value = words[++i];
    }
    const FieldSpec* field = nullptr;
    for (const FieldSpec& f : kFields) {
      if (flag == f.flag || flag == f.long_flag) field = &f;
    }
    const std::string canonical = field != nullptr ? field->flag : std::string(flag);
    for (const auto& s : seen) {
      if (s == canonical) bad("line " + quoted + ": flag " + bare(flag) + " given twice");
    }
    seen.push_back(canonical);

    std::int64_t number = 0;
    const auto need_int = [&] {
      // Canonical decimal, as in keys: "017" (octal to C and to CLI11) and "0x10" are refused.
      if (!parse_int(value, number, true)) {
        bad("line " + quoted + ": value " + quoted_input(value) + " of " + bare(flag) +
            " is not a decimal integer (digits, no leading zero) within 64 bits");
      }
    };
    if (field != nullptr) {
      need_int();
      p.*field->member = number;
    } else if (flag == "-F" || flag == "--forw") {
      need_int();
      if (number == 1) {
        p.direction = ConvDirection::forward;
      } else if (number == 2) {
        p.direction = ConvDirection::backward_data;
      } else if (number == 4) {
        p.direction = ConvDirection::backward_weights;
      } else {
        bad("line " + quoted + ": -F " + bare(value) +
            " names no single direction (valid: 1 forward, 2 backward data, 4 backward weights)");
      }
    } else if (flag == "-m" || flag == "--mode") {
      if (value != "conv") bad("line " + quoted + ": -m " + bare(value) + " is not supported (valid: conv)");
    } else if (flag == "-t" || flag == "--time" || flag == "-V" || flag == "--verify" || flag == "-i" ||
               flag == "--iter") {
      need_int();  // run options of the driver, not part of the problem: accepted so pasted lines work
    } else if (flag == "--dtype") {
      if (value.size() > kQuotedInputChars) {
        bad("line " + quoted + ": unknown dtype " + quoted_input(value) + " (valid: f32, f16, bf16)");
      }
      p.dtype = parse_dtype(value);
    } else if (flag == "--layout") {
      p.layout = parse_layout(value);
    } else {
      bad("line " + quoted + ": unknown flag " + bare(flag) +
          " (valid: -n -c -H -W -k -y -x -p -q -u -v -l -j -g -F -m -t -V -i --dtype --layout)");
    }
  }
  try {
    p.validate();
  } catch (const Error& e) {
    bad(std::string(e.what()) + " in line " + quoted);
  }
  return p;
}

}  // namespace galley::dnn
