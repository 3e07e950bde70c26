// Per-block timeline stamps of the sm_90a kernels and the split merge, for a
// probe build only (-DKDTREE_SM90A_STAMPS=ON; bench/probes/run_stamps.sh).
// One thread of each role records %clock64 at the points below of its path,
// and %globaltimer at the block's entry and warpgroup 0's end, into a device
// array (one per translation unit); after the launch numbered
// $KDTREE_PROBE_STAMPS of that unit's kernel a one-thread kernel prints each
// block's row ("STAMP block v0 .. v31"; the merge's "MSTAMP"), which
// bench/probes/stamps_summary.py turns into per-phase medians. The points are
// named for the ping-pong kernel; the single-warpgroup kernel records a
// subset with its own meaning (stamps_summary.py --kernel single), and so
// does the merge with the kMerge* names (--kernel merge). In every other
// build KDTREE_STAMP compiles to nothing and the kernels are unchanged.
// (docs/perf_notes.md, sessions 20-21: where a call's fixed cost goes;
// session 23: what the merge costs.)
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace kdtree::verify::stamps {

// Slot numbers of the points (stamps_summary.py reads them by number).
enum Point : int {
  kEntryGlobal = 0,     // %globaltimer at the block's entry
  kFirstCopy = 1,       // the gather's first copy of pair 0 issued
  kWg0FirstHalf = 2,    // warpgroup 0's first stage half landed
  kWg0LoopEnd = 3,      // warpgroup 0's last wgmma done
  kWg0EpilogueEnd = 4,  // warpgroup 0's stores issued
  kWg1LoopEnd = 5,
  kWg1EpilogueEnd = 6,
  kGatherEnd = 7,
  kEntryClock = 8,      // %clock64 at the block's entry: the others count from it
  kWg0EndGlobal = 9,    // %globaltimer with kWg0EpilogueEnd (the SM clock's rate)
  kRequestLoaded = 10,  // the prologue's view of the block loaded
  kBarrier = 11,        // the block barrier passed
  kGatherView = 12,     // the gather's role begun (the kernel's view in hand)
  kPair0Rows = 13,      // pair 0's rows computed from its slot ids
  kWg1FirstHalf = 14,
  kPair0Maxima = 15,    // warpgroup 0 has pair 0's maxima from warpgroup 1
  kPair0Copy2 = 16,     // pair 0's second, third, fourth copy issued
  kPair0Copy3 = 17,
  kPair0Copy4 = 18,
  kPair1Copy1 = 19,     // pair 1's first copy issued
  kPair1Copy2Free = 20, // pair 1's second copy: its stage half free
  kPair1Copy2 = 21,
  kWg0MaxAHanded = 22,  // warpgroup 0 past pair 0's softmax (its maxima to warpgroup 1)
  kWg1Pair0Scores = 23, // warpgroup 1's pair-0 scores done, at its wait for those maxima
  kGatherRegsSet = 24,  // the gather's setmaxnreg done (before its view)
  kScoreRegsSet = 25,   // warpgroup 0's setmaxnreg done
  kWg0QReady = 26,      // warpgroup 0 past the Q barrier
  kWg0AtFirstHalf = 27, // warpgroup 0 at pair 0's first wait (before it)
  kWg1AtFirstHalf = 28,
  kWg0Released = 29,    // warpgroup 0 past allow_dependent_launch (epilogue's start)
  kWg0SumsPassed = 30,  // warpgroup 0 past the row sums' barrier
  kWg1SumsPassed = 31,
  kPoints = 32
};
// The split merge's points (verify_paged_merge.cu, thread 0 of each block),
// in slots the verify kernels' names above also use: its entry and end keep
// the meaning of kEntryGlobal, kEntryClock, kWg0EpilogueEnd and kWg0EndGlobal.
enum MergePoint : int {
  kMergeRequestLoaded = 10,  // the block's request loaded (before the wait)
  kMergeWaited = 11,         // past the wait for the split kernel
  kMergeSummed = 14,         // this thread's splits summed
  kMergePartsAdded = 15,     // the split parts added (the barrier before passed)
};
// The ping-pong kernel's points of one steady pair, k = kStampPair, and of
// the next pair's waits and copies (PSTAMP lines; thread 0 of each role;
// stamps_summary.py --kernel pairs). Where a stage half's time goes from its
// free to the wait for its refill (docs/perf_notes.md, session 35). They are
// kept in shared memory until the role's loop ends: a global store in the
// loop would hold up warpgroup 0's proxy fence (a MEMBAR) before kP0.
constexpr int kStampPair = 8;  // blocks of fewer than 2 (k + 2) tiles record a part
enum PairPoint : int {
  kWg0QkDone = 0,        // warpgroup 0's QK of pair k done (its scores in registers)
  kWg1QkDone,            // warpgroup 1's
  kWg0MaxA,              // warpgroup 0 hands its maxima over (kMaxA)
  kWg1PastMaxA,          // warpgroup 1 has them
  kWg1MaxB,              // warpgroup 1 hands its maxima over (kMaxB)
  kWg0PastMaxB,          // warpgroup 0 has them
  kWg0P0,                // warpgroup 0's P handed over (kP0)
  kWg0Free00,            // warpgroup 0's own P V done: stage 0's low half free
  kWg1P1,                // warpgroup 1's P handed over (kP1)
  kWg1PastP0,            // warpgroup 1 has warpgroup 0's P
  kWg0PastP1,            // warpgroup 0 has warpgroup 1's P
  kWg1Free11,            // warpgroup 1's own P V done: stage 1's high half free
  kWg1Free01,            // its other P V done: stage 0's high half free
  kGatherPast00,         // the gather past stage 0's low half free (pair k + 1's copies)
  kGatherCopied00,       // ... its copies issued
  kGatherPast11,
  kGatherCopied11,
  kGatherPast01,
  kGatherCopied01,
  kGatherPast10,
  kGatherCopied10,
  kWg0Free10,            // warpgroup 0's other P V done: stage 1's low half free
  kWg0AtFirst,           // warpgroup 0 at pair k + 1's first half wait (stage 0 low)
  kWg0PastFirst,
  kWg0AtSecond,          // ... its second (stage 0 high)
  kWg0PastSecond,
  kWg1AtFirst,           // warpgroup 1 at pair k + 1's first half wait (stage 1 high)
  kWg1PastFirst,
  kWg1AtSecond,          // ... its second (stage 1 low)
  kWg1PastSecond,
  kPairPoints = 32       // (two unused: a PSTAMP line prints 32 values too)
};
// Each role's points (bit p: point p), which that role's thread copies out.
constexpr uint32_t kWg0PairPoints = 1u << kWg0QkDone | 1u << kWg0MaxA | 1u << kWg0PastMaxB | 1u << kWg0P0 |
                                    1u << kWg0Free00 | 1u << kWg0PastP1 | 1u << kWg0Free10 | 1u << kWg0AtFirst |
                                    1u << kWg0PastFirst | 1u << kWg0AtSecond | 1u << kWg0PastSecond;
constexpr uint32_t kWg1PairPoints = 1u << kWg1QkDone | 1u << kWg1PastMaxA | 1u << kWg1MaxB | 1u << kWg1P1 |
                                    1u << kWg1PastP0 | 1u << kWg1Free11 | 1u << kWg1Free01 | 1u << kWg1AtFirst |
                                    1u << kWg1PastFirst | 1u << kWg1AtSecond | 1u << kWg1PastSecond;
constexpr uint32_t kGatherPairPoints = ((1u << (kGatherCopied10 + 1)) - 1) & ~((1u << kGatherPast00) - 1);
static_assert((kWg0PairPoints & kWg1PairPoints) == 0 && (kWg0PairPoints & kGatherPairPoints) == 0 &&
                  (kWg1PairPoints & kGatherPairPoints) == 0 &&
                  (kWg0PairPoints | kWg1PairPoints | kGatherPairPoints) == (1u << (kWg1PastSecond + 1)) - 1,
              "each pair point belongs to one role");
constexpr unsigned kMaxBlocks = 4096;  // blocks past it record nothing
static_assert(kPoints == 32 && kPairPoints == 32, "a STAMP or PSTAMP line prints 32 values");

}  // namespace kdtree::verify::stamps

