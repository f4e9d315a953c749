// Uses the installed public headers and library: lists devices and runs one copy on the cpu.
#include <cstdio>
#include <cstring>
#include <vector>

#include "galley/core/version.hpp"
#include "galley/runtime/device.hpp"
#include "galley/runtime/stream.hpp"

int main() {
  auto cpu = galley::runtime::device("cpu");
  galley::runtime::Stream stream(cpu);
  std::vector<char> src(1000, 7), dst(1000, 0);
  stream.copy_h2h(dst.data(), src.data(), src.size());
  stream.synchronize();
  if (std::memcmp(src.data(), dst.data(), src.size()) != 0) return 1;
  std::printf("consumer: galley %s, %zu device(s)\n", galley::version_string(),
              galley::runtime::devices().size());
  return 0;
}
