// Caps the cpu kernels' ISA level for a scope, so a test reaches the AVX2 and scalar builds of a
// loop on a machine with AVX-512, and restores it when the scope ends, however it ends.
#pragma once

#include "backends/cpu/conv_isa.hpp"

namespace galley::dnn {

struct IsaCap {
  explicit IsaCap(backends::cpu::CpuIsa cap) { backends::cpu::set_cpu_isa_cap(cap); }
  ~IsaCap() { backends::cpu::set_cpu_isa_cap(backends::cpu::CpuIsa::avx512); }
  IsaCap(const IsaCap&) = delete;
  IsaCap& operator=(const IsaCap&) = delete;
};

}  // namespace galley::dnn
