// Defragmentation copy: every (move, layer) row in one launch.
//
// Tiling. A group of `lanes_per_row` threads (a power of two up to a warp,
// chosen on the host from row_bytes so short rows do not idle a whole warp)
// runs tasks. A task is one move in kLayersPerTask consecutive layers: the
// group reads the move's src/dst slot once and copies that many rows with all
// their loads issued before any store. Tasks are numbered move-major
// (task = move * tasks_per_move + layer / kLayersPerTask) and groups walk them
// with a grid-stride loop; the stride is split into (moves, tasks) on the host,
// so the loop advances by adding, never dividing. The grid is one wave of
// resident blocks sized from the SM count and the host bound max_moves; the
// live move count is read on the device.
//
// Bytes in flight. Little's law: ~2.2 TB/s of reads at ~1.5 us loaded
// latency on an H200 needs > 3 MB of loads outstanding. The fast path (a full
// warp per row, row_bytes and the slot stride multiples of 16, every layer
// base of the task 16-byte aligned: checked per task, uniform in the warp)
// stages 3 rows x 3 passes of 16-byte units per lane. A 1152-byte row is 72
// units, one chunk of 32 lanes x 3 passes, so a warp has 3 x 1152 B
// outstanding and 32 warps per SM hold 110 KB: ~14.6 MB across 132 SMs. The
// next task's src/dst are loaded before this task's stores, so the index
// latency overlaps the data instead of preceding it. Data loads bypass L1
// (it keeps layer_base and the slot lists) and stores are evict-first: no
// row is read twice. Other rows (short ones, odd sizes or alignments) go one
// at a time at the widest unit they allow, 3 units per lane in flight.
//
// Bounds. A move whose src or dst lies outside [0, num_slots) is skipped in
// every layer and flagged once (by its layer-0 task); its rows are never
// addressed. Offsets are 64-bit. Sources are read through the non-coherent
// path: the header requires destinations disjoint from every source.
//
// Variants (issue 4; compile-time macros, defaults in parentheses; see
// docs/perf_notes.md "defrag copy, session 3" and scripts/defrag_sweep.sh):
//   KDTREE_DEFRAG_ROWS           rows a warp has in flight = layers per task (3)
//   KDTREE_DEFRAG_PASSES         16-byte units per lane per row in flight (3)
//   KDTREE_DEFRAG_BLOCKS_PER_SM  the register budget's occupancy target (4)
//   KDTREE_DEFRAG_STORE_CS       1: evict-first stores, 0: default stores (1)
//   KDTREE_DEFRAG_TMA            1: the bulk-copy path below on sm_90+ (1: the
//                                default on sm_90+ when the rows fit it; the
//                                warp tasks above run otherwise)
//   KDTREE_DEFRAG_TMA_WARPS / _STAGES   its pipes per block / stages per pipe
//   KDTREE_DEFRAG_TMA_WAVES             its grid in waves of resident blocks (2)
//   KDTREE_DEFRAG_TMA_STORE_EVICT_LAST  1: its stores' L2 lines evict-last (1)
// Bulk-copy path (TMA engine, sm_90+). Each warp's lane 0 is a pipe that owns
// a contiguous range of the (move, layer, chunk) items, move-major, so it
// reads each move's slots once (the next move's prefetched) and the ranges
// differ by at most one item. The grid is two waves of resident blocks: the
// SMs do not copy at one rate (on the H200 ~24 of 132 finish a one-wave
// copy in ~2/3 of the time), and the second wave's blocks go to the SMs that
// free a block first. A chunk is a whole row up to the stage size
// (1152 B rows: one item). The pipe keeps STAGES - 1 bulk loads global ->
// shared in flight (one mbarrier per stage) and stores each landed stage
// with one bulk store shared -> global; a stage is refilled once the bulk
// store before last has read it. The stores' L2 lines are marked evict-last:
// the moved rows outlive the copy's source lines in L2 (read once), so more
// of their write-back to HBM falls after the kernel (docs/perf_notes.md,
// "Defrag copy, session 7"). It runs when the host found the rows fit
// the fast path and every layer base is 16-byte aligned (checked per warp
// on the device); otherwise the grid runs the warp tasks above.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "common/cuda_check.hpp"
#include "common/device.hpp"
#include "common/mbarrier.cuh"
#include "common/mma.cuh"
#include "defrag/defrag_launch.hpp"

