#include "env_config_seam.hpp"

#include <cstdlib>
#include <string>
#include <string_view>

#include "backends/cpu/conv_isa.hpp"
#include "fuzz_check.hpp"
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

// Runs one variable's parser: a result, or an Error whose message names the variable.
template <typename F>
void parse_variable(const char* name, F&& parse) {
  expect_result_or_error(name, [&] {
    try {
      parse();
    } catch (const Error& e) {
      if (std::string_view(e.what()).find(name) == std::string_view::npos) {
        std::fprintf(stderr, "fuzz: the error about %s does not name it: %s\n", name, e.what());
        std::abort();
      }
      throw;
    }
  });
}

}  // namespace

void parse_environment(const EnvAssignments& assignments) {
  for (const auto& [name, value] : assignments) {
    if (is_listed(name)) ::setenv(name.c_str(), value.c_str(), 1);
  }
  for (const env::Variable& v : env::variables()) {
    expect_result_or_error("env::get", [&] { (void)env::get(v.name); });
  }
  for (const char* flag : {"GALLEY_LOG_CMD", "GALLEY_LAUNCH_BLOCKING", "GALLEY_NO_CACHING", "GALLEY_CUDA_GRAPHS"}) {
    parse_variable(flag, [&] { (void)env::get_flag(flag); });
  }
  // FindOptions::from_env reads three variables; its message must name the one that is bad.
  expect_result_or_error("FindOptions::from_env", [] {
    try {
      (void)tuning::FindOptions::from_env();
    } catch (const Error& e) {
      const std::string_view message = e.what();
      if (message.find("GALLEY_FIND_") == std::string_view::npos) {
        std::fprintf(stderr, "fuzz: a find option error names no variable: %s\n", e.what());
        std::abort();
      }
      throw;
    }
  });
  parse_variable("GALLEY_ALLOC_CONF", [] { (void)memory::AllocatorConfig::from_env(); });
  parse_variable("GALLEY_CPU_ISA", [] { (void)backends::cpu::cpu_isa_cap_from_env(); });
  for (const auto& [name, value] : assignments) {
    if (is_listed(name)) ::unsetenv(name.c_str());
  }
}

}  // namespace galley::fuzz
