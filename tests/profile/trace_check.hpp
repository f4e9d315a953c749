// Checks of a Chrome trace against the event format, shared by the profile tests: fields and units,
// matching flow ids, no partly overlapping spans on one track.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace galley::profile::test {

// Adds a gtest failure for every violation; returns the parsed trace.
inline nlohmann::json check_chrome_trace(const std::string& text) {
  nlohmann::json trace;
  try {
    trace = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not JSON: " << e.what();
    return {};
  }
  EXPECT_TRUE(trace.contains("traceEvents") && trace["traceEvents"].is_array());
  EXPECT_EQ(trace.value("displayTimeUnit", ""), "ns");
  std::map<std::pair<int, std::uint64_t>, std::vector<std::pair<double, double>>> tracks;
  std::map<std::uint64_t, int> starts, finishes;
  for (const auto& e : trace["traceEvents"]) {
    const std::string ph = e.value("ph", "");
    EXPECT_TRUE(ph == "X" || ph == "M" || ph == "s" || ph == "f" || ph == "i" || ph == "C") << e.dump();
    EXPECT_TRUE(e.contains("pid") && e["pid"].is_number_integer()) << e.dump();
    if (ph == "M") continue;
    EXPECT_TRUE(e.contains("ts") && e["ts"].is_number() && e["ts"].get<double>() >= 0) << e.dump();
    if (ph != "C") EXPECT_TRUE(e.contains("tid") && e["tid"].is_number_integer()) << e.dump();
    if (ph == "X") {
      EXPECT_TRUE(e.contains("dur") && e["dur"].is_number() && e["dur"].get<double>() >= 0) << e.dump();
      EXPECT_TRUE(e.contains("name") && e["name"].is_string() && !e["name"].get<std::string>().empty())
          << e.dump();
      tracks[{e["pid"].get<int>(), e["tid"].get<std::uint64_t>()}].push_back(
          {e["ts"].get<double>(), e["ts"].get<double>() + e["dur"].get<double>()});
    }
    if (ph == "s") ++starts[e["id"].get<std::uint64_t>()];
    if (ph == "f") {
      ++finishes[e["id"].get<std::uint64_t>()];
      EXPECT_EQ(e.value("bp", ""), "e") << e.dump();
    }
    if (ph == "C") EXPECT_TRUE(e["args"].contains("allocated") && e["args"].contains("reserved")) << e.dump();
  }
  EXPECT_EQ(starts.size(), finishes.size());
  for (const auto& [id, n] : starts) {
    EXPECT_EQ(n, 1) << "flow " << id << " starts " << n << " times";
    EXPECT_EQ(finishes.count(id), 1u) << "flow " << id << " has no finish";
  }
  // One track holds spans that nest or follow each other, never ones that overlap partly.
  for (auto& [track, spans] : tracks) {
    std::sort(spans.begin(), spans.end(), [](const auto& a, const auto& b) {
      return a.first < b.first || (a.first == b.first && a.second > b.second);
    });
    std::vector<double> open_ends;
    for (const auto& [begin, end] : spans) {
      while (!open_ends.empty() && open_ends.back() <= begin) open_ends.pop_back();
      if (!open_ends.empty()) {
        EXPECT_LE(end, open_ends.back() + 1e-3)
            << "pid " << track.first << " tid " << track.second << ": span [" << begin << ", " << end
            << ") overlaps the end of its enclosing span at " << open_ends.back();
      }
      open_ends.push_back(end);
    }
  }
  return trace;
}

inline std::vector<nlohmann::json> events_where(const nlohmann::json& trace, const std::string& ph,
                                                const std::string& cat) {
  std::vector<nlohmann::json> out;
  for (const auto& e : trace["traceEvents"]) {
    if (e.value("ph", "") == ph && (cat.empty() || e.value("cat", "") == cat)) out.push_back(e);
  }
  return out;
}

}  // namespace galley::profile::test