#ifndef KDTREE_DEFRAG_ROWS
#define KDTREE_DEFRAG_ROWS 3
#endif
#ifndef KDTREE_DEFRAG_PASSES
#define KDTREE_DEFRAG_PASSES 3
#endif
#ifndef KDTREE_DEFRAG_BLOCKS_PER_SM
#define KDTREE_DEFRAG_BLOCKS_PER_SM 4
#endif
#ifndef KDTREE_DEFRAG_STORE_CS
#define KDTREE_DEFRAG_STORE_CS 1
#endif
// The bulk-copy path with 2 pipes x 16 stages is the sm_90+ default: the
// sweep of 2026-11-29 (H200, d97c4db) measured it at 0.824 of copy bandwidth
// against 0.790 for the warp tasks in the same run (docs/perf_notes.md).
#ifndef KDTREE_DEFRAG_TMA
#define KDTREE_DEFRAG_TMA 1
#endif
#ifndef KDTREE_DEFRAG_TMA_WARPS
#define KDTREE_DEFRAG_TMA_WARPS 2
#endif
#ifndef KDTREE_DEFRAG_TMA_STAGES
#define KDTREE_DEFRAG_TMA_STAGES 16
#endif
// The bulk-copy grid in waves of resident blocks (docs/perf_notes.md, "Defrag
// copy, session 40": 2 waves +0.2..+0.6% on the bar's copy, 4 flat, 8 and 16
// lost).
#ifndef KDTREE_DEFRAG_TMA_WAVES
#define KDTREE_DEFRAG_TMA_WAVES 2
#endif
#ifndef KDTREE_DEFRAG_TMA_STORE_EVICT_LAST
#define KDTREE_DEFRAG_TMA_STORE_EVICT_LAST 1
#endif

