// One find-db row as JSON, both ways. Reading checks every field, because what `galley db import`
// stores is trusted later: the tuner runs the solver a row names for the problem its key names.
#include "tuning/find_row_json.hpp"

#include <climits>
#include <cmath>
#include <ctime>
#include <limits>
#include <string_view>

#include "galley/core/error.hpp"
#include "galley/dnn/conv_problem.hpp"
#include "galley/dnn/solver.hpp"

namespace galley::tuning {

nlohmann::json find_row_to_json(const FindRow& row) {
  nlohmann::json j = {{"problem", row.problem},
                      {"device", row.device.name},
                      {"arch", row.device.arch},
                      {"compute_units", row.device.compute_units},
                      {"driver_version", row.device.driver_version},
                      {"galley_version", row.device.galley_version},
                      {"rank", row.record.rank},
                      {"solver", row.record.solver},
                      {"workspace_bytes", row.record.workspace_bytes},
                      {"tuned_at", row.tuned_at},
                      {"params", row.record.params}};
  // JSON has no NaN: an untimed entry has "ms": null.
  j["ms"] = std::isnan(row.record.ms) ? nlohmann::json(nullptr) : nlohmann::json(row.record.ms);
  return j;
}

namespace {

// Longer texts are junk, not keys or names; they are refused before anything quotes them whole.
constexpr std::size_t kMaxKeyChars = 256;
constexpr std::size_t kMaxTextChars = 1024;
// A clock a day ahead of this machine's is skew; further ahead, the time is made up.
constexpr std::int64_t kFutureSlackSeconds = 24 * 3600;

[[noreturn]] void bad(const std::string& why) { throw Error(Status::corrupt_data, why); }

// A value as a message may show it: JSON text, cut short.
std::string shown(const nlohmann::json& value) {
  std::string text = value.dump();
  constexpr std::size_t kShown = 60;
  if (text.size() > kShown)
    text = text.substr(0, kShown) + "... (" + std::to_string(text.size()) + " characters)";
  return text;
}

const nlohmann::json& field(const nlohmann::json& j, const char* name) {
  const auto it = j.find(name);
  if (it == j.end()) bad(std::string("has no \"") + name + "\"");
  return *it;
}

std::string text_field(const nlohmann::json& j, const char* name, std::size_t max_chars = kMaxTextChars) {
  const nlohmann::json& v = field(j, name);
  if (!v.is_string()) bad(std::string("\"") + name + "\" is " + shown(v) + ", not a string");
  const auto& text = v.get_ref<const std::string&>();
  if (text.size() > max_chars) {
    bad(std::string("\"") + name + "\" is " + std::to_string(text.size()) + " characters long (at most " +
        std::to_string(max_chars) + ")");
  }
  return text;
}

// A JSON integer within [lo, hi]; 1.0, 1e12 (floats) and strings are not integers here.
std::int64_t int_field(const nlohmann::json& j, const char* name, std::int64_t lo, std::int64_t hi) {
  const nlohmann::json& v = field(j, name);
  const std::string range = " (valid: " + std::to_string(lo) + " to " + std::to_string(hi) + ")";
  if (!v.is_number_integer())
    bad(std::string("\"") + name + "\" is " + shown(v) + ", not an integer" + range);
  // The parser keeps a non-negative integer unsigned, up to 2^64-1; read as signed it could wrap.
  const bool in_range = v.is_number_unsigned() ? v.get<std::uint64_t>() <= static_cast<std::uint64_t>(hi) &&
                                                     static_cast<std::int64_t>(v.get<std::uint64_t>()) >= lo
                                               : v.get<std::int64_t>() >= lo && v.get<std::int64_t>() <= hi;
  if (!in_range) bad(std::string("\"") + name + "\" " + v.dump() + " is out of range" + range);
  return v.is_number_unsigned() ? static_cast<std::int64_t>(v.get<std::uint64_t>()) : v.get<std::int64_t>();
}

// A key of a known op that its parser accepts. The parsers take canonical keys only (no leading
// zeros, lower case), so an accepted key is one a lookup can match.
// Returns the key's op kind, whose solver list the row's solver must be in.
dnn::OpKind check_problem_key(const std::string& key) {
  try {
    return dnn::parse_problem_key(key).ops->kind;
  } catch (const Error& e) {
    bad(std::string("problem key: ") + e.what());
  }
}

bool well_formed_solver_name(std::string_view name) {
  // <backend>.<op>.<name>, lower case: "cuda.conv.cudnn_graph".
  int dots = 0;
  char previous = '.';
  for (const char c : name) {
    if (c == '.') {
      if (previous == '.') return false;
      ++dots;
    } else if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) {
      return false;
    }
    previous = c;
  }
  return dots == 2 && previous != '.';
}

std::string first_part(std::string_view name) { return std::string(name.substr(0, name.find('.'))); }

}  // namespace

