// The galley CLI entry point: builds the app from registered subcommands and turns a
// galley::Error into a one-line message and a non-zero exit code.
#include <cstdio>
#include <vector>

#include "command.hpp"
#include "galley/core/env.hpp"
#include "galley/core/error.hpp"

namespace galley::cli {
namespace {

std::vector<CommandSetup>& registry() {
  static std::vector<CommandSetup> setups;
  return setups;
}
int g_exit_code = 0;

}  // namespace

bool register_command(CommandSetup setup) {
  registry().push_back(std::move(setup));
  return true;
}

CLI::App& bench_group(CLI::App& root) {
  for (CLI::App* sub : root.get_subcommands([](CLI::App*) { return true; })) {
    if (sub->get_name() == "bench") return *sub;
  }
  CLI::App* bench = root.add_subcommand("bench", "Benchmarks: transfer, alloc, conv");
  bench->require_subcommand(1);
  return *bench;
}

void set_exit_code(int code) { g_exit_code = code; }

}  // namespace galley::cli

int main(int argc, char** argv) {
  CLI::App app{"galley: one compute stack for NVIDIA, AMD and CPU"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Show help for every subcommand");
  for (const auto& setup : galley::cli::registry()) setup(app);
  // Every GALLEY_* variable is checked once the command line is parsed and before any command
  // runs, so a bad value stops the command before it queues work. `galley info --env` is exempt:
  // it lists the variables and marks the invalid ones.
  app.parse_complete_callback([&app] {
    const bool listing_env = app.got_subcommand("info") && app.get_subcommand("info")->count("--env") > 0;
    if (!listing_env) galley::env::check();
  });
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const galley::Error& e) {
    std::fprintf(stderr, "galley: error (%s): %s\n", galley::to_string(e.status()), e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "galley: internal error: %s\n", e.what());
    return 1;
  }
  return galley::cli::g_exit_code;
}
