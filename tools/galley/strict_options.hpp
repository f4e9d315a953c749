// Strict numbers on the command line. CLI11 reads integers with base detection (`-n 017` is 15,
// `-n 0x10` is 16), clamps nothing it cannot store into a range the user sees, and takes "nan" and
// "inf" as numbers; a problem file rejects all of these, so the flags must too. Every numeric option
// gets one of these validators where it is declared (its range), and main() puts number_syntax()
// on any numeric option left without one, so no subcommand can forget.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

namespace galley::cli {

/// Parses a decimal integer: an optional '-', then digits with no leading zero ("0" itself is
/// fine). Throws Error(invalid_argument) naming `option`, the (shortened) text and [min, max] when
/// it is anything else or out of range.
std::int64_t parse_integer(std::string_view option, std::string_view text, std::int64_t min,
                           std::int64_t max);

/// Parses a finite decimal number ("1e-5", "0.25", "3"; no hex, nan, inf, leading '+'). Throws
/// Error(invalid_argument) naming `option` and the valid range when it is anything else, below
/// `min` (or equal to it when `min_exclusive`), or above `max`.
double parse_number(std::string_view option, std::string_view text, double min, bool min_exclusive,
                    double max = std::numeric_limits<double>::max());

/// A CLI11 check: the value is a decimal integer in [min, max].
CLI::Validator integer_in(std::int64_t min, std::int64_t max = std::numeric_limits<std::int64_t>::max());

/// A CLI11 check: the value is a finite decimal number >= min (> min when `min_exclusive`), <= max.
CLI::Validator number_in(double min, bool min_exclusive, double max = std::numeric_limits<double>::max());

/// What CLI11 stores a numeric option into.
enum class NumberKind { signed_integer, unsigned_integer, floating };

/// A CLI11 check for a numeric option declared without a range: only the syntax (decimal,
/// finite; no '-' for an unsigned target) and what fits in 64 bits.
CLI::Validator number_syntax(NumberKind kind);

/// Puts number_syntax() on every option of `app` and its subcommands, recursively, whose target is
/// a number (CLI11 type INT, UINT or FLOAT) and that has no validator yet.
void apply_number_syntax(CLI::App& app);

/// The largest repeat count (iterations, warm-up runs, rounds) a benchmark accepts: each repeat
/// keeps a record, so an absurd count is an error up front, not a run that grows without end.
inline constexpr std::int64_t kMaxRepeats = 1'000'000;

}  // namespace galley::cli

namespace galley::cli {

/// Throws Error(invalid_argument) "OPTION needs NEEDED" when `option` was given to `cmd` without
/// `needed` (each an option name as declared, e.g. "--first-call"), so a flag that only means
/// something beside another is never silently ignored.
void require_with(const CLI::App& cmd, const std::string& option, const std::string& needed,
                  const std::string& why = "");

/// Throws Error(invalid_argument) naming both when `a` and `b` were both given to `cmd`.
void require_apart(const CLI::App& cmd, const std::string& a, const std::string& b,
                   const std::string& why = "");

}  // namespace galley::cli
