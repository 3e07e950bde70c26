// What the two sm_90a verify kernels share: the block's tile geometry (64
// query rows, 64-key KV tiles, nine 64-dim column blocks in the 128-byte
// swizzle wgmma reads), the Q load, the visible-key words of a masked tile
// and the pieces of the online softmax and the P store.
// verify_paged_sm90a.cu runs one score warpgroup and one gather warpgroup;
// verify_paged_sm90a_pingpong.cu two score warpgroups taking turns and a
// gather warpgroup. Each thread of a score warpgroup holds the m64nN
// accumulator layout: rows g and g + 8 of its warp's 16 (g = lane / 4), and
// in each 8-column block the columns 2c, 2c + 1 (c = lane % 4).
#pragma once

#include <cuda_runtime_api.h>

#include <cmath>
#include <type_traits>

#include "common/cuda_check.hpp"
#include "common/mma.cuh"
#include "common/wgmma.cuh"
#include "verify/verify_paged_args.cuh"
#include "verify/verify_paged_sm90a.hpp"
#include "verify/verify_paged_sm90a_stamps.cuh"

namespace kdtree::verify::sm90a {

constexpr int kRows = kSm90aRows;
constexpr int kKeys = kSm90aKeys;
constexpr int kGroup = 128;                 // threads of a warpgroup
constexpr int kDimBlocks = kHeadDim / 64;   // 64-dim column blocks of a row (9)
constexpr int kBlockBytes = kRows * 128;    // one column block of 64 rows
static_assert(kKeys == kRows, "Q and KV tiles share the column-block geometry");
constexpr int kTileBytes = kDimBlocks * kBlockBytes;  // Q or one KV stage (72 KB)
constexpr size_t kSmemOptin = 232448;       // sm_90's opt-in shared memory per block
// Each kernel aligns its dynamic shared memory base up to 1024 B (the
// swizzle atom), so its layout gets this much on top.
constexpr size_t kAlignSlack = 1024;

// The grid of either kernel: (row tiles, splits, requests).
inline dim3 grid_of(const PagedArgs& a) {
  const int rows = a.max_q_len * a.num_heads;
  return dim3((rows + kRows - 1) / kRows, a.num_splits, a.batch_size);
}

// Either kernel's three instances by route (route_of): 16-bit rows to partial
// states or to out have one each, the route fixed at compile time (since the
// bulk-copy epilogue it decides only a row's address); f32 rows have one that
// asks the call (session 23: with the route fixed, the out kernel's epilogue
// spilled 32 bytes). One 16-bit kernel with the route at run time measured
// +1.8..+3.4% (docs/perf_notes.md, session 25: ptxas scheduled its tile loop
// anew, 4% slower per tile). `name` names the kernel in errors, `what` its
// tiles in UNSUPPORTED's message; every instance runs `threads` threads with
// `smem_bytes` of dynamic shared memory. The instances are named in the order their
// code has always been laid out in the cubin (the first named, the first
// emitted): the loop's rate depends on where its code sits (session 30).
struct RouteKernels {
  using Kernel = void (*)(PagedArgs);
  Kernel any_route, to_partials, to_out;
  const char* name;
  const char* what;
  int threads;
  size_t smem_bytes;

