// The mbarrier, TMA and cp.async-arrival instructions of the warp-specialized Hopper kernels
// (gemm_wgmma.cu's TMA tiles, conv_igemm_wgmma.cu's specialized tiles). Shared addresses are shared::cta
// ones; without clusters a CTA's own shared::cluster address is the same value. sm_90a only, as the files
// that include it.
#pragma once

#include <cuda.h>

#include <cstdint>

namespace galley::backends::gpu::mbar {

__device__ __forceinline__ void init(unsigned bar, unsigned arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(arrivals) : "memory");
}
/// Makes the initialized barriers visible to the async proxy (TMA's complete_tx) before first use.
__device__ __forceinline__ void fence_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
/// This thread's arrival, announcing `bytes` the phase also waits for (the copies' complete_tx).
__device__ __forceinline__ void arrive_expect_bytes(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void arrive(unsigned bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
/// An arrival that happens once every cp.async this thread issued so far has landed. noinc: it is one
/// of the arrivals the barrier was initialized to expect (without it the instruction first raises the
/// pending count, and the thread would have to arrive again itself).
__device__ __forceinline__ void arrive_on_cp_async(unsigned bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}
/// Waits until the phase of parity `parity` has completed.
__device__ __forceinline__ void wait(unsigned bar, unsigned parity) {
  unsigned done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (done == 0);
}

/// One box of the 3-D tensor map `map` at coordinates (c0, c1, c2), innermost first, into shared memory
/// at dst; its bytes complete on mbarrier `bar`. Elements outside the tensor arrive as zeros.
__device__ __forceinline__ void tma_load_3d(unsigned dst, const CUtensorMap& map, int c0, int c1, int c2,
                                            unsigned bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], "
      "[%5];\n" ::"r"(dst),
      "l"(reinterpret_cast<std::uint64_t>(&map)), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
      : "memory");
}
/// Fetches the tensor map (a kernel parameter) ahead of its first use.
__device__ __forceinline__ void prefetch_map(const CUtensorMap& map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<std::uint64_t>(&map)) : "memory");
}

/// Waits for every cp.async this thread issued, committed to a group or not.
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

}  // namespace galley::backends::gpu::mbar
