// Split-K tree-verify attention on Hopper (sm_90a): warpgroup MMA (wgmma),
// one warpgroup for the scores and one for the gather.
//
// Same grid, split plan, workspace and merge as the portable kernel
// (verify_paged_kernel.cuh): block (m, s, b) takes query rows
// [64m, 64m + 64) of request b (row = token * H + head) and the keys of split
// s, 64 keys per tile, in a two-stage KV buffer. 256 threads, two roles:
//   warpgroup 0 (scores): S = Q K^T for the whole 64 x 64 tile (36 wgmma
//     m64n64k16 over the 576 dims, Q and K from shared memory), the mask on
//     tiles with tail keys, a split end or a flagged slot (found per query
//     token by warp ballots, before the QK), the online softmax
//     with the portable kernel's lazy rescale, P (bf16/f16) and the rows'
//     rescale factors to shared memory; then O[:, 0..256) = alpha O + P V
//     (4 wgmma m64n256k16, V = the tile's first 512 dims read transposed) and
//     P times a ones column (m64n8k16), so O is normalized by the
//     tensor-core sum of the same rounded P (all-ones values give exactly 1).
//   warpgroup 1 (gather): O[:, 256..512) = alpha O + P V from the same P
//     (its rows' weights come from warpgroup 0 in the epilogue), and the KV
//     rows: slot ids into shared memory by cp.async a tile ahead, rows of
//     tile t + 1 by cp.async into the stage tile t - 1 left.
// Per tile t, both warpgroups run one loop with two block barriers:
//   landed:  the gather warpgroup's copies of tile t are done (then a block
//            barrier); warpgroup 0 computes S and P while warpgroup 1 issues
//            tile t + 1's gather into the other stage (freed at this barrier);
//   p_full:  block barrier; both run their half of P V.
// Warpgroup 0's scores thus overlap the gather's issue and latency, and each
// warpgroup's P V overlaps the other's. Every barrier is a __syncthreads at
// one place in the code, which compute-sanitizer's racecheck and synccheck
// follow exactly.
// Shared memory (224 KB + 2 KB): Q and each KV stage as nine 64-dim column
// blocks of [rows][128 B] in the 128-byte swizzle wgmma reads; P as one such
// block. Epilogue as the portable kernel: O / w and lse to the output, or
// the split's partial state for verify_paged_merge, which this kernel lets
// launch (programmatic dependent launch) as its epilogue begins.
#include "common/cuda_check.hpp"
#include "common/grid_dependency.cuh"
#include "common/mma.cuh"
#include "common/wgmma.cuh"
#include "verify/verify_paged_sm90a.hpp"

#include <cmath>
#include <type_traits>

namespace kdtree::verify {
namespace {

constexpr int kRows = kSm90aRows;
constexpr int kKeys = kSm90aKeys;
constexpr int kThreads = 256;               // two warpgroups
[[maybe_unused]] constexpr int kGroup = 128;  // threads of a warpgroup (device code only)
constexpr int kDimBlocks = kHeadDim / 64;   // 64-dim column blocks of a row (9)
constexpr int kBlockBytes = kRows * 128;    // one column block of 64 rows
static_assert(kKeys == kRows, "Q and KV tiles share the column-block geometry");
constexpr int kTileBytes = kDimBlocks * kBlockBytes;  // Q or one KV stage (72 KB)

constexpr size_t kOffQ = 0;
constexpr size_t kOffKv = kOffQ + kTileBytes;          // [2] stages
constexpr size_t kOffP = kOffKv + 2 * kTileBytes;      // [64 rows][64 keys]
constexpr size_t kOffOnes = kOffP + kBlockBytes;       // 16 keys x 8 ones
constexpr size_t kOffRed = kOffOnes + 256;             // [2][64] f32: rescale factors; row sums and weights
constexpr size_t kOffBadKey = kOffRed + 2 * kRows * 4;  // [2][64] u8: flagged slots per stage
constexpr size_t kOffBadWarp = kOffBadKey + 2 * kKeys;  // [2][4] u8: any flagged slot per gather warp
constexpr size_t kOffSlots = kOffBadWarp + 16;          // [2][64] i64: slot ids a tile ahead
constexpr size_t kLayoutBytes = kOffSlots + 2 * kKeys * 8;
// The dynamic shared memory base is aligned up to 1024 B (the swizzle atom).
constexpr size_t kSmemBytes = kLayoutBytes + 1024;
static_assert(kSmemBytes <= 232448, "sm_90 opt-in shared memory");

template <class T>
struct Sm90aBlock {
  const PagedArgs& a;
  unsigned char* smem;
  Request req;
  int rows, row0;
  int64_t key_begin, key_end;

