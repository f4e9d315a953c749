// Sets (or unsets) one environment variable for a test's scope and re-reads Galley's configuration,
// which the library otherwise reads once per process (src/core/config.hpp); both are restored when
// the scope ends.
#pragma once

#include <stdlib.h>

#include <optional>
#include <string>

#include "core/config.hpp"

namespace galley::testing {

class ScopedEnv {
 public:
  /// value == nullptr unsets the variable.
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = ::getenv(name)) old_ = old;
    set(value);
  }
  ~ScopedEnv() { set(old_ ? old_->c_str() : nullptr); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

  /// Changes the value again within the scope.
  void set(const char* value) {
    if (value == nullptr) {
      ::unsetenv(name_.c_str());
    } else {
      ::setenv(name_.c_str(), value, 1);
    }
    env::reload_for_testing();
  }

 private:
  std::string name_;
  std::optional<std::string> old_;
};

}  // namespace galley::testing