namespace kdtree::defrag {
namespace {

constexpr int kThreads = 256;
// Resident blocks per SM the register budget is held to: 32 warps at 64
// registers, of which 36 stage data (3 rows x 3 passes x uint4). 61 layers
// make 21 tasks per move, the last with one row.
constexpr int kBlocksPerSm = KDTREE_DEFRAG_BLOCKS_PER_SM;
constexpr int kLayersPerTask = KDTREE_DEFRAG_ROWS;
constexpr int kPasses = KDTREE_DEFRAG_PASSES;
static_assert(kLayersPerTask >= 1 && kLayersPerTask <= 8, "KDTREE_DEFRAG_ROWS: 1..8");
static_assert(kPasses >= 1 && kPasses <= 8, "KDTREE_DEFRAG_PASSES: 1..8");
static_assert(kBlocksPerSm >= 1 && kBlocksPerSm <= 8, "KDTREE_DEFRAG_BLOCKS_PER_SM: 1..8");

// The bulk-copy path: pipes (warps) per block and stages per pipe. Shared
// memory per block stays within the default 48 KB (no opt-in attribute): a
// stage holds a whole row up to kTmaStageCap bytes, longer rows go in chunks.
constexpr int kTmaWarps = KDTREE_DEFRAG_TMA_WARPS;
constexpr int kTmaStages = KDTREE_DEFRAG_TMA_STAGES;
// Per pipe: mbarriers, destination addresses and sizes of its stages.
constexpr int kTmaMetaBytes = (kTmaStages * 20 + 127) / 128 * 128;
constexpr int64_t kTmaStageCap =
    ((48 * 1024) / kTmaWarps - kTmaMetaBytes) / kTmaStages / 16 * 16;
static_assert(kTmaStages >= 2 && kTmaWarps >= 1 && kTmaStageCap >= 16,
              "KDTREE_DEFRAG_TMA_WARPS x KDTREE_DEFRAG_TMA_STAGES leave no stage room");
static_assert(KDTREE_DEFRAG_TMA_WAVES >= 1 && KDTREE_DEFRAG_TMA_WAVES <= 64, "KDTREE_DEFRAG_TMA_WAVES: 1..64");

struct CopyArgs {
  const uint64_t* layer_base;
  int64_t slot_stride_bytes;
  int64_t row_bytes;
  int64_t num_slots;
  const void* src_slots;
  const void* dst_slots;
  int64_t max_moves;
  const int64_t* num_moves;
  int32_t* error_flag;
  int32_t num_layers;
  int32_t lanes_log2;      // lanes_per_row = 1 << lanes_log2, <= 32
  int32_t tasks_per_move;  // ceil(num_layers / kLayersPerTask)
  int32_t stride_tasks;    // grid stride in tasks = stride_moves * tasks_per_move
  int64_t stride_moves;    //                       + stride_tasks (< tasks_per_move)
  int32_t warp_rows;       // the fast path applies (see copy_task)
  int32_t chunks_per_row;  // bulk-copy path: ceil(row_bytes / stage_bytes)
  int64_t stage_bytes;     // bulk-copy path: bytes of one stage (multiple of 16)
  int64_t pipe_smem_bytes; // bulk-copy path: shared memory of one pipe
};

// Streaming accesses: loads skip L1, stores are evict-first in L2.
__device__ __forceinline__ uint4 load_stream(const uint4* p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
}
__device__ __forceinline__ uint2 load_stream(const uint2* p) {
  uint2 v;
  asm("ld.global.nc.L1::no_allocate.v2.u32 {%0, %1}, [%2];" : "=r"(v.x), "=r"(v.y) : "l"(p));
  return v;
}
__device__ __forceinline__ uint32_t load_stream(const uint32_t* p) {
  uint32_t v;
  asm("ld.global.nc.L1::no_allocate.u32 %0, [%1];" : "=r"(v) : "l"(p));
  return v;
}
__device__ __forceinline__ uint8_t load_stream(const uint8_t* p) { return __ldg(p); }

// KDTREE_DEFRAG_STORE_CS=0 tests whether evict-first stores cost DRAM write
// locality (hypothesis H4 of the perf notes).
template <class Unit>
__device__ __forceinline__ void store_stream(Unit* p, Unit v) {
  if constexpr (KDTREE_DEFRAG_STORE_CS != 0) {
    __stcs(p, v);
  } else {
    *p = v;
  }
}

// The fast path: kRows rows (layer bases base[r]) of `units` 16-byte units
// (units < 2^31), a full warp per row. Lane `lane` takes units lane + 32 p of
// each chunk of 32 x kPasses and loads them for every row before storing any;
// the pass offsets are immediates.
template <int kRows>
__device__ __forceinline__ void copy_rows_warp(const uint64_t (&base)[kLayersPerTask],
                                               uint64_t src_offset, uint64_t dst_offset,
                                               int units, int lane) {
  constexpr int kLanes = 32;
  const uint4* src[kRows];
  uint4* dst[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    src[r] = reinterpret_cast<const uint4*>(base[r] + src_offset) + lane;
    dst[r] = reinterpret_cast<uint4*>(base[r] + dst_offset) + lane;
  }
#pragma unroll 1
  for (int left = units - lane; left > 0; left -= kLanes * kPasses) {
    // Zeroed so a skipped pass's register is not an undefined value the
    // compiler may carry from an earlier iteration (it would keep every
    // instantiation's registers live across the whole kernel).
    uint4 staged[kRows][kPasses] = {};
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
#pragma unroll
      for (int p = 0; p < kPasses; ++p) {
        if (p * kLanes < left) staged[r][p] = load_stream(src[r] + p * kLanes);
      }
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
#pragma unroll
      for (int p = 0; p < kPasses; ++p) {
        if (p * kLanes < left) store_stream(dst[r] + p * kLanes, staged[r][p]);
      }
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      src[r] += kLanes * kPasses;
      dst[r] += kLanes * kPasses;
    }
  }
}

// copy_rows_warp<rows> for a task's row count 1..kRows (the last task of a
// move may be short): one branch per count.
template <int kRows>
__device__ __forceinline__ void copy_rows_warp_upto(int rows, const uint64_t (&base)[kLayersPerTask],
                                                    uint64_t src_offset, uint64_t dst_offset,
                                                    int units, int lane) {
  if (rows == kRows) {
    copy_rows_warp<kRows>(base, src_offset, dst_offset, units, lane);
  } else if constexpr (kRows > 1) {
    copy_rows_warp_upto<kRows - 1>(rows, base, src_offset, dst_offset, units, lane);
  }
}

// Any other row: `units` Units by `lanes` threads, kPasses loads per lane
// before its stores.
template <class Unit>
__device__ __forceinline__ void copy_row_any(const char* from, char* to, int64_t units, int lane,
                                             int lanes) {
  const Unit* src = reinterpret_cast<const Unit*>(from) + lane;
  Unit* dst = reinterpret_cast<Unit*>(to) + lane;
  const int step = lanes * kPasses;
#pragma unroll 1
  for (int64_t left = units - lane; left > 0; left -= step, src += step, dst += step) {
    Unit staged[kPasses] = {};  // as in copy_rows_warp
#pragma unroll
    for (int p = 0; p < kPasses; ++p) {
      if (p * lanes < left) staged[p] = load_stream(src + p * lanes);
    }
#pragma unroll
    for (int p = 0; p < kPasses; ++p) {
      if (p * lanes < left) store_stream(dst + p * lanes, staged[p]);
    }
  }
}

// The widest unit the row's alignment allows.
__device__ __forceinline__ void copy_row_aligned(const char* from, char* to, int64_t row_bytes,
                                              int lane, int lanes) {
  const uint64_t alignment = reinterpret_cast<uint64_t>(from) | reinterpret_cast<uint64_t>(to) |
                             static_cast<uint64_t>(row_bytes);
  if (alignment % 16 == 0) {
    copy_row_any<uint4>(from, to, row_bytes >> 4, lane, lanes);
  } else if (alignment % 8 == 0) {
    copy_row_any<uint2>(from, to, row_bytes >> 3, lane, lanes);
  } else if (alignment % 4 == 0) {
    copy_row_any<uint32_t>(from, to, row_bytes >> 2, lane, lanes);
  } else {
    copy_row_any<uint8_t>(from, to, row_bytes, lane, lanes);
  }
}

__device__ __forceinline__ bool slots_in_range(const CopyArgs& a, int64_t src, int64_t dst) {
  return src >= 0 && src < a.num_slots && dst >= 0 && dst < a.num_slots;
}

// One task: move src -> dst in layers [layer0, layer0 + kLayersPerTask).
// When the host found the rows fit the fast path (a.warp_rows: a full warp
// per row, row_bytes and the slot stride multiples of 16) and every layer
// base of the task is 16-byte aligned, the rows go together; otherwise one
// at a time at the widest unit their alignment allows.
__device__ __forceinline__ void copy_task(const CopyArgs& a, int64_t src, int64_t dst, int layer0,
                                          int lane, int lanes) {
  if (!slots_in_range(a, src, dst)) {
    if (layer0 == 0 && lane == 0 && a.error_flag != nullptr) {
      atomicOr(a.error_flag, KDTREE_FLAG_SLOT_OUT_OF_RANGE);
    }
    return;
  }
  const int rows = min(kLayersPerTask, a.num_layers - layer0);
  const uint64_t src_offset = static_cast<uint64_t>(src) * a.slot_stride_bytes;
  const uint64_t dst_offset = static_cast<uint64_t>(dst) * a.slot_stride_bytes;
  const uint64_t* bases = a.layer_base + layer0;
  if (a.warp_rows) {
    // Layers past the last repeat its base: loaded, never copied.
    uint64_t base[kLayersPerTask];
    uint64_t alignment = 0;
#pragma unroll
    for (int r = 0; r < kLayersPerTask; ++r) {
      base[r] = __ldg(bases + min(r, rows - 1));
      alignment |= base[r];
    }
    if (alignment % 16 == 0) {
      const int units = static_cast<int>(a.row_bytes >> 4);
      copy_rows_warp_upto<kLayersPerTask>(rows, base, src_offset, dst_offset, units, lane);
      return;
    }
  }
  for (int r = 0; r < rows; ++r) {
    const uint64_t base = __ldg(bases + r);
    copy_row_aligned(reinterpret_cast<const char*>(base + src_offset),
                     reinterpret_cast<char*>(base + dst_offset), a.row_bytes, lane, lanes);
  }
}

// The live move count: *num_moves clamped to [0, max_moves], or max_moves.
__device__ __forceinline__ int64_t live_moves(const CopyArgs& a) {
  if (a.num_moves == nullptr) return a.max_moves;
  return max(int64_t{0}, min(*a.num_moves, a.max_moves));
}

// Group `group` (of lanes threads) walks its tasks, grid-stride.
template <class Index>
__device__ __forceinline__ void run_tasks(const CopyArgs& a, int64_t count, int group, int lane,
                                          int lanes) {
  const Index* src_slots = static_cast<const Index*>(a.src_slots);
  const Index* dst_slots = static_cast<const Index*>(a.dst_slots);
  // The group's first task; the only division in the loop's setup.
  int64_t move = group / a.tasks_per_move;
  int task = group - static_cast<int>(move) * a.tasks_per_move;
  Index src = 0, dst = 0;
  if (move < count) {
    src = __ldg(&src_slots[move]);
    dst = __ldg(&dst_slots[move]);
  }
#pragma unroll 1
  while (move < count) {
    const Index this_src = src, this_dst = dst;
    const int layer0 = task * kLayersPerTask;
    move += a.stride_moves;
    task += a.stride_tasks;
    if (task >= a.tasks_per_move) {
      task -= a.tasks_per_move;
      ++move;
    }
    // Next task's slots, in flight while this task's rows are.
    if (move < count) {
      src = __ldg(&src_slots[move]);
      dst = __ldg(&dst_slots[move]);
    }
    copy_task(a, static_cast<int64_t>(this_src), static_cast<int64_t>(this_dst), layer0, lane,
              lanes);
  }
}

template <class Index>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm) copy_rows_kernel(CopyArgs a) {
  const int lanes = 1 << a.lanes_log2;
  const int lane = threadIdx.x & (lanes - 1);
  const int group = static_cast<int>((blockIdx.x * kThreads + threadIdx.x) >> a.lanes_log2);
  run_tasks<Index>(a, live_moves(a), group, lane, lanes);
}