  // 2^x by the SFU alone (exp2f adds a denormal-range fix-up around it): the
  // arguments here are <= kRescaleLog2, and a probability below 2^-126 adds
  // nothing next to the row's maximum term 1.
  __device__ static float exp2_ftz(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
  }

  // Byte offset of 16-byte chunk `chunk` (0..71) of row `row` in a Q / KV tile.
  __device__ static uint32_t chunk_offset(int row, int chunk) {
    return static_cast<uint32_t>((chunk >> 3) * kBlockBytes + row * 128 + (((chunk ^ row) & 7) << 4));
  }
  // Ones: a 16 x 8 B operand needs no layout, every element being 1.
  __device__ uint64_t ones_desc() const { return wgmma_desc(base() + kOffOnes, 128, 256, WgmmaLayout::kInterleave); }

  __device__ uint32_t base() const { return smem_addr(smem); }
  __device__ uint8_t* bad_key(int stage) const { return smem + kOffBadKey + stage * kKeys; }
  __device__ uint32_t* bad_warps(int stage) const { return reinterpret_cast<uint32_t*>(smem + kOffBadWarp) + stage; }
  __device__ float* red() const { return reinterpret_cast<float*>(smem + kOffRed); }

  // Q rows of the block (all 256 threads); rows past the request are zero.
  __device__ void load_q() const {
    const int lane8 = threadIdx.x % 8;
#pragma unroll
    for (int pass = 0; pass < kRows / (kThreads / 8); ++pass) {
      const int r_local = pass * (kThreads / 8) + threadIdx.x / 8;
      const int r = row0 + r_local;
      bool ok;
      const T* src = q_row<T>(a, req, rows, r, &ok);
#pragma unroll
      for (int u = 0; u < kDimBlocks; ++u) {
        const int c = lane8 + 8 * u;
        cp_async_16(base() + kOffQ + chunk_offset(r_local, c), ok ? src + c * 8 : src, ok ? 16 : 0);
      }
    }
  }

  __device__ const int64_t* slots(int stage) const {
    return reinterpret_cast<const int64_t*>(smem + kOffSlots) + stage * kKeys;
  }

  // Slot ids of the tile at k0 into shared memory with cp.async (gather
  // threads 0..63, one key each), a tile ahead of load_kv: no thread ever
  // waits on them. An int32 id goes to the low half of its 8-byte entry,
  // whose high half the kernel zeroed at the start (key_row sign-extends it);
  // a key that reads no id gets 0.
  __device__ void stage_slots(int64_t k0, int stage, int gtid) const {
    if (gtid >= kKeys) return;
    const int64_t kk = k0 + gtid;
    const bool reads = key_reads_slot_id(a, req, key_end, kk);
    const uint32_t dst = base() + static_cast<uint32_t>(kOffSlots + (stage * kKeys + gtid) * 8);
    const int64_t at = reads ? req.kv_start + kk : 0;
    if (a.index_is_64) {
      cp_async_small<8>(dst, static_cast<const int64_t*>(a.kv_indices) + at, reads ? 8 : 0);
    } else {
      cp_async_small<4>(dst, static_cast<const int32_t*>(a.kv_indices) + at, reads ? 4 : 0);
    }
  }

