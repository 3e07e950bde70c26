// Warp-level tensor-core and async-copy primitives shared by the kernels:
// mma.sync m16n8k16 (bf16 / f16 in, f32 accumulate), ldmatrix, cp.async.
// Portable from sm_80 to sm_120. Fragment layouts are PTX's:
//   A 16x16 row-major: a0 (g, 2c..2c+1), a1 (g+8, 2c..), a2 (g, 2c+8..), a3 (g+8, 2c+8..)
//   B 16x8  col-major: b0 (k 2c..2c+1, n g), b1 (k 2c+8.., n g)
//   C 16x8:            c0,c1 (g, 2c..2c+1), c2,c3 (g+8, 2c..2c+1)
// with g = lane / 4 and c = lane % 4.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace kdtree {

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16-byte global -> shared copy from src + kOffset to dst + kDstOffset bytes
// (the offsets in the instruction: a gather over a row's chunks needs no
// address registers for each); src_bytes 0 writes zeros without reading.
template <int kOffset = 0, int kDstOffset = 0>
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0+%4], [%1+%3], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes),
               "n"(kOffset), "n"(kDstOffset));
}
// The same from src + kOffset bytes (the offset in the instruction: a
// gather over a row's column blocks needs no address register for each),
// L2 fetching the 128-byte line around it. (A 1152-byte KV row spans nine
// lines, and the L2::256B hint fetched ten: the shapes whose rows come from
// HBM (S3, S4, S7) ran 0.3-0.7% slower with it; docs/perf_notes.md, session 22.)
template <int kOffset = 0>
__device__ __forceinline__ void cp_async_16_l2_128(uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1+%3], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes),
               "n"(kOffset));
}
// kBytes-byte (4 or 8) global -> shared copy through L1; src_bytes 0 writes
// zeros without reading, fewer than kBytes zero-fill the rest.
template <int kBytes>
__device__ __forceinline__ void cp_async_small(uint32_t dst, const void* src, int src_bytes) {
  static_assert(kBytes == 4 || kBytes == 8, "cp.async.ca copies 4, 8 or 16 bytes");
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(dst), "l"(src), "n"(kBytes), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// Barrier kId (1..15; 0 is __syncthreads) over kThreads threads of the block.
// Immediate ids let ptxas reserve only the barriers the kernel names.
template <int kId, int kThreads>
__device__ __forceinline__ void named_barrier_sync() {
  asm volatile("bar.sync %0, %1;\n" ::"n"(kId), "n"(kThreads) : "memory");
}

// named_barrier_sync that also returns whether `pred` held in any of its threads.
template <int kId, int kThreads>
__device__ __forceinline__ bool named_barrier_or(bool pred) {
  uint32_t any;
  asm volatile(
      "{\n .reg .pred p, q;\n setp.ne.u32 p, %1, 0;\n bar.red.or.pred q, %2, %3, p;\n selp.u32 %0, 1, 0, q;\n}\n"
      : "=r"(any)
      : "r"(uint32_t{pred}), "n"(kId), "n"(kThreads)
      : "memory");
  return any != 0;
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
// Stores four 8x8 16-bit matrices (sm_90+): lanes 8m..8m+7 give the row
// addresses of matrix m; r[m] holds this lane's pair of it in the mma
// accumulator layout (row lane / 4, columns 2 (lane % 4), +1).
__device__ __forceinline__ void stmatrix_x4(uint32_t addr, const uint32_t (&r)[4]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(r[0]), "r"(r[1]),
               "r"(r[2]), "r"(r[3])
               : "memory");
#endif
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// D = A * B + D, m16n8k16, fp32 accumulate. T selects bf16 or f16 operands.
template <class T>
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1);

template <>
__device__ __forceinline__ void mma_16816<__nv_bfloat16>(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                                         uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <>
__device__ __forceinline__ void mma_16816<__half>(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two floats -> one packed pair of T (round to nearest even).
template <class T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi);
template <>
__device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}
template <>
__device__ __forceinline__ uint32_t pack2<__half>(float lo, float hi) {
  __half2 v = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}

// One packed pair of T -> two floats (exact).
template <class T>
__device__ __forceinline__ float2 unpack2(uint32_t pair);
template <>
__device__ __forceinline__ float2 unpack2<__nv_bfloat16>(uint32_t pair) {
  return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&pair));
}
template <>
__device__ __forceinline__ float2 unpack2<__half>(uint32_t pair) {
  return __half22float2(*reinterpret_cast<const __half2*>(&pair));
}

}  // namespace kdtree
