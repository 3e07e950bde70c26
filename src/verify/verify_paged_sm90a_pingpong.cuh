// Split-K tree-verify attention on Hopper (sm_90a) for long splits:
// warpgroup MMA (wgmma), two score warpgroups taking turns over two KV
// stages, and a gather warpgroup (FlashMLA's layout). The launcher picks it
// over verify_paged_sm90a.cu's kernel (one score warpgroup) when a split has
// kSm90aPingPongTiles tiles or more: it has the faster tile loop and the
// longer start (both tiles of the first pair land before either warpgroup's
// softmax; docs/perf_notes.md, session 11).
//
// Same split plan, workspace and merge as the portable kernel
// (verify_paged_kernel.cuh), or a lead plan (PagedArgs::lead_keys): block
// (m, b, s) takes query rows [64m, 64m + 64) of request b (row = token * H +
// head) and the keys of split s, 64 keys per tile. The split's tiles go in
// pairs: tile 2i to warpgroup 0 through KV stage 0, tile 2i + 1 to warpgroup
// 1 through stage 1. 384 threads, three roles:
//   warpgroups 0 and 1 (scores; 232 and 208 registers): each owns output dims
//     [256 w, 256 w + 256) of all 64 rows. Per pair, warpgroup w: S = Q K^T
//     for its own tile (36 wgmma m64n64k16, Q and K from shared memory, in
//     the order the gather lands the stage's halves; warpgroup 0 holds Q's
//     rope block in registers for its last four), the mask on tiles with
//     tail keys, a split end or a flagged slot (found per query token by
//     warp ballots), the online softmax with the portable kernel's lazy
//     rescale, then O += P V for its own tile with P from registers (4
//     wgmma m64n256k16) and for the other warpgroup's tile with that P from
//     shared memory (warpgroup 0 loads it to registers first, by ldmatrix).
//     Both must scale P by the same row maximum: warpgroup 0
//     publishes its running maximum, warpgroup 1 takes the larger of it and
//     its own tile's, and warpgroup 0 adopts that before it stores its P. So
//     one warpgroup's softmax runs while the other's QK holds the tensor
//     cores. Warpgroup 0 hands its P over while its own P V may still read
//     it, waiting for that P V first only when a row's maximum moved (P and
//     O then change): warpgroup 1 flags that per warp beside its maxima, so
//     the branch around the wait is warpgroup-uniform, as wgmma needs.
//     P times a ones column (m64n8k16) beside warpgroup 1's P V
//     gives the rows' weights: the tensor-core sum of the same rounded P,
//     so all-ones values give exactly 1. Warpgroup 0 takes those weights in
//     the epilogue, plus what its own O took differently (w_fix: its P
//     before a rescale to warpgroup 1's larger maximum, which warpgroup 1
//     gets rounded again): its O and those weights then add the same values
//     in other orders, a few fp32 ulps apart, which bf16 and f16 rows round
//     away (test_verify_exact: all-ones values, sharp scores). Rows that
//     go out in f32 (kF32Rows) need each warpgroup's own sum: there
//     warpgroup 0 runs the ones column beside its P V too (without it the
//     16-bit kernels are 0.5-1.6% faster; docs/perf_notes.md, session 20).
//     Warpgroup 0 issues the next pair's QK right behind its P V of the
//     other tile and frees stage 1's low half when that P V is done (wait for
//     the older wgmma group only), as FlashMLA's sm_90 kernels order them.
//   warpgroup 2 (gather; 64 registers): the KV rows by slot id with cp.async
//     (8 threads per key, 16 bytes each, L2 fetching 128-byte lines), each
//     stage in two halves (dims 0..255, the values warpgroup 0 reads; dims
//     256..575) with their own full / free mbarriers, so a half is refilled
//     as soon as its last P V is done: tile 2i's low half, 2i + 1's high
//     half, 2i's high half, 2i + 1's low half. A pair's slot ids are loaded
//     a pair ahead, all eight of a thread's at once (key_slot_ids); a pair
//     whose keys all read a slot id takes the short path (slot_row).
//     fp8 e4m3 KV (the kKvFp8 kernels, verify_paged_sm90a_pingpong_fp8.cu):
//     4 threads a key, each row's raw bytes copied into the first cell of
//     each pair of 16-byte cells they take in T, then converted in place once
//     the half has landed (kv_landed): keys 0..31 by the gather, keys 32..63
//     by the score warpgroup whose stage it is, while it waits for the half;
//     the half full after every conversion (kv_scale applies to the score
//     warpgroups' logits and outputs).
// Shared memory (224 KB + 2 KB): Q and each KV stage as nine 64-dim column
// blocks of [64 rows][128 B] in the 128-byte swizzle wgmma reads; warpgroup
// 0's P in stage 0's last column block (its rope dims, read by that tile's
// QK only), warpgroup 1's P in a block of its own. Epilogue as the portable
// kernel: O / w and lse to the output, or the split's partial state for
// verify_paged_merge, which this kernel lets launch (programmatic dependent
// launch) as its epilogue begins; each warpgroup stages its rows in its freed
// stage and sends them out by the bulk-copy engine, a row per copy.
#pragma once

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
[[maybe_unused]] constexpr int kScoreThreads = 2 * kGroup;   // warpgroups 0 and 1
constexpr int kThreads = 3 * kGroup;        // + the gather warpgroup
[[maybe_unused]] constexpr int kLowBlocks = 4;               // a stage's low half: dims 0..255
// setmaxnreg: 232 + 208 + 64 = 3 x 168, the launch's 384 threads x 168, no
// spills. Warpgroup 0's extra 16 hold Q's rope block (the A operand of its
// QK's last four k-steps: 8 KB less read from shared memory per tile of the
// critical warpgroup's path, S1-S7 -0.9..-1.8%; the same budgets without it
// -0.0..-0.3%; docs/perf_notes.md, session 36). 224 / 216 / 64,
// 232 / 216 / 56 and 240 / 200 / 64 spill. The fp8 KV kernels, whose gather
// and score warpgroups also convert, fit the same budgets, but for warpgroup
// 0 of the f32-rows kernel, which leaves Q's rope block in shared memory
// (kRopeInRegs).
[[maybe_unused]] constexpr int kWg0Regs = 232;
[[maybe_unused]] constexpr int kWg1Regs = 208;
[[maybe_unused]] constexpr int kGatherRegs = 64;
static_assert(kWg0Regs + kWg1Regs + kGatherRegs == 3 * 168, "the launch's registers, redistributed");

// The score warpgroups' hand-offs, as mbarriers (after the stages' full[2][2]
// and free[2][2]); the first four complete a phase per pair, arrived by the
// 128 threads of one warpgroup and waited for by the other; the last two by
// all 256, once. Mbarriers, not named barriers: with bar.arrive on one side
// and bar.sync on the other, racecheck reported the row maxima as races and
// synccheck the barriers as misused (session 11), although the hand-off
// orders them; the gather's mbarrier hand-offs drew neither.
// (Device-only names are [[maybe_unused]] for the host pass.)
enum Hand : int {
  kMaxA = 0,  // warpgroup 0's row maxima written (warpgroup 0 arrives)
  kMaxB,      // warpgroup 1's row maxima written (warpgroup 1 arrives)
  kP0,        // warpgroup 0's P written
  kP1,        // warpgroup 1's P written
  kQReady,    // Q in shared memory (both)
  kSums,      // row sums written, epilogue (both)
  kHands
};

