// The one header with vendor-specific matrix instructions for the conv kernels: NVIDIA's
// mma.sync / ldmatrix / cp.async PTX (sm_80 and newer). GALLEY_GPU_MMA is 1 where they exist; code
// that uses them sits behind `#if GALLEY_GPU_MMA`, and the hip build takes the SIMT paths instead
// (an MFMA path for gfx90a would go here, behind its own macro).
#pragma once

#include "conv_device.cuh"

#if !GALLEY_GPU_HIP
#define GALLEY_GPU_MMA 1
#else
#define GALLEY_GPU_MMA 0
#endif

#if GALLEY_GPU_MMA
namespace galley::backends::gpu::mma {

// The device pass for an arch older than sm_80 compiles these to traps; the planners never pick
// tensor-core kernels there (check() refuses such devices).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define GALLEY_MMA_UNAVAILABLE 1
#endif

__device__ __forceinline__ unsigned smem_addr(const void* ptr) {
  return static_cast<unsigned>(__cvta_generic_to_shared(ptr));
}

/// 16-byte async copy global -> shared; `src_bytes` = 0 writes zeros (padding, out of range).
/// kCacheInL1 false caches in L2 only (.cg): for data a block reads once (weights), which would
/// otherwise take L1 room from data it reads again (an im2col tile's neighbouring taps).
template <bool kCacheInL1 = true>
__device__ __forceinline__ void cp_async16(unsigned dst, const void* src, int src_bytes) {
#ifndef GALLEY_MMA_UNAVAILABLE
  if constexpr (kCacheInL1)
    asm volatile("cp.async.ca.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
  else
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
#else
  __trap();
#endif
}
__device__ __forceinline__ void cp_async_commit() {
#ifndef GALLEY_MMA_UNAVAILABLE
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
#ifndef GALLEY_MMA_UNAVAILABLE
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}

/// Four 8x8 b16 matrices; lane i supplies the row address of matrix i/8, row i%8.
__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], unsigned addr) {
#ifndef GALLEY_MMA_UNAVAILABLE
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
#else
  r[0] = r[1] = r[2] = r[3] = 0;
  __trap();
#endif
}

/// ldmatrix_x4 with each 8x8 matrix transposed on the way: for operands stored with the reduction
/// index along rows (lane i then receives the two row entries 2 * (i % 4), +1 of column i / 4).
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], unsigned addr) {
#ifndef GALLEY_MMA_UNAVAILABLE
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
#else
  r[0] = r[1] = r[2] = r[3] = 0;
  __trap();
#endif
}

/// Zeroes a warp's MT x NT grid of m16n8 fp32 accumulator fragments.
template <int MT, int NT>
__device__ __forceinline__ void zero_fragments(float (&acc)[MT][NT][4]) {
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;
}

/// D(16x8, f32) += A(16x16, row) * B(16x8, col) for T = __half or bf16_t.
template <typename T>
__device__ __forceinline__ void mma_16816(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1);
template <>
__device__ __forceinline__ void mma_16816<__half>(float (&d)[4], const unsigned (&a)[4], unsigned b0,
                                                  unsigned b1) {
#ifndef GALLEY_MMA_UNAVAILABLE
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
  __trap();
#endif
}
template <>
__device__ __forceinline__ void mma_16816<bf16_t>(float (&d)[4], const unsigned (&a)[4], unsigned b0,
                                                  unsigned b1) {
#ifndef GALLEY_MMA_UNAVAILABLE
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
  __trap();
#endif
}

/// D(16x8, f32) += A(16x8, row) * B(8x8, col).
template <typename T>
__device__ __forceinline__ void mma_1688(float (&d)[4], unsigned a0, unsigned a1, unsigned b);
template <>
__device__ __forceinline__ void mma_1688<__half>(float (&d)[4], unsigned a0, unsigned a1, unsigned b) {
#ifndef GALLEY_MMA_UNAVAILABLE
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(b));
#else
  __trap();
