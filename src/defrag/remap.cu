// Defragmentation remap: rewrite moved slot ids in a [rows x cols] slot table
// (SGLang's req_to_token) through a dense slot map in the caller's workspace.
//
// Three launches on one stream, each a grid-stride loop whose grid depends
// only on host fields (num_slots, max_moves, rows, cols):
//   1. fill_map:    map[s] = -1 for every slot, one thread per slot.
//   2. scatter_map: map[src[m]] = dst[m] for m < the device move count; a move
//                   with src or dst outside [0, num_slots) is skipped and
//                   flagged. Sources are unique (the planner's contract), so
//                   the writes never race. With nothing to rewrite (no rows,
//                   cols or slots) there is no map and no fill or rewrite:
//                   the scatter only flags, as the copy does.
//   3. rewrite:     blockIdx.y walks rows, blockIdx.x and the threads stride
//                   columns (grid.x sized for ~4 entries per thread); an entry below the row's length holding a slot
//                   v with map[v] >= 0 becomes map[v]. Other entries are not
//                   written, so a table can be remapped in pieces (rows
//                   split between calls) and a value outside the pool is
//                   left alone.
// The map is int32: num_slots <= 2^31 (checked by the API layer).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "common/cuda_check.hpp"
#include "defrag/defrag_launch.hpp"

namespace kdtree::defrag {
namespace {

constexpr int kThreads = 256;
constexpr int kColsPerTile = kThreads * 4;
constexpr int64_t kMaxBlocks = 4096;  // grid-stride beyond this
constexpr int64_t kMaxGridY = 65535;
constexpr size_t kMapAlignment = 256;

int grid_for(int64_t items, int64_t per_block) {
  return static_cast<int>(std::max<int64_t>(1, std::min((items + per_block - 1) / per_block, kMaxBlocks)));
}

__global__ void __launch_bounds__(kThreads) fill_map_kernel(int32_t* map, int64_t num_slots) {
  for (int64_t s = int64_t{blockIdx.x} * kThreads + threadIdx.x; s < num_slots;
       s += int64_t{gridDim.x} * kThreads) {
    map[s] = -1;
  }
}

template <class Index>
__global__ void __launch_bounds__(kThreads)
    scatter_map_kernel(int32_t* map, int64_t num_slots, const Index* src_slots,
                       const Index* dst_slots, int64_t max_moves, const int64_t* num_moves,
                       int32_t* error_flag) {
  int64_t count = max_moves;
  if (num_moves != nullptr) count = max(int64_t{0}, min(*num_moves, max_moves));
  for (int64_t m = int64_t{blockIdx.x} * kThreads + threadIdx.x; m < count;
       m += int64_t{gridDim.x} * kThreads) {
    const int64_t src = static_cast<int64_t>(src_slots[m]);
    const int64_t dst = static_cast<int64_t>(dst_slots[m]);
    if (src < 0 || src >= num_slots || dst < 0 || dst >= num_slots) {
      if (error_flag != nullptr) atomicOr(error_flag, KDTREE_FLAG_SLOT_OUT_OF_RANGE);
      continue;
    }
    if (map != nullptr) map[src] = static_cast<int32_t>(dst);
  }
}

template <class Table>
__global__ void __launch_bounds__(kThreads)
    rewrite_kernel(Table* table, int64_t rows, int64_t cols, int64_t row_stride,
                   const int32_t* row_lengths, const int32_t* map, int64_t num_slots) {
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const int64_t length = row_lengths != nullptr
                               ? min(cols, max(int64_t{0}, static_cast<int64_t>(row_lengths[r])))
                               : cols;
    Table* row = table + r * row_stride;
    for (int64_t c = int64_t{blockIdx.x} * kThreads + threadIdx.x; c < length;
         c += int64_t{gridDim.x} * kThreads) {
      const int64_t v = static_cast<int64_t>(row[c]);
      if (v < 0 || v >= num_slots) continue;
      const int32_t to = map[v];
      if (to >= 0) row[c] = static_cast<Table>(to);
    }
  }
}

}  // namespace

size_t remap_workspace_bytes(const kdtree_defrag_remap_params& p) {
  if (p.rows <= 0 || p.cols <= 0 || p.num_slots <= 0) return 0;  // nothing to rewrite
  const size_t map_bytes = static_cast<size_t>(p.num_slots) * sizeof(int32_t);
  return (map_bytes + kMapAlignment - 1) / kMapAlignment * kMapAlignment;
}

void launch_remap(const kdtree_defrag_remap_params& p, void* workspace, cudaStream_t stream) {
  int32_t* map = remap_workspace_bytes(p) > 0 ? static_cast<int32_t*>(workspace) : nullptr;
  const char* function = "kdtree_defrag_remap";

  if (map != nullptr) {
    fill_map_kernel<<<grid_for(p.num_slots, kThreads), kThreads, 0, stream>>>(map, p.num_slots);
    check_launch(function, "fill_map_kernel");
  }

  const int blocks = grid_for(p.max_moves, kThreads);
  if (p.index_dtype == KDTREE_DTYPE_INT64) {
    scatter_map_kernel<<<blocks, kThreads, 0, stream>>>(
        map, p.num_slots, static_cast<const int64_t*>(p.src_slots),
        static_cast<const int64_t*>(p.dst_slots), p.max_moves, p.num_moves, p.error_flag);
  } else {
    scatter_map_kernel<<<blocks, kThreads, 0, stream>>>(
        map, p.num_slots, static_cast<const int32_t*>(p.src_slots),
        static_cast<const int32_t*>(p.dst_slots), p.max_moves, p.num_moves, p.error_flag);
  }
  check_launch(function, "scatter_map_kernel");

  if (map == nullptr) return;
  const dim3 grid(grid_for(p.cols, kColsPerTile), static_cast<unsigned>(std::min(p.rows, kMaxGridY)));
  if (p.table_dtype == KDTREE_DTYPE_INT64) {
    rewrite_kernel<<<grid, kThreads, 0, stream>>>(static_cast<int64_t*>(p.table), p.rows, p.cols,
                                                  p.row_stride, p.row_lengths, map, p.num_slots);
  } else {
    rewrite_kernel<<<grid, kThreads, 0, stream>>>(static_cast<int32_t*>(p.table), p.rows, p.cols,
                                                  p.row_stride, p.row_lengths, map, p.num_slots);
  }
  check_launch(function, "rewrite_kernel");
}

}  // namespace kdtree::defrag
