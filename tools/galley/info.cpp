// `galley info [--json] [--env] [--check]`: backends, devices, versions, readiness verdicts.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "command.hpp"
#include "galley/core/env.hpp"
#include "galley/core/error.hpp"
#include "galley/core/units.hpp"
#include "galley/core/version.hpp"
#include "galley/memory/allocator_config.hpp"
#include "galley/runtime/device.hpp"
#include "runtime/backend.hpp"
#include "table.hpp"

namespace galley::cli {
namespace {

struct InfoOptions {
  bool json = false;
  bool env = false;
  bool check = false;
};

bool all_ok(const std::vector<std::string>& readiness) {
  for (const auto& line : readiness) {
    if (line.find(": FAIL") != std::string::npos) return false;
  }
  return !readiness.empty();
}

nlohmann::json device_json(const runtime::Device& device) {
  const auto p = device.properties();
  return {{"name", device.name()},
          {"model", p.name},
          {"backend", p.backend},
          {"arch", p.arch},
          {"compute_units", p.compute_units},
          {"memory_total", p.memory_total},
          {"memory_free", p.memory_free},
          {"clock_mhz", p.clock_mhz},
          {"memory_clock_mhz", p.memory_clock_mhz},
          {"l2_bytes", p.l2_bytes},
          {"driver_version", p.driver_version},
          {"runtime_version", p.runtime_version},
          {"built_for", p.built_for},
          {"isa_features", p.isa_features},
          {"readiness", device.impl().readiness()}};
}

// Lists every variable without throwing: this is where a user finds out which value is wrong.
int run_env(bool json) {
  const auto settings = env::settings();
  const auto& variables = env::variables();
  const auto declared = [&](const std::string& name) -> const env::Variable* {
    for (const auto& v : variables) {
      if (v.name == name) return &v;
    }
    return nullptr;
  };
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& s : settings) {
      const env::Variable* v = declared(s.name);
      nlohmann::json row = {{"name", s.name},
                            {"meaning", v ? std::string(v->meaning) : ""},
                            {"default", v ? std::string(v->default_value) : ""},
                            {"value", s.value ? nlohmann::json(*s.value) : nlohmann::json(nullptr)},
                            {"known", s.known},
                            {"implemented", v ? v->implemented : false},
                            {"valid", s.problem.empty()}};
      if (!s.problem.empty()) row["problem"] = s.problem;
      out.push_back(row);
    }
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  Table table({"variable", "value", "default", "meaning"});
  int invalid = 0;
  int unknown = 0;
  for (const auto& s : settings) {
    const env::Variable* v = declared(s.name);
    std::string value = s.value ? *s.value : "(unset)";
    if (!s.problem.empty() && s.known) {
      value += "  INVALID";
      ++invalid;
    } else if (!s.known) {
      value += "  (unknown: ignored)";
      ++unknown;
    }
    table.add({s.name, value, v ? std::string(v->default_value) : "", v ? std::string(v->meaning) : ""});
  }
  table.print();
  if (invalid > 0) {
    std::printf("\n%d invalid value(s); every command except `galley info --env` stops on them:\n", invalid);
    for (const auto& s : settings) {
      if (s.known && !s.problem.empty()) std::printf("  %s\n", s.problem.c_str());
    }
  }
  if (unknown > 0) {
    std::printf("\nGALLEY_* names this build does not know (ignored):\n");
    for (const auto& s : settings) {
      if (!s.known) std::printf("  %s: %s\n", s.name.c_str(), s.problem.c_str());
    }
  }
  std::printf("\nGALLEY_ALLOC_CONF keys:\n%s\n", memory::alloc_conf_help().c_str());
  return 0;
}

int run_info(const InfoOptions& options) {
  if (options.env) return run_env(options.json);
  const auto reports = runtime::backend_reports();
  const auto devices = runtime::devices();
  std::string default_name;
  std::string default_error;
  bool default_ready = false;
  try {
    const auto d = runtime::default_device();
    default_name = d.name();
    default_ready = all_ok(d.impl().readiness());
  } catch (const Error& e) {
    default_error = e.what();
  }

  if (options.json) {
    nlohmann::json out;
    out["version"] = version_string();
    out["default_device"] = default_name.empty() ? nlohmann::json(nullptr) : nlohmann::json(default_name);
    if (!default_error.empty()) out["default_device_error"] = default_error;
    out["default_device_ready"] = default_ready;
    for (const auto& r : reports) {
      out["backends"].push_back({{"name", r.name}, {"library", r.library}, {"loaded", r.loaded},
                                 {"device_count", r.device_count}, {"reason", r.reason}});
    }
    for (const auto& d : devices) out["devices"].push_back(device_json(d));
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    std::printf("galley %s\n\nBackends\n", version_string());
    Table backends({"backend", "status", "devices", "library / reason"});
    for (const auto& r : reports) {
      const std::string status = r.loaded ? (r.device_count > 0 ? "ready" : "no devices") : "not loaded";
      backends.add({r.name, status, std::to_string(r.device_count),
                    r.reason.empty() ? r.library : r.library + ": " + r.reason});
    }
    backends.print();
    std::printf("\nDevices\n");
    for (const auto& d : devices) {
      const auto p = d.properties();
      std::printf("  %s  %s  (%s, %d compute units, %s total, %s free", d.name().c_str(), p.name.c_str(),
                  p.arch.c_str(), p.compute_units, format_bytes(p.memory_total).c_str(),
                  format_bytes(p.memory_free).c_str());
      if (p.clock_mhz > 0) std::printf(", %d MHz", p.clock_mhz);
      std::printf(")\n    driver %s, runtime %s\n", p.driver_version.c_str(), p.runtime_version.c_str());
      for (const auto& line : d.impl().readiness()) std::printf("    %s\n", line.c_str());
    }
    if (default_error.empty()) {
      std::printf("\nDefault device: %s (%s)\n", default_name.c_str(), default_ready ? "ready" : "NOT ready");
    } else {
      std::printf("\nDefault device: none: %s\n", default_error.c_str());
    }
  }
  if (options.check && (!default_error.empty() || !default_ready)) return 3;
  return 0;
}

const bool info_registered = register_command([](CLI::App& root) {
  auto options = std::make_shared<InfoOptions>();
  CLI::App* cmd = root.add_subcommand("info", "Devices, backends, versions and readiness checks");
  cmd->add_flag("--json", options->json, "Machine-readable output");
  cmd->add_flag("--env", options->env, "List every GALLEY_* variable with its meaning and value");
  cmd->add_flag("--check", options->check, "Exit non-zero (3) when the default device is not ready");
  cmd->callback([options] { set_exit_code(run_info(*options)); });
});

}  // namespace
}  // namespace galley::cli