// ---------------------------------------------------------------------------
// Bulk-copy path (KDTREE_DEFRAG_TMA; the copy itself on sm_90+ only)
// ---------------------------------------------------------------------------
#if KDTREE_DEFRAG_TMA
constexpr int kTmaThreads = 32 * kTmaWarps;

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
// `bytes` from global `from` into shared `to`; completes the barrier's phase.
__device__ __forceinline__ void bulk_load(uint32_t to, const void* from, uint32_t bytes,
                                          uint32_t barrier) {
  mbarrier_arrive_expect_tx(barrier, bytes);
  bulk_copy_to_shared(to, from, bytes, barrier);
}

// `bytes` from shared `from` to global `to`, as one bulk group (L2 lines
// evict-last with KDTREE_DEFRAG_TMA_STORE_EVICT_LAST: the path's notes above).
__device__ __forceinline__ void bulk_store(void* to, uint32_t from, uint32_t bytes) {
#if KDTREE_DEFRAG_TMA_STORE_EVICT_LAST
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group.L2::cache_hint [%0], [%1], %2, %3;" ::"l"(to),
               "r"(from), "r"(bytes), "l"(policy)
               : "memory");
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
#else
  bulk_store_to_global(to, from, bytes);
#endif
}

// All but the newest bulk store have read their shared memory.
__device__ __forceinline__ void bulk_wait_read_all_but_newest() {
  asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory");
}

