// `galley db export/import`: the find-db as a JSON file, so a tuned db moves to another machine
// with the same device (rows of other devices or versions travel too and stay unmatched there).
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>

#include "galley/core/error.hpp"
#include "galley/tuning/find_db.hpp"
#include "tuning/find_row_json.hpp"

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

constexpr const char* kFormat = "galley-finddb";
constexpr int kFormatVersion = 1;

FindRow from_json(const nlohmann::json& j) {
  FindRow row;
  row.problem = j.at("problem").get<std::string>();
  row.device.name = j.at("device").get<std::string>();
  row.device.arch = j.at("arch").get<std::string>();
  row.device.compute_units = j.at("compute_units").get<int>();
  row.device.driver_version = j.at("driver_version").get<std::string>();
  row.device.galley_version = j.at("galley_version").get<std::string>();
  row.record.rank = j.at("rank").get<int>();
  row.record.solver = j.at("solver").get<std::string>();
  row.record.workspace_bytes = j.at("workspace_bytes").get<std::size_t>();
  const auto& ms = j.at("ms");
  row.record.ms = ms.is_null() ? std::nan("") : ms.get<double>();
  // Files exported before solvers had inner choices have no "params": the solver searches again.
  if (const auto it = j.find("params"); it != j.end()) row.record.params = it->get<std::string>();
  if (row.problem.empty() || row.record.solver.empty() || row.record.rank < 0) {
    throw Error(Status::corrupt_data, "row with an empty problem or solver, or a negative rank");
  }
  return row;
}

}  // namespace

void FindDb::export_json(const std::filesystem::path& file) {
  nlohmann::json rows = nlohmann::json::array();
  for (const FindRow& row : this->rows()) rows.push_back(find_row_to_json(row));
  const nlohmann::json doc = {{"format", kFormat}, {"version", kFormatVersion}, {"rows", std::move(rows)}};
  std::ofstream out(file);
  if (!out) throw Error(Status::io_error, "cannot write " + file.string());
  out << doc.dump(1) << '\n';
  out.close();
  if (!out) throw Error(Status::io_error, "writing " + file.string() + " failed");
}

std::size_t FindDb::import_json(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) throw Error(Status::not_found, "cannot read find-db export " + file.string());
  std::vector<FindRow> rows;
  try {
    const nlohmann::json doc = nlohmann::json::parse(in);
    if (doc.value("format", "") != kFormat) {
      throw Error(Status::corrupt_data, "not a galley find-db export (\"format\" is not \"galley-finddb\")");
    }
    if (doc.value("version", 0) != kFormatVersion) {
      throw Error(Status::unsupported,
                  "export format version " + doc.value("version", nlohmann::json(0)).dump() + " (this Galley reads 1)");
    }
    for (const auto& j : doc.at("rows")) rows.push_back(from_json(j));
  } catch (const nlohmann::json::exception& e) {
    throw Error(Status::corrupt_data, file.string() + ": malformed find-db export: " + e.what());
  } catch (const Error& e) {
    throw Error(e.status(), file.string() + ": " + e.what());
  }
  // A problem's list is stored as a whole (store() replaces it), grouped and kept in rank order.
  using Key = std::tuple<std::string, std::string, std::string, int, std::string, std::string>;
  std::map<Key, std::map<int, FindRecord>> lists;
  std::map<Key, DeviceIdentity> identities;
  for (const FindRow& row : rows) {
    const Key key{row.problem, row.device.name, row.device.arch, row.device.compute_units, row.device.driver_version,
                  row.device.galley_version};
    lists[key][row.record.rank] = row.record;
    identities[key] = row.device;
  }
  for (const auto& [key, by_rank] : lists) {
    std::vector<FindRecord> ranked;
    for (const auto& [rank, record] : by_rank) ranked.push_back(record);
    store(std::get<0>(key), identities[key], ranked);
  }
  return rows.size();
}

}  // namespace galley::tuning