  // The gather warpgroup's loads of the KV tile at key k0 into `stage` (8
  // threads per key, `gtid` 0..127), with each key's out-of-range flag and
  // each warp's any-flag.
  __device__ void load_kv(int64_t k0, int stage, int gtid) const {
    constexpr int kKeysPerPass = kGroup / 8;
    bool any_bad = false;
    const int lane8 = gtid % 8;
    const uint32_t tile = base() + kOffKv + stage * kTileBytes;
#pragma unroll
    for (int pass = 0; pass < kKeys / kKeysPerPass; ++pass) {
      const int key = pass * kKeysPerPass + gtid / 8;
      bool bad;
      const T* src = key_row<T>(a, req, key_end, k0 + key, slots(stage)[key], lane8 == 0, &bad);
      if (lane8 == 0) bad_key(stage)[key] = bad;
      any_bad |= bad;
      // A key that must not be read is zero-filled: 0 source bytes, the
      // address (kv_cache) never dereferenced.
      const int src_bytes = src != nullptr ? 16 : 0;
      if (src == nullptr) src = static_cast<const T*>(a.kv_cache);
      // Chunk lane8 + 8u of the row: the swizzle term is the same for every
      // u, so the nine copies differ only by constant offsets.
      const char* from = reinterpret_cast<const char*>(src) + lane8 * 16;
      const uint32_t to = tile + chunk_offset(key, lane8);
#pragma unroll
      for (int u = 0; u < kDimBlocks; ++u) cp_async_16(to + u * kBlockBytes, from + u * 128, src_bytes);
    }
    any_bad = __any_sync(0xffffffffu, any_bad);
    if (gtid % 32 == 0) reinterpret_cast<uint8_t*>(bad_warps(stage))[gtid / 32] = any_bad;
  }

};

template <class T>
__global__ void __launch_bounds__(kThreads, 1) verify_paged_sm90a_kernel(const PagedArgs a) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  unsigned char* smem = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
  constexpr float kNegInf = -INFINITY;

  const int m_tile = blockIdx.x, split = blockIdx.y, b = blockIdx.z;
  const Request req = load_request(a, b, threadIdx.x == 0 && m_tile == 0 && split == 0);
  if (!req.valid) return;
  Sm90aBlock<T> blk{a, smem, req, req.q_len * a.num_heads, m_tile * kRows, 0, 0};
  if (blk.row0 >= blk.rows) return;
  split_range(req.num_keys, a.num_splits, split, kKeys, &blk.key_begin, &blk.key_end);
  const int num_tiles = static_cast<int>((blk.key_end - blk.key_begin + kKeys - 1) / kKeys);
  const auto tile_key = [&](int tile) { return blk.key_begin + static_cast<int64_t>(tile) * kKeys; };

  // Warpgroup (broadcast from lane 0 so the compiler sees it warp-uniform):
  // 0 scores, 1 gather; each owns the P V of its 256 output dims.
  const int wg = __shfl_sync(0xffffffffu, threadIdx.x / kGroup, 0);
  const int gtid = threadIdx.x - kGroup;  // gather thread index (warpgroup 1)
  const int lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
  const int warp_row0 = (threadIdx.x / 32 % 4) * 16;  // this warp's accumulator rows
  const auto row_token = [&](int half) {
    const int r = blk.row0 + warp_row0 + g + 8 * half;
    return r < blk.rows ? r / a.num_heads : -1;
  };

  const uint8_t* const tail_mask = request_tail_mask(a, req, b);
  const uint32_t base = blk.base();
  if (threadIdx.x < 64) {
    reinterpret_cast<uint32_t*>(smem + kOffOnes)[threadIdx.x] = pack2<T>(1.f, 1.f);
  }
  if (threadIdx.x < 2 * kKeys) reinterpret_cast<int64_t*>(smem + kOffSlots)[threadIdx.x] = 0;
  __syncthreads();  // zeroed slot entries before any cp.async writes their low halves

  // The slot ids of tiles 0 and 1 (their own cp.async group), then Q; only
  // the ids are waited for before tile 0's rows are issued, so Q's load
  // overlaps the rows' (the landed wait of tile 0 covers both).
  if (wg == 1) {
    if (num_tiles > 0) blk.stage_slots(tile_key(0), 0, gtid);
    if (num_tiles > 1) blk.stage_slots(tile_key(1), 1, gtid);
  }
  cp_async_commit();
  blk.load_q();
  cp_async_commit();
  cp_async_wait<1>();
  __syncthreads();
  if (wg == 1 && num_tiles > 0) blk.load_kv(tile_key(0), 0, gtid);
  cp_async_commit();

