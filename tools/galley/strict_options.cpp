#include "strict_options.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>

#include "core/quoted_input.hpp"
#include "galley/core/error.hpp"

namespace galley::cli {
namespace {

// The name our validators carry, so apply_number_syntax() can tell a declared range from none.
constexpr const char* kValidatorName = "galley-strict-number";

std::string integer_range(std::int64_t min, std::int64_t max) {
  return "valid: a decimal integer from " + std::to_string(min) + " to " + std::to_string(max);
}

std::string short_number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

std::string number_range(double min, bool min_exclusive, double max) {
  std::string out =
      std::string("valid: a finite decimal number ") + (min_exclusive ? "> " : ">= ") + short_number(min);
  if (max < std::numeric_limits<double>::max()) out += " and <= " + short_number(max);
  return out;
}

[[noreturn]] void bad(std::string_view option, std::string_view text, const std::string& why,
                      const std::string& range) {
  std::string message;
  if (!option.empty()) message = std::string(option) + ": ";
  throw Error(Status::invalid_argument, message + quoted_input(text) + " " + why + " (" + range + ")");
}

// Runs `parse` on a CLI11 value; an Error becomes the validator's message (CLI11 prefixes the option).
template <typename Parse>
CLI::Validator validator(Parse parse, std::string description) {
  return CLI::Validator(
      [parse](std::string& value) -> std::string {
        try {
          parse(value);
          return {};
        } catch (const Error& e) {
          return e.what();
        }
      },
      std::move(description), kValidatorName);
}

}  // namespace

std::int64_t parse_integer(std::string_view option, std::string_view text, std::int64_t min,
                           std::int64_t max) {
  const std::string range = integer_range(min, max);
  const std::string_view digits = !text.empty() && text.front() == '-' ? text.substr(1) : text;
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string_view::npos) {
    bad(option, text, "is not a decimal integer", range);
  }
  // A leading zero reads as octal to C and to many tools: refuse it rather than guess.
  if (digits.size() > 1 && digits.front() == '0') {
    bad(option, text, "has a leading zero (octal is not accepted)", range);
  }
  std::int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec == std::errc::result_out_of_range || value < min || value > max)
    bad(option, text, "is out of range", range);
  if (ec != std::errc() || end != text.data() + text.size())
    bad(option, text, "is not a decimal integer", range);
  return value;
}

double parse_number(std::string_view option, std::string_view text, double min, bool min_exclusive,
                    double max) {
  const std::string range = number_range(min, min_exclusive, max);
  // Only digits, signs, '.' and an exponent: from_chars alone would also take "nan" and "inf".
  if (text.empty() || text.find_first_not_of("0123456789.eE-+") != std::string_view::npos ||
      text.front() == '+') {
    bad(option, text, "is not a finite decimal number", range);
  }
  double value = 0;
  const auto [end, ec] =
      std::from_chars(text.data(), text.data() + text.size(), value, std::chars_format::general);
  if (ec == std::errc::result_out_of_range) bad(option, text, "is out of range", range);
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(value)) {
    bad(option, text, "is not a finite decimal number", range);
  }
  if (value < min || (min_exclusive && value == min) || value > max)
    bad(option, text, "is out of range", range);
  return value;
}

CLI::Validator integer_in(std::int64_t min, std::int64_t max) {
  // The help's type column: "INT:>= 1", "INT:0..1".
  std::string description = max == std::numeric_limits<std::int64_t>::max()
                                ? ">= " + std::to_string(min)
                                : std::to_string(min) + ".." + std::to_string(max);
  return validator([min, max](const std::string& v) { parse_integer("", v, min, max); },
                   std::move(description));
}

CLI::Validator number_in(double min, bool min_exclusive, double max) {
  std::string description = (min_exclusive ? "> " : ">= ") + short_number(min);
  if (max < std::numeric_limits<double>::max()) description += ", <= " + short_number(max);
  return validator(
      [min, min_exclusive, max](const std::string& v) { parse_number("", v, min, min_exclusive, max); },
      std::move(description));
}

CLI::Validator number_syntax(NumberKind kind) {
  if (kind != NumberKind::floating) {
    const std::int64_t min =
        kind == NumberKind::unsigned_integer ? 0 : std::numeric_limits<std::int64_t>::min();
    return validator(
        [min](const std::string& v) { parse_integer("", v, min, std::numeric_limits<std::int64_t>::max()); },
        "");
  }
  return validator(
      [](const std::string& v) { parse_number("", v, -std::numeric_limits<double>::max(), false); }, "");
}

void apply_number_syntax(CLI::App& app) {
  for (CLI::Option* option : app.get_options()) {
    const std::string type = option->get_type_name();
    NumberKind kind;
    if (type.starts_with("INT")) {
      kind = NumberKind::signed_integer;
    } else if (type.starts_with("UINT")) {
      kind = NumberKind::unsigned_integer;
    } else if (type.starts_with("FLOAT")) {
      kind = NumberKind::floating;
    } else {
      continue;
    }
    try {
      option->get_validator(kValidatorName);
      continue;  // declared with its own range
    } catch (const CLI::OptionNotFound&) {
    }
    option->check(number_syntax(kind));
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) apply_number_syntax(*sub);
}

}  // namespace galley::cli

namespace galley::cli {

void require_with(const CLI::App& cmd, const std::string& option, const std::string& needed,
                  const std::string& why) {
  if (cmd.count(option) > 0 && cmd.count(needed) == 0) {
    throw Error(Status::invalid_argument, option + " needs " + needed + (why.empty() ? "" : ": " + why));
  }
}

void require_apart(const CLI::App& cmd, const std::string& a, const std::string& b, const std::string& why) {
  if (cmd.count(a) > 0 && cmd.count(b) > 0) {
    throw Error(Status::invalid_argument,
                a + " and " + b + " exclude each other" + (why.empty() ? "" : ": " + why));
  }
}

}  // namespace galley::cli
