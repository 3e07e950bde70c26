// Split-K tree-verify attention on Hopper (sm_90a): warpgroup MMA (wgmma),
// one warpgroup for the scores and one for the gather. The launcher runs it
// for splits shorter than kSm90aPingPongTiles tiles; longer ones go to
// verify_paged_sm90a_pingpong.cu (two score warpgroups), whose tile loop is
// faster and whose start is longer.
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
//     (4 wgmma m64n256k16, P from registers, V = the tile's first 512 dims
//     read transposed) and P times a ones column (m64n8k16), so O is
//     normalized by the tensor-core sum of the same rounded P (all-ones
//     values give exactly 1).
//   warpgroup 1 (gather): the KV rows (slot ids into shared memory by
//     cp.async a tile ahead, rows of tile t + 1 by cp.async into the stage
//     tile t - 1 left; fp8 e4m3 rows as raw bytes, 4 threads a key, each
//     converting its own cells to T in place at the top of the tile they
//     belong to, once its copies have landed), then O[:, 256..512) = alpha O + P V from the same P,
//     loaded to registers by ldmatrix (its rows' weights come from warpgroup
//     0 in the epilogue). ldmatrix reads through the generic proxy, as
//     stmatrix wrote P, so warpgroup 0 hands P over with no async-proxy fence
//     (a MEMBAR) on its chain (docs/perf_notes.md, session 40: S8 -1.1%).
// Per tile t, both warpgroups run one loop with one block barrier and one
// hand-off:
//   landed:  the gather warpgroup's copies of tile t are done (then a block
//            barrier: both warpgroups are also done with tile t - 1's stage,
//            P and factors); warpgroup 0 computes S and P while warpgroup 1
//            issues tile t + 1's gather into the other stage;
//   p_full:  an mbarrier warpgroup 0 arrives on once P and the factors are
//            written. It runs its own P V at once, from registers, not
//            behind a block barrier that also waited for warpgroup 1's
//            copies (docs/perf_notes.md, session 39: S8 -0.9..-1.2%).
//            Warpgroup 1 waits for it after its copies, then runs its P V.
// Warpgroup 0's scores thus overlap the gather's issue and latency, and each
// warpgroup's P V overlaps the other's. The tile is warpgroup 0's serial
// chain (session 40's stamps, ~3,850 clocks on S8): the QK (~2,050, bound by
// shared memory, which the gather's copies write at the same time), the
// softmax and P's hand-off (~800), then both P Vs.
// Shared memory (224 KB + 2 KB): Q and each KV stage as nine 64-dim column
// blocks of [rows][128 B] in the 128-byte swizzle wgmma reads; P as one such
// block. Epilogue as the portable kernel: O / w and lse to the output, or
// the split's partial state for verify_paged_merge, which this kernel lets
// launch (programmatic dependent launch) as its epilogue begins.
#include "common/grid_dependency.cuh"
#include "common/mbarrier.cuh"
#include "common/mma.cuh"
#include "common/wgmma.cuh"
#include "verify/verify_paged_sm90a.hpp"
#include "verify/verify_paged_sm90a_stamps.cuh"
#include "verify/verify_paged_sm90a_tile.cuh"

#include <cmath>
#include <type_traits>

namespace kdtree::verify {
namespace {

using namespace sm90a;
constexpr int kThreads = 2 * kGroup;  // two warpgroups

constexpr size_t kOffQ = 0;
constexpr size_t kOffKv = kOffQ + kTileBytes;          // [2] stages
constexpr size_t kOffP = kOffKv + 2 * kTileBytes;      // [64 rows][64 keys]
constexpr size_t kOffOnes = kOffP + kBlockBytes;       // 16 keys x 8 ones
constexpr size_t kOffRed = kOffOnes + 256;             // [2][64] f32: rescale factors; row sums and weights
constexpr size_t kOffBadKey = kOffRed + 2 * kRows * 4;  // [2][64] u8: flagged slots per stage
constexpr size_t kOffBadWarp = kOffBadKey + 2 * kKeys;  // [2][4] u8: any flagged slot per gather warp
constexpr size_t kOffSlots = kOffBadWarp + 16;          // [2][64] i64: slot ids a tile ahead
constexpr size_t kOffPFull = kOffSlots + 2 * kKeys * 8;  // mbarrier: P and its factors written
constexpr size_t kLayoutBytes = kOffPFull + 8;
constexpr size_t kSmemBytes = kLayoutBytes + kAlignSlack;
static_assert(kSmemBytes <= kSmemOptin, "sm_90 opt-in shared memory");

template <class T>
struct Sm90aBlock {
  const PagedArgs& a;
  unsigned char* smem;
  Request req;
  int rows, row0;
  int64_t key_begin, key_end;

