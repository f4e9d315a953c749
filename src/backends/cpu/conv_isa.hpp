// Which vector kernels this CPU may run. The *_avx2.cpp files are compiled with -mavx2 -mfma
// -mf16c and must only be entered after these checks say yes.
#pragma once

namespace galley::backends::cpu {

/// AVX2 and FMA (the register-blocked kernels). Cached after the first call.
bool cpu_has_avx2_fma();
/// F16C (vectorised f16 <-> f32 conversion). Cached after the first call.
bool cpu_has_f16c();

}  // namespace galley::backends::cpu
