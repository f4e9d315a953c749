// Subcommand self-registration: each tools/galley/<name>.cpp registers itself, so adding a
// subcommand never edits main.cpp.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace galley::cli {

/// Adds a subcommand (with its options and callback) to the root app.
using CommandSetup = std::function<void(CLI::App& root)>;

/// Called from a static initialiser in each subcommand file; returns true.
bool register_command(CommandSetup setup);

/// The `galley bench` group, created on first use, so bench kinds can live in separate files.
CLI::App& bench_group(CLI::App& root);

/// The process exit code a callback wants (default 0); set it instead of calling exit().
void set_exit_code(int code);

}  // namespace galley::cli