__device__ __forceinline__ void bulk_wait_all() {
  asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}

// Walks items [begin, end) of the flattened (move, layer, chunk) space.
// Moves with a slot out of range are skipped (flagged at their first item).
template <class Index>
struct ItemCursor {
  const CopyArgs& a;
  int64_t count, left, move;
  int layer, chunk;
  int64_t src, dst, next_src, next_dst;

  __device__ __forceinline__ ItemCursor(const CopyArgs& args, int64_t live, int64_t begin, int64_t end)
      : a(args), count(live), left(end - begin) {
    const int64_t items_per_move = int64_t{a.num_layers} * a.chunks_per_row;
    move = begin / items_per_move;
    const int64_t within = begin - move * items_per_move;
    layer = static_cast<int>(within / a.chunks_per_row);
    chunk = static_cast<int>(within - int64_t{layer} * a.chunks_per_row);
    src = dst = next_src = next_dst = 0;
    if (left > 0) {
      src = slot(a.src_slots, move);
      dst = slot(a.dst_slots, move);
      prefetch_next();
    }
  }

  __device__ __forceinline__ static int64_t slot(const void* slots, int64_t move) {
    return static_cast<int64_t>(__ldg(static_cast<const Index*>(slots) + move));
  }

  // The next move's slots, in flight while this move's rows are.
  __device__ __forceinline__ void prefetch_next() {
    const int64_t items_here = int64_t{a.num_layers - layer} * a.chunks_per_row - chunk;
    if (left > items_here && move + 1 < count) {
      next_src = slot(a.src_slots, move + 1);
      next_dst = slot(a.dst_slots, move + 1);
    }
  }

