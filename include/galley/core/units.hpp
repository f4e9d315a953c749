// Byte-size formatting and parsing shared by the CLI, logs and error messages.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace galley {

/// "512 B", "1.50 KiB", "64.00 MiB", "1.00 GiB".
std::string format_bytes(std::size_t bytes);

/// Parses "4096", "4K", "64M", "1G" (binary multiples, case-insensitive, optional trailing "iB"/"B").
/// Throws Error(invalid_argument) naming the text on anything else or on overflow.
std::size_t parse_bytes(std::string_view text);

}  // namespace galley
