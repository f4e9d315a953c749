// `galley prof --out trace.json [--summary] [--html report.html] -- <galley args>`: runs one
// galley command with tracing on and writes its Chrome trace; `--summary` prints where the time
// went, `--html` writes the self-contained HTML report (with --html alone the trace is a temporary
// file). `galley prof --in trace.json` summarises a trace written earlier (or, with --html, writes
// its report); `galley prof --memory snapshot.json` shows a caching-allocator snapshot
// (GALLEY_ALLOC_CONF=snapshot_on_oom:PATH).
//
// The command runs as a child process of the same binary with GALLEY_PROFILE set, so it is traced
// exactly as any program linked with Galley is (the trace is written at its exit), and its exit
// code becomes prof's.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "command.hpp"
#include "core/quoted_input.hpp"
#include "galley/core/error.hpp"
#include "profile/chrome_trace.hpp"
#include "profile/html_report.hpp"
#include "profile/memory_report.hpp"
#include "profile/summary.hpp"
#include "profile/tracer.hpp"

extern char** environ;

namespace galley::cli {
namespace {

struct ProfOptions {
  std::string out;
  std::string in;
  std::string memory;
  std::string html;
  bool summary = false;
  std::string phase = "all";
  std::vector<std::string> command;
};

std::string joined(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : " ") + w;
  return out;
}

// The child's environment: ours with GALLEY_PROFILE set to the trace path.
std::vector<std::string> child_environment(const std::string& trace) {
  std::vector<std::string> env;
  for (char** item = environ; item != nullptr && *item != nullptr; ++item) {
    if (std::strncmp(*item, "GALLEY_PROFILE=", 15) != 0) env.emplace_back(*item);
  }
  env.push_back("GALLEY_PROFILE=" + trace);
  return env;
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// Runs `galley <command>` with GALLEY_PROFILE=trace; returns its exit code.
int run_traced(const std::vector<std::string>& command, const std::string& trace) {
  std::vector<std::string> args{"galley"};
  args.insert(args.end(), command.begin(), command.end());
  std::vector<std::string> env = child_environment(trace);
  auto argv = pointers(args);
  auto envp = pointers(env);
  pid_t child = 0;
  if (const int rc = ::posix_spawn(&child, "/proc/self/exe", nullptr, nullptr, argv.data(), envp.data());
      rc != 0) {
    throw Error(Status::internal,
                "galley prof: cannot start 'galley " + joined(command) + "': " + std::strerror(rc));
  }
  int status = 0;
  while (::waitpid(child, &status, 0) < 0) {
    if (errno != EINTR)
      throw Error(Status::internal, std::string("galley prof: waitpid: ") + std::strerror(errno));
  }
  if (WIFSIGNALED(status)) {
    std::fprintf(stderr, "galley prof: 'galley %s' was killed by signal %d (%s); its trace was not written\n",
                 joined(command).c_str(), WTERMSIG(status), strsignal(WTERMSIG(status)));
    return 128 + WTERMSIG(status);
  }
  return WEXITSTATUS(status);
}

std::string read_file(const std::string& path, const char* option) {
  std::ifstream file(path, std::ios::binary);
  if (!file)
    throw Error(Status::not_found, std::string(option) + " " + quoted_input(path) + ": cannot be read");
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

void print_summary(const std::string& path, const char* option, const std::string& phase) {
  const auto summary = profile::summarize_trace(read_file(path, option), profile::parse_summary_phase(phase));
  std::fputs(profile::format_summary(summary).c_str(), stdout);
}

void write_report(const std::string& html, const std::string& trace, const char* option,
                  const std::string& title) {
  profile::write_html_report(html, read_file(trace, option), title);
  std::fprintf(stderr, "galley prof: HTML report written to %s (open it in a browser; it loads nothing)\n",
               html.c_str());
}

// Removes the trace `galley prof --html` alone wrote for its report, however prof leaves.
struct TemporaryFile {
  std::string path;
  ~TemporaryFile() {
    if (!path.empty()) std::remove(path.c_str());
  }
};

void run_prof(ProfOptions o) {
  if (!profile::kCompiledIn && (!o.command.empty() || !o.out.empty())) {
    throw Error(Status::unsupported,
                "galley prof: this build has no profiler (configured with -DGALLEY_PROFILER=OFF), so it "
                "cannot trace a command; --in and --memory still read files written by a build with it");
  }
  (void)profile::parse_summary_phase(o.phase);  // a bad phase fails before the command runs
  if (o.phase != "all") o.summary = true;
  if (!o.memory.empty()) {
    if (!o.command.empty() || !o.out.empty() || !o.in.empty() || !o.html.empty() || o.summary) {
      throw Error(Status::invalid_argument,
                  "galley prof: --memory shows a memory snapshot; it takes no other "
                  "option and no command");
    }
    std::fputs(profile::format_memory_snapshot(read_file(o.memory, "--memory")).c_str(), stdout);
    return;
  }
  if (!o.in.empty()) {
    if (!o.command.empty() || !o.out.empty()) {
      throw Error(Status::invalid_argument,
                  "galley prof: --in summarises an existing trace; it takes no --out "
                  "and no command");
    }
    if (o.html.empty()) {
      print_summary(o.in, "--in", o.phase);
      return;
    }
    profile::check_trace_path("--html", o.html);
    write_report(o.html, o.in, "--in", "trace " + o.in);
    if (o.summary) print_summary(o.in, "--in", o.phase);
    return;
  }
  if (o.command.empty()) {
    throw Error(
        Status::invalid_argument,
        "galley prof needs a galley command after '--' (e.g. galley prof --out trace.json -- bench conv)");
  }
  if (o.command.front() == "prof")
    throw Error(Status::invalid_argument, "galley prof cannot profile 'prof' itself");
  if (o.out.empty() && o.html.empty()) {
    throw Error(Status::invalid_argument,
                "galley prof needs --out FILE.json for the trace or --html FILE.html for the report");
  }
  if (!o.html.empty()) profile::check_trace_path("--html", o.html);
  TemporaryFile temporary;
  if (o.out.empty()) temporary.path = o.html + ".trace" + std::to_string(::getpid()) + ".json";
  const std::string& trace = o.out.empty() ? temporary.path : o.out;
  profile::check_trace_path(o.out.empty() ? "--html" : "--out", trace);
  std::remove(trace.c_str());  // a trace left from an earlier run must not pass for this one's
  const int code = run_traced(o.command, trace);
  set_exit_code(code);
  if (::access(trace.c_str(), R_OK) != 0) {
    if (code == 0) {
      throw Error(Status::not_found,
                  "galley prof: 'galley " + joined(o.command) +
                      "' created no stream, so there is nothing to trace and no trace was written");
    }
    return;  // the command failed before its first work; it said why
  }
  if (!o.out.empty()) {
    std::fprintf(
        stderr, "galley prof: trace written to %s (load it in https://ui.perfetto.dev or chrome://tracing)\n",
        o.out.c_str());
  }
  if (!o.html.empty())
    write_report(o.html, trace, o.out.empty() ? "--html" : "--out", "galley " + joined(o.command));
  if (o.summary) print_summary(trace, o.out.empty() ? "--html" : "--out", o.phase);
}

const bool prof_registered = register_command([](CLI::App& root) {
  auto options = std::make_shared<ProfOptions>();
  CLI::App* cmd = root.add_subcommand("prof",
                                      "Trace a galley command: galley prof --out trace.json [--summary] "
                                      "[--html report.html] -- <galley args>");
  cmd->add_option("--out", options->out,
                  "Chrome trace JSON to write (loads in Perfetto and chrome://tracing)");
  cmd->add_flag("--summary", options->summary,
                "Print per op and solver the calls, device time, mean and share, and per stream the busy and "
                "gap time with the largest gaps");
  cmd->add_option(
      "--html", options->html,
      "Write a self-contained HTML report (timeline, op table, streams, memory, tuner); with --in, "
      "of that trace");
  cmd->add_option("--phase", options->phase,
                  "Summarise only part of the trace (implies --summary): all, before-replays (the eager "
                  "warm-up and capture of a --graph run), replays (its graph replays)")
      ->capture_default_str();
  cmd->add_option("--in", options->in, "Summarise this trace (written earlier) instead of running a command");
  cmd->add_option("--memory", options->memory,
                  "Show this caching-allocator snapshot (written by GALLEY_ALLOC_CONF=snapshot_on_oom:PATH)");
  cmd->add_option("command", options->command, "The galley command to trace, after '--'");
  cmd->callback([options] { run_prof(*options); });
});

}  // namespace
}  // namespace galley::cli
