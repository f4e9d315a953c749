// Runs a shell command as a test's child process (the `galley` CLI as a user runs it): its standard
// output and exit code. Shared by the test layers that drive the CLI.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace galley::testing {

struct CommandResult {
  int exit_code = -1;  // -1 when the command could not be started or did not exit normally
  std::string output;  // its standard output; append " 2>&1" to the command for stderr too
};

inline CommandResult run_command(const std::string& command) {
  CommandResult result;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  std::array<char, 4096> chunk{};
  std::size_t n;
  while ((n = std::fread(chunk.data(), 1, chunk.size(), pipe)) > 0) result.output.append(chunk.data(), n);
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

}  // namespace galley::testing
