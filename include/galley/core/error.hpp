// Status codes and the one exception type every Galley layer throws.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace galley {

/// What went wrong, coarse enough for a C API return code.
enum class Status {
  ok = 0,
  invalid_argument,  ///< the caller passed a bad value; the message names it
  unsupported,       ///< valid, but no implementation can do it here
  out_of_memory,     ///< a device or host allocation failed
  backend_error,     ///< a vendor runtime/library call failed
  not_found,         ///< a named device, solver, file or key does not exist
  io_error,          ///< a file or database could not be read or written
  corrupt_data,      ///< persistent state failed validation
  internal,          ///< a Galley bug
};

/// The stable lower-case name of a status ("invalid_argument").
const char* to_string(Status status) noexcept;

/// The exception thrown for every failure. The message names the offending value and, where it
/// helps, what would be valid.
class Error : public std::runtime_error {
 public:
  Error(Status status, const std::string& message);
  Status status() const noexcept { return status_; }

 private:
  Status status_;
};

/// Throws Error(status, message) when `condition` is false. Keeps validation code flat.
inline void require(bool condition, Status status, std::string_view message) {
  if (!condition) throw Error(status, std::string(message));
}

}  // namespace galley
