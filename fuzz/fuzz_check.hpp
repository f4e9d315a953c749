// What every fuzz target accepts from the code under test: it returns, or it throws galley::Error.
// Any other exception escaping (std::out_of_range, a JSON library's error, bad_alloc from a size
// taken from the input) is a finding, reported by aborting so libFuzzer saves the input.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <exception>

#include "galley/core/error.hpp"

namespace galley::fuzz {

template <typename F>
void expect_result_or_error(const char* what, F&& call) {
  try {
    call();
  } catch (const Error&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz: %s threw a non-galley exception: %s\n", what, e.what());
    std::abort();
  } catch (...) {
    std::fprintf(stderr, "fuzz: %s threw a non-std exception\n", what);
    std::abort();
  }
}

[[noreturn]] inline void finding(const char* message) {
  std::fprintf(stderr, "fuzz: %s\n", message);
  std::abort();
}

}  // namespace galley::fuzz
