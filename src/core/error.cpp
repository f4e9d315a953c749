#include "galley/core/error.hpp"

namespace galley {

const char* to_string(Status status) noexcept {
  switch (status) {
    case Status::ok: return "ok";
    case Status::invalid_argument: return "invalid_argument";
    case Status::unsupported: return "unsupported";
    case Status::out_of_memory: return "out_of_memory";
    case Status::backend_error: return "backend_error";
    case Status::not_found: return "not_found";
    case Status::io_error: return "io_error";
    case Status::corrupt_data: return "corrupt_data";
    case Status::internal: return "internal";
  }
  return "unknown";
}

Error::Error(Status status, const std::string& message) : std::runtime_error(message), status_(status) {}

}  // namespace galley