  // Ones: a 16 x 8 B operand needs no layout, every element being 1.
  __device__ uint64_t ones_desc() const { return wgmma_desc(base() + kOffOnes, 128, 256, WgmmaLayout::kInterleave); }

  __device__ uint32_t base() const { return smem_addr(smem); }
  __device__ uint8_t* bad_key(int stage) const { return smem + kOffBadKey + stage * kKeys; }
  __device__ uint32_t* bad_warps(int stage) const { return reinterpret_cast<uint32_t*>(smem + kOffBadWarp) + stage; }
  __device__ float* red() const { return reinterpret_cast<float*>(smem + kOffRed); }
  __device__ uint32_t p_full() const { return base() + static_cast<uint32_t>(kOffPFull); }

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
  // each warp's any-flag. fp8 KV (kKvFp8): 4 threads per key, each copying
  // 16 raw bytes of each 64-dim block into the first of the two cells those
  // dims take in T (convert_fp8_cells converts them in place).
  template <bool kKvFp8>
  __device__ void load_kv(int64_t k0, int stage, int gtid) const {
    using KvElem = std::conditional_t<kKvFp8, uint8_t, T>;
    constexpr int kPerKey = kKvFp8 ? 4 : 8;
    constexpr int kKeysPerPass = kGroup / kPerKey;
    bool any_bad = false;
    const int lane8 = gtid % kPerKey;
    const uint32_t tile = base() + kOffKv + stage * kTileBytes;
#pragma unroll
    for (int pass = 0; pass < kKeys / kKeysPerPass; ++pass) {
      const int key = pass * kKeysPerPass + gtid / kPerKey;
      bool bad;
      const KvElem* src = key_row<KvElem>(a, req, key_end, k0 + key, slots(stage)[key], lane8 == 0, &bad);
      if (lane8 == 0) bad_key(stage)[key] = bad;
      any_bad |= bad;
      // A key that must not be read is zero-filled: 0 source bytes, the
      // address (kv_cache) never dereferenced.
      const int src_bytes = src != nullptr ? 16 : 0;
      if (src == nullptr) src = static_cast<const KvElem*>(a.kv_cache);
      // Chunk lane8 + 8u of the row: the swizzle term is the same for every
      // u, so the nine copies differ only by constant offsets.
      const char* from = reinterpret_cast<const char*>(src) + lane8 * 16;
      const uint32_t to = tile + chunk_offset(key, kKvFp8 ? 2 * lane8 : lane8);
#pragma unroll
      for (int u = 0; u < kDimBlocks; ++u) {
        cp_async_16(to + u * kBlockBytes, from + u * 64 * int(sizeof(KvElem)), src_bytes);
      }
    }
    any_bad = __any_sync(0xffffffffu, any_bad);
    if (gtid % 32 == 0) reinterpret_cast<uint8_t*>(bad_warps(stage))[gtid / 32] = any_bad;
  }

};

// kRoute: where the rows go (verify_paged_args.cuh), fixed at compile time
// for 16-bit rows so that the epilogue, which runs once per block from a cold
// instruction cache, holds only that route's code.
template <class T, bool kKvFp8, int kRoute>
__global__ void __launch_bounds__(kThreads, 1) verify_paged_sm90a_kernel(const PagedArgs a) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  unsigned char* smem = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
  constexpr float kNegInf = -INFINITY;
  // (Stamps: a probe build only. This kernel records some of the ping-pong's
  // point numbers at its own places, kWg0QReady at tiles 0 and 1's slot ids
  // for one: bench/probes/stamps_summary.py --kernel single names them.)
  if (threadIdx.x == 0) {
    KDTREE_STAMP(stamps::kEntryGlobal, stamps::global_time());
    KDTREE_STAMP(stamps::kEntryClock, stamps::clock());
  }

