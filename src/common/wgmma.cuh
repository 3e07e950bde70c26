// Hopper warpgroup MMA (sm_90a only): shared-memory matrix descriptors,
// wgmma.mma_async m64nNk16 with bf16 / f16 operands and fp32 accumulation,
// and the fences that order it against ordinary shared-memory writes.
//
// A warpgroup (4 consecutive warps, 128 threads) issues each wgmma together.
// Accumulator layout of m64nN: warp w of the group owns rows 16w..16w+15 and,
// per 8-column block j, d[4j..4j+3] = (row g, cols 8j+2c, +1), (row g+8, same
// cols) with g = lane / 4, c = lane % 4: mma.sync's C fragment per n8 block.
//
// Operands use the 128-byte swizzle (the PTX ISA's canonical layouts):
//   K-major (rows of 64 16-bit elements, 128 B): row r of an 8-row, 1024-byte
//     atom at r * 128, its 16-byte chunk c at ((c ^ r) & 7) * 16; atoms of the
//     next 8 rows SBO bytes apart; LBO unused.
//   MN-major (transposed B): 64 MN-elements per 128-byte row, K rows 128 B
//     apart in 8-row atoms; next 64 MN-elements LBO bytes away, next 8 K rows
//     SBO bytes away.
// Atoms must start 1024-byte aligned; a k-step inside a K-major atom advances
// the start address by 32 bytes (the swizzle is applied to the final address).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace kdtree {

// Shared-memory layouts a descriptor can name (its bits 62-63).
enum class WgmmaLayout : uint64_t { kInterleave = 0, kSwizzle128 = 1 };

// Descriptor of a shared-memory operand at `smem_addr`: start address, leading
// and stride byte offsets (16-byte units), layout.
__device__ __forceinline__ uint64_t wgmma_desc(uint32_t smem_addr, uint32_t lbo_bytes, uint32_t sbo_bytes,
                                               WgmmaLayout layout) {
  return static_cast<uint64_t>((smem_addr & 0x3FFFF) >> 4) |
         static_cast<uint64_t>((lbo_bytes >> 4) & 0x3FFF) << 16 |
         static_cast<uint64_t>((sbo_bytes >> 4) & 0x3FFF) << 32 | static_cast<uint64_t>(layout) << 62;
}
__device__ __forceinline__ uint64_t wgmma_desc_sw128(uint32_t smem_addr, uint32_t lbo_bytes, uint32_t sbo_bytes) {
  return wgmma_desc(smem_addr, lbo_bytes, sbo_bytes, WgmmaLayout::kSwizzle128);
}
// `desc` with `step` 16-byte units added to its start address: a 32-bit add on
// the low word. Shared memory addresses stay below 256 KB, so the 14-bit field
// never carries and the high word (stride, layout) is left as it is. (A 64-bit
// add made ptxas build each wgmma's two descriptors by a carry chain: eight
// uniform instructions per wgmma where three do.)
__device__ __forceinline__ uint64_t wgmma_desc_advance(uint64_t desc, uint32_t step) {
  return (desc & 0xFFFFFFFF00000000ull) | static_cast<uint32_t>(static_cast<uint32_t>(desc) + step);
}

// Orders register writes to accumulators / fragments before the next wgmma.
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Makes this thread's generic-proxy shared-memory writes (st.shared, cp.async)
// visible to the async proxy wgmma reads through; a barrier then publishes them.
__device__ __forceinline__ void fence_proxy_async_smem() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// The reader's side of the same hand-off, after an mbarrier wait whose phase
// the writers completed (cp.async's mbarrier arrivals included): orders that
// acquire before this thread's async-proxy (wgmma) reads. On sm_90 it needs
// no instruction, where the bidirectional fence above costs a MEMBAR.
__device__ __forceinline__ void fence_proxy_async_acquire_smem() {
  asm volatile("fence.proxy.async::generic.acquire.sync_restrict::shared::cluster.cluster;\n" ::: "memory");
}