  __device__ __forceinline__ void advance() {
    --left;
    if (++chunk < a.chunks_per_row) return;
    chunk = 0;
    if (++layer < a.num_layers) return;
    layer = 0;
    ++move;
    src = next_src;
    dst = next_dst;
    prefetch_next();
  }

  // The next copyable item's global source / destination and size (0 when
  // the range is done).
  struct Item {
    const char* from;
    char* to;
    uint32_t bytes;
  };
  __device__ __forceinline__ Item next() {
    while (left > 0) {
      if (!slots_in_range(a, src, dst)) {
        if (layer == 0 && chunk == 0 && a.error_flag != nullptr) {
          atomicOr(a.error_flag, KDTREE_FLAG_SLOT_OUT_OF_RANGE);
        }
        advance();
        continue;
      }
      const uint64_t base = __ldg(a.layer_base + layer);
      const int64_t at = chunk * a.stage_bytes;
      const Item item{
          reinterpret_cast<const char*>(base + static_cast<uint64_t>(src) * a.slot_stride_bytes) + at,
          reinterpret_cast<char*>(base + static_cast<uint64_t>(dst) * a.slot_stride_bytes) + at,
          static_cast<uint32_t>(min(a.stage_bytes, a.row_bytes - at))};
      advance();
      return item;
    }
    return Item{nullptr, nullptr, 0};
  }
};

// One pipe (a single thread): items [begin, end) through kTmaStages stages.
template <class Index>
__device__ __forceinline__ void run_pipe(const CopyArgs& a, int64_t count, int64_t begin, int64_t end,
                         char* pipe_smem) {
  uint64_t* barriers = reinterpret_cast<uint64_t*>(pipe_smem);
  char** destinations = reinterpret_cast<char**>(barriers + kTmaStages);
  uint32_t* sizes = reinterpret_cast<uint32_t*>(destinations + kTmaStages);
  char* data = pipe_smem + kTmaMetaBytes;
  for (int s = 0; s < kTmaStages; ++s) mbarrier_init(smem_addr(barriers + s), 1);
  mbarrier_init_fence();  // visible to the bulk-copy engine

  ItemCursor<Index> items(a, count, begin, end);
  uint32_t issued = 0, stored = 0;
  // Load number `issued` into stage issued % kTmaStages.
  auto issue = [&]() {
    const auto item = items.next();
    if (item.bytes == 0) return false;
    const int stage = static_cast<int>(issued % kTmaStages);
    destinations[stage] = item.to;
    sizes[stage] = item.bytes;
    bulk_load(smem_addr(data + stage * a.stage_bytes), item.from, item.bytes,
              smem_addr(barriers + stage));
    ++issued;
    return true;
  };
  while (issued < kTmaStages - 1 && issue()) {
  }
#pragma unroll 1
  while (stored < issued) {
    const int stage = static_cast<int>(stored % kTmaStages);
    mbarrier_wait(smem_addr(barriers + stage), (stored / kTmaStages) & 1);
    bulk_store(destinations[stage], smem_addr(data + stage * a.stage_bytes), sizes[stage]);
    ++stored;
    // At most kTmaStages - 1 loads in flight: the refilled stage is the one
    // the store before the newest read.
    bulk_wait_read_all_but_newest();
    issue();
  }
  bulk_wait_all();
}
#endif  // __CUDA_ARCH__ >= 900