#endif
}
template <>
__device__ __forceinline__ void mma_1688<bf16_t>(float (&d)[4], unsigned a0, unsigned a1, unsigned b) {
#ifndef GALLEY_MMA_UNAVAILABLE
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(b));
#else
  __trap();
#endif
}

/// v rounded to TF32 (10-bit mantissa, round to nearest, ties away), as its fp32 bit pattern.
__device__ __forceinline__ unsigned to_tf32(float v) {
#ifndef GALLEY_MMA_UNAVAILABLE
  unsigned t;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(t) : "f"(v));
  return t;
#else
  (void)v;
  __trap();
  return 0;
#endif
}

/// v as its TF32 part (big) and the TF32 of the rest (small): big + small carries v to within fp32's
/// rounding, so big*big + big*small + small*big (3xTF32) keeps a product's fp32 accuracy.
__device__ __forceinline__ void split_tf32(float v, unsigned& big, unsigned& small) {
  big = to_tf32(v);
  small = to_tf32(v - __uint_as_float(big));
}

/// D(16x8, f32) += A(16x8, row) * B(8x8, col) in TF32 (operands from to_tf32()).
__device__ __forceinline__ void mma_1688_tf32(float (&d)[4], const unsigned (&a)[4], unsigned b0,
                                              unsigned b1) {
#ifndef GALLEY_MMA_UNAVAILABLE
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
  (void)d, (void)a, (void)b0, (void)b1;
  __trap();
#endif
}

/// D = A * B in TF32, no accumulator in (the C operand is zero).
__device__ __forceinline__ void mma_1688_tf32_fresh(float (&d)[4], const unsigned (&a)[4], unsigned b0,
                                                    unsigned b1) {
#ifndef GALLEY_MMA_UNAVAILABLE
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%10,%10,%10,%10};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(0.f));
#else
  (void)d, (void)a, (void)b0, (void)b1;
  __trap();
#endif
}

/// D = A * B in 3xTF32 from split_tf32() parts, the two small products first, into a fresh partial.
/// The tensor core's accumulation does not round to nearest, and onto one running sum that bias
/// grows linearly with the reduction's length (past SIMT fp32's error within a few thousand k); a
/// partial over a short slice of k, added to the running sum in fp32 (rounded), keeps fp32's accuracy.
__device__ __forceinline__ void mma_1688_3xtf32_fresh(float (&part)[4], const unsigned (&a_big)[4],
                                                      const unsigned (&a_small)[4],
                                                      const unsigned (&b_big)[2],
                                                      const unsigned (&b_small)[2]) {
  mma_1688_tf32_fresh(part, a_small, b_big[0], b_big[1]);
  mma_1688_tf32(part, a_big, b_small[0], b_small[1]);
  mma_1688_tf32(part, a_big, b_big[0], b_big[1]);
}

/// part += A * B in 3xTF32: the next k8 of a slice's partial (see mma_1688_3xtf32_fresh).
__device__ __forceinline__ void mma_1688_3xtf32_into(float (&part)[4], const unsigned (&a_big)[4],
                                                     const unsigned (&a_small)[4], const unsigned (&b_big)[2],
                                                     const unsigned (&b_small)[2]) {
  mma_1688_tf32(part, a_small, b_big[0], b_big[1]);
  mma_1688_tf32(part, a_big, b_small[0], b_small[1]);
  mma_1688_tf32(part, a_big, b_big[0], b_big[1]);
}

/// D += A * B in 3xTF32 with one rounded add per k8 (see mma_1688_3xtf32_fresh).
__device__ __forceinline__ void mma_1688_3xtf32(float (&d)[4], const unsigned (&a_big)[4],
                                                const unsigned (&a_small)[4], const unsigned (&b_big)[2],
                                                const unsigned (&b_small)[2]) {
  float part[4];
  mma_1688_3xtf32_fresh(part, a_big, a_small, b_big, b_small);
#pragma unroll
  for (int e = 0; e < 4; ++e) d[e] += part[e];
}

}  // namespace galley::backends::gpu::mma
#endif  // GALLEY_GPU_MMA