#if KDTREE_SM90A_STAMPS
#include <cstdio>
#include <cstdlib>

namespace kdtree::verify::stamps {
namespace {

__device__ unsigned long long g_stamps[kMaxBlocks * kPoints];
__device__ unsigned long long g_pair_stamps[kMaxBlocks * kPairPoints];

__device__ __forceinline__ unsigned long long clock() {
  unsigned long long c;
  asm volatile("mov.u64 %0, %%clock64;" : "=l"(c));
  return c;
}
// The clock once `dep` is available (the loads it comes from landed).
__device__ __forceinline__ unsigned long long clock_after(long long dep) {
  unsigned long long c;
  asm volatile("mov.u64 %0, %%clock64;" : "=l"(c) : "l"(dep) : "memory");
  return c;
}
__device__ __forceinline__ unsigned long long global_time() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ unsigned block_number() {
  return blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
}
__device__ __forceinline__ void record(int point, unsigned long long value) {
  const unsigned b = block_number();
  if (b < kMaxBlocks) g_stamps[b * kPoints + point] = value;
}
// The steady pair's words at shared address `words` set to 0 (not
// recorded), by the block's first kPairPoints threads before its barrier.
__device__ __forceinline__ void clear_pair(uint32_t words) {
  if (threadIdx.x < kPairPoints) asm volatile("st.shared.u32 [%0], 0;" ::"r"(words + 4 * threadIdx.x) : "memory");
}
// A steady-pair point: the clock's low 32 bits to word `point` of the
// kernel's [kPairPoints] u32 at shared address `words` (zeroed at entry).
__device__ __forceinline__ void record_pair(uint32_t words, int point) {
  const uint32_t lo = static_cast<uint32_t>(clock());
  asm volatile("st.shared.u32 [%0], %1;" ::"r"(words + 4 * point), "r"(lo) : "memory");
}
// The points in `mask` to g_pair_stamps, widened to 64 bits from the block's
// entry clock (a word still 0 was not recorded: 0, before any entry).
__device__ __forceinline__ void flush_pair(uint32_t words, uint32_t mask) {
  const unsigned b = block_number();
  if (b >= kMaxBlocks) return;
  const unsigned long long entry = g_stamps[b * kPoints + kEntryClock];
  for (int p = 0; p < kPairPoints; ++p) {
    if (!((mask >> p) & 1)) continue;
    uint32_t lo;
    asm volatile("ld.shared.u32 %0, [%1];" : "=r"(lo) : "r"(words + 4 * p) : "memory");
    g_pair_stamps[b * kPairPoints + p] =
        lo == 0 ? 0 : entry + static_cast<uint32_t>(lo - static_cast<uint32_t>(entry));
  }
}

// One line per block: `tag`, the block, its 32 values.
__device__ void print_rows(const char* tag, const unsigned long long* rows, unsigned blocks) {
  // Two printf calls for one line: device printf takes at most 32 arguments
  // after the format, and a line has 33 (one printf lost point 31).
  for (unsigned b = 0; b < blocks && b < kMaxBlocks; ++b) {
    const unsigned long long* v = rows + b * kPoints;
    printf("%s %u %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu", tag, b, v[0],
           v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10], v[11], v[12], v[13], v[14], v[15]);
    printf(" %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu\n", v[16], v[17], v[18],
           v[19], v[20], v[21], v[22], v[23], v[24], v[25], v[26], v[27], v[28], v[29], v[30], v[31]);
  }
}

// The verify kernels' STAMP and (ping-pong only; zeros elsewhere) PSTAMP
// lines, or the merge's MSTAMP lines.
__global__ void print_stamps_kernel(unsigned blocks, bool merge) {
  print_rows(merge ? "MSTAMP" : "STAMP", g_stamps, blocks);
  if (!merge) print_rows("PSTAMP", g_pair_stamps, blocks);
}

// After each launch of the unit's kernel: the launch numbered
// $KDTREE_PROBE_STAMPS (from 1) prints its stamps (a probe build, one host
// thread; `merge`: the split merge's, as MSTAMP lines).
inline void print_after_launch(dim3 grid, cudaStream_t stream, bool merge = false) {
  static int launches = 0;
  const char* at = std::getenv("KDTREE_PROBE_STAMPS");
  if (at != nullptr && ++launches == std::atoi(at)) {
    print_stamps_kernel<<<1, 1, 0, stream>>>(grid.x * grid.y * grid.z, merge);
  }
}

}  // namespace
}  // namespace kdtree::verify::stamps

#define KDTREE_STAMP(point, value) ::kdtree::verify::stamps::record(point, value)
#define KDTREE_PAIR_CLEAR(words) ::kdtree::verify::stamps::clear_pair(words)
#define KDTREE_PAIR_STAMP(words, point) ::kdtree::verify::stamps::record_pair(words, point)
#define KDTREE_PAIR_FLUSH(words, mask) ::kdtree::verify::stamps::flush_pair(words, mask)
#else
#define KDTREE_STAMP(point, value) ((void)0)
#define KDTREE_PAIR_CLEAR(words) ((void)0)
#define KDTREE_PAIR_STAMP(words, point) ((void)0)
#define KDTREE_PAIR_FLUSH(words, mask) ((void)0)
#endif