  const int m_tile = blockIdx.x, split = blockIdx.y, b = blockIdx.z;
  const Request req = load_request(a, b, threadIdx.x == 0 && m_tile == 0 && split == 0);
  if (!req.valid) return;
  if (threadIdx.x == 0) KDTREE_STAMP(stamps::kRequestLoaded, stamps::clock_after(req.num_keys));
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
  if (threadIdx.x == 0) {
    mbarrier_init(blk.p_full(), kGroup);
    mbarrier_init_fence();
  }
  __syncthreads();  // zeroed slot entries before any cp.async writes their low halves; p_full initialised
  if (threadIdx.x == 0) KDTREE_STAMP(stamps::kBarrier, stamps::clock());

  // The slot ids of tiles 0 and 1 (their own cp.async group), then Q; only
  // the ids are waited for before tile 0's rows are issued, so Q's load
  // overlaps the rows' (the landed wait of tile 0 covers both).
  if (wg == 1) {
    if (num_tiles > 0) blk.stage_slots(tile_key(0), 0, gtid);
    if (num_tiles > 1) blk.stage_slots(tile_key(1), 1, gtid);
  }
  cp_async_commit();
  load_q_tile<T, kThreads>(a, req, blk.rows, blk.row0, base + kOffQ);
  cp_async_commit();
  cp_async_wait<1>();
  __syncthreads();
  if (threadIdx.x == 0) KDTREE_STAMP(stamps::kWg0QReady, stamps::clock());
  if (wg == 1 && num_tiles > 0) blk.template load_kv<kKvFp8>(tile_key(0), 0, gtid);
  cp_async_commit();
  if (gtid == 0) KDTREE_STAMP(stamps::kFirstCopy, stamps::clock());
  if (wg == 0) {
    // Warpgroup 0's own shared-memory writes that wgmma reads (its Q rows by
    // cp.async, the ones column), fenced here: in the loop only the gather
    // warpgroup fences. Warpgroup 0 would wait for its Q at tile 0 anyway.
    cp_async_wait<0>();
    fence_proxy_async_smem();
  }

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
  const uint64_t ones_desc = blk.ones_desc();

