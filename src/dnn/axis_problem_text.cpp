#include "dnn/axis_problem_text.hpp"

#include <charconv>

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

}  // namespace galley::dnn::detail
