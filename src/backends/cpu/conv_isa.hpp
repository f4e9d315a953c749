// Which vector kernels this CPU may run. The *_avx2.cpp files are compiled with -mavx2 -mfma
// -mf16c, the *_avx512.cpp files with AVX-512 F/BW/VL/DQ as well; each must only be entered after
// these checks say yes.
//
// The level in effect is the highest the CPU (and OS) supports, lowered by GALLEY_CPU_ISA (read at
// the first use) or by set_cpu_isa_cap(), so that users, tests and benchmarks can run the AVX2 and
// scalar paths on a machine that has AVX-512.
#pragma once

#include <string>
#include <string_view>

namespace galley::backends::cpu {

/// Instruction-set levels the cpu kernels are written for, lowest first.
enum class CpuIsa { scalar = 0, avx2 = 1, avx512 = 2 };

/// "scalar", "avx2", "avx512".
std::string_view to_string(CpuIsa isa);
/// The inverse of to_string; Error(invalid_argument) naming the value and the valid ones.
CpuIsa parse_cpu_isa(const std::string& name);

/// The highest level this CPU and OS can run (cpuid + saved register state). Cached.
CpuIsa cpu_isa_supported();
/// The level the kernels use now: min(cpu_isa_supported(), cap). The first call reads the cap from
/// GALLEY_CPU_ISA unless set_cpu_isa_cap() came first; a malformed value throws Error(invalid_argument)
/// naming the variable, the value and the valid ones (on every call, until fixed).
CpuIsa cpu_isa();
/// GALLEY_CPU_ISA parsed (CpuIsa::avx512 when unset or empty); throws as cpu_isa() does.
CpuIsa cpu_isa_cap_from_env();
/// Caps cpu_isa() at `cap` (CpuIsa::avx512 lifts any cap). Solvers read the level when they size
/// their workspace and when they run, so change it only between convolutions, never during one.
void set_cpu_isa_cap(CpuIsa cap);

/// cpu_isa() >= avx2 (AVX2 and FMA: the register-blocked kernels).
bool cpu_has_avx2_fma();
/// cpu_isa() >= avx512 (AVX-512 F, BW, VL, DQ with the zmm state saved by the OS).
bool cpu_has_avx512();
/// The CPU has F16C (cpuid), whatever the ISA cap; what `galley info` lists.
bool cpu_reports_f16c();
/// F16C at cpu_isa() >= avx2 (vectorised f16 <-> f32 conversion).
bool cpu_has_f16c();

}  // namespace galley::backends::cpu
