// One cuDNN backend engine config as text: cuda.conv.cudnn_graph's inner choice (its TunableSolver
// config), the form the find-db stores beside the solver's name, "eng12{k2=3,k14=4}": the engine's
// global index and its knob choices (knob type = value) in the order cuDNN reports them. Free of
// cuDNN's headers so that the text form is tested without the plugin or a GPU.
#pragma once

#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

namespace galley::backends::cuda {

struct EngineConfig {
  std::int64_t index = -1;                                   // CUDNN_ATTR_ENGINE_GLOBAL_INDEX
  std::vector<std::pair<std::int64_t, std::int64_t>> knobs;  // (knob type, value), cuDNN's order

  bool operator==(const EngineConfig&) const = default;

  /// "eng12{k2=3,k14=4}"; "eng12" without knob choices.
  std::string to_string() const {
    std::string out = "eng" + std::to_string(index);
    if (knobs.empty()) return out;
    out += '{';
    for (std::size_t i = 0; i < knobs.size(); ++i) {
      out.append(i ? ",k" : "k")
          .append(std::to_string(knobs[i].first))
          .append("=")
          .append(std::to_string(knobs[i].second));
    }
    return out + '}';
  }

  /// to_string()'s text back; nullopt for any other text (malformed, a negative index or knob
  /// type, empty braces, leading zeros, surrounding blanks), so that a parsed text always prints
  /// back the same.
  static std::optional<EngineConfig> parse(std::string_view text) {
    // A decimal number, '-' allowed; false when there is none or it overflows.
    auto number = [](std::string_view& rest, std::int64_t& out) {
      const auto [end, error] = std::from_chars(rest.data(), rest.data() + rest.size(), out);
      if (error != std::errc()) return false;
      rest.remove_prefix(std::size_t(end - rest.data()));
      return true;
    };
    std::string_view rest = text;
    if (rest.substr(0, 3) != "eng") return std::nullopt;
    rest.remove_prefix(3);
    EngineConfig config;
    if (!number(rest, config.index) || config.index < 0) return std::nullopt;
    if (!rest.empty()) {
      if (rest.front() != '{' || rest.back() != '}' || rest.size() < 3) return std::nullopt;
      rest = rest.substr(1, rest.size() - 2);
      while (true) {
        std::int64_t type = 0, value = 0;
        if (rest.empty() || rest.front() != 'k') return std::nullopt;
        rest.remove_prefix(1);
        if (!number(rest, type) || type < 0 || rest.empty() || rest.front() != '=') return std::nullopt;
        rest.remove_prefix(1);
        if (!number(rest, value)) return std::nullopt;
        config.knobs.emplace_back(type, value);
        if (rest.empty()) break;
        if (rest.front() != ',') return std::nullopt;
        rest.remove_prefix(1);
      }
    }
    // Leading zeros, "-0" and the like parse to a value that prints otherwise: not this form.
    if (config.to_string() != text) return std::nullopt;
    return config;
  }
};

}  // namespace galley::backends::cuda
