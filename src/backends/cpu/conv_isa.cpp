#include "backends/cpu/conv_isa.hpp"

#include <atomic>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "core/config.hpp"
#include "galley/core/error.hpp"

namespace galley::backends::cpu {
namespace {

// -1 until the first cpu_isa() reads GALLEY_CPU_ISA or a test or benchmark sets it.
std::atomic<int> g_cap{-1};

// __builtin_cpu_supports reads cpuid and also checks that the OS saves the ymm / zmm state
// (xgetbv), so a "yes" here means the code can really run.
CpuIsa detect() {
#if defined(__x86_64__) || defined(__i386__)
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return CpuIsa::scalar;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") && cpu_reports_f16c()) {
    return CpuIsa::avx512;
  }
  return CpuIsa::avx2;
#else
  return CpuIsa::scalar;
#endif
}

}  // namespace

std::string_view to_string(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::scalar: return "scalar";
    case CpuIsa::avx2: return "avx2";
    case CpuIsa::avx512: return "avx512";
  }
  return "?";
}

CpuIsa parse_cpu_isa(const std::string& name) {
  for (CpuIsa isa : {CpuIsa::scalar, CpuIsa::avx2, CpuIsa::avx512}) {
    if (name == to_string(isa)) return isa;
  }
  throw Error(Status::invalid_argument, "cpu ISA '" + name + "' (valid: scalar, avx2, avx512)");
}

CpuIsa cpu_isa_supported() {
  static const CpuIsa supported = detect();
  return supported;
}

CpuIsa cpu_isa_cap_from_env() {
  const std::string& value = env::config().cpu_isa;  // validated: scalar, avx2, avx512 or empty
  return value.empty() ? CpuIsa::avx512 : parse_cpu_isa(value);
}

CpuIsa cpu_isa() {
  int cap = g_cap.load(std::memory_order_relaxed);
  if (cap < 0) {
    int unset = -1;
    g_cap.compare_exchange_strong(unset, static_cast<int>(cpu_isa_cap_from_env()), std::memory_order_relaxed);
    cap = g_cap.load(std::memory_order_relaxed);
  }
  const int have = static_cast<int>(cpu_isa_supported());
  return static_cast<CpuIsa>(cap < have ? cap : have);
}

void set_cpu_isa_cap(CpuIsa cap) { g_cap.store(static_cast<int>(cap), std::memory_order_relaxed); }

bool cpu_has_avx2_fma() { return cpu_isa() >= CpuIsa::avx2; }

bool cpu_has_avx512() { return cpu_isa() >= CpuIsa::avx512; }

// cpuid leaf 1, ECX bit 29: clang before 16 has no "f16c" for __builtin_cpu_supports.
bool cpu_reports_f16c() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned int eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
#else
  return false;
#endif
}

bool cpu_has_f16c() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool has = cpu_reports_f16c();
  return has && cpu_has_avx2_fma();
#else
  return false;
#endif
}

}  // namespace galley::backends::cpu
