// One find-db row as JSON: the form `galley db export` writes and `galley db list --json` prints, and
// the checked reading of it that `galley db import` does. Internal to libgalley and the CLI.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "galley/tuning/find_db.hpp"

namespace galley::tuning {

/// {"problem", "device", "arch", "compute_units", "driver_version", "galley_version", "rank",
///  "solver", "workspace_bytes", "tuned_at", "params", "ms"}; "ms" is null for an untimed row (JSON has no NaN).
nlohmann::json find_row_to_json(const FindRow& row);

/// Reads rows of an export without trusting them: a row the find-db would store wrongly (a negative
/// size read back as 2^64-1, a unit count that wraps, a time that is negative or not a number) or
/// could never match (a malformed or non-canonical problem key, a solver that does not exist) is an
/// error, not a row.
class FindRowReader {
 public:
  /// Takes the registered solver names and the clock once, for every row read.
  FindRowReader();

  /// The row `j`. Throws Error(corrupt_data) saying which field is wrong and what would be valid
  /// (the caller adds which row). "params" may be absent (older exports), "tuned_at" too (then now).
  FindRow read(const nlohmann::json& j) const;

 private:
  std::set<std::string, std::less<>> solvers_;   // every registered conv solver name
  std::set<std::string, std::less<>> prefixes_;  // their first dotted parts: "cpu", "ref", "cuda", ...
  std::int64_t now_ = 0;                         // unix seconds
};

}  // namespace galley::tuning
