#include "dnn/key_text.hpp"

#include <charconv>

#include "core/quoted_input.hpp"

namespace galley::dnn::detail {

bool parse_key_uint(std::string_view text, std::int64_t& out) {
  if (text.empty() || (text.size() > 1 && text.front() == '0')) return false;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
  }
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && ptr == text.data() + text.size();
}

std::string dims_text(const Dims& dims, int rank) {
  std::string out;
  for (int i = 0; i < rank; ++i) {
    if (i > 0) out += 'x';
    out += std::to_string(dims[static_cast<std::size_t>(i)]);
  }
  return out;
}

std::vector<std::string_view> split_text(std::string_view text, char sep) {
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

bool parse_dims_text(std::string_view text, Dims& dims, int& rank) {
  const auto parts = split_text(text, 'x');
  if (parts.empty() || parts.size() > static_cast<std::size_t>(kMaxRank)) return false;
  Dims out{1, 1, 1, 1, 1, 1};
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (!parse_key_uint(parts[i], out[i])) return false;
  }
  dims = out;
  rank = static_cast<int>(parts.size());
  return true;
}

KeyReader::KeyReader(std::string_view kind, std::string_view key, std::string_view example,
                     std::initializer_list<std::string_view> value_tail)
    : kind_(kind), key_(key), example_(example) {
  // Each tail field starts at the last "-<prefix>" before the next one's start.
  std::vector<std::size_t> starts;
  std::size_t end = key.size();
  for (auto it = std::rbegin(value_tail); it != std::rend(value_tail); ++it) {
    std::string marker(1, '-');
    marker += *it;
    const std::size_t at =
        end < marker.size() ? std::string_view::npos : key.rfind(marker, end - marker.size());
    if (at == std::string_view::npos) {
      std::string want;
      for (std::string_view prefix : value_tail) {
        want += '-';
        want += prefix;
        want += "<value>";
      }
      fail("does not end in " + want);
    }
    starts.insert(starts.begin(), at);
    end = at;
  }
  fields_ = split_text(key.substr(0, end), '-');
  for (std::size_t i = 0; i < starts.size(); ++i) {
    const std::size_t stop = i + 1 < starts.size() ? starts[i + 1] : key.size();
    fields_.push_back(key.substr(starts[i] + 1, stop - starts[i] - 1));
  }
  if (fields_[0] != kind) fail("does not start with '" + std::string(kind) + "'");
  next_ = 1;
}

void KeyReader::fail(const std::string& why) const {
  std::string message = "malformed " + std::string(kind_) + " key " + quoted_input(key_) + ": " + why;
  if (!example_.empty()) message += " (expected e.g. " + std::string(example_) + ")";
  throw Error(Status::invalid_argument, message);
}

void KeyReader::bad_field(std::string_view what) const {
  fail("field " + std::to_string(next_) + " " + quoted_input(fields_[next_ - 1]) + " is not '" +
       std::string(prefix_) + "<" + std::string(what) + ">'");
}

std::string_view KeyReader::word(std::string_view what) {
  if (next_ >= fields_.size()) {
    fail("has " + std::to_string(fields_.size()) + " '-'-separated fields, ending before its " +
         std::string(what));
  }
  prefix_ = {};
  return fields_[next_++];
}

bool KeyReader::accept(std::string_view literal) {
  if (next_ >= fields_.size() || fields_[next_] != literal) return false;
  ++next_;
  return true;
}

std::size_t KeyReader::one_of(std::string_view what, std::initializer_list<std::string_view> names) {
  const std::string_view text = word(what);
  std::string valid;
  std::size_t index = 0;
  for (std::string_view name : names) {
    if (text == name) return index;
    valid += (index == 0 ? "" : index + 1 == names.size() ? " or " : ", ") + std::string(name);
    ++index;
  }
  fail(std::string(what) + " " + quoted_input(text) + " is not " + valid);
}

char KeyReader::direction(std::string_view letters) {
  const std::string_view text = word("direction");
  if (text.size() == 1 && letters.find(text[0]) != std::string_view::npos) return text[0];
  std::string valid;
  for (std::size_t i = 0; i < letters.size(); ++i) {
    valid += (i == 0 ? "" : i + 1 == letters.size() ? " or " : ", ") + std::string(1, letters[i]);
  }
  fail("direction " + quoted_input(text) + " is not " + valid);
}

DType KeyReader::dtype() {
  const DType dtype = parsed_word("dtype", parse_dtype);
  if (fields_[next_ - 1] != to_string(dtype)) {
    fail("dtype " + quoted_input(fields_[next_ - 1]) + " is not canonical (" + to_string(dtype) + ")");
  }
  return dtype;
}

Layout KeyReader::layout() {
  const Layout layout = parsed_word("layout", parse_layout);
  if (fields_[next_ - 1] != to_string(layout)) {
    fail("layout " + quoted_input(fields_[next_ - 1]) + " must be lower case");
  }
  return layout;
}

std::string_view KeyReader::field(std::string_view prefix, std::string_view what) {
  const std::string_view text = word(std::string(prefix) + "<" + std::string(what) + ">");
  prefix_ = prefix;
  if (!text.starts_with(prefix)) bad_field(what);
  return text.substr(prefix.size());
}

std::int64_t KeyReader::count(std::string_view prefix) {
  return field<std::int64_t>(prefix, "integer", parse_key_uint);
}

std::vector<std::int64_t> KeyReader::counts(std::string_view prefix, char sep, std::string_view what) {
  std::vector<std::int64_t> out;
  for (std::string_view item : split_text(field(prefix, what), sep)) {
    std::int64_t value = 0;
    if (!parse_key_uint(item, value)) bad_field(what);
    out.push_back(value);
  }
  return out;
}

void KeyReader::dims(std::string_view prefix, Dims& dims, int& rank) {
  const std::string what = "1 to " + std::to_string(kMaxRank) + " dims joined by x";
  if (!parse_dims_text(field(prefix, what), dims, rank)) bad_field(what);
}

bool KeyReader::flag(std::string_view prefix) {
  const std::string_view text = field(prefix, "0 or 1");
  if (text != "0" && text != "1") bad_field("0 or 1");
  return text == "1";
}

void KeyReader::end() const {
  if (next_ != fields_.size()) {
    fail("has " + std::to_string(fields_.size()) + " '-'-separated fields, want " + std::to_string(next_));
  }
}

}  // namespace galley::dnn::detail
