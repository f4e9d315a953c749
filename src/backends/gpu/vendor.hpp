// The one switch between the two GPU vendors. Code under src/backends/gpu/ and the shared runtime
// glue (src/backends/cuda/runtime_*.cpp) is written in the CUDA dialect and includes only this
// header; the hip plugin compiles the same files with -DGALLEY_HIP, which maps every cuda* name to
// its hip* twin (as ggml-hip does). Each vendor header also defines the few helpers whose code
// truly differs (arch names, version numbers, pointer kinds) in namespace galley::backends::vendor,
// so no #if is scattered through the sources.
//
// Provided by both:
//   GALLEY_GPU_NS                       cuda | hip (namespace of the plugin's internals)
//   vendor::kBackend, kApi, kVendor     "cuda"/"hip", "cuda"/"hip" call prefix, "NVIDIA"/"AMD"
//   vendor::arch_name(prop)             "sm_90", "gfx90a"
//   vendor::arch_runs_on(built, device) can machine code for `built` run on `device`?
//   vendor::format_version(v)           runtime/driver version int -> "13.0", "5.2"
//   vendor::pointer_kind(p)             pageable | pinned | device (clears the error it may set)
//   vendor::driver_detail()             kernel driver version text, "" when unknown
//   vendor::launch_host_func<Fn>(s, p)  Fn(p) on a host thread in stream order
//   vendor::no_device_summary(err, ...) why device_count() is 0
#pragma once

#include <string>

namespace galley::backends::vendor {
/// What kind of memory a pointer handed to a copy points at.
enum class PointerKind { pageable, pinned, device };
}  // namespace galley::backends::vendor

#define GALLEY_GPU_VENDOR_SWITCH 1
#if defined(GALLEY_HIP)
#include "backends/hip/vendor.hpp"
#else
#include "backends/cuda/vendor.hpp"
#endif