constexpr size_t kOffQ = 0;
constexpr size_t kOffKv = kOffQ + kTileBytes;                // [2] stages
constexpr size_t kOffP1 = kOffKv + 2 * kTileBytes;           // warpgroup 1's P
[[maybe_unused]] constexpr size_t kOffP0 = kOffKv + (kDimBlocks - 1) * kBlockBytes;  // stage 0's rope block
constexpr size_t kOffOnes = kOffP1 + kBlockBytes;            // 16 keys x 8 ones
static_assert(kOffP0 % 1024 == 0 && kOffP1 % 1024 == 0, "P blocks: 128-byte swizzle atoms");
constexpr size_t kOffMax = kOffOnes + 256;                   // [2][64] f32: maxima of warpgroup 0, 1
constexpr size_t kOffSums = kOffMax + 2 * kRows * 4;         // [2][64] f32: row sums (epilogue)
constexpr size_t kOffWeights = kOffSums + 2 * kRows * 4;     // [64] f32: warpgroup 1's row weights (epilogue)
constexpr size_t kOffBadKey = kOffWeights + kRows * 4;       // [2][64] u8: flagged slots per stage
constexpr size_t kOffBarriers = kOffBadKey + 2 * kKeys;      // full[2][2], free[2][2]
constexpr size_t kOffMoved = kOffBarriers + (8 + kHands) * 8;  // [4] u8: warpgroup 1's warps moved a maximum
#if KDTREE_SM90A_STAMPS
constexpr size_t kOffPairStamps = kOffMoved + 4;  // [32] u32: the steady pair's clocks (a probe build)
constexpr size_t kOffLanded = (kOffPairStamps + 4 * stamps::kPairPoints + 7) / 8 * 8;
#else
constexpr size_t kOffLanded = (kOffMoved + 4 + 7) / 8 * 8;
#endif
// landed[2][2] (fp8 KV only): a stage half's raw bytes have landed.
constexpr size_t kLayoutBytes = kOffLanded + 4 * 8;
static_assert(kOffBarriers % 8 == 0, "mbarriers are 8-byte aligned");
constexpr size_t kSmemBytes = kLayoutBytes + kAlignSlack;
static_assert(kSmemBytes <= kSmemOptin, "sm_90 opt-in shared memory");

// Keys [begin, end) of split `split` of a request of num_keys keys:
// split_range's, or under a lead plan a lead split's lead_keys or the last
// split's rest.
__device__ __forceinline__ void block_keys(const PagedArgs& a, int64_t num_keys, int split, int64_t* begin,
                                           int64_t* end) {
  const bool lead_plan = a.lead_keys != 0;
  const int64_t chunk = lead_plan ? a.lead_keys : split_chunk(num_keys, a.num_splits, kKeys);
  chunk_range(num_keys, chunk, lead_plan, a.num_splits, split, begin, end);
}

template <class T>
struct Sm90aBlock {
  const PagedArgs& a;
  unsigned char* smem;
  Request req;
  int rows, row0;
  int64_t key_begin, key_end;

  // The block's request, query rows and split keys (grid (m, b, split):
  // pingpong_grid).
  __device__ static Sm90aBlock make(const PagedArgs& a, unsigned char* smem, bool report) {
    const Request req = load_request(a, blockIdx.y, report);
    Sm90aBlock blk{a, smem, req, req.q_len * a.num_heads, static_cast<int>(blockIdx.x) * kRows, 0, 0};
    if (req.valid) block_keys(a, req.num_keys, blockIdx.z, &blk.key_begin, &blk.key_end);
    return blk;
  }
  // Whether the block has query rows to compute.
  __device__ bool live() const { return req.valid && row0 < rows; }
  __device__ int num_tiles() const { return static_cast<int>((key_end - key_begin + kKeys - 1) / kKeys); }
  __device__ int64_t tile_key(int tile) const { return key_begin + static_cast<int64_t>(tile) * kKeys; }
  // The query token of the block's row r_local (-1: a padding row past the request).
  __device__ int row_token(int r_local) const {
    const int r = row0 + r_local;
    return r < rows ? r / a.num_heads : -1;
  }
  // A gather thread's keys of tile pair `pair`, kN of each tile: key
  // p * (64 / kN) + key_lane (p < kN) of tile 2 pair, then of tile 2 pair + 1;
  // key_lane (0 .. 64 / kN - 1) is the thread's index over its key's threads.
  template <int kN>
  __device__ void pair_keys(int pair, int key_lane, int64_t (&kk)[2 * kN]) const {
#pragma unroll
    for (int i = 0; i < 2 * kN; ++i) kk[i] = tile_key(2 * pair + i / kN) + (i % kN) * (kKeys / kN) + key_lane;
  }
  // Their raw slot ids, by one batch of loads (key_slot_ids).
  template <int kN>
  __device__ void pair_slot_ids(int pair, int key_lane, int64_t (&id)[2 * kN]) const {
    int64_t kk[2 * kN];
    pair_keys<kN>(pair, key_lane, kk);
    key_slot_ids(a, req, key_end, kk, id);
  }
  // The end of the keys that are in the split and read a slot id (none from
  // tail_kv): a pair wholly below it is plain, its keys' rows need only their
  // ids (slot_row), not key_row's other cases.
  __device__ int64_t plain_end() const {
    return a.tail_source == KDTREE_TAIL_FROM_EXTEND ? min(key_end, req.prefix) : key_end;
  }
  // pair_slot_ids for a plain pair: every key reads its id, no predicate.
  // (pair_keys' keys written as constant offsets from one pointer: taken
  // through pair_keys, ptxas emits 96 more instructions per kernel.)
  template <class Id, int kN>
  __device__ void plain_pair_slot_ids_as(int pair, int key_lane, int64_t (&id)[2 * kN]) const {
    const Id* at = static_cast<const Id*>(a.kv_indices) + req.kv_start + tile_key(2 * pair) + key_lane;
#pragma unroll
    for (int i = 0; i < 2 * kN; ++i) {
      id[i] = static_cast<int64_t>(__ldg(at + (i / kN) * kKeys + (i % kN) * (kKeys / kN)));
    }
  }
  template <int kN>
  __device__ void plain_pair_slot_ids(int pair, int key_lane, int64_t (&id)[2 * kN]) const {
    if (a.index_is_64) {
      plain_pair_slot_ids_as<unsigned long long, kN>(pair, key_lane, id);
    } else {
      plain_pair_slot_ids_as<unsigned int, kN>(pair, key_lane, id);
    }
  }

