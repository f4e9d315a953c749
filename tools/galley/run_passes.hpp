// `galley run`'s graph-pass flags (--dtype, --layout, --no-pass NAME ...) and how it reports what
// the passes did (--verbose table, --json "passes" array).
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "galley/model/graph.hpp"
#include "galley/model/passes.hpp"
#include "galley/runtime/device.hpp"

namespace galley::cli {

struct PassFlags {
  std::vector<std::string> disabled;  ///< --no-pass, repeatable
  std::string dtype = "f32";          ///< --dtype
  std::string layout = "auto";        ///< --layout
};

void add_pass_flags(CLI::App& cmd, PassFlags& flags);

/// The options the flags ask for on `device`; Error(invalid_argument) naming a bad pass name (with
/// the valid ones), dtype or layout.
model::PassOptions pass_options(const PassFlags& flags, const runtime::Device& device);

/// The tolerance a --check compares with: the test data's dtype's, widened to the dtype the graph
/// computes in (f16 1e-2, bf16 5e-2).
double check_tolerance(const model::PassOptions& options, model::ElemType data_type);

nlohmann::json passes_json(const model::PassReport& report);
/// One line per pass: ran or why not, rewrites, nodes and constants before -> after.
void print_passes(const model::PassReport& report);

}  // namespace galley::cli