  float o[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) o[i] = 0.f;
  float w[4] = {0.f, 0.f, 0.f, 0.f};  // rounded P times ones: the rows' weights
  float m_run[2] = {kNegInf, kNegInf};
  float l_run[2] = {0.f, 0.f};  // fp32 row sums

  // Descriptors of each operand's first k-step; a k-step, column block or
  // stage adds its byte offset / 16 to the start-address field (every
  // address stays below 256 KB, so the field never carries).
  const uint64_t q_desc = wgmma_desc_sw128(base + kOffQ, 16, 1024);
  const uint64_t k_desc = wgmma_desc_sw128(base + kOffKv, 16, 1024);
  const uint64_t v_desc = wgmma_desc_sw128(base + kOffKv + wg * 4 * kBlockBytes, kBlockBytes, 1024);
  const uint64_t p_desc = wgmma_desc_sw128(base + kOffP, 16, 1024);
  const uint64_t ones_desc = blk.ones_desc();

  for (int tile = 0; tile < num_tiles; ++tile) {
    const int stage = tile & 1;
    const uint32_t stage_off = stage * (kTileBytes >> 4);
    const int64_t k0 = tile_key(tile);
    // ---- landed: tile t's rows (and tile t + 1's ids) are in shared memory ----
    cp_async_wait<0>();
    fence_proxy_async_smem();  // cp.async wrote through the generic proxy; wgmma reads async
    __syncthreads();           // also: both warpgroups done with tile t - 1 (P, factors, stage)

    float scale_old[2] = {1.f, 1.f};
    if (wg == 1) {
      // Tile t + 1's rows into the stage tile t - 1 left, tile t + 2's ids
      // into the slot buffer tile t's ids left.
      if (tile + 1 < num_tiles) {
        blk.load_kv(tile_key(tile + 1), stage ^ 1, gtid);
        if (tile + 2 < num_tiles) blk.stage_slots(tile_key(tile + 2), stage, gtid);
      }
      cp_async_commit();
    } else {
      // The visible keys of this thread's 32 scores, on tiles that need a
      // mask, found before the scores. Visibility depends on the row's token,
      // not its head, so each warp finds it per token of its 16 rows (one or
      // two tokens when H >= 8): lane L tests keys L and L + 32, both mask
      // bytes in flight at once, and two ballots make the token's 64-key word.
      const bool any_bad = *blk.bad_warps(stage) != 0;
      const bool needs_mask = any_bad || k0 + kKeys > blk.key_end || k0 + kKeys > req.prefix;
      uint32_t visible = ~0u;
      if (needs_mask) {
        const auto key_word = [&](int token) {
          const TailMaskRow mask_row(a, req, tail_mask, token);
          uint32_t word[2];
#pragma unroll
          for (int u = 0; u < 2; ++u) {
            const int key_local = lane + 32 * u;
            const uint8_t byte = mask_row.byte(a, req, blk.key_end, k0 + key_local);
            const bool bad = any_bad && blk.bad_key(stage)[key_local];
            word[u] = __ballot_sync(0xffffffffu, key_visible(a, req, blk.key_end, k0 + key_local, token, bad, byte));
          }
          return static_cast<uint64_t>(word[1]) << 32 | word[0];
        };
        const int token[2] = {row_token(0), row_token(1)};
        uint64_t row_keys[2];
        row_keys[0] = row_keys[1] = key_word(-1);  // padding rows: every unflagged key of the split
        const int warp_r0 = blk.row0 + warp_row0, warp_r1 = min(warp_r0 + 16, blk.rows) - 1;
        if (warp_r0 <= warp_r1) {
#pragma unroll 2
          for (int t = warp_r0 / a.num_heads; t <= warp_r1 / a.num_heads; ++t) {  // warp-uniform
            const uint64_t word = key_word(t);
            if (token[0] == t) row_keys[0] = word;
            if (token[1] == t) row_keys[1] = word;
          }
        }
#pragma unroll
        for (int i = 0; i < 32; ++i) {
          const int key_local = (i / 4) * 8 + 2 * c + (i & 1);
          if (!((row_keys[(i >> 1) & 1] >> key_local) & 1)) visible &= ~(1u << i);
        }
      }

      // ---- S = Q K^T: 64 rows x 64 keys ----
      float s[32];
#pragma unroll
      for (int i = 0; i < 32; ++i) s[i] = 0.f;  // overwritten by the first wgmma; keeps them defined
      wgmma_fence();
#pragma unroll
      for (int db = 0; db < kDimBlocks; ++db) {
#pragma unroll
        for (int ks = 0; ks < 4; ++ks) {
          const uint32_t step = (db * kBlockBytes + ks * 32) >> 4;
          wgmma_m64n64k16<T, 0>(s, q_desc + step, k_desc + stage_off + step, db | ks);
        }
      }
      wgmma_commit();
      wgmma_wait<0>();

      // The scale is folded into the exponent's FMA when it is positive (the
      // usual case: the row maximum of the raw scores, scaled, is then exactly
      // that of the scaled scores); any other scale is applied first.
      float scale = a.scale_log2;
      if (!(scale > 0.f)) {
#pragma unroll
        for (int i = 0; i < 32; ++i) s[i] *= scale;
        scale = 1.f;
      }
      if (needs_mask) {  // one block-uniform branch: unmasked tiles skip the mask code entirely
#pragma unroll
        for (int i = 0; i < 32; ++i) {
          if (!((visible >> i) & 1)) s[i] = kNegInf;
        }
      }

      // ---- online softmax; P and the rows' factors to shared memory ----
      uint32_t p_pack[2][8];  // (row half, 8-key block j): keys 8j + 2c, +1
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int row = warp_row0 + g + 8 * half;
        float mx = kNegInf;
#pragma unroll
        for (int j = 0; j < 8; ++j) mx = fmaxf(mx, fmaxf(s[4 * j + 2 * half], s[4 * j + 2 * half + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        mx *= scale;
        const bool rescale = mx > m_run[half] + kRescaleLog2;
        const float m_new = rescale ? mx : m_run[half];
        const float m_ref = m_new == kNegInf ? 0.f : m_new;  // all masked so far: keep exp2 finite
        scale_old[half] = rescale ? blk.exp2_ftz(m_run[half] - m_ref) : 1.f;
        float sum = 0.f;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          const float p0 = blk.exp2_ftz(fmaf(s[4 * j + 2 * half], scale, -m_ref));
          const float p1 = blk.exp2_ftz(fmaf(s[4 * j + 2 * half + 1], scale, -m_ref));
          sum += p0 + p1;
          p_pack[half][j] = pack2<T>(p0, p1);
        }
        l_run[half] = l_run[half] * scale_old[half] + sum;
        m_run[half] = m_new;
        if (c == 0) blk.red()[row] = scale_old[half];
      }
      // P to shared memory, four 8 x 8 blocks per stmatrix: call q stores key
      // blocks 2q and 2q + 1 of both row halves; lane L names row L % 8 of
      // block m = L / 8 (half m % 2, key block 2q + m / 2), whose 16 bytes sit
      // at chunk (key block ^ row) of the row (the 128-byte swizzle).
      const int m = lane / 8, r = lane % 8;
      const uint32_t row_addr = base + kOffP + (warp_row0 + 8 * (m % 2) + r) * 128;
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const int j = 2 * q + m / 2;
        const uint32_t regs[4] = {p_pack[0][2 * q], p_pack[1][2 * q], p_pack[0][2 * q + 1], p_pack[1][2 * q + 1]};
        stmatrix_x4(row_addr + (((j ^ r) & 7) << 4), regs);
      }
      fence_proxy_async_smem();
    }
    // ---- p_full: P and the factors written ----
    __syncthreads();

    // ---- O[:, 256 wg ..) = alpha O + P V ----
    if (wg == 1) {
#pragma unroll
      for (int half = 0; half < 2; ++half) scale_old[half] = blk.red()[warp_row0 + g + 8 * half];
    }
    if (__any_sync(0xffffffffu, scale_old[0] != 1.f || scale_old[1] != 1.f)) {  // warp-uniform branch
#pragma unroll
      for (int i = 0; i < 128; ++i) o[i] *= scale_old[(i >> 1) & 1];
#pragma unroll
      for (int i = 0; i < 4; ++i) w[i] *= scale_old[(i >> 1) & 1];
    }
    // The row weights (P times ones) by warpgroup 0 alone. Each warpgroup
    // runs its own copy, fence to wait, so no wgmma sits under a branch
    // (ptxas serializes those, C7515).
    const auto p_times_v = [&](auto row_weights) {
      wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < kKeys / 16; ++ks) {
        const uint64_t pd = p_desc + ((ks * 32) >> 4);
        wgmma_m64n256k16<T, 1>(o, pd, v_desc + stage_off + ((ks * 16 * 128) >> 4), 1);
        if constexpr (decltype(row_weights)::value) wgmma_m64n8k16<T, 0>(w, pd, ones_desc, 1);
      }
      wgmma_commit();
      wgmma_wait<0>();
    };
    if (wg == 0) {
      p_times_v(std::true_type{});
    } else {
      p_times_v(std::false_type{});
    }
  }