  __device__ uint32_t base() const { return smem_addr(smem); }
  __device__ uint32_t stage_addr(int stage) const { return base() + kOffKv + stage * kTileBytes; }
  // Ones: a 16 x 8 B operand needs no layout, every element being 1.
  __device__ uint64_t ones_desc() const { return wgmma_desc(base() + kOffOnes, 128, 256, WgmmaLayout::kInterleave); }
  __device__ float* row_max(int wg) const { return reinterpret_cast<float*>(smem + kOffMax) + wg * kRows; }
  __device__ float* row_sums(int wg) const { return reinterpret_cast<float*>(smem + kOffSums) + wg * kRows; }
  __device__ float* row_weights() const { return reinterpret_cast<float*>(smem + kOffWeights); }
  __device__ uint8_t* bad_key(int stage) const { return smem + kOffBadKey + stage * kKeys; }
  // Byte w: whether warp w of warpgroup 1 moved a row's maximum past
  // warpgroup 0's in this pair; read as one word, whether any row did.
  // Written each pair before kMaxB, read after it; the next pair's write
  // comes after kP0, which warpgroup 0 arrives on after its read.
  __device__ uint8_t* rows_moved() const { return smem + kOffMoved; }
  // (In asm: the plain load made ptxas spill 24 bytes in the kF32Rows kernels.)
  __device__ bool any_row_moved() const {
    uint32_t any;
    asm volatile(
        "{\n.reg .u32 w;\n.reg .pred p;\n"
        "ld.shared.u32 w, [%1];\nsetp.ne.u32 p, w, 0;\nselp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(any) : "r"(base() + static_cast<uint32_t>(kOffMoved)) : "memory");
    return any != 0;
  }
  // Half 0 (dims 0..255) or 1 (dims 256..575) of a stage: landed / free.
  __device__ uint32_t kv_full(int stage, int half) const { return base() + kOffBarriers + (stage * 2 + half) * 8; }
  __device__ uint32_t kv_free(int stage, int half) const {
    return base() + kOffBarriers + (4 + stage * 2 + half) * 8;
  }
  __device__ uint32_t hand(Hand h) const { return base() + kOffBarriers + (8 + h) * 8; }
  // fp8 KV: half `half` of a stage has its raw bytes (every gather thread's copies landed).
  __device__ uint32_t kv_landed(int stage, int half) const { return base() + kOffLanded + (stage * 2 + half) * 8; }
#if KDTREE_SM90A_STAMPS
  __device__ uint32_t pair_stamps() const { return base() + kOffPairStamps; }
#endif
};

// ---------------------------------------------------------------------------
// Column blocks [u0, u1) of one 16-byte chunk of a row: block u's bytes at
// `from` + kSrcBlock u (the offset in each copy instruction; a 64-dim block
// is 128 bytes of a 16-bit row, 64 of an fp8 one) to `to` + u blocks.
template <int kSrcBlock, int kU = 0>
__device__ __forceinline__ void copy_chunk_blocks(uint32_t to, const char* from, int src_bytes, int u0, int u1) {
  if constexpr (kU < kDimBlocks) {
    if (kU >= u0 && kU < u1) cp_async_16_l2_128<kU * kSrcBlock>(to + kU * kBlockBytes, from, src_bytes);
    copy_chunk_blocks<kSrcBlock, kU + 1>(to, from, src_bytes, u0, u1);
  }
}

// Warpgroup 2: the gather. 16-bit KV: each thread copies 16 bytes of each
// 64-dim block of four keys per tile (`gtid` 0..127: key pass * 16 + gtid / 8,
// chunk gtid % 8), and arrives twice on the half's full barrier: once its
// copies land, once right away (after writing its keys' flags, with the first
// half of a stage).
// fp8 KV (kKvFp8): each thread copies 16 raw bytes of each block of two keys
// per tile (key pass * 32 + gtid / 4; dims 16 (gtid % 4) .. + 15 of the
// block), each into the first of the two 16-byte cells those dims take in T,
// and arrives twice on the half's landed barrier; once every thread's copies
// have landed it converts its cells of keys 0..31 in place (convert_fp8_cells;
// the stage's score warpgroup converts keys 32..63) and arrives on the full
// barrier (the loop's order: gather_warpgroup).
template <class KvElem, int kN>
struct TileRows {
  const KvElem* src[kN];  // nullptr: zero-filled (past the split or a flagged slot)
  uint32_t bad;           // bit p: key p's slot is out of range (flagged)
};

template <class T, bool kKvFp8>
__device__ __forceinline__ void gather_warpgroup(const Sm90aBlock<T>& blk) {
  using KvElem = std::conditional_t<kKvFp8, uint8_t, T>;
  constexpr int kPerKey = kKvFp8 ? 4 : 8;  // threads a key (16 bytes of each 64-dim block)
  constexpr int kN = kKeys * kPerKey / kGroup;  // keys a thread copies of each tile (4 / 2)
  const PagedArgs& a = blk.a;
  if (!blk.live()) return;
  const int num_tiles = blk.num_tiles();
  const int gtid = threadIdx.x - kScoreThreads;
  if (gtid == 0) KDTREE_STAMP(stamps::kGatherView, stamps::clock_after(num_tiles));
  const int lane = gtid % kPerKey, key_lane = gtid / kPerKey;

  // Whether pair `pair` is plain (Sm90aBlock::plain_end); block-uniform.
  const int64_t plain_end = blk.plain_end();
  const auto plain = [&](int pair) { return blk.tile_key(2 * pair + 2) <= plain_end; };
  // A pair's rows from its slot ids (loaded a pair before they are used;
  // keys past the split, and every key of a missing tile, read nothing).
  // Plain pairs, all but a split's last or a request's tail, take the short
  // path: the gather's code per pair is what every warp of the SM fetches
  // beside the score warpgroups' loops.
  using Rows = TileRows<KvElem, kN>;
  const auto rows_of_pair = [&](int pair, const int64_t (&id)[2 * kN], Rows* even, Rows* odd) {
    bool bad[2 * kN];
    if (plain(pair)) {
#pragma unroll
      for (int i = 0; i < 2 * kN; ++i) (i < kN ? even : odd)->src[i % kN] = slot_row<KvElem>(a, id[i], &bad[i]);
    } else {
      int64_t kk[2 * kN];
      blk.template pair_keys<kN>(pair, key_lane, kk);
#pragma unroll
      for (int i = 0; i < 2 * kN; ++i) {
        (i < kN ? even : odd)->src[i % kN] = key_row<KvElem>(a, blk.req, blk.key_end, kk[i], id[i], false, &bad[i]);
      }
    }
#pragma unroll
    for (int t = 0; t < 2; ++t) {
      Rows& rows = t == 0 ? *even : *odd;
      rows.bad = 0;
#pragma unroll
      for (int p = 0; p < kN; ++p) rows.bad |= static_cast<uint32_t>(bad[kN * t + p]) << p;
      if (rows.bad != 0 && lane == 0) raise_flag(a.error_flag, KDTREE_FLAG_SLOT_OUT_OF_RANGE);
    }
  };
  const auto slot_ids_of_pair = [&](int pair, int64_t (&id)[2 * kN]) {
    if (plain(pair)) {
      blk.template plain_pair_slot_ids<kN>(pair, key_lane, id);
    } else {
      blk.template pair_slot_ids<kN>(pair, key_lane, id);
    }
  };
  // Blocks [b0, b1) of `rows` into `stage`; flags too with the stage's first half.
  const auto copy_half = [&](const Rows& rows, int stage, int half, bool flags) {
    const int u0 = half == 0 ? 0 : kLowBlocks, u1 = half == 0 ? kLowBlocks : kDimBlocks;
    const uint32_t tile = blk.stage_addr(stage);
#pragma unroll
    for (int p = 0; p < kN; ++p) {
      const int key = p * (kKeys / kN) + key_lane;
      if (flags && lane == 0) blk.bad_key(stage)[key] = (rows.bad >> p) & 1;
      // A key that must not be read is zero-filled: 0 source bytes, the
      // address (kv_cache) never dereferenced.
      const int src_bytes = rows.src[p] != nullptr ? 16 : 0;
      const char* from = reinterpret_cast<const char*>(rows.src[p] != nullptr
                                                           ? rows.src[p]
                                                           : static_cast<const KvElem*>(a.kv_cache)) +
                         lane * 16;
      const uint32_t to = tile + chunk_offset(key, kKvFp8 ? 2 * lane : lane);
      copy_chunk_blocks<64 * sizeof(KvElem)>(to, from, src_bytes, u0, u1);
    }
    // (The barrier named by blk each time: a name that depends on T, which
    // the host pass, where the mbarrier functions are not declared, skips.)
    mbarrier_arrive_on_cp_async(kKvFp8 ? blk.kv_landed(stage, half) : blk.kv_full(stage, half));
    mbarrier_arrive(kKvFp8 ? blk.kv_landed(stage, half) : blk.kv_full(stage, half));
  };

  Rows even, odd;
  int64_t ids[2 * kN];
  blk.template pair_slot_ids<kN>(0, key_lane, ids);
  rows_of_pair(0, ids, &even, &odd);
  if (gtid == 0) KDTREE_STAMP(stamps::kPair0Rows, stamps::clock_after(reinterpret_cast<long long>(even.src[0])));
  slot_ids_of_pair(1, ids);
  if constexpr (kKvFp8) {
    // The halves in the 16-bit gather's order, half k of the sequence being
    // pair k / 4's (stage, half) (0, 0), (1, 1), (0, 1), (1, 0) by k % 4, a
    // last pair without an odd tile skipping stage 1's. A thread converts its
    // part of the oldest half it has issued as soon as that has landed (a
    // half is full only after both parts' conversions), else issues the next half if its free has
    // come, else sleeps on that landing for up to kLandedPollNs (20, 100 and
    // 500 measured alike). It waits for a free only with nothing issued
    // unconverted, so the frees never wait on a half this thread holds.
    constexpr uint32_t kLandedPollNs = 100;
    const int end = 4 * ((num_tiles + 1) / 2);
    const auto next = [&](int k) { return ((k + 1) & 1) == 0 || 2 * ((k + 1) >> 2) + 1 < num_tiles ? k + 1 : k + 2; };
    // Half k's stage and half from j = k % 4.
    const auto stage_of = [](int j) { return j & 1; };
    const auto half_of = [](int j) { return (j >> 1) ^ (j & 1); };
    uint32_t cells[1];  // keys 0..31 (the stage's score warpgroup converts keys 32..63)
    cells[0] = blk.stage_addr(0) + chunk_offset(key_lane, 2 * lane);
    int issued = 0, converted = 0;
    while (converted < end) {
      if (converted < issued) {
        const int pair = converted >> 2, j = converted & 3, stage = stage_of(j), half = half_of(j);
        if (mbarrier_warp_done<0>(blk.kv_landed(stage, half), pair & 1)) {
          // This thread's cells converted, fenced for the score warpgroups'
          // wgmma (the async proxy), and its arrival on the full barrier.
          convert_fp8_cells<T, 1>(cells, stage, half);
          fence_proxy_async_smem();
          mbarrier_arrive(blk.kv_full(stage, half));
          converted = next(converted);
          continue;
        }
      }
      if (issued < end) {
        const int pair = issued >> 2, j = issued & 3, stage = stage_of(j), half = half_of(j);
        if (pair == 0 || issued == converted || mbarrier_warp_done<0>(blk.kv_free(stage, half), (pair - 1) & 1)) {
          // (After a successful poll this wait returns at once; waiting only
          // where nothing polled moved ~170 of the kernel's instructions, not
          // measured, so the measured form stays.)
          if (pair > 0) mbarrier_wait(blk.kv_free(stage, half), (pair - 1) & 1);
          // (The steady pair's points as the 16-bit gather's, j-th half's
          // pair kGatherPast00 + 2j, kGatherCopied00 + 2j: a probe build only.)
          const bool pair_stamped = gtid == 0 && pair == stamps::kStampPair + 1;
          if (pair_stamped) KDTREE_PAIR_STAMP(blk.pair_stamps(), stamps::kGatherPast00 + 2 * j);
          if (stage == 0) {  // (not a reference chosen at run time: that put both in local memory)
            copy_half(even, 0, half, j < 2);
          } else {
            copy_half(odd, 1, half, j < 2);
          }
          if (pair_stamped) KDTREE_PAIR_STAMP(blk.pair_stamps(), stamps::kGatherCopied00 + 2 * j);
          const int after = next(issued);
          if (after >> 2 != pair) {
            // The next pair's rows (from the ids loaded a pair ago) and the
            // slot ids of the pair after it.
            rows_of_pair(pair + 1, ids, &even, &odd);
            slot_ids_of_pair(pair + 2, ids);
          }
          issued = after;
          continue;
        }
      }
      const int j = converted & 3;  // (converted < issued here)
      (void)mbarrier_warp_done<kLandedPollNs>(blk.kv_landed(stage_of(j), half_of(j)), (converted >> 2) & 1);
    }
  } else {
    for (int pair = 0; 2 * pair < num_tiles; ++pair) {
      const bool has_odd = 2 * pair + 1 < num_tiles;
      const uint32_t parity = (pair - 1) & 1;  // the free phase of the pair before
      // (Stamps of pairs 0 and 1, and of the steady pair's copies: a probe build only.)
      const bool stamped = gtid == 0 && pair < 2;
      const bool pair_stamped = gtid == 0 && pair == stamps::kStampPair + 1;
      if (pair > 0) mbarrier_wait(blk.kv_free(0, 0), parity);
      if (pair_stamped) KDTREE_PAIR_STAMP(blk.pair_stamps(), stamps::kGatherPast00);
      copy_half(even, 0, 0, true);
      if (stamped) KDTREE_STAMP(pair == 0 ? stamps::kFirstCopy : stamps::kPair1Copy1, stamps::clock());
      if (pair_stamped) KDTREE_PAIR_STAMP(blk.pair_stamps(), stamps::kGatherCopied00);
      if (has_odd) {
        if (pair > 0) mbarrier_wait(blk.kv_free(1, 1), parity);
        if (stamped && pair == 1) KDTREE_STAMP(stamps::kPair1Copy2Free, stamps::clock());
        if (pair_stamped) KDTREE_PAIR_STAMP(blk.pair_stamps(), stamps::kGatherPast11);
        copy_half(odd, 1, 1, true);
        if (stamped) KDTREE_STAMP(pair == 0 ? stamps::kPair0Copy2 : stamps::kPair1Copy2, stamps::clock());
        if (pair_stamped) KDTREE_PAIR_STAMP(blk.pair_stamps(), stamps::kGatherCopied11);
      }
      if (pair > 0) mbarrier_wait(blk.kv_free(0, 1), parity);
      if (pair_stamped) KDTREE_PAIR_STAMP(blk.pair_stamps(), stamps::kGatherPast01);
      copy_half(even, 0, 1, false);
      if (stamped && pair == 0) KDTREE_STAMP(stamps::kPair0Copy3, stamps::clock());
      if (pair_stamped) KDTREE_PAIR_STAMP(blk.pair_stamps(), stamps::kGatherCopied01);
      if (has_odd) {
        if (pair > 0) mbarrier_wait(blk.kv_free(1, 0), parity);
        if (pair_stamped) KDTREE_PAIR_STAMP(blk.pair_stamps(), stamps::kGatherPast10);
        copy_half(odd, 1, 0, false);
        if (stamped && pair == 0) KDTREE_STAMP(stamps::kPair0Copy4, stamps::clock());
        if (pair_stamped) KDTREE_PAIR_STAMP(blk.pair_stamps(), stamps::kGatherCopied10);
      }
      // The next pair's rows (from the ids loaded a pair ago) and the slot ids
      // of the pair after it.
      rows_of_pair(pair + 1, ids, &even, &odd);
      slot_ids_of_pair(pair + 2, ids);
    }
  }
  allow_dependent_launch();
  if (gtid == 0) KDTREE_STAMP(stamps::kGatherEnd, stamps::clock());
  if (gtid == 0) KDTREE_PAIR_FLUSH(blk.pair_stamps(), stamps::kGatherPairPoints);
}

// ---------------------------------------------------------------------------
// The epilogue's rows leave by the bulk-copy engine, one row per copy: a
// warpgroup stages its normalized O ([64 rows][256 dims], the wgmma
// accumulator layout) in its own KV stage, then 64 of its threads issue one
// copy each, for partial states and out alike: ~1,100 fewer instructions per
// warpgroup than stores from registers (partial states), ~300 fewer than a
// 16-byte copy loop (out). Measured S7 -0.6%, the other shapes flat: the
// epilogue's time is not all its code's first fetch (docs/perf_notes.md,
// session 24).
//
// A staged row: 256 elements of the rows' type (kF32Rows: f32, else bf16 or
// f16 as out_dtype; 16-bit partial states are bf16 and come with a bf16 out),
// contiguous as a copy takes them, the next row kStagedPitch bytes on: the 16
// bytes of padding put the eight rows of each stmatrix on distinct banks.
template <bool kF32Rows>
constexpr uint32_t kStagedRowBytes = 256 * (kF32Rows ? 4 : 2);
template <bool kF32Rows>
constexpr uint32_t kStagedPitch = kStagedRowBytes<kF32Rows> + 16;
static_assert(kRows * kStagedPitch<true> <= kTileBytes, "a warpgroup's f32 rows fit its stage");

// Row half `half` of this thread's rows in f32 (kF32Rows) at `at`: thread
// (g, c) holds dims 8j + 2c, +1 of rows g and g + 8 (staged one half at a
// time, right after its normalization: both halves at once spilled).
__device__ __forceinline__ void stage_f32_row_half(const float (&o)[128], uint32_t at, int warp_row0, int half) {
  const int lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
  const uint32_t row_at = at + (warp_row0 + g + 8 * half) * kStagedPitch<true> + c * 8;
#pragma unroll
  for (int j = 0; j < 32; ++j) {
    asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(row_at + 32 * j), "f"(o[4 * j + 2 * half]),
                 "f"(o[4 * j + 2 * half + 1]) : "memory");
  }
}

