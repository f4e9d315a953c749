// Output file checks and whole-file writes.
#include "profile/output_file.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "galley/core/error.hpp"

namespace galley::profile {

void check_trace_path(const std::string& setting, const std::string& path) {
  auto bad = [&](const std::string& why) {
    throw Error(Status::invalid_argument,
                setting + "='" + path + "': " + why + " (valid: a writable file path such as trace.json)");
  };
  if (path.empty()) bad("no file named");
  struct stat info {};
  if (::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode)) bad("is a folder");
  const auto slash = path.rfind('/');
  const std::string folder = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  if (::stat(folder.c_str(), &info) != 0 || !S_ISDIR(info.st_mode))
    bad("folder '" + folder + "' does not exist");
  if (::access(folder.c_str(), W_OK) != 0) bad("folder '" + folder + "' is not writable");
}

void write_file_atomically(const std::string& path, const std::string& text, const std::string& what) {
  auto failed = [&](int error) {
    return Error(Status::io_error, "cannot write " + what + " '" + path + "': " + std::strerror(error));
  };
  const std::string temporary = path + ".tmp" + std::to_string(::getpid());
  std::FILE* file = std::fopen(temporary.c_str(), "wb");
  if (file == nullptr) throw failed(errno);
  const bool written = std::fwrite(text.data(), 1, text.size(), file) == text.size();
  const int write_errno = errno;
  const bool closed = std::fclose(file) == 0;
  const int close_errno = errno;
  if (!written || !closed) {
    std::remove(temporary.c_str());
    throw failed(!written ? write_errno : close_errno);
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    const int rename_errno = errno;
    std::remove(temporary.c_str());
    throw failed(rename_errno);
  }
}

}  // namespace galley::profile
