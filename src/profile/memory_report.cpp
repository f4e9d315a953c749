// The memory snapshot as text.
#include "profile/memory_report.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "galley/core/error.hpp"

namespace galley::profile {
namespace {

// Characters per segment bar: enough to see a handful of blocks, short enough for a terminal.
constexpr std::size_t kBarWidth = 64;

[[noreturn]] void corrupt(const std::string& what) {
  throw Error(Status::corrupt_data, "not a Galley memory snapshot: " + what);
}

std::string mib(std::uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f MiB", static_cast<double>(bytes) / (1 << 20));
  return text;
}

std::uint64_t number(const nlohmann::json& object, const char* name) {
  const auto it = object.find(name);
  if (it == object.end() || !it->is_number_unsigned()) corrupt(std::string("no number \"") + name + "\"");
  return it->get<std::uint64_t>();
}

// '#' allocated, '+' freed but awaiting its streams' events, '.' free (cached).
char state_mark(const std::string& state) {
  if (state == "active_allocated") return '#';
  if (state == "active_awaiting_free") return '+';
  return '.';
}

}  // namespace

std::string format_memory_snapshot(const std::string& json_text) {
  nlohmann::json snapshot;
  try {
    snapshot = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::exception& e) {
    corrupt(std::string("invalid JSON: ") + e.what());
  }
  if (!snapshot.is_object() || !snapshot.contains("segments") || !snapshot["segments"].is_array())
    corrupt("no \"segments\" array");
  std::string out;
  char line[256];
  std::uint64_t reserved = 0, allocated = 0, free_bytes = 0, largest_free = 0, blocks = 0;
  std::string bars;
  for (const auto& segment : snapshot["segments"]) {
    if (!segment.is_object() || !segment.contains("blocks") || !segment["blocks"].is_array())
      corrupt("a segment without \"blocks\"");
    const std::uint64_t total = number(segment, "total_size");
    reserved += total;
    std::string bar(kBarWidth, ' ');
    std::uint64_t offset = 0;
    for (const auto& block : segment["blocks"]) {
      const std::uint64_t size = number(block, "size");
      const std::string state = block.value("state", "");
      ++blocks;
      if (state == "active_allocated") allocated += size;
      if (state == "inactive") {
        free_bytes += size;
        largest_free = std::max(largest_free, size);
      }
      if (total > 0) {
        const auto from = static_cast<std::size_t>(offset * kBarWidth / total);
        const auto to = std::max(from + 1, static_cast<std::size_t>((offset + size) * kBarWidth / total));
        for (std::size_t i = from; i < std::min(to, kBarWidth); ++i) bar[i] = state_mark(state);
      }
      offset += size;
    }
    std::snprintf(line, sizeof line, "  %#14llx %-5s %12s |%s| %zu blocks\n",
                  static_cast<unsigned long long>(segment.value("address", std::uint64_t{0})),
                  segment.value("pool", "?").c_str(), mib(total).c_str(), bar.c_str(),
                  segment["blocks"].size());
    bars += line;
  }
  out +=
      "memory snapshot of " + snapshot.value("device", std::string("?")) +
      (snapshot.value("config", std::string()).empty() ? ""
                                                       : " (" + snapshot["config"].get<std::string>() + ")") +
      "\n";
  std::snprintf(line, sizeof line,
                "  reserved %s in %zu segments; allocated %s, cached free %s in %llu blocks; largest free "
                "block %s\n",
                mib(reserved).c_str(), snapshot["segments"].size(), mib(allocated).c_str(),
                mib(free_bytes).c_str(), static_cast<unsigned long long>(blocks), mib(largest_free).c_str());
  out += line;
  if (free_bytes > 0) {
    std::snprintf(line, sizeof line, "  fragmentation: the largest free block is %.0f%% of the free memory\n",
                  100.0 * static_cast<double>(largest_free) / static_cast<double>(free_bytes));
    out += line;
  }
  if (snapshot.contains("stats") && snapshot["stats"].is_object()) {
    const auto& s = snapshot["stats"];
    std::snprintf(line, sizeof line, "  peaks: allocated %s, reserved %s; out-of-memory errors %llu\n",
                  mib(s.value("allocated_bytes.all.peak", std::uint64_t{0})).c_str(),
                  mib(s.value("reserved_bytes.all.peak", std::uint64_t{0})).c_str(),
                  static_cast<unsigned long long>(s.value("num_ooms", std::uint64_t{0})));
    out += line;
  }
  out += "  segments ('#' allocated, '+' freed awaiting other streams, '.' cached free):\n";
  out += bars;
  return out;
}

}  // namespace galley::profile