// This thread's rows in bf16 or f16 (out_dtype) at `at`: four 8 x 8 blocks
// per stmatrix, as store_p: lane L names row L % 8 of block m = L / 8 (row
// half m % 2, dim block 2q + m / 2).
__device__ __forceinline__ void stage_16bit_rows(const PagedArgs& a, const float (&o)[128], uint32_t at,
                                                 int warp_row0) {
  const int lane = threadIdx.x % 32, m = lane / 8, r8 = lane % 8;
  const uint32_t row_at = at + (warp_row0 + 8 * (m % 2) + r8) * kStagedPitch<false> + (m / 2) * 16;
  const auto stage = [&](auto pack) {
#pragma unroll
    for (int q = 0; q < 16; ++q) {
      const uint32_t regs[4] = {pack(o[8 * q], o[8 * q + 1]), pack(o[8 * q + 2], o[8 * q + 3]),
                                pack(o[8 * q + 4], o[8 * q + 5]), pack(o[8 * q + 6], o[8 * q + 7])};
      stmatrix_x4(row_at + 32 * q, regs);
    }
  };
  if (a.out_dtype == KDTREE_DTYPE_BF16) {
    stage([](float x, float y) { return pack2<__nv_bfloat16>(x, y); });
  } else {
    stage([](float x, float y) { return pack2<__half>(x, y); });
  }
}

