// User input quoted in an error message: short and printable. A message must name the bad value,
// but a 10 MB junk line or a value full of control characters must not flood or garble stderr.
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>
#include <string_view>

namespace galley {

/// The most characters of user input an error message quotes.
inline constexpr std::size_t kQuotedInputChars = 80;

/// `text` in single quotes with control bytes written as \xNN; longer than `max_chars`, its first
/// `max_chars` bytes (cut at a UTF-8 character boundary) then "..." and the full length:
/// "'conv -n 1 -c...' (10485760 chars)".
inline std::string quoted_input(std::string_view text, std::size_t max_chars = kQuotedInputChars) {
  std::size_t shown = text.size();
  if (shown > max_chars) {
    shown = max_chars;
    // Never end inside a multi-byte UTF-8 character (continuation bytes are 10xxxxxx).
    while (shown > 0 && (static_cast<unsigned char>(text[shown]) & 0xC0) == 0x80) --shown;
  }
  std::string out = "'";
  for (std::size_t i = 0; i < shown; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7F) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02X", c);
      out += escaped;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (shown < text.size()) {
    out += "...' (" + std::to_string(text.size()) + " chars)";
  } else {
    out += '\'';
  }
  return out;
}

}  // namespace galley