  for (int tile = 0; tile < num_tiles; ++tile) {
    const int stage = tile & 1;
    const uint32_t stage_off = stage * (kTileBytes >> 4);
    const int64_t k0 = tile_key(tile);
    // ---- landed: tile t's rows (and tile t + 1's ids) are in shared memory ----
    cp_async_wait<0>();
    // cp.async wrote through the generic proxy; wgmma reads async. Only the
    // gather warpgroup copies in the loop (warpgroup 0 fenced its Q before
    // the loop, and its P is read by ldmatrix, the generic proxy), so only
    // it needs the fence: a MEMBAR off the score chain.
    if (wg == 1) {
      if constexpr (kKvFp8) {
        // fp8 KV: this thread's own cells of the stage, converted in place
        // once its own copies have landed (the wait above), before the
        // fence that hands them to wgmma.
        uint32_t cells[2];
#pragma unroll
        for (int p = 0; p < 2; ++p) cells[p] = base + kOffKv + chunk_offset(p * 32 + gtid / 4, 2 * (gtid % 4));
        convert_fp8_cells<T, 2>(cells, stage, 0);
        convert_fp8_cells<T, 2>(cells, stage, 1);
      }
      fence_proxy_async_smem();
    }
    __syncthreads();  // also: both warpgroups done with tile t - 1 (P, factors, stage)
    if (tile == 0 && threadIdx.x == 0) KDTREE_STAMP(stamps::kWg0FirstHalf, stamps::clock());

    float scale_old[2] = {1.f, 1.f};
    // O (and warpgroup 0's row weights) scaled by this tile's factors, rows
    // whose maximum moved, before its P V.
    const auto rescale_o = [&](const float (&factor)[2]) {
      if (__any_sync(0xffffffffu, factor[0] != 1.f || factor[1] != 1.f)) {  // warp-uniform branch
#pragma unroll
        for (int i = 0; i < 128; ++i) o[i] *= factor[(i >> 1) & 1];
#pragma unroll
        for (int i = 0; i < 4; ++i) w[i] *= factor[(i >> 1) & 1];
      }
    };
    if (wg == 0) {
      // The visible keys of this thread's 32 scores, on tiles that need a
      // mask, found before the scores.
      const bool any_bad = *blk.bad_warps(stage) != 0;
      const bool needs_mask = any_bad || k0 + kKeys > blk.key_end || k0 + kKeys > req.prefix;
      uint32_t visible = ~0u;
      if (needs_mask) {
        const int token[2] = {row_token(0), row_token(1)};
        uint64_t row_keys[2];
        const int warp_r0 = blk.row0 + warp_row0, warp_r1 = min(warp_r0 + 16, blk.rows) - 1;
        row_key_words(a, req, tail_mask, blk.key_end, k0, blk.bad_key(stage), any_bad, warp_r0, warp_r1, token,
                      row_keys);
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

      // ---- online softmax; P and the rows' factors to warpgroup 1 ----
      uint32_t p_pack[2][8];  // (row half, 8-key block j): keys 8j + 2c, +1
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int row = warp_row0 + g + 8 * half;
        const float mx = quad_row_max(s, half) * scale;
        const bool rescale = mx > m_run[half] + kRescaleLog2;
        const float m_new = rescale ? mx : m_run[half];
        const float m_ref = m_new == kNegInf ? 0.f : m_new;  // all masked so far: keep exp2 finite
        scale_old[half] = rescale ? exp2_ftz(m_run[half] - m_ref) : 1.f;
        const float sum = exp_pack<T>(s, half, scale, m_ref, p_pack[half]);
        l_run[half] = l_run[half] * scale_old[half] + sum;
        m_run[half] = m_new;
        if (c == 0) blk.red()[row] = scale_old[half];
      }
      store_p(base + kOffP, warp_row0, p_pack);
      mbarrier_arrive(blk.p_full());

      // ---- O[:, 0..256) = alpha O + P V, P from registers, at once: not
      // behind warpgroup 1, which may still be issuing the next tile's rows;
      // the rows' weights (P times ones) beside it ----
      rescale_o(scale_old);
      pv_from_registers<T, true>(o, w, p_pack, v_desc + stage_off, ones_desc);
      wgmma_wait<0>();
    } else {
      // Tile t + 1's rows into the stage tile t - 1 left, tile t + 2's ids
      // into the slot buffer tile t's ids left.
      if (tile + 1 < num_tiles) {
        blk.template load_kv<kKvFp8>(tile_key(tile + 1), stage ^ 1, gtid);
        if (tile + 2 < num_tiles) blk.stage_slots(tile_key(tile + 2), stage, gtid);
      }
      cp_async_commit();
      // ---- O[:, 256..512) = alpha O + P V once P is written ----
      mbarrier_wait(blk.p_full(), tile & 1);
#pragma unroll
      for (int half = 0; half < 2; ++half) scale_old[half] = blk.red()[warp_row0 + g + 8 * half];
      uint32_t p_pack[2][8];
      load_p(base + kOffP, warp_row0, p_pack);
      rescale_o(scale_old);
      // (w not written: the rows' weights are warpgroup 0's)
      pv_from_registers<T, false>(o, w, p_pack, v_desc + stage_off, ones_desc);
      wgmma_wait<0>();
    }
  }

  // A split with no tile never waited for its Q load: nothing is left in
  // flight into shared memory when the block exits.
  if (num_tiles == 0) cp_async_wait<0>();
  if (threadIdx.x == 0) KDTREE_STAMP(stamps::kWg0LoopEnd, stamps::clock());
  // The split merge, if any, may now be scheduled (it waits for this grid).
  allow_dependent_launch();
  if (threadIdx.x == 0) KDTREE_STAMP(stamps::kWg0Released, stamps::clock());