  // A split with no tile never waited for its Q load: nothing is left in
  // flight into shared memory when the block exits.
  if (num_tiles == 0) cp_async_wait<0>();
  // The split merge, if any, may now be scheduled (it waits for this grid).
  allow_dependent_launch();

  // ---- epilogue: warpgroup 0's row sums and weights to both; normalize, store ----
  __syncthreads();  // the last factors read before they are overwritten
  if (wg == 0) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      float l = l_run[half];  // this thread's 16 keys of the row, then the quad's 64
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      if (c == 0) {
        blk.red()[warp_row0 + g + 8 * half] = l;
        blk.red()[kRows + warp_row0 + g + 8 * half] = w[2 * half];
      }
    }
  }
  __syncthreads();
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int token = row_token(half);
    if (token < 0) continue;
    const int row = warp_row0 + g + 8 * half;
    const int h = blk.row0 + row - token * a.num_heads;
    const float weight = blk.red()[kRows + row], l = blk.red()[row];
    // Divided (RowDivisor) by the row weight: all-ones values give exactly 1.
    // In place, before the store picks its dtype: one copy of the division
    // code, not one per store branch (this epilogue runs once per block, from
    // a cold instruction cache).
    const RowDivisor div(weight > 0.f ? weight / a.out_scale : 1.f);
