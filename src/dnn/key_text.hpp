// The text of problem keys ("pool-F-f16-nhwc-max-kernel-n32-..."), which name problems in the find-db
// and in logs: strict integers, shapes as "2x3x4x5", and KeyReader, which every op's parse_key reads its
// key with, so that all of them accept only the canonical spelling and fail with one message format.
// Internal to libgalley.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "galley/core/dtype.hpp"
#include "galley/core/error.hpp"
#include "galley/dnn/tensor.hpp"

namespace galley::dnn::detail {

/// Strict decimal: digits only, no sign, no leading zero (so a key has one spelling).
bool parse_key_uint(std::string_view text, std::int64_t& out);

/// "2x3x4x5" for the first `rank` dims.
std::string dims_text(const Dims& dims, int rank);
/// Reads "2x3x4x5" into dims and rank; false when malformed or of more than kMaxRank dims.
bool parse_dims_text(std::string_view text, Dims& dims, int& rank);

/// Splits `text` at every `sep`.
std::vector<std::string_view> split_text(std::string_view text, char sep);

/// Reads a key's '-'-separated fields in order. Every failure throws Error(invalid_argument)
///   malformed <kind> key '<key>': <why> (expected e.g. <example>)
/// where <why> quotes the bad field and says what was wanted there.
class KeyReader {
 public:
  /// Fails unless the first field is `kind`. `value_tail`: the prefixes of the key's last fields
  /// whose values may hold '-' ({"alpha", "beta"} for "...-alpha-0.5-beta1e-05"); they are found
  /// from the end of the key, so each of them is one field.
  KeyReader(std::string_view kind, std::string_view key, std::string_view example,
            std::initializer_list<std::string_view> value_tail = {});

  [[noreturn]] void fail(const std::string& why) const;
  /// The field read last is not `<prefix><what>`.
  [[noreturn]] void bad_field(std::string_view what) const;

  /// The next field as it is; fails when the key has ended (`what` names the missing field).
  std::string_view word(std::string_view what);
  /// Consumes the next field if it is `literal`.
  bool accept(std::string_view literal);
  /// The next field, which must be one of `names`; returns its index there.
  std::size_t one_of(std::string_view what, std::initializer_list<std::string_view> names);
  /// The next field through `parse` (a parse_<enum>(std::string_view) that throws Error).
  template <class Parse>
  auto parsed_word(std::string_view what, Parse&& parse) {
    const std::string_view text = word(what);
    try {
      return parse(text);
    } catch (const Error& e) {
      fail(e.what());
    }
  }

  /// The direction letter, one of `letters`.
  char direction(std::string_view letters = "FB");
  /// A dtype in its one spelling ("f32").
  DType dtype();
  /// "nchw" or "nhwc".
  Layout layout();

  /// The text after `prefix` of the next field.
  std::string_view field(std::string_view prefix, std::string_view what);
  /// The next field's value after `prefix`, read by `parse(text, value)` (false: not canonical).
  template <class T, class Parse>
  T field(std::string_view prefix, std::string_view what, Parse&& parse) {
    const std::string_view text = field(prefix, what);
    T value{};
    if (!parse(text, value)) bad_field(what);
    return value;
  }
  /// `<prefix><integer>`, strict as parse_key_uint.
  std::int64_t count(std::string_view prefix);
  /// `<prefix>` then integers joined by `sep` ("d2x3x4", "a1.2"), at least one.
  std::vector<std::int64_t> counts(std::string_view prefix, char sep, std::string_view what);
  /// `<prefix>` then 1 to kMaxRank dims as parse_dims_text reads them ("s2x3x4").
  void dims(std::string_view prefix, Dims& dims, int& rank);
  /// `<prefix>0` or `<prefix>1`.
  bool flag(std::string_view prefix);

  /// Fails when fields are left over.
  void end() const;

 private:
  std::string_view kind_, key_, example_;
  std::vector<std::string_view> fields_;
  std::size_t next_ = 0;
  std::string_view prefix_;  // of the field read last, for bad_field
};

}  // namespace galley::dnn::detail