// The block's rows that warpgroup `wg` staged in its stage (stage_*) to its
// split's partial states (grid (m, split, b)) or to out, dims [256 wg,
// 256 wg + 256): thread `tid` (of 128) copies row tid if the block has it.
// Partial states, out and out's strides are 16-byte aligned
// (kdtree_verify_paged checks).
template <bool kF32Rows, class Block>
__device__ __forceinline__ void copy_o_rows(const Block& blk, bool to_partials, int wg, int tid) {
  constexpr int64_t kElem = kF32Rows ? 4 : 2;
  const PagedArgs& a = blk.a;
  const int r = tid;
  if (r >= kRows || blk.row0 + r >= blk.rows) return;
  // (Not row_token: r is below the block's rows already.)
  const int token = (blk.row0 + r) / a.num_heads, h = blk.row0 + r - token * a.num_heads;
  const int64_t t = blk.req.q_start + token;
  const int64_t elem = to_partials ? partial_state(a, blockIdx.z, t, h) * kLatentDim
                                   : t * a.out_stride_token + h * a.out_stride_head;
  void* const base = to_partials ? a.partial_out : a.out;
  bulk_copy_to_global(static_cast<char*>(base) + (elem + 256 * wg) * kElem,
                      blk.stage_addr(wg) + r * kStagedPitch<kF32Rows>, kStagedRowBytes<kF32Rows>);
}