#pragma unroll
    for (int j = 0; j < 32; ++j) {
      o[4 * j + 2 * half] = div(o[4 * j + 2 * half]);
      o[4 * j + 2 * half + 1] = div(o[4 * j + 2 * half + 1]);
    }
    const int64_t t = req.q_start + token;
    store_out_row<32>(a, t, h, split, wg * 256 + 2 * c,
                      [&](int j) { return make_float2(o[4 * j + 2 * half], o[4 * j + 2 * half + 1]); });
    if (wg == 0 && c == 0) {
      // l == 0: no visible key. A NaN l (NaN in q or a key) propagates.
      store_lse(a, t, h, split, l != 0.f ? (m_run[half] + log2f(l)) * 0.69314718055994531f : kNegInf);
    }
  }
#endif
}

}  // namespace

bool sm90a_built() {
#if KDTREE_SM90A
  return true;
#else
  return false;
#endif
}

template <class T>
void launch_sm90a(const PagedArgs& a, cudaStream_t stream) {
  const int rows = a.max_q_len * a.num_heads;
  const dim3 grid((rows + kRows - 1) / kRows, a.num_splits, a.batch_size);
  verify_paged_sm90a_kernel<T><<<grid, kThreads, kSmemBytes, stream>>>(a);
  check_launch("kdtree_verify_paged", "verify_paged_sm90a_kernel");
}

template <class T>
void prepare_sm90a(size_t smem_optin, const char* function) {
  allow_dynamic_smem(verify_paged_sm90a_kernel<T>, kSmemBytes, smem_optin, function, "the sm_90a verify tiles",
                     "verify_paged_sm90a_kernel");
}

template void launch_sm90a<__nv_bfloat16>(const PagedArgs&, cudaStream_t);
template void launch_sm90a<__half>(const PagedArgs&, cudaStream_t);
template void prepare_sm90a<__nv_bfloat16>(size_t, const char*);
template void prepare_sm90a<__half>(size_t, const char*);

}  // namespace kdtree::verify