FindRowReader::FindRowReader() : now_(static_cast<std::int64_t>(std::time(nullptr))) {
  for (const dnn::OpKind kind : {dnn::OpKind::conv}) {
    for (std::string& name : dnn::solver_names(kind)) {
      prefixes_.insert(first_part(name));
      solvers_.insert(std::move(name));
    }
  }
}

FindRow FindRowReader::read(const nlohmann::json& j) const {
  if (!j.is_object()) bad("is " + shown(j) + ", not an object");
  FindRow row;
  row.problem = text_field(j, "problem", kMaxKeyChars);
  const dnn::OpKind kind = check_problem_key(row.problem);
  row.device.name = text_field(j, "device");
  row.device.arch = text_field(j, "arch");
  row.device.compute_units = static_cast<int>(int_field(j, "compute_units", 1, INT_MAX));
  row.device.driver_version = text_field(j, "driver_version");
  row.device.galley_version = text_field(j, "galley_version");
  row.record.rank = static_cast<int>(int_field(j, "rank", 0, INT_MAX));

  row.record.solver = text_field(j, "solver", kMaxKeyChars);
  const std::string_view op_part = std::string_view(row.record.solver).substr(row.record.solver.find('.') + 1);
  if (row.record.solver.find('.') != std::string::npos && op_part.substr(0, op_part.find('.')) != dnn::to_string(kind)) {
    bad("solver " + shown(row.record.solver) + " is not a " + dnn::to_string(kind) + " solver, as the problem key is");
  }
  if (solvers_.count(row.record.solver) == 0) {
    // A row tuned on a backend whose plugin is not loaded here (a cuda row on a cpu-only machine)
    // cannot be checked against its solver list; it travels as it is if its name is well formed,
    // and the tuner of a machine with that backend drops it if the solver is gone there.
    const bool backend_absent = prefixes_.count(first_part(row.record.solver)) == 0;
    if (!backend_absent || !well_formed_solver_name(row.record.solver)) {
      std::string known;
      for (const auto& name : solvers_) known += (known.empty() ? "" : ", ") + name;
      bad("unknown solver " + shown(row.record.solver) + " (known here: " + known +
          (backend_absent ? "; a solver of a backend not loaded here must look like <backend>.<op>.<name>"
                          : "") +
          ")");
    }
  }

  // Stored as a signed 64-bit SQLite integer: anything larger would come back negative.
  row.record.workspace_bytes =
      static_cast<std::size_t>(int_field(j, "workspace_bytes", 0, std::numeric_limits<std::int64_t>::max()));

  const nlohmann::json& ms = field(j, "ms");
  if (ms.is_null()) {
    row.record.ms = std::nan("");  // untimed: the only applicable solver
  } else if (!ms.is_number()) {
    bad("\"ms\" is " + shown(ms) + ", not a number or null");
  } else {
    row.record.ms = ms.get<double>();
    if (!std::isfinite(row.record.ms) || row.record.ms < 0) {
      bad("\"ms\" " + ms.dump() + " is not a time (valid: a finite number >= 0, or null when untimed)");
    }
  }

  // Files exported before solvers had inner choices have no "params": the solver searches again.
  if (j.contains("params")) row.record.params = text_field(j, "params", 4 * kMaxTextChars);
  row.tuned_at = j.contains("tuned_at") ? int_field(j, "tuned_at", 0, now_ + kFutureSlackSeconds) : now_;
  return row;
}

}  // namespace galley::tuning
