#include "backends/cpu/conv_isa.hpp"

namespace galley::backends::cpu {

// __builtin_cpu_supports reads cpuid and also checks that the OS saves the ymm state (xgetbv), so
// a "yes" here means the AVX2 code can really run.
bool cpu_has_avx2_fma() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
#else
  return false;
#endif
}

bool cpu_has_f16c() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool has = cpu_has_avx2_fma() && __builtin_cpu_supports("f16c");
  return has;
#else
  return false;
#endif
}

}  // namespace galley::backends::cpu