// ---------------------------------------------------------------------------
// Warpgroups 0 and 1 (kWg): per pair, the QK, softmax and both P V of this
// warpgroup's output dims; then the epilogue. `blk` is the kernel's view of
// the block, live across the register move before the call (setmaxnreg.inc
// keeps registers; 0 spills).
// kRoute: where the rows go (partial states with several splits, else out),
// or kAnyRoute for the kernel of f32 rows (route_of), which asks the call;
// with f32 rows (kF32Rows) each warpgroup sums its own weights. kKvFp8: the
// KV cache is fp8 e4m3, and this warpgroup converts part of its stage.
template <class T, int kWg, int kRoute, bool kKvFp8>
__device__ __forceinline__ void score_warpgroup(const Sm90aBlock<T>& blk) {
  constexpr bool kF32Rows = kRoute == kAnyRoute;
  // Warpgroup 0 holds Q's rope block in registers, but where it also sums
  // its own weights (f32 rows) and converts fp8 KV: those spilled 4 bytes.
  constexpr bool kRopeInRegs = kWg == 0 && !(kF32Rows && kKvFp8);
  constexpr float kNegInf = -INFINITY;
  constexpr int kOther = 1 - kWg;
  const PagedArgs& a = blk.a;
  unsigned char* const smem = blk.smem;
  if (!blk.live()) return;
  const Request& req = blk.req;
  const int num_tiles = blk.num_tiles();
  const int split = blockIdx.z;
  const int lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
  const int warp_row0 = (threadIdx.x / 32 % 4) * 16;  // this warp's accumulator rows
  const auto row_token = [&](int half) { return blk.row_token(warp_row0 + g + 8 * half); };
  const uint32_t base = blk.base();
  const uint8_t* const tail_mask = request_tail_mask(a, req, blockIdx.y);

  // (Q's copies were issued before the role split, in the kernel.)
  if (kWg == 0 && threadIdx.x < 64) reinterpret_cast<uint32_t*>(smem + kOffOnes)[threadIdx.x] = pack2<T>(1.f, 1.f);

  float o[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) o[i] = 0.f;
  // O zeroed here, before Q's wait: left to ptxas, its 64 CS2R sink into the
  // loop's preheader, on warpgroup 0's path from its first QK to its maxima,
  // where code runs cold (docs/perf_notes.md, session 24).
#pragma unroll
  for (int i = 0; i < 128; ++i) asm volatile("" : "+f"(o[i]));
  // Rounded P times ones: the rows' weights (warpgroup 1; warpgroup 0 too
  // with kF32Rows). Else warpgroup 0's weights are warpgroup 1's plus w_fix.
  constexpr bool kOwnWeights = kWg == 1 || kF32Rows;
  float w[4] = {0.f, 0.f, 0.f, 0.f};
  float w_fix[2] = {0.f, 0.f};
  float m_run[2] = {kNegInf, kNegInf};  // the row maximum O, w and l are relative to
  float l_run[2] = {0.f, 0.f};          // fp32 row sums of this warpgroup's tiles

  // Descriptors of each operand's first k-step; a k-step, column block or
  // stage adds its byte offset / 16 to the start-address field (every
  // address stays below 256 KB, so the field never carries).
  const uint64_t q_desc = wgmma_desc_sw128(base + kOffQ, 16, 1024);
  const uint64_t k_desc = wgmma_desc_sw128(blk.stage_addr(kWg), 16, 1024);
  // Values: this warpgroup's 256 dims of a stage (B read MN-major).
  const uint64_t v_own = wgmma_desc_sw128(blk.stage_addr(kWg) + kWg * kLowBlocks * kBlockBytes, kBlockBytes, 1024);
  const uint64_t v_other =
      wgmma_desc_sw128(blk.stage_addr(kOther) + kWg * kLowBlocks * kBlockBytes, kBlockBytes, 1024);
  const uint32_t p_other_addr = base + (kWg == 0 ? kOffP1 : kOffP0);
  const uint64_t p_other = wgmma_desc_sw128(p_other_addr, 16, 1024);
  const uint32_t p_own = base + (kWg == 0 ? kOffP0 : kOffP1);
  const uint64_t ones_desc = blk.ones_desc();

  cp_async_wait<0>();
  fence_proxy_async_smem();
  mbarrier_arrive(blk.hand(kQReady));
  mbarrier_wait(blk.hand(kQReady), 0);  // Q in shared memory
  if (kWg == 0 && threadIdx.x == 0) KDTREE_STAMP(stamps::kWg0QReady, stamps::clock());
  // Warpgroup 0: Q's rope block as its QK's A fragments, k-step ks from call
  // ks. Q stays in shared memory for warpgroup 1.
  uint32_t q_rope[4][4];
  if constexpr (kRopeInRegs) {
    const uint32_t addr = fragment_lane_addr(base + kOffQ + (kDimBlocks - 1) * kBlockBytes, warp_row0);
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) ldmatrix_x4(q_rope[ks], addr ^ (ks << 5));
  }

  // ---- S = Q K^T for this warpgroup's tile of a pair, half by half as they
  // land (warpgroup 0's stage low half first, warpgroup 1's high half first:
  // the gather's order; the first half brings the flags); the mask found
  // while the first half runs. Warpgroup 0 issues it behind the P V of the
  // pair before, whose stage 1 low half it then frees.
  float s[32];  // set by the first wgmma (scale-d 0); -inf below for a missing tile
  uint32_t visible = ~0u;
  bool needs_mask = false;
  // fp8 KV: this warpgroup converts keys 32..63 of its own stage's halves,
  // the gather keys 0..31, each once the half has landed; both then arrive on
  // the half's full barrier. A half's conversion thus runs in two parts at
  // once, off the gather's serial path (its time waiting for the half is
  // this warpgroup's anyway: docs/perf_notes.md, session 59, -3.7..-5.8%).
  uint32_t own_cells[1];
  own_cells[0] = blk.stage_addr(0) + chunk_offset(32 + threadIdx.x % kGroup / 4, 2 * (threadIdx.x % 4));
  const auto convert_own = [&](int half, uint32_t parity) {
    if constexpr (kKvFp8) {
      mbarrier_wait(blk.kv_landed(kWg, half), parity);
      convert_fp8_cells<T, 1>(own_cells, kWg, half);
      fence_proxy_async_smem();
      mbarrier_arrive(blk.kv_full(kWg, half));
    }
  };
  const auto score_tile = [&](int pair, auto pv_in_flight) {
    const int64_t k0 = blk.tile_key(2 * pair + kWg);
    const uint32_t parity = pair & 1;
    const auto qk_blocks = [&](int b0, int b1, bool first) {
      wgmma_fence();
#pragma unroll
      for (int db = 0; db < kDimBlocks; ++db) {
        if (db < b0 || db >= b1) continue;
#pragma unroll
        for (int ks = 0; ks < 4; ++ks) {
          const uint32_t step = (db * kBlockBytes + ks * 32) >> 4;
          // (Warpgroup 1's 64-bit adds already compile to in-place increments.)
          const uint64_t qd = kWg == 0 ? wgmma_desc_advance(q_desc, step) : q_desc + step;
          const uint64_t kd = kWg == 0 ? wgmma_desc_advance(k_desc, step) : k_desc + step;
          if (kRopeInRegs && db == kDimBlocks - 1) {
            wgmma_m64n64k16_rs<T, 0>(s, q_rope[ks], kd, !(first && db == b0 && ks == 0));
          } else {
            wgmma_m64n64k16<T, 0>(s, qd, kd, !(first && db == b0 && ks == 0));
          }
        }
      }
      wgmma_commit();
    };
    // (Stamps of pair 0 and of the steady pair's next: a probe build only.)
    const bool next_stamped = threadIdx.x % kGroup == 0 && pair == stamps::kStampPair + 1;
    if (pair == 0 && threadIdx.x % kGroup == 0) {
      KDTREE_STAMP(kWg == 0 ? stamps::kWg0AtFirstHalf : stamps::kWg1AtFirstHalf, stamps::clock());
    }
    if (next_stamped) KDTREE_PAIR_STAMP(blk.pair_stamps(), kWg == 0 ? stamps::kWg0AtFirst : stamps::kWg1AtFirst);
    convert_own(kWg, parity);
    mbarrier_wait(blk.kv_full(kWg, kWg), parity);
    if (pair == 0 && threadIdx.x % kGroup == 0) {
      KDTREE_STAMP(kWg == 0 ? stamps::kWg0FirstHalf : stamps::kWg1FirstHalf, stamps::clock());
    }
    if (next_stamped) KDTREE_PAIR_STAMP(blk.pair_stamps(), kWg == 0 ? stamps::kWg0PastFirst : stamps::kWg1PastFirst);
    fence_proxy_async_acquire_smem();  // cp.async wrote through the generic proxy; wgmma reads async
    if (kWg == 0) {
      qk_blocks(0, kLowBlocks, true);
    } else {
      qk_blocks(kLowBlocks, kDimBlocks, true);
    }
    if constexpr (decltype(pv_in_flight)::value) {
      // Warpgroup 0's P V of the pair before ran under this QK's first half
      // (FlashMLA's order): once it is done, stage 1's low half is free.
      wgmma_wait<1>();
      mbarrier_arrive(blk.kv_free(1, 0));
      if (next_stamped) KDTREE_PAIR_STAMP(blk.pair_stamps(), stamps::kWg0Free10);
    }

    // The visible keys of this thread's 32 scores, on tiles that need a
    // mask. Visibility depends on the row's token, not its head, so each
    // warp finds it per token of its 16 rows (one or two tokens when H >=
    // 8): lane L tests keys L and L + 32, both mask bytes in flight at once,
    // and two ballots make the token's 64-key word.
    const uint8_t* bad_key = blk.bad_key(kWg);
    const bool any_bad = __any_sync(0xffffffffu, bad_key[lane] != 0 || bad_key[lane + 32] != 0);
    needs_mask = any_bad || k0 + kKeys > blk.key_end || k0 + kKeys > req.prefix;
    visible = ~0u;
    if (needs_mask) {
      // row_key_words (verify_paged_sm90a_tile.cuh) written out: calling it
      // here moves ptxas's register allocation of this kernel (its SASS then
      // differs in ~8,500 lines), and the measured build is this one.
      const auto key_word = [&](int token) {
        const TailMaskRow mask_row(a, req, tail_mask, token);
        uint32_t word[2];
#pragma unroll
        for (int u = 0; u < 2; ++u) {
          const int key_local = lane + 32 * u;
          const uint8_t byte = mask_row.byte(a, req, blk.key_end, k0 + key_local);
          const bool bad = any_bad && bad_key[key_local];
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
      // Score i is key (i / 4) * 8 + 2c + (i & 1) of row half (i >> 1) & 1:
      // one shift by 2c per half, then constant shifts.
      const uint64_t keys_of[2] = {row_keys[0] >> (2 * c), row_keys[1] >> (2 * c)};
#pragma unroll
      for (int i = 0; i < 32; ++i) {
        if (!((keys_of[(i >> 1) & 1] >> ((i / 4) * 8 + (i & 1))) & 1)) visible &= ~(1u << i);
      }
    }

    if (next_stamped) KDTREE_PAIR_STAMP(blk.pair_stamps(), kWg == 0 ? stamps::kWg0AtSecond : stamps::kWg1AtSecond);
    convert_own(1 - kWg, parity);
    mbarrier_wait(blk.kv_full(kWg, 1 - kWg), parity);
    if (next_stamped) KDTREE_PAIR_STAMP(blk.pair_stamps(), kWg == 0 ? stamps::kWg0PastSecond : stamps::kWg1PastSecond);
    fence_proxy_async_acquire_smem();
    if (kWg == 0) {
      qk_blocks(kLowBlocks, kDimBlocks, false);
    } else {
      qk_blocks(0, kLowBlocks, false);
    }
    wgmma_wait<0>();
    if (threadIdx.x % kGroup == 0 && pair == stamps::kStampPair) {
      KDTREE_PAIR_STAMP(blk.pair_stamps(), kWg == 0 ? stamps::kWg0QkDone : stamps::kWg1QkDone);
    }
  };

  if (kWg == 0 && num_tiles > 0) score_tile(0, std::false_type{});
  for (int pair = 0; 2 * pair < num_tiles; ++pair) {
    const bool has_odd = 2 * pair + 1 < num_tiles;
    const bool mine = kWg == 0 || has_odd;  // block-uniform
    if (kWg == 1 && mine) score_tile(pair, std::false_type{});

    // The scale is folded into the exponent's FMA when it is positive (the
    // usual case: the row maximum of the raw scores, scaled, is then exactly
    // that of the scaled scores); any other scale is applied first.
    float scale = a.scale_log2;
    if (!(scale > 0.f)) {
#pragma unroll
      for (int i = 0; i < 32; ++i) s[i] *= scale;
      scale = 1.f;
    }
    if (needs_mask || !mine) {  // block-uniform: unmasked tiles skip the mask code entirely
#pragma unroll
      for (int i = 0; i < 32; ++i) {
        if (!mine || !((visible >> i) & 1)) s[i] = kNegInf;
      }
    }

    // ---- online softmax: the shared row maximum, P, this warpgroup's O ----
    // Warpgroup 0 moves from the pair before's maximum by its own tile;
    // warpgroup 1 from warpgroup 0's new maximum by its tile. Lazy: the
    // maximum moves only when a score passes it by kRescaleLog2.
    if (kWg == 1 && pair == 0 && threadIdx.x == kGroup) {
      KDTREE_STAMP(stamps::kWg1Pair0Scores, stamps::clock());  // (score_tile waited for its wgmmas)
    }
    // (Stamps of the steady pair: a probe build only.)
    const bool pair_stamped = threadIdx.x % kGroup == 0 && pair == stamps::kStampPair;
    if (kWg == 1) mbarrier_wait(blk.hand(kMaxA), pair & 1);
    if (kWg == 1 && pair_stamped) KDTREE_PAIR_STAMP(blk.pair_stamps(), stamps::kWg1PastMaxA);
    uint32_t p_pack[2][8];  // (row half, 8-key block j): keys 8j + 2c, +1
    float scale_old[2];
    bool moved = false;  // (warpgroup 1) a row's maximum passed warpgroup 0's
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = warp_row0 + g + 8 * half;
      const float m_from = kWg == 0 ? m_run[half] : blk.row_max(0)[row];
      const float mx = quad_row_max(s, half) * scale;
      const float m_new = mx > m_from + kRescaleLog2 ? mx : m_from;
      const float m_ref = m_new == kNegInf ? 0.f : m_new;  // all masked so far: keep exp2 finite
      // m_new >= m_run; from -inf (nothing visible yet, O = 0) the factor is 0.
      scale_old[half] = m_new != m_run[half] ? exp2_ftz(m_run[half] - m_ref) : 1.f;
      const float sum = exp_pack<T>(s, half, scale, m_ref, p_pack[half]);
      l_run[half] = l_run[half] * scale_old[half] + sum;
      if (kWg == 1) moved |= m_new != m_from;
      m_run[half] = m_new;
      if (c == 0) blk.row_max(kWg)[row] = m_new;
    }
    if (kWg == 1) {
      const bool warp_moved = __any_sync(0xffffffffu, moved);
      if (lane == 0) blk.rows_moved()[warp_row0 / 16] = warp_moved;
    }
    if (kWg == 0) {
      mbarrier_arrive(blk.hand(kMaxA));
      if (pair == 0 && threadIdx.x == 0) KDTREE_STAMP(stamps::kWg0MaxAHanded, stamps::clock());
      if (pair_stamped) KDTREE_PAIR_STAMP(blk.pair_stamps(), stamps::kWg0MaxA);
    } else {
      mbarrier_arrive(blk.hand(kMaxB));
      if (pair_stamped) KDTREE_PAIR_STAMP(blk.pair_stamps(), stamps::kWg1MaxB);
    }
    if (__any_sync(0xffffffffu, scale_old[0] != 1.f || scale_old[1] != 1.f)) {  // warp-uniform branch
#pragma unroll
      for (int i = 0; i < 128; ++i) o[i] *= scale_old[(i >> 1) & 1];
#pragma unroll
      for (int i = 0; i < 4; ++i) w[i] *= scale_old[(i >> 1) & 1];
#pragma unroll
      for (int i = 0; i < 2; ++i) w_fix[i] *= scale_old[i];  // (warpgroup 0 without kF32Rows)
    }

    // ---- O += P V for this warpgroup's tile, P from registers ----
    const auto pv_own = [&]() { pv_from_registers<T, kOwnWeights>(o, w, p_pack, v_own, ones_desc); };
    // P to shared memory for the other warpgroup.
    const auto hand_over_p = [&]() {
      store_p(p_own, warp_row0, p_pack);
      // Warpgroup 1 reads P0 by wgmma (the async proxy); warpgroup 0 reads P1
      // by ldmatrix (the generic proxy, as stmatrix wrote it), which the kP1
      // barrier alone orders. P0's fence stays on the writer's side: the
      // acquire-side form the gather's cp.async rows take, after warpgroup 1's
      // kP0 wait, let its wgmma read stale P (the GPU tests failed while the
      // sanitizers saw nothing; docs/perf_notes.md, session 26).
      if constexpr (kWg == 0) fence_proxy_async_smem();
    };
    // ---- O += P V for the other warpgroup's tile ----
    // Warpgroup 0 loads that P to registers by ldmatrix from where the
    // other's store_p put it (the same fragment layout as p_pack): read once
    // for both wgmmas of each k-step with kF32Rows, where shared-memory
    // operands would read it twice (the P V's and the ones column's), and
    // shared memory is what the tile loop is short of. Without the ones
    // column the P V straight from shared memory measured 0.6-1.7% slower
    // (session 20). Warpgroup 1 reads it from shared memory: its own P is
    // still in its P V's registers then (ptxas: C7512).
    const auto pv_other = [&]() {
      if constexpr (kWg == 1) {
        // (The other warpgroup fenced its P writes before its arrival.)
        wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < kKeys / 16; ++ks) {
          const uint64_t pd = p_other + ((ks * 32) >> 4);
          wgmma_m64n256k16<T, 1>(o, pd, v_other + ((ks * 16 * 128) >> 4), 1);
          wgmma_m64n8k16<T, 0>(w, pd, ones_desc, 1);
        }
        wgmma_commit();
        return;
      }
      uint32_t p_other_pack[2][8];
      load_p(p_other_addr, warp_row0, p_other_pack);
      pv_from_registers<T, kOwnWeights>(o, w, p_other_pack, v_other, ones_desc);
    };

    if (kWg == 0) {
      pv_own();
      // Warpgroup 1's maximum is the pair's: P and O move to it (rarely).
      mbarrier_wait(blk.hand(kMaxB), pair & 1);
      if (pair == 0 && threadIdx.x == 0) KDTREE_STAMP(stamps::kPair0Maxima, stamps::clock());
      if (pair_stamped) KDTREE_PAIR_STAMP(blk.pair_stamps(), stamps::kWg0PastMaxB);
      // Whether any row moves is one word warpgroup 1 wrote before kMaxB:
      // the branch is warpgroup-uniform, so the wait in it is every warp's.
      float factor[2];
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const float m_b = blk.row_max(1)[warp_row0 + g + 8 * half];
        factor[half] = m_b != m_run[half] ? exp2_ftz(m_run[half] - m_b) : 1.f;  // m_b > m_run
        m_run[half] = m_b;
      }
      if (blk.any_row_moved()) {
        wgmma_wait<0>();  // P and O change under the P V of this warpgroup's tile
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          w_fix[half] *= factor[half];
#pragma unroll
          for (int j = 0; j < 8; ++j) {
            const float2 p = unpack2<T>(p_pack[half][j]);
            const float2 f = make_float2(p.x * factor[half], p.y * factor[half]);
            p_pack[half][j] = pack2<T>(f.x, f.y);
            // This O took P, then the factor; warpgroup 1's takes (and
            // weighs) the product rounded again.
            const float2 r = unpack2<T>(p_pack[half][j]);
            w_fix[half] += (f.x - r.x) + (f.y - r.y);
          }
          l_run[half] *= factor[half];
        }
#pragma unroll
        for (int i = 0; i < 128; ++i) o[i] *= factor[(i >> 1) & 1];
#pragma unroll
        for (int i = 0; i < 4; ++i) w[i] *= factor[(i >> 1) & 1];  // (with kF32Rows)
      }
      // Else P goes to warpgroup 1 while the P V that reads the same
      // registers may still run (stmatrix reads them too; nothing writes them).
      hand_over_p();
      mbarrier_arrive(blk.hand(kP0));
      if (pair_stamped) KDTREE_PAIR_STAMP(blk.pair_stamps(), stamps::kWg0P0);
      wgmma_wait<0>();
      mbarrier_arrive(blk.kv_free(0, 0));  // stage 0's low half: its last P V is done
      if (pair_stamped) KDTREE_PAIR_STAMP(blk.pair_stamps(), stamps::kWg0Free00);
      mbarrier_wait(blk.hand(kP1), pair & 1);
      if (pair_stamped) KDTREE_PAIR_STAMP(blk.pair_stamps(), stamps::kWg0PastP1);
      if (!has_odd) break;  // the last pair had no tile for warpgroup 1
      pv_other();
      if (2 * pair + 2 < num_tiles) {
        score_tile(pair + 1, std::true_type{});  // frees stage 1's low half once pv_other is done
      } else {
        wgmma_wait<0>();
        mbarrier_arrive(blk.kv_free(1, 0));  // stage 1's low half
      }
    } else {
      if (mine) {
        pv_own();
        hand_over_p();
      }
      mbarrier_arrive(blk.hand(kP1));
      if (pair_stamped) KDTREE_PAIR_STAMP(blk.pair_stamps(), stamps::kWg1P1);
      mbarrier_wait(blk.hand(kP0), pair & 1);
      if (pair_stamped) KDTREE_PAIR_STAMP(blk.pair_stamps(), stamps::kWg1PastP0);
      pv_other();
      if (mine) {
        wgmma_wait<1>();
        mbarrier_arrive(blk.kv_free(1, 1));  // stage 1's high half
        if (pair_stamped) KDTREE_PAIR_STAMP(blk.pair_stamps(), stamps::kWg1Free11);
      }
      wgmma_wait<0>();
      mbarrier_arrive(blk.kv_free(0, 1));  // stage 0's high half
      if (pair_stamped) KDTREE_PAIR_STAMP(blk.pair_stamps(), stamps::kWg1Free01);
    }
  }
  wgmma_wait<0>();
  if (threadIdx.x % kGroup == 0) KDTREE_STAMP(kWg == 0 ? stamps::kWg0LoopEnd : stamps::kWg1LoopEnd, stamps::clock());
  if (threadIdx.x % kGroup == 0) {
    KDTREE_PAIR_FLUSH(blk.pair_stamps(), kWg == 0 ? stamps::kWg0PairPoints : stamps::kWg1PairPoints);
  }

  // The split merge, if any, may now be scheduled (it waits for this grid).
  allow_dependent_launch();
  if (kWg == 0 && threadIdx.x == 0) KDTREE_STAMP(stamps::kWg0Released, stamps::clock());
  // ---- epilogue: both warpgroups' row sums; normalize, store ----
  // (It runs once per block from a cold instruction cache: its normalization
  // and staging take ~50 ns per 128-byte line of code executed; session 24's
  // stamps, S1: warpgroup 0 4.5 us from the row sums' barrier, ~1.7 of it
  // the copies; docs/perf_notes.md.)
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const float l = quad_sum(l_run[half]);  // this thread's 16 keys of the row -> the quad's 64
    if (c == 0) blk.row_sums(kWg)[warp_row0 + g + 8 * half] = l;
    if constexpr (!kOwnWeights) w_fix[half] = quad_sum(w_fix[half]);
    if (kWg == 1 && !kF32Rows && c == 0) blk.row_weights()[warp_row0 + g + 8 * half] = w[2 * half];
  }
  mbarrier_arrive(blk.hand(kSums));
  mbarrier_wait(blk.hand(kSums), 0);
  if (threadIdx.x % kGroup == 0) KDTREE_STAMP(kWg == 0 ? stamps::kWg0SumsPassed : stamps::kWg1SumsPassed, stamps::clock());
  // Where the rows go: kRoute, or with kAnyRoute the call's split count.
  const bool to_partials = kRoute == kToPartials || (kRoute == kAnyRoute && a.num_splits > 1);
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int token = row_token(half);
    const int row = warp_row0 + g + 8 * half;
    const float weight = kOwnWeights ? w[2 * half] : blk.row_weights()[row] + w_fix[half];
    normalize_row_as<!kF32Rows>(row_divisor(a, weight), row_half_normalizer(o, half));
    // Both warpgroups' wgmmas are done, so every stage is free: each stages
    // its rows in its own stage.
    if constexpr (kF32Rows) stage_f32_row_half(o, blk.stage_addr(kWg), warp_row0, half);
    if (kWg == 0 && c == 0 && token >= 0) {
      // l == 0: no visible key. A NaN l (NaN in q or a key) propagates.
      const float l = blk.row_sums(0)[row] + blk.row_sums(1)[row];
      store_lse(a, req.q_start + token, blk.row0 + row - token * a.num_heads, split,
                l != 0.f ? (m_run[half] + log2f(l)) * 0.69314718055994531f : kNegInf);
    }
  }
  if constexpr (!kF32Rows) stage_16bit_rows(a, o, blk.stage_addr(kWg), warp_row0);
  fence_proxy_async_smem();               // the staged rows, for the bulk copies
  named_barrier_sync<1 + kWg, kGroup>();  // this warpgroup's rows staged
  copy_o_rows<kF32Rows>(blk, to_partials, kWg, threadIdx.x % kGroup);
  if (threadIdx.x % kGroup == 0) {
    KDTREE_STAMP(kWg == 0 ? stamps::kWg0EpilogueEnd : stamps::kWg1EpilogueEnd, stamps::clock());
    if (kWg == 0) KDTREE_STAMP(stamps::kWg0EndGlobal, stamps::global_time());
  }
}