  // Raises each instance's dynamic shared memory limit to smem_bytes
  // (allow_dynamic_smem).
  void allow_smem(size_t smem_optin, const char* function) const {
    for (const Kernel kernel : {any_route, to_partials, to_out}) {
      allow_dynamic_smem(kernel, smem_bytes, smem_optin, function, what, name);
    }
  }
  // Launches the instance for the call's rows and checks the launch.
  void launch(const PagedArgs& a, dim3 grid, cudaStream_t stream) const {
    const int route = route_of(a);
    const Kernel kernel = route == kToPartials ? to_partials : route == kToOut ? to_out : any_route;
    kernel<<<grid, threads, smem_bytes, stream>>>(a);
    check_launch("kdtree_verify_paged", name);
#if KDTREE_SM90A_STAMPS
    stamps::print_after_launch(grid, stream);
#endif
  }
};

// 2^x by the SFU alone (exp2f adds a denormal-range fix-up around it): the
// arguments here are <= kRescaleLog2, and a probability below 2^-126 adds
// nothing next to the row's maximum term 1.
__device__ __forceinline__ float exp2_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// Four fp8 e4m3 values (one word, in order) -> four of T, exactly, with no
// conversion instruction (Hopper runs those at a fraction of the integer
// rate): each byte goes to a 16-bit lane as T's bits of its value times
// 2^-(bias(T) - 7) (its sign by a sign-replicating byte permute, its exponent
// and mantissa shifted into T's fields; e4m3's subnormals become T's), then
// one packed multiply by 2^(bias(T) - 7). An e4m3 NaN (0x7F / 0xFF, the one
// code with all seven low bits set) reads as +-480.
template <class T>
__device__ __forceinline__ uint2 fp8x4_to(uint32_t word) {
  constexpr bool kBf16 = std::is_same<T, __nv_bfloat16>::value;
  constexpr int kShift = kBf16 ? 4 : 7;                          // e4m3's 3 mantissa bits to T's 7 / 10
  constexpr uint32_t kKeep = kBf16 ? 0x87F087F0u : 0xBF80BF80u;  // a lane's sign, exponent and mantissa
  constexpr uint32_t kScale = kBf16 ? 0x7B807B80u : 0x5C005C00u;  // 2^120 / 2^8 in both lanes
  uint32_t lanes[2];
  // Bytes (v, sign(v), w, sign(w)) of the values (0, 1), then (2, 3).
  asm("prmt.b32 %0, %1, 0, 0x9180;" : "=r"(lanes[0]) : "r"(word));
  asm("prmt.b32 %0, %1, 0, 0xB3A2;" : "=r"(lanes[1]) : "r"(word));
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const uint32_t bits = (lanes[i] << kShift) & kKeep;
    if constexpr (kBf16) {
      asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(lanes[i]) : "r"(bits), "r"(kScale));
    } else {
      asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(lanes[i]) : "r"(bits), "r"(kScale));
    }
  }
  return make_uint2(lanes[0], lanes[1]);
}

// Sixteen fp8 e4m3 values -> sixteen of T: the first eight to *lo, the rest to *hi.
template <class T>
__device__ __forceinline__ void fp8x16_to(uint4 raw, uint4* lo, uint4* hi) {
  const uint2 a = fp8x4_to<T>(raw.x), b = fp8x4_to<T>(raw.y), c = fp8x4_to<T>(raw.z), d = fp8x4_to<T>(raw.w);
  *lo = make_uint4(a.x, a.y, b.x, b.y);
  *hi = make_uint4(c.x, c.y, d.x, d.y);
}

// fp8 KV: the cells a gather thread copied into half `half` of stage `stage`,
// converted in place: raw cell 2j of a block (dims 16j ..
// 16j + 15) becomes cells 2j and 2j + 1 in T. `cells`: the raw cell of each
// of the thread's kN keys in stage 0's block 0. A block's loads go together
// (one shared-memory round trip a block); the eight threads of a quarter
// warp, two keys of four cells each, hit eight bank groups (the swizzle).
// One loop over the blocks, not unrolled: the gather's code per pair is what
// the SM's instruction caches hold beside the score warpgroups' loops.
template <class T, int kN>
__device__ __forceinline__ void convert_fp8_cells(const uint32_t (&cells)[kN], int stage, int half) {
  const uint32_t stage_at = stage * kTileBytes;
#pragma unroll 1
  for (int u = half == 0 ? 0 : kDimBlocks / 2; u < (half == 0 ? kDimBlocks / 2 : kDimBlocks); ++u) {
    const uint32_t at = stage_at + u * kBlockBytes;
    uint4 raw[kN];
#pragma unroll
    for (int p = 0; p < kN; ++p) {
      asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                   : "=r"(raw[p].x), "=r"(raw[p].y), "=r"(raw[p].z), "=r"(raw[p].w)
                   : "r"(cells[p] + at));
    }
#pragma unroll
    for (int p = 0; p < kN; ++p) {
      uint4 lo, hi;
      fp8x16_to<T>(raw[p], &lo, &hi);
      asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(cells[p] + at), "r"(lo.x), "r"(lo.y), "r"(lo.z),
                   "r"(lo.w)
                   : "memory");
      asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"((cells[p] ^ 16) + at), "r"(hi.x), "r"(hi.y),
                   "r"(hi.z), "r"(hi.w)
                   : "memory");
    }
  }
}

