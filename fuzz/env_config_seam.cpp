#include "env_config_seam.hpp"

#include <cstdlib>
#include <string>
#include <string_view>

#include "backends/cpu/conv_isa.hpp"
#include "fuzz_check.hpp"
#include "core/config.hpp"
#include "galley/core/env.hpp"
#include "galley/memory/allocator_config.hpp"
#include "galley/tuning/find_mode.hpp"

namespace galley::fuzz {
namespace {

bool is_listed(std::string_view name) {
  for (const env::Variable& v : env::variables()) {
    if (v.name == name) return true;
  }
  return false;
}

// Runs one parser: a result, or an Error whose message names one of the variables set. (One
// parser may read several variables: AllocatorConfig::from_env reads GALLEY_ALLOC_CONF and
// GALLEY_NO_CACHING, FindOptions::from_env three GALLEY_FIND_* ones.)
template <typename F>
void parse_variables(const char* what, const EnvAssignments& assignments, F&& parse) {
  expect_result_or_error(what, [&] {
    try {
      parse();
    } catch (const Error& e) {
      const std::string_view message = e.what();
      for (const auto& [name, value] : assignments) {
        if (is_listed(name) && message.find(name) != std::string_view::npos) throw;
      }
      std::fprintf(stderr, "fuzz: the error of %s names no variable that is set: %s\n", what, e.what());
      std::abort();
    }
  });
}

}  // namespace

void parse_environment(const EnvAssignments& assignments) {
  for (const auto& [name, value] : assignments) {
    if (is_listed(name)) ::setenv(name.c_str(), value.c_str(), 1);
  }
  // The one configuration object parses every variable at once: its snapshot either holds the
  // values or its Error names a variable that is set; settings() and the layers' own parsers of
  // the values it carries (the allocator's GALLEY_ALLOC_CONF) must agree.
  env::reload_for_testing();
  expect_result_or_error("env::settings", [] { (void)env::settings(); });
  parse_variables("env::check", assignments, [] { env::check(); });
  parse_variables("env::config", assignments, [] { (void)env::config(); });
  parse_variables("FindOptions::from_env", assignments, [] { (void)tuning::FindOptions::from_env(); });
  parse_variables("AllocatorConfig::from_env", assignments, [] { (void)memory::AllocatorConfig::from_env(); });
  parse_variables("cpu_isa_cap_from_env", assignments, [] { (void)backends::cpu::cpu_isa_cap_from_env(); });
  for (const auto& [name, value] : assignments) {
    if (is_listed(name)) ::unsetenv(name.c_str());
  }
  env::reload_for_testing();
  // Nothing read above outlives this input: the replaced snapshots can go, or a campaign of
  // millions of inputs would hold one each.
  env::release_retired_for_testing();
}

}  // namespace galley::fuzz