template <class T, bool kKvFp8, int kRoute>
__global__ void __launch_bounds__(kThreads, 1) verify_paged_sm90a_pingpong_kernel(const PagedArgs a) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  unsigned char* smem = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
  if (threadIdx.x == 0) {
    KDTREE_STAMP(stamps::kEntryGlobal, stamps::global_time());
    KDTREE_STAMP(stamps::kEntryClock, stamps::clock());
  }
  // The block's start runs from a cold instruction cache, where code far
  // from the entry costs about one 128-byte line per L2 round trip
  // (docs/perf_notes.md, session 21). So the mbarriers, which need no
  // request, are set up first; then all three warpgroups load the block's
  // view once, in code that falls through from the entry, and take it into
  // their roles (a dead block returns in each role): a view made again
  // inside a role's code ran cold there, 2.8 us of warpgroup 0's path to its
  // first QK (session 29). The score warpgroups issue Q's copies right after
  // it, and the gather's code comes next in the binary.
  {
    const Sm90aBlock<T> blk{a, smem};  // (its barriers' addresses need no request)
    if (threadIdx.x < 4) {
      // A half is full: 16-bit KV, once each gather thread's copies have
      // landed and it has arrived twice; fp8 KV, once each gather thread and
      // each thread of the stage's score warpgroup has converted its cells
      // (after the half landed: every gather thread arrived on kv_landed).
      mbarrier_init(blk.kv_full(threadIdx.x / 2, threadIdx.x % 2), 2 * kGroup);
      mbarrier_init(blk.kv_free(threadIdx.x / 2, threadIdx.x % 2), kGroup);
      if (kKvFp8) mbarrier_init(blk.kv_landed(threadIdx.x / 2, threadIdx.x % 2), 2 * kGroup);
    }
    if (threadIdx.x < kHands) {
      const Hand h = static_cast<Hand>(threadIdx.x);
      mbarrier_init(blk.hand(h), h == kQReady || h == kSums ? 2 * kGroup : kGroup);
    }
    mbarrier_init_fence();
    KDTREE_PAIR_CLEAR(blk.pair_stamps());  // (a probe build: the steady pair's words)
  }
  __syncthreads();  // barriers initialised
  if (threadIdx.x == 0) KDTREE_STAMP(stamps::kBarrier, stamps::clock());

  // Warpgroup (broadcast from lane 0 so the compiler sees it warp-uniform).
  // Each role keeps its registers inside its own function (the epilogues
  // too, with named barriers, not block barriers, after this point), so
  // that ptxas gives each warpgroup its own register budget; the view below
  // is all they share.
  const int wg = __shfl_sync(0xffffffffu, threadIdx.x / kGroup, 0);
  // Q's copies, by the score warpgroups, in code that falls through to the
  // role split (a test of threadIdx, not of wg: ptxas would merge it into the
  // score warpgroups' branch below and lay it out after the gather's code).
  const Sm90aBlock<T> blk = Sm90aBlock<T>::make(a, smem, false);
  if (threadIdx.x == 0) KDTREE_STAMP(stamps::kRequestLoaded, stamps::clock_after(blk.key_end));
  if (threadIdx.x < kScoreThreads && blk.live()) {
    load_q_tile<T, kScoreThreads>(a, blk.req, blk.rows, blk.row0, blk.base() + kOffQ);
    cp_async_commit();
  }
  // (The score warpgroups' branch returns, so that ptxas lays the gather's
  // code out right after this prologue.)
  if (wg < 2) {
    if (wg == 0) {
      warpgroup_regs_inc<kWg0Regs>();
      if (threadIdx.x == 0) KDTREE_STAMP(stamps::kScoreRegsSet, stamps::clock());
      score_warpgroup<T, 0, kRoute, kKvFp8>(blk);
    } else {
      warpgroup_regs_inc<kWg1Regs>();
      score_warpgroup<T, 1, kRoute, kKvFp8>(blk);
    }
    return;
  }
  warpgroup_regs_dec<kGatherRegs>();
  if (threadIdx.x == kScoreThreads) KDTREE_STAMP(stamps::kGatherRegsSet, stamps::clock());
  gather_warpgroup<T, kKvFp8>(blk);
  // The request's flags (make's `report`), raised by one thread of its
  // first block once its gather is done: with the registers free.
  if (threadIdx.x == kScoreThreads && blockIdx.x == 0 && blockIdx.z == 0) (void)load_request(a, blockIdx.y, true);
