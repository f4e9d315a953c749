// One find-db row as JSON: the form `galley db export` writes and `galley db list --json` prints.
// Internal to libgalley and the CLI.
#pragma once

#include <nlohmann/json.hpp>

#include "galley/tuning/find_db.hpp"

namespace galley::tuning {

/// {"problem", "device", "arch", "compute_units", "driver_version", "galley_version", "rank",
///  "solver", "workspace_bytes", "tuned_at", "params", "ms"}; "ms" is null for an untimed row (JSON has no NaN).
nlohmann::json find_row_to_json(const FindRow& row);

}  // namespace galley::tuning