// Launched on compute capability >= 9 only (launch_bulk): below sm_90 the
// kernel has no body.
template <class Index>
__global__ void __launch_bounds__(kTmaThreads) copy_rows_bulk_kernel(CopyArgs a) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const int64_t count = live_moves(a);
  const int lane = threadIdx.x & 31;
  const int warp = static_cast<int>((blockIdx.x * kTmaThreads + threadIdx.x) >> 5);
  // Bulk copies need 16-byte aligned addresses: every layer base, checked by
  // each warp so the choice is uniform without a grid barrier.
  uint32_t misaligned = 0;
  for (int l = lane; l < a.num_layers; l += 32) {
    misaligned |= static_cast<uint32_t>(__ldg(a.layer_base + l)) & 15u;
  }
  if (__reduce_or_sync(0xffffffffu, misaligned) == 0) {
    if (lane != 0) return;
    extern __shared__ __align__(128) char pipes_smem[];
    // Balanced contiguous ranges: pipe p takes items_total / pipes items,
    // plus one when p < items_total % pipes.
    const int64_t pipes = int64_t{gridDim.x} * kTmaWarps;
    const int64_t total = count * a.num_layers * a.chunks_per_row;
    const int64_t share = total / pipes, extra = total % pipes;
    const int64_t begin = share * warp + min(int64_t{warp}, extra);
    const int64_t end = begin + share + (warp < extra ? 1 : 0);
    run_pipe<Index>(a, count, begin, end,
                    pipes_smem + (threadIdx.x >> 5) * a.pipe_smem_bytes);
    return;
  }
  // Misaligned layer bases: the warp tasks, a full warp per row
  // (a.lanes_log2 == 5 here).
  run_tasks<Index>(a, count, warp, lane, 32);
#else
  (void)a;
#endif
}
#endif  // KDTREE_DEFRAG_TMA

int lanes_log2_for_row(int64_t row_bytes) {
  const int64_t units = (row_bytes + 15) / 16;
  int log2 = 0;
  while (log2 < 5 && (int64_t{1} << log2) < units) ++log2;
  return log2;
}

// Grid-stride split of `groups` groups into (moves, tasks), so the device
// loop advances by adding.
void set_stride(CopyArgs& a, int64_t groups) {
  a.stride_moves = groups / a.tasks_per_move;
  a.stride_tasks = static_cast<int32_t>(groups % a.tasks_per_move);
}