// Byte offset of 16-byte chunk `chunk` (0..71) of row `row` in a Q / KV tile.
__device__ __forceinline__ uint32_t chunk_offset(int row, int chunk) {
  return static_cast<uint32_t>((chunk >> 3) * kBlockBytes + row * 128 + (((chunk ^ row) & 7) << 4));
}

// Query rows [row0, row0 + 64) of the request into the Q tile at `q_tile`
// with cp.async, by threads 0..kThreads - 1; rows past the request are zero.
template <class T, int kThreads>
__device__ __forceinline__ void load_q_tile(const PagedArgs& a, const Request& req, int rows, int row0,
                                            uint32_t q_tile) {
  const int lane8 = threadIdx.x % 8;
#pragma unroll
  for (int pass = 0; pass < kRows / (kThreads / 8); ++pass) {
    const int r_local = pass * (kThreads / 8) + threadIdx.x / 8;
    bool ok;
    const T* src = q_row<T>(a, req, rows, row0 + r_local, &ok);
#pragma unroll
    for (int u = 0; u < kDimBlocks; ++u) {
      const int c = lane8 + 8 * u;
      cp_async_16(q_tile + chunk_offset(r_local, c), ok ? src + c * 8 : src, ok ? 16 : 0);
    }
  }
}

// The visible keys of the tile at key k0 for this thread's two accumulator
// rows, as 64-bit words (bit k: key k0 + k). Visibility depends on the row's
// token, not its head, so the warp finds it per token of its 16 rows (one or
// two tokens when H >= 8): lane L tests keys L and L + 32, both mask bytes in
// flight at once, and two ballots make the token's word. bad_key: the
// stage's flagged slots, read only when any_bad. [warp_r0, warp_r1]: the
// warp's rows in the request; token: this thread's rows' tokens (-1: padding).
__device__ __forceinline__ void row_key_words(const PagedArgs& a, const Request& req, const uint8_t* tail_mask,
                                              int64_t key_end, int64_t k0, const uint8_t* bad_key, bool any_bad,
                                              int warp_r0, int warp_r1, const int (&token)[2],
                                              uint64_t (&row_keys)[2]) {
  const int lane = threadIdx.x % 32;
  const auto key_word = [&](int t) {
    const TailMaskRow mask_row(a, req, tail_mask, t);
    uint32_t word[2];
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      const int key_local = lane + 32 * u;
      const uint8_t byte = mask_row.byte(a, req, key_end, k0 + key_local);
      const bool bad = any_bad && bad_key[key_local];
      word[u] = __ballot_sync(0xffffffffu, key_visible(a, req, key_end, k0 + key_local, t, bad, byte));
    }
    return static_cast<uint64_t>(word[1]) << 32 | word[0];
  };
  row_keys[0] = row_keys[1] = key_word(-1);  // padding rows: every unflagged key of the split
  if (warp_r0 <= warp_r1) {
#pragma unroll 2
    for (int t = warp_r0 / a.num_heads; t <= warp_r1 / a.num_heads; ++t) {  // warp-uniform
      const uint64_t word = key_word(t);
      if (token[0] == t) row_keys[0] = word;
      if (token[1] == t) row_keys[1] = word;
    }
  }
}

// The maximum of row half `half` of the thread's 32 scores over its quad
// (the row's 64 keys).
__device__ __forceinline__ float quad_row_max(const float (&s)[32], int half) {
  float mx = -INFINITY;
#pragma unroll
  for (int j = 0; j < 8; ++j) mx = fmaxf(mx, fmaxf(s[4 * j + 2 * half], s[4 * j + 2 * half + 1]));
  mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
  mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
  return mx;
}

// P of row half `half`: 2^(s * scale - m_ref), rounded to T in pairs (keys
// 8j + 2c, + 1 in pack[j]); returns the fp32 sum of the unrounded values.
template <class T>
__device__ __forceinline__ float exp_pack(const float (&s)[32], int half, float scale, float m_ref,
                                          uint32_t (&pack)[8]) {
  float sum = 0.f;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const float p0 = exp2_ftz(fmaf(s[4 * j + 2 * half], scale, -m_ref));
    const float p1 = exp2_ftz(fmaf(s[4 * j + 2 * half + 1], scale, -m_ref));
    sum += p0 + p1;
    pack[j] = pack2<T>(p0, p1);
  }
  return sum;
}