// PTX spells out every accumulator register: one operand list per shape.
// Operands: d (N/2 floats), desc_a, desc_b, accumulate (0: D = A B), kTransB.
#define KDTREE_WGMMA_M64N8K16(TY)                                                   \
  asm volatile(                                                                          \
    "{\n.reg .pred p;\nsetp.ne.b32 p, %6, 0;\n"                                        \
    "wgmma.mma_async.sync.aligned.m64n8k16.f32." TY "." TY " "                             \
    "{%0, %1, %2, %3}, " \
    "%4, %5, p, 1, 1, 0, %7;\n}\n"                                                 \
    : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) \
    : "l"(desc_a), "l"(desc_b), "r"(accumulate), "n"(kTransB))

#define KDTREE_WGMMA_M64N16K16(TY)                                                   \
  asm volatile(                                                                          \
    "{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"                                        \
    "wgmma.mma_async.sync.aligned.m64n16k16.f32." TY "." TY " "                             \
    "{%0, %1, %2, %3, %4, %5, %6, %7}, " \
    "%8, %9, p, 1, 1, 0, %11;\n}\n"                                                 \
    : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]) \
    : "l"(desc_a), "l"(desc_b), "r"(accumulate), "n"(kTransB))

// The m64n64 accumulator as asm operands %0..%31: its registers, register
// list and in-out constraints (the SS and RS forms share them, and the
// m64n256 lists below begin with them).
#define KDTREE_WGMMA_D32_REGS \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define KDTREE_WGMMA_D32_LIST "{" KDTREE_WGMMA_D32_REGS "}"
#define KDTREE_WGMMA_D32_INOUT \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
  "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
  "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
  "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])

#define KDTREE_WGMMA_M64N64K16(TY)                                                   \
  asm volatile(                                                                          \
    "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"                                        \
    "wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY " "                             \
    KDTREE_WGMMA_D32_LIST ", %32, %33, p, 1, 1, 0, %35;\n}\n"                             \
    : KDTREE_WGMMA_D32_INOUT                                                             \
    : "l"(desc_a), "l"(desc_b), "r"(accumulate), "n"(kTransB))

// The m64n256 accumulator as asm operands %0..%127: its register list and its
// in-out constraints (the SS and RS forms below share them).
#define KDTREE_WGMMA_D128_LIST \
  "{" KDTREE_WGMMA_D32_REGS ", " \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47," \
  " %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63," \
  " %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79," \
  " %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95," \
  " %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111," \
  " %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}"
#define KDTREE_WGMMA_D128_INOUT \
  KDTREE_WGMMA_D32_INOUT, \
  "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
  "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
  "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
  "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), \
  "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), \
  "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), \
  "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), \
  "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), \
  "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), \
  "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), \
  "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), \
  "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])

#define KDTREE_WGMMA_M64N256K16(TY)                                                   \
  asm volatile(                                                                          \
    "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"                                        \
    "wgmma.mma_async.sync.aligned.m64n256k16.f32." TY "." TY " "                             \
    KDTREE_WGMMA_D128_LIST ", %128, %129, p, 1, 1, 0, %131;\n}\n"                        \
    : KDTREE_WGMMA_D128_INOUT                                                            \
    : "l"(desc_a), "l"(desc_b), "r"(accumulate), "n"(kTransB))

// D[64 x N] (+)= A[64 x 16] * B[16 x N] with A from registers: each thread
// holds mma.sync's A fragment of its warp's 16 rows (a0 (g, 2c..2c+1), a1
// (g+8, 2c..), a2 (g, 2c+8..), a3 (g+8, 2c+8..)), which is also how the
// m64nN accumulator of the tile before holds those columns (packed in pairs).
// The registers must not change until the wgmma has completed.
#define KDTREE_WGMMA_M64N8K16_RS(TY)                                                   \
  asm volatile(                                                                          \
    "{\n.reg .pred p;\nsetp.ne.b32 p, %9, 0;\n"                                        \
    "wgmma.mma_async.sync.aligned.m64n8k16.f32." TY "." TY " "                             \
    "{%0, %1, %2, %3}, " \
    "{%4, %5, %6, %7}, %8, p, 1, 1, %10;\n}\n"                                                 \
    : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) \
    : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate), "n"(kTransB))
