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
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "common/cuda_check.hpp"
#include "common/device.hpp"
#include "defrag/defrag_launch.hpp"

namespace kdtree::defrag {
namespace {

constexpr int kThreads = 256;
// Resident blocks per SM the register budget is held to: 32 warps at 64
// registers, of which 36 stage data (3 rows x 3 passes x uint4). 61 layers
// make 21 tasks per move, the last with one row.
constexpr int kBlocksPerSm = 4;
constexpr int kLayersPerTask = 3;
constexpr int kPasses = 3;

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

__device__ __forceinline__ void store_stream(uint4* p, uint4 v) { __stcs(p, v); }
__device__ __forceinline__ void store_stream(uint2* p, uint2 v) { __stcs(p, v); }
__device__ __forceinline__ void store_stream(uint32_t* p, uint32_t v) { __stcs(p, v); }
__device__ __forceinline__ void store_stream(uint8_t* p, uint8_t v) { __stcs(p, v); }

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

// One task: move src -> dst in layers [layer0, layer0 + kLayersPerTask).
// When the host found the rows fit the fast path (a.warp_rows: a full warp
// per row, row_bytes and the slot stride multiples of 16) and every layer
// base of the task is 16-byte aligned, the rows go together; otherwise one
// at a time at the widest unit their alignment allows.
__device__ __forceinline__ void copy_task(const CopyArgs& a, int64_t src, int64_t dst, int layer0,
                                          int lane, int lanes) {
  static_assert(kLayersPerTask == 3, "the fast path has one branch per row count");
  if (src < 0 || src >= a.num_slots || dst < 0 || dst >= a.num_slots) {
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
      if (rows == 3) {
        copy_rows_warp<3>(base, src_offset, dst_offset, units, lane);
      } else if (rows == 2) {
        copy_rows_warp<2>(base, src_offset, dst_offset, units, lane);
      } else {
        copy_rows_warp<1>(base, src_offset, dst_offset, units, lane);
      }
      return;
    }
  }
  for (int r = 0; r < rows; ++r) {
    const uint64_t base = __ldg(bases + r);
    copy_row_aligned(reinterpret_cast<const char*>(base + src_offset),
                     reinterpret_cast<char*>(base + dst_offset), a.row_bytes, lane, lanes);
  }
}

template <class Index>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm) copy_rows_kernel(CopyArgs a) {
  int64_t count = a.max_moves;
  if (a.num_moves != nullptr) count = max(int64_t{0}, min(*a.num_moves, a.max_moves));
  const int lanes = 1 << a.lanes_log2;
  const int lane = threadIdx.x & (lanes - 1);
  const Index* src_slots = static_cast<const Index*>(a.src_slots);
  const Index* dst_slots = static_cast<const Index*>(a.dst_slots);

  // The group's first task; the only division in the kernel.
  const int group = static_cast<int>((blockIdx.x * kThreads + threadIdx.x) >> a.lanes_log2);
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

int lanes_log2_for_row(int64_t row_bytes) {
  const int64_t units = (row_bytes + 15) / 16;
  int log2 = 0;
  while (log2 < 5 && (int64_t{1} << log2) < units) ++log2;
  return log2;
}

}  // namespace

void launch_copy(const kdtree_defrag_copy_params& p, cudaStream_t stream) {
  if (p.max_moves <= 0 || p.num_layers <= 0) return;
  const DeviceInfo& dev = current_device("kdtree_defrag_copy");
  const int lanes_log2 = lanes_log2_for_row(p.row_bytes);
  const int tasks_per_move = (p.num_layers + kLayersPerTask - 1) / kLayersPerTask;
  const int64_t groups_per_block = kThreads >> lanes_log2;
  // One wave of resident blocks at most; the min() first keeps the product
  // of host bounds from overflowing.
  const int64_t one_wave = int64_t{dev.sm_count} * kBlocksPerSm;
  const int64_t tasks = std::min(p.max_moves, one_wave * groups_per_block) * tasks_per_move;
  const int blocks = static_cast<int>(
      std::max<int64_t>(1, std::min((tasks + groups_per_block - 1) / groups_per_block, one_wave)));
  const int64_t stride = blocks * groups_per_block;

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
  a.stride_moves = stride / tasks_per_move;
  a.stride_tasks = static_cast<int32_t>(stride % tasks_per_move);
  a.warp_rows = lanes_log2 == 5 && p.row_bytes % 16 == 0 && p.slot_stride_bytes % 16 == 0 &&
                (p.row_bytes >> 4) < (int64_t{1} << 31);
  if (p.index_dtype == KDTREE_DTYPE_INT64) {
    copy_rows_kernel<int64_t><<<blocks, kThreads, 0, stream>>>(a);
  } else {
    copy_rows_kernel<int32_t><<<blocks, kThreads, 0, stream>>>(a);
  }
  check_launch("kdtree_defrag_copy", "copy_rows_kernel");
}

}  // namespace kdtree::defrag