// The normalize function (verify_paged_args.cuh's normalize_row_as) for row half
// `half` of a score warpgroup's O (o[4j + 2 half], o[4j + 2 half + 1], j <
// 32: 256 output dims): each value divided in place.
__device__ __forceinline__ auto row_half_normalizer(float (&o)[128], int half) {
  return [&o, half](auto divide) {
#pragma unroll
    for (int j = 0; j < 32; ++j) {
      o[4 * j + 2 * half] = divide(o[4 * j + 2 * half]);
      o[4 * j + 2 * half + 1] = divide(o[4 * j + 2 * half + 1]);
    }
  };
}

// Lane L's address for ldmatrix / stmatrix .x4 call 0 on an A fragment of
// this warp's 16 rows in a [64 rows][64 columns] block at `block` (the
// 128-byte swizzle): lane L names row L % 8 of matrix m = L / 8 (rows
// warp_row0 + 8 (m % 2), 8-column chunk 2q + m / 2 for call q), whose 16
// bytes sit at chunk (2q + m / 2) ^ r of the row. Call q's address is this
// one ^ 32q: a row starts 128-byte aligned, so chunk (c0 ^ 2q) of it is chunk
// c0's address ^ 32q, and one address stays live across the calls.
__device__ __forceinline__ uint32_t fragment_lane_addr(uint32_t block, int warp_row0) {
  const int lane = threadIdx.x % 32;
  const int m = lane / 8, r = lane % 8;
  return block + (warp_row0 + 8 * (m % 2) + r) * 128 + (((m / 2) ^ r) << 4);
}

// P to the P block, four 8 x 8 blocks per stmatrix. No proxy fence: a
// reader by ldmatrix (load_p) reads through the generic proxy, ordered by the
// barrier between them; a reader by wgmma (the async proxy) needs the
// writer's fence_proxy_async_smem after this.
__device__ __forceinline__ void store_p(uint32_t p_block, int warp_row0, const uint32_t (&p_pack)[2][8]) {
  const uint32_t addr = fragment_lane_addr(p_block, warp_row0);
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const uint32_t regs[4] = {p_pack[0][2 * q], p_pack[1][2 * q], p_pack[0][2 * q + 1], p_pack[1][2 * q + 1]};
    stmatrix_x4(addr ^ (q << 5), regs);
  }
}

// store_p's inverse: the P block into this thread's p_pack (exp_pack's
// accumulator layout), for a P V from registers.
__device__ __forceinline__ void load_p(uint32_t p_block, int warp_row0, uint32_t (&p_pack)[2][8]) {
  const uint32_t addr = fragment_lane_addr(p_block, warp_row0);
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    uint32_t regs[4];
    ldmatrix_x4(regs, addr ^ (q << 5));
    p_pack[0][2 * q] = regs[0];
    p_pack[1][2 * q] = regs[1];
    p_pack[0][2 * q + 1] = regs[2];
    p_pack[1][2 * q + 1] = regs[3];
  }
}

// O += P V over one 64-key tile, P (this thread's p_pack, the accumulator
// layout exp_pack wrote) the A operand from registers: k-step ks takes key
// blocks 2ks and 2ks + 1 of both row halves, V's k-step ks at v_desc plus 16
// rows. With kWeights, P times the ones column into w beside each k-step
// (the rows' weights). One wgmma group, committed, not waited for.
template <class T, bool kWeights>
__device__ __forceinline__ void pv_from_registers(float (&o)[128], float (&w)[4], const uint32_t (&p_pack)[2][8],
                                                  uint64_t v_desc, uint64_t ones_desc) {
  wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < kKeys / 16; ++ks) {
    const uint32_t pa[4] = {p_pack[0][2 * ks], p_pack[1][2 * ks], p_pack[0][2 * ks + 1], p_pack[1][2 * ks + 1]};
    wgmma_m64n256k16_rs<T, 1>(o, pa, v_desc + ((ks * 16 * 128) >> 4), 1);
    if constexpr (kWeights) wgmma_m64n8k16_rs<T, 0>(w, pa, ones_desc, 1);
  }
  wgmma_commit();
}

// The sum of l over the thread's quad (a row's 64 keys).
__device__ __forceinline__ float quad_sum(float l) {
  l += __shfl_xor_sync(0xffffffffu, l, 1);
  l += __shfl_xor_sync(0xffffffffu, l, 2);
  return l;
}

}  // namespace kdtree::verify::sm90a