#define KDTREE_WGMMA_M64N64K16_RS(TY)                                                   \
  asm volatile(                                                                          \
    "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"                                        \
    "wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY " "                             \
    KDTREE_WGMMA_D32_LIST ", {%32, %33, %34, %35}, %36, p, 1, 1, %38;\n}\n"               \
    : KDTREE_WGMMA_D32_INOUT                                                             \
    : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate), "n"(kTransB))
#define KDTREE_WGMMA_M64N256K16_RS(TY)                                                   \
  asm volatile(                                                                          \
    "{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"                                        \
    "wgmma.mma_async.sync.aligned.m64n256k16.f32." TY "." TY " "                             \
    KDTREE_WGMMA_D128_LIST ", {%128, %129, %130, %131}, %132, p, 1, 1, %134;\n}\n"       \
    : KDTREE_WGMMA_D128_INOUT                                                            \
    : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate), "n"(kTransB))

// One wrapper per shape and A source: NAME(d, <A operand>, desc_b,
// accumulate) for T = bf16 or f16; kTransB = 1 reads B MN-major.
#define KDTREE_WGMMA_DEFINE(NAME, ASM, REGS, A_PARAM)                                               \
  template <class T, int kTransB>                                                                   \
  __device__ __forceinline__ void NAME(float (&d)[REGS], A_PARAM, uint64_t desc_b, int accumulate) {  \
    static_assert(std::is_same<T, __nv_bfloat16>::value || std::is_same<T, __half>::value, "bf16 / f16"); \
    if constexpr (std::is_same<T, __nv_bfloat16>::value) {                                          \
      ASM("bf16");                                                                                  \
    } else {                                                                                        \
      ASM("f16");                                                                                   \
    }                                                                                               \
  }
KDTREE_WGMMA_DEFINE(wgmma_m64n8k16_rs, KDTREE_WGMMA_M64N8K16_RS, 4, const uint32_t (&a)[4])
KDTREE_WGMMA_DEFINE(wgmma_m64n64k16_rs, KDTREE_WGMMA_M64N64K16_RS, 32, const uint32_t (&a)[4])
KDTREE_WGMMA_DEFINE(wgmma_m64n256k16_rs, KDTREE_WGMMA_M64N256K16_RS, 128, const uint32_t (&a)[4])
#undef KDTREE_WGMMA_M64N8K16_RS
#undef KDTREE_WGMMA_M64N64K16_RS
#undef KDTREE_WGMMA_M64N256K16_RS

// D[64 x N] (+)= A[64 x 16] * B[16 x N], A and B from shared memory.
KDTREE_WGMMA_DEFINE(wgmma_m64n8k16, KDTREE_WGMMA_M64N8K16, 4, uint64_t desc_a)
KDTREE_WGMMA_DEFINE(wgmma_m64n16k16, KDTREE_WGMMA_M64N16K16, 8, uint64_t desc_a)
KDTREE_WGMMA_DEFINE(wgmma_m64n64k16, KDTREE_WGMMA_M64N64K16, 32, uint64_t desc_a)
KDTREE_WGMMA_DEFINE(wgmma_m64n256k16, KDTREE_WGMMA_M64N256K16, 128, uint64_t desc_a)
#undef KDTREE_WGMMA_DEFINE
#undef KDTREE_WGMMA_M64N8K16
#undef KDTREE_WGMMA_M64N16K16
#undef KDTREE_WGMMA_M64N64K16
#undef KDTREE_WGMMA_M64N256K16
#undef KDTREE_WGMMA_D32_REGS
#undef KDTREE_WGMMA_D32_LIST
#undef KDTREE_WGMMA_D32_INOUT
#undef KDTREE_WGMMA_D128_LIST
#undef KDTREE_WGMMA_D128_INOUT

// Warpgroup register budget (sm_90a): every thread of the warpgroup moves to
// kRegs registers per thread; inc waits until the block has them free.
template <int kRegs>
__device__ __forceinline__ void warpgroup_regs_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}
template <int kRegs>
__device__ __forceinline__ void warpgroup_regs_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}

}  // namespace kdtree
