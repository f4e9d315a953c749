#include "cli_cases.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <map>
#include <sstream>

#include "core/quoted_input.hpp"

extern char** environ;

namespace galley::testing {
namespace {

using Clock = std::chrono::steady_clock;

struct Running {
  std::size_t index;
  pid_t pid;
  int fd;
  Clock::time_point start;
};

std::string env_name(const std::string& pair) { return pair.substr(0, pair.find('=')); }

// The child's environment: ours, with the case's NAME=value pairs replacing or adding. OpenBLAS
// starts a thread per core when libgalley loads and joins them at exit, five times the cost of a
// command line that fails to parse; these cases never multiply a matrix, so one thread (unless the
// case sets its own).
std::vector<std::string> environment_for(const CliCase& c) {
  std::map<std::string, std::string> vars;
  for (char** e = environ; *e != nullptr; ++e) vars[env_name(*e)] = *e;
  vars["OPENBLAS_NUM_THREADS"] = "OPENBLAS_NUM_THREADS=1";
  for (const auto& pair : c.env) vars[env_name(pair)] = pair;
  std::vector<std::string> out;
  for (auto& [name, pair] : vars) out.push_back(pair);
  return out;
}

// Spawns the child with stdout and stderr on one pipe and stdin from /dev/null; returns the pipe's
// read end. posix_spawn (a vfork underneath) rather than fork: a thousand children cost no copies
// of this process's page tables.
Running start(const CliCase& c, std::size_t index) {
  static const std::string binary = GALLEY_TEST_BIN_DIR "/galley";
  std::vector<std::string> args{binary};
  args.insert(args.end(), c.args.begin(), c.args.end());
  const std::vector<std::string> env = environment_for(c);
  std::vector<char*> argv, envp;
  for (auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDERR_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, binary.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    throw std::runtime_error(binary + ": posix_spawn failed: " + std::strerror(rc));
  }
  return {index, pid, fds[0], Clock::now()};
}

void finish(Running& r, CliOutcome& out, bool killed) {
  ::close(r.fd);
  int status = 0;
  ::waitpid(r.pid, &status, 0);
  out.seconds = std::chrono::duration<double>(Clock::now() - r.start).count();
  out.timed_out = killed;
  if (WIFEXITED(status)) out.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) out.signal = WTERMSIG(status);
}

}  // namespace

std::vector<CliOutcome> run_cli_cases(const std::vector<CliCase>& cases, int parallel, double timeout_s) {
  std::vector<CliOutcome> outcomes(cases.size());
  std::vector<Running> running;
  std::size_t next = 0;
  char buffer[65536];
  while (next < cases.size() || !running.empty()) {
    while (next < cases.size() && static_cast<int>(running.size()) < parallel) {
      outcomes[next].output_bytes = 0;
      running.push_back(start(cases[next], next));
      ++next;
    }
    std::vector<pollfd> fds;
    for (const Running& r : running) fds.push_back({r.fd, POLLIN, 0});
    ::poll(fds.data(), fds.size(), 50);
    for (std::size_t i = running.size(); i-- > 0;) {
      Running& r = running[i];
      CliOutcome& out = outcomes[r.index];
      bool done = false;
      if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) {
        const ssize_t n = ::read(r.fd, buffer, sizeof buffer);
        if (n > 0) {
          out.output_bytes += static_cast<std::size_t>(n);
          const std::size_t room = kMaxKeptOutput - std::min(kMaxKeptOutput, out.output.size());
          out.output.append(buffer, std::min(room, static_cast<std::size_t>(n)));
        } else {
          done = true;  // end of file: the child closed its output (exited)
        }
      }
      const bool late = std::chrono::duration<double>(Clock::now() - r.start).count() > timeout_s;
      if (late && !done) ::kill(r.pid, SIGKILL);
      if (done || late) {
        finish(r, out, late && !done);
        running.erase(running.begin() + static_cast<std::ptrdiff_t>(i));
      }
    }
  }
  return outcomes;
}

std::string describe(const CliCase& c) {
  std::string out;
  for (const auto& e : c.env) out += quoted_input(e, 60) + " ";
  out += "galley";
  for (const auto& a : c.args) out += " " + quoted_input(a, 60);
  return out;
}

std::string clean_failure_problem(const CliCase& c, const CliOutcome& o, double limit_s,
                                  std::size_t max_output) {
  std::vector<std::string> problems;
  if (o.timed_out) problems.push_back("timed out");
  if (o.signal != 0)
    problems.push_back("killed by signal " + std::to_string(o.signal) + " (" + strsignal(o.signal) + ")");
  if (o.exit_code == 0) problems.push_back("exited 0");
  if (o.seconds > limit_s) problems.push_back("took " + std::to_string(o.seconds) + " s");
  if (o.output.find("internal error") != std::string::npos) problems.push_back("says 'internal error'");
  if (o.output_bytes > max_output) problems.push_back("wrote " + std::to_string(o.output_bytes) + " bytes");
  // The message: the line that starts with "galley: error".
  std::string message;
  std::istringstream lines(o.output);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("galley: error", 0) == 0) {
      message = line;
      break;
    }
  }
  if (message.empty()) {
    problems.push_back("no line starting with 'galley: error'");
  } else if (!c.expect.empty() && message.find(c.expect) == std::string::npos) {
    problems.push_back("the message does not name " + quoted_input(c.expect));
  }
  if (problems.empty()) return {};
  std::string out = describe(c) + ":";
  for (const auto& p : problems) out += " " + p + ";";
  return out + "\n  output: " + quoted_input(o.output, 600);
}

}  // namespace galley::testing