#endif
}

}  // namespace

template <class T, bool kKvFp8>
RouteKernels pingpong_kernels() {
  return {verify_paged_sm90a_pingpong_kernel<T, kKvFp8, kAnyRoute>,
          verify_paged_sm90a_pingpong_kernel<T, kKvFp8, kToPartials>,
          verify_paged_sm90a_pingpong_kernel<T, kKvFp8, kToOut>, "verify_paged_sm90a_pingpong_kernel",
          kKvFp8 ? "the sm_90a ping-pong verify tiles (fp8 KV)" : "the sm_90a ping-pong verify tiles", kThreads,
          kSmemBytes};
}

// (row tiles, requests, splits): the splits slowest, so that a lead plan's
// last splits are the grid's last blocks (block_keys).
inline dim3 pingpong_grid(const PagedArgs& a) {
  const dim3 grid = grid_of(a);
  return dim3(grid.x, grid.z, grid.y);
}

template <class T, bool kKvFp8>
void launch_sm90a_pingpong(const PagedArgs& a, cudaStream_t stream) {
  pingpong_kernels<T, kKvFp8>().launch(a, pingpong_grid(a), stream);
}

template <class T, bool kKvFp8>
void prepare_sm90a_pingpong(size_t smem_optin, const char* function) {
  pingpong_kernels<T, kKvFp8>().allow_smem(smem_optin, function);
}

// The instances of one KV type, in the translation unit that names them
// (verify_paged_sm90a_pingpong.cu: 16-bit KV; _fp8.cu: fp8 KV), so that each
// compiles on its own and the 16-bit kernels' code is laid out as before.
#define KDTREE_INSTANTIATE_SM90A_PINGPONG(FP8)                                                    \
  template void launch_sm90a_pingpong<__nv_bfloat16, FP8>(const PagedArgs&, cudaStream_t);        \
  template void launch_sm90a_pingpong<__half, FP8>(const PagedArgs&, cudaStream_t);               \
  template void prepare_sm90a_pingpong<__nv_bfloat16, FP8>(size_t, const char*);                  \
  template void prepare_sm90a_pingpong<__half, FP8>(size_t, const char*);

}  // namespace kdtree::verify
