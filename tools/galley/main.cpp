// The galley CLI entry point: builds the app from registered subcommands and turns a
// galley::Error or a command-line error into a one-line "galley: error" message and a non-zero
// exit code.
#include <cstdio>
#include <new>
#include <string>
#include <vector>

#include "command.hpp"
#include "core/quoted_input.hpp"
#include "galley/core/env.hpp"
#include "galley/core/error.hpp"
#include "strict_options.hpp"

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

namespace {

// Exit code of a command line that does not parse (as argparse and most Unix tools use).
constexpr int kUsageExitCode = 2;
// Messages quote user input shortened; this bounds whatever still grows with the input (a list of
// problems, each with its reason), so stderr stays readable.
constexpr std::size_t kMaxMessageBytes = 64 * 1024;

void print_error(const char* status, const std::string& message) {
  if (message.size() <= kMaxMessageBytes) {
    std::fprintf(stderr, "galley: error (%s): %s\n", status, message.c_str());
  } else {
    std::fprintf(stderr, "galley: error (%s): %s... (message cut at %zu of %zu bytes)\n", status,
                 message.substr(0, kMaxMessageBytes).c_str(), kMaxMessageBytes, message.size());
  }
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

// The subcommands the parser entered, outermost first: {galley, bench, conv}.
std::vector<const CLI::App*> parsed_chain(const CLI::App& app) {
  std::vector<const CLI::App*> chain{&app};
  while (!chain.back()->get_subcommands().empty()) chain.push_back(chain.back()->get_subcommands().front());
  return chain;
}

std::string command_path(const std::vector<const CLI::App*>& chain, std::size_t depth) {
  std::string out = "galley";
  for (std::size_t i = 1; i <= depth; ++i) out += " " + chain[i]->get_name();
  return out;
}

std::vector<std::string> subcommand_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    names.push_back(sub->get_name());
  return names;
}

std::vector<std::string> option_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::Option* option : app.get_options()) {
    if (option->get_lnames().empty() && option->get_snames().empty()) continue;  // a positional
    names.push_back(option->get_name());
  }
  return names;
}

// CLI11 reports an unknown word late and vaguely ("A subcommand is required", "The following
// arguments were not expected: <all of them>"): name the first word no command took, at the level
// where it was typed, with what is valid there.
std::string describe_parse_error(const CLI::App& app, const CLI::ParseError& error) {
  const auto chain = parsed_chain(app);
  for (std::size_t depth = 0; depth < chain.size(); ++depth) {
    const auto extra = chain[depth]->remaining(false);
    if (extra.empty()) continue;
    const std::string& word = extra.front();
    const std::string where = command_path(chain, depth);
    const auto subcommands = subcommand_names(*chain[depth]);
    if (word.size() > 1 && word.front() == '-') {
      return "unknown option " + quoted_input(word) + " for '" + where +
             "' (valid: " + join(option_names(*chain[depth])) + ")";
    }
    if (!subcommands.empty()) {
      return "unknown subcommand " + quoted_input(word) + " of '" + where + "' (valid: " + join(subcommands) +
             ")";
    }
    return "unexpected argument " + quoted_input(word) + ": '" + where + "' takes no positional arguments";
  }
  const CLI::App& last = *chain.back();
  if (last.get_require_subcommand_min() > 0 && last.get_subcommands().empty()) {
    return "'" + command_path(chain, chain.size() - 1) +
           "' needs a subcommand (valid: " + join(subcommand_names(last)) + ")";
  }
  // CLI11's own messages quote what they could not convert ("--json=<anything>") in full.
  const std::string message = error.what();
  constexpr std::size_t kMaxParseMessage = 1024;
  if (message.size() <= kMaxParseMessage) return message;
  return message.substr(0, kMaxParseMessage) + "... (" + std::to_string(message.size()) + " chars)";
}

}  // namespace

}  // namespace galley::cli

int main(int argc, char** argv) {
  CLI::App app{"galley: one compute stack for NVIDIA, AMD and CPU"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Show help for every subcommand");
  for (const auto& setup : galley::cli::registry()) setup(app);
  galley::cli::apply_number_syntax(app);
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
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --help-all
    galley::cli::print_error("invalid_argument", galley::cli::describe_parse_error(app, e));
    const auto chain = galley::cli::parsed_chain(app);
    std::fprintf(stderr, "Run '%s --help' for help.\n",
                 galley::cli::command_path(chain, chain.size() - 1).c_str());
    return galley::cli::kUsageExitCode;
  } catch (const galley::Error& e) {
    galley::cli::print_error(galley::to_string(e.status()), e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    // Sizes are checked against the device's memory before anything is allocated; this is the
    // host running short anyway (other processes, overcommit limits).
    galley::cli::print_error(galley::to_string(galley::Status::out_of_memory), "a host allocation failed");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "galley: internal error: %s\n", e.what());
    return 1;
  }
  return galley::cli::g_exit_code;
}