  // ---- epilogue: warpgroup 0's row sums and weights to both; normalize, store ----
  __syncthreads();  // the last factors read before they are overwritten
  if (wg == 0) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const float l = quad_sum(l_run[half]);  // this thread's 16 keys of the row -> the quad's 64
      if (c == 0) {
        blk.red()[warp_row0 + g + 8 * half] = l;
        blk.red()[kRows + warp_row0 + g + 8 * half] = w[2 * half];
      }
    }
  }
  __syncthreads();
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    // Padding rows (token -1) go through the same code, unstored: the warp
    // stays converged for store_out_row's whole-warp exchanges.
    const int token = row_token(half);
    const bool stored = token >= 0;
    const int row = warp_row0 + g + 8 * half;
    const int h = blk.row0 + row - token * a.num_heads;
    const float weight = blk.red()[kRows + row], l = blk.red()[row];
    // Divided by the row weight in place (all-ones values give exactly 1):
    // 16-bit rows (a fixed kRoute) by the product, f32 rows by the refined
    // division, one copy of it before the store (this epilogue runs once per
    // block, from a cold instruction cache). (The rest of the epilogue is
    // written out here: verify_paged_sm90a_pingpong.cu's stages its rows and
    // sends them by bulk copies, and as a function shared with that one it
    // moved this kernel's register allocation.)
    normalize_row_as<kRoute != kAnyRoute>(row_divisor(a, weight), row_half_normalizer(o, half));
    const int64_t t = req.q_start + token;
    store_out_row<32, kRoute, true>(
        a, t, h, split, wg * 256 + 2 * c,
        [&](int j) { return make_float2(o[4 * j + 2 * half], o[4 * j + 2 * half + 1]); }, stored);
    if (stored && wg == 0 && c == 0) {
      // l == 0: no visible key. A NaN l (NaN in q or a key) propagates.
      store_lse(a, t, h, split, l != 0.f ? (m_run[half] + log2f(l)) * 0.69314718055994531f : kNegInf);
    }
  }
  if (threadIdx.x % kGroup == 0) {
    KDTREE_STAMP(wg == 0 ? stamps::kWg0EpilogueEnd : stamps::kWg1EpilogueEnd, stamps::clock());
    if (wg == 0) KDTREE_STAMP(stamps::kWg0EndGlobal, stamps::global_time());
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

bool sm90a_pingpong(int64_t max_kv_len, int num_splits) {
#if KDTREE_SM90A_SCHEDULE == 1
  (void)max_kv_len, (void)num_splits;
  return false;
#elif KDTREE_SM90A_SCHEDULE == 2
  (void)max_kv_len, (void)num_splits;
  return true;
#else
  return split_chunk(max_kv_len, num_splits, kKeys) / kKeys >= kSm90aPingPongTiles;
#endif
}

template <class T, bool kKvFp8>
RouteKernels sm90a_kernels() {
  return {verify_paged_sm90a_kernel<T, kKvFp8, kAnyRoute>, verify_paged_sm90a_kernel<T, kKvFp8, kToPartials>,
          verify_paged_sm90a_kernel<T, kKvFp8, kToOut>, "verify_paged_sm90a_kernel", "the sm_90a verify tiles",
          kThreads, kSmemBytes};
}

template <class T, bool kKvFp8>
void launch_sm90a(const PagedArgs& a, cudaStream_t stream) {
  sm90a_kernels<T, kKvFp8>().launch(a, grid_of(a), stream);
}

template <class T, bool kKvFp8>
void prepare_sm90a(size_t smem_optin, const char* function) {
  sm90a_kernels<T, kKvFp8>().allow_smem(smem_optin, function);
}

template void launch_sm90a<__nv_bfloat16, false>(const PagedArgs&, cudaStream_t);
template void launch_sm90a<__half, false>(const PagedArgs&, cudaStream_t);
template void prepare_sm90a<__nv_bfloat16, false>(size_t, const char*);
template void prepare_sm90a<__half, false>(size_t, const char*);
template void launch_sm90a<__nv_bfloat16, true>(const PagedArgs&, cudaStream_t);
template void launch_sm90a<__half, true>(const PagedArgs&, cudaStream_t);
template void prepare_sm90a<__nv_bfloat16, true>(size_t, const char*);
template void prepare_sm90a<__half, true>(size_t, const char*);

}  // namespace kdtree::verify