// The bulk-copy path in sm_90+ images (its kernel is empty in others, which an
// sm_90+ device runs when the build lacks its arch) when the rows fit the fast
// path; returns false (nothing launched) otherwise.
bool launch_bulk(CopyArgs a, const DeviceInfo& dev, int32_t index_dtype, cudaStream_t stream) {
#if !KDTREE_DEFRAG_TMA
  (void)a, (void)dev, (void)index_dtype, (void)stream;
  return false;
#else
  if (dev.image_arch < 900 || !a.warp_rows) return false;
  // Even chunks, 16-byte multiples: 2064 B in 2 stages of 1040 B, not 1520 +
  // 544. The count is taken again from the rounded stage so none is empty.
  const int64_t chunks = (a.row_bytes + kTmaStageCap - 1) / kTmaStageCap;
  a.stage_bytes = ((a.row_bytes + chunks - 1) / chunks + 15) / 16 * 16;
  const int64_t chunks_per_row = (a.row_bytes + a.stage_bytes - 1) / a.stage_bytes;
  // Items (move, layer, chunk) are counted in int64 on the device.
  // (chunks_per_row <= row_bytes / 16 < 2^31: warp_rows holds.)
  int64_t max_items = 0;
  if (__builtin_mul_overflow(a.max_moves, a.num_layers * chunks_per_row, &max_items)) return false;
  a.chunks_per_row = static_cast<int32_t>(chunks_per_row);
  a.pipe_smem_bytes = kTmaMetaBytes + kTmaStages * a.stage_bytes;
  const size_t smem = static_cast<size_t>(kTmaWarps * a.pipe_smem_bytes);
  auto kernel = index_dtype == KDTREE_DTYPE_INT64 ? copy_rows_bulk_kernel<int64_t>
                                                  : copy_rows_bulk_kernel<int32_t>;
  int per_sm = 0;
  check_cuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kTmaThreads, smem),
             "kdtree_defrag_copy", "occupancy of copy_rows_bulk_kernel");
  const int64_t one_wave = int64_t{dev.sm_count} * std::max(per_sm, 1);
  // KDTREE_DEFRAG_TMA_WAVES waves, and no more pipes than items.
  const int64_t items = std::min(max_items, one_wave * kTmaWarps * KDTREE_DEFRAG_TMA_WAVES);
  const int blocks = static_cast<int>(std::max<int64_t>(1, (items + kTmaWarps - 1) / kTmaWarps));
  set_stride(a, int64_t{blocks} * kTmaWarps);  // for the misaligned fallback
  kernel<<<blocks, kTmaThreads, smem, stream>>>(a);
  check_launch("kdtree_defrag_copy", "copy_rows_bulk_kernel");
  return true;
#endif
}

}  // namespace

void launch_copy(const kdtree_defrag_copy_params& p, cudaStream_t stream) {
  if (p.max_moves <= 0 || p.num_layers <= 0) return;
  const DeviceInfo& dev = current_device("kdtree_defrag_copy");
  const int lanes_log2 = lanes_log2_for_row(p.row_bytes);
  const int tasks_per_move = (p.num_layers + kLayersPerTask - 1) / kLayersPerTask;

  CopyArgs a{};
  a.layer_base = p.layer_base;
  a.slot_stride_bytes = p.slot_stride_bytes;
  a.row_bytes = p.row_bytes;
  a.num_slots = p.num_slots;
  a.src_slots = p.src_slots;
  a.dst_slots = p.dst_slots;
  a.max_moves = p.max_moves;
  a.num_moves = p.num_moves;
  a.error_flag = p.error_flag;
  a.num_layers = p.num_layers;
  a.lanes_log2 = lanes_log2;
  a.tasks_per_move = tasks_per_move;
  a.warp_rows = lanes_log2 == 5 && p.row_bytes % 16 == 0 && p.slot_stride_bytes % 16 == 0 &&
                (p.row_bytes >> 4) < (int64_t{1} << 31);
  if (launch_bulk(a, dev, p.index_dtype, stream)) return;

  // The warp tasks: one wave of resident blocks at most; the min() first
  // keeps the product of host bounds from overflowing.
  const int64_t groups_per_block = kThreads >> lanes_log2;
  const int64_t one_wave = int64_t{dev.sm_count} * kBlocksPerSm;
  const int64_t tasks = std::min(p.max_moves, one_wave * groups_per_block) * tasks_per_move;
  const int blocks = static_cast<int>(
      std::max<int64_t>(1, std::min((tasks + groups_per_block - 1) / groups_per_block, one_wave)));
  set_stride(a, blocks * groups_per_block);
  if (p.index_dtype == KDTREE_DTYPE_INT64) {
    copy_rows_kernel<int64_t><<<blocks, kThreads, 0, stream>>>(a);
  } else {
    copy_rows_kernel<int32_t><<<blocks, kThreads, 0, stream>>>(a);
  }
  check_launch("kdtree_defrag_copy", "copy_rows_kernel");
}

}  // namespace kdtree::defrag
