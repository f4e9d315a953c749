// `galley db path|list [--json]|clear|export FILE [--force]|import FILE`: look at and move the find-db.
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "command.hpp"
#include "tuning/find_row_json.hpp"
#include "galley/core/error.hpp"
#include "galley/core/units.hpp"
#include "galley/core/version.hpp"
#include "galley/runtime/device.hpp"
#include "galley/tuning/find_db.hpp"
#include "table.hpp"

namespace galley::cli {
namespace {

struct DbArgs {
  bool json = false;
  bool force = false;
  std::string file;
};

std::string fixed(double v) {
  if (std::isnan(v)) return "-";
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.3f", v);
  return buffer;
}

std::string when(std::int64_t unix_seconds) {
  const std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%d %H:%M", &tm);
  return buffer;
}

// Rows of this build on a visible device are "current"; the others are kept but never matched.
bool is_current(const tuning::DeviceIdentity& id, const std::vector<tuning::DeviceIdentity>& here) {
  for (const auto& h : here) {
    if (h == id) return true;
  }
  return false;
}

std::vector<tuning::DeviceIdentity> visible_identities() {
  std::vector<tuning::DeviceIdentity> out;
  for (const auto& d : runtime::devices()) out.push_back(tuning::DeviceIdentity::of(d));
  return out;
}

int run_path(const DbArgs& args) {
  const auto paths = tuning::default_find_db_paths();
  std::error_code ec;
  const bool user_exists = std::filesystem::exists(paths.user, ec);
  const bool system_exists = !paths.system.empty() && std::filesystem::exists(paths.system, ec);
  if (args.json) {
    const nlohmann::json j = {{"user", paths.user.string()},
                              {"user_exists", user_exists},
                              {"system", paths.system.string()},
                              {"system_exists", system_exists}};
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("%s\n", paths.user.string().c_str());
    std::fprintf(stderr, "user db:   %s%s\nsystem db: %s%s\n", paths.user.string().c_str(),
                 user_exists ? "" : " (not created yet)", paths.system.string().c_str(),
                 system_exists ? " (read-only, consulted under the user db)" : " (none)");
  }
  return 0;
}

int run_list(const DbArgs& args) {
  tuning::FindDb db(tuning::default_find_db_paths());
  const auto rows = db.rows();
  const auto here = visible_identities();
  if (args.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& r : rows) {
      nlohmann::json row = tuning::find_row_to_json(r);
      row["current"] = is_current(r.device, here);
      out.push_back(std::move(row));
    }
    const nlohmann::json doc = {{"path", db.user_path().string()}, {"in_memory", db.in_memory()}, {"rows", out}};
    std::printf("%s\n", doc.dump(2).c_str());
    return 0;
  }
  Table table({"problem", "rank", "solver", "params", "ms", "workspace", "device", "tuned", "current"});
  std::size_t stale = 0;
  for (const auto& r : rows) {
    const bool current = is_current(r.device, here);
    stale += !current;
    table.add({r.problem, std::to_string(r.record.rank), r.record.solver,
               r.record.params.empty() ? "-" : r.record.params, fixed(r.record.ms),
               format_bytes(r.record.workspace_bytes), r.device.to_string(), when(r.tuned_at),
               current ? "yes" : "no"});
  }
  table.print();
  std::printf("%zu rows in %s", rows.size(), db.user_path().string().c_str());
  if (stale > 0) std::printf(" (%zu for another device, driver or Galley version: ignored here)", stale);
  std::printf("\n");
  return 0;
}

const bool db_registered = register_command([](CLI::App& root) {
  auto args = std::make_shared<DbArgs>();
  CLI::App* cmd = root.add_subcommand("db", "The find-db: path, list, clear, export, import");
  cmd->require_subcommand(1);
  CLI::App* path = cmd->add_subcommand("path", "Print the user find-db file (and the system db on stderr)");
  path->add_flag("--json", args->json, "machine-readable output");
  path->callback([args] { set_exit_code(run_path(*args)); });
  CLI::App* list = cmd->add_subcommand("list", "List every row (all devices and versions)");
  list->add_flag("--json", args->json, "machine-readable output");
  list->callback([args] { set_exit_code(run_list(*args)); });
  CLI::App* clear = cmd->add_subcommand("clear", "Delete every row of the user find-db");
  clear->callback([] {
    tuning::FindDb db(tuning::default_find_db_paths());
    const tuning::WriteResult cleared = db.clear();
    if (!cleared) throw Error(Status::io_error, "nothing deleted: " + cleared.reason);
    std::printf("deleted %zu rows from %s\n", cleared.rows, db.user_path().string().c_str());
  });
  CLI::App* exp = cmd->add_subcommand("export", "Write the user find-db as JSON");
  exp->add_option("FILE", args->file, "output file (a new one; never a database)")->required();
  exp->add_flag("--force", args->force, "replace FILE when it exists (never a database)");
  exp->callback([args] {
    tuning::FindDb db(tuning::default_find_db_paths());
    const std::size_t n = db.export_json(args->file, args->force);
    std::printf("exported %zu rows to %s\n", n, args->file.c_str());
  });
  CLI::App* imp = cmd->add_subcommand("import", "Add the rows of an exported JSON file to the user find-db");
  imp->add_option("FILE", args->file, "file written by galley db export")->required();
  imp->callback([args] {
    tuning::FindDb db(tuning::default_find_db_paths());
    const tuning::WriteResult imported = db.import_json(args->file);
    if (!imported) {
      throw Error(Status::io_error, "nothing imported from " + args->file + ": " + imported.reason);
    }
    std::printf("imported %zu rows into %s\n", imported.rows, db.user_path().string().c_str());
  });
});

}  // namespace
}  // namespace galley::cli
