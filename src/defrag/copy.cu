// Defragmentation copy: every (move, layer) row in one launch.
//
// Tiling. A group of `lanes_per_row` threads (a power of two up to a warp,
// chosen on the host from row_bytes so short rows do not idle a whole warp)
// copies one row. Groups walk the flattened rows move-major (row = move *
// num_layers + layer) with a grid-stride loop, so neighbouring groups share a
// move's src/dst index in L1 and the grid depends only on the host fields
// max_moves and num_layers; the live move count is read on the device.
//
// Bytes in flight. Each thread issues kUnroll independent loads before its
// stores, of the widest unit the row allows: 16 B when the layer base, both
// slot offsets and row_bytes are multiples of 16. Layer bases are device data,
// so the unit is chosen per row on the device (uniform within a group); any
// alignment is correct, only narrower. A 1152-byte row is 72 16-byte units:
// one pass of a 32-lane group, up to 3 loads per lane in flight. The grid is
// one full wave of resident blocks, enough to cover HBM latency with
// moves x layers rows (4096 x 61 = 250k in the benchmark).
//
// Bounds. A move whose src or dst lies outside [0, num_slots) is skipped in
// every layer and flagged once (from layer 0). Offsets are 64-bit.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "common/cuda_check.hpp"
#include "common/device.hpp"
#include "defrag/defrag_launch.hpp"

namespace kdtree::defrag {
namespace {

constexpr int kThreads = 256;
constexpr int kUnroll = 4;
// Resident blocks per SM the register budget is held to (32 warps): latency
// hiding here is warps x bytes in flight, not registers per thread.
constexpr int kBlocksPerSm = 4;

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
  int32_t lanes_per_row;  // power of two, <= 32
};

// `units` Units from src to dst by `lanes` threads; lane `lane` takes units
// lane, lane + lanes, ... and loads kUnroll of them before storing any.
template <class Unit>
__device__ __forceinline__ void copy_row(const char* src, char* dst, int64_t units, int lane,
                                         int lanes) {
  const Unit* from = reinterpret_cast<const Unit*>(src) + lane;
  Unit* to = reinterpret_cast<Unit*>(dst) + lane;
  const int step = lanes * kUnroll;
  for (int64_t left = units - lane; left > 0; left -= step, from += step, to += step) {
    Unit staged[kUnroll];
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      if (k * lanes < left) staged[k] = from[k * lanes];
    }
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      if (k * lanes < left) to[k * lanes] = staged[k];
    }
  }
}

template <class Index>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm) copy_rows_kernel(CopyArgs a) {
  int64_t count = a.max_moves;
  if (a.num_moves != nullptr) count = max(int64_t{0}, min(*a.num_moves, a.max_moves));
  const int64_t rows = count * a.num_layers;
  const int lanes = a.lanes_per_row;
  const int lane = threadIdx.x & (lanes - 1);
  const int64_t groups = int64_t{gridDim.x} * kThreads / lanes;
  const Index* src_slots = static_cast<const Index*>(a.src_slots);
  const Index* dst_slots = static_cast<const Index*>(a.dst_slots);

  for (int64_t row = (int64_t{blockIdx.x} * kThreads + threadIdx.x) / lanes; row < rows;
       row += groups) {
    const int64_t move = row / a.num_layers;
    const int layer = static_cast<int>(row - move * a.num_layers);
    const int64_t src = static_cast<int64_t>(src_slots[move]);
    const int64_t dst = static_cast<int64_t>(dst_slots[move]);
    if (src < 0 || src >= a.num_slots || dst < 0 || dst >= a.num_slots) {
      if (layer == 0 && lane == 0 && a.error_flag != nullptr) {
        atomicOr(a.error_flag, KDTREE_FLAG_SLOT_OUT_OF_RANGE);
      }
      continue;
    }
    const uint64_t base = a.layer_base[layer];
    const uint64_t from = base + static_cast<uint64_t>(src) * a.slot_stride_bytes;
    const uint64_t to = base + static_cast<uint64_t>(dst) * a.slot_stride_bytes;
    const uint64_t alignment = from | to | static_cast<uint64_t>(a.row_bytes);
    const char* from_ptr = reinterpret_cast<const char*>(from);
    char* to_ptr = reinterpret_cast<char*>(to);
    if (alignment % 16 == 0) {
      copy_row<uint4>(from_ptr, to_ptr, a.row_bytes / 16, lane, lanes);
    } else if (alignment % 8 == 0) {
      copy_row<uint2>(from_ptr, to_ptr, a.row_bytes / 8, lane, lanes);
    } else if (alignment % 4 == 0) {
      copy_row<uint32_t>(from_ptr, to_ptr, a.row_bytes / 4, lane, lanes);
    } else {
      copy_row<uint8_t>(from_ptr, to_ptr, a.row_bytes, lane, lanes);
    }
  }
}

int lanes_for_row(int64_t row_bytes) {
  const int64_t units = (row_bytes + 15) / 16;
  int lanes = 1;
  while (lanes < 32 && lanes < units) lanes *= 2;
  return lanes;
}

}  // namespace

void launch_copy(const kdtree_defrag_copy_params& p, cudaStream_t stream) {
  if (p.max_moves <= 0 || p.num_layers <= 0) return;
  const DeviceInfo& dev = current_device("kdtree_defrag_copy");
  CopyArgs a{p.layer_base, p.slot_stride_bytes, p.row_bytes,  p.num_slots,
             p.src_slots,  p.dst_slots,         p.max_moves,  p.num_moves,
             p.error_flag, p.num_layers,        lanes_for_row(p.row_bytes)};
  // One wave of resident blocks at most; the min() first keeps the product
  // of host bounds from overflowing.
  const int64_t one_wave = int64_t{dev.sm_count} * kBlocksPerSm;
  const int64_t groups_per_wave = one_wave * kThreads / a.lanes_per_row;
  const int64_t threads_needed =
      std::min(p.max_moves, groups_per_wave) * p.num_layers * a.lanes_per_row;
  const int blocks = static_cast<int>(
      std::max<int64_t>(1, std::min((threads_needed + kThreads - 1) / kThreads, one_wave)));
  if (p.index_dtype == KDTREE_DTYPE_INT64) {
    copy_rows_kernel<int64_t><<<blocks, kThreads, 0, stream>>>(a);
  } else {
    copy_rows_kernel<int32_t><<<blocks, kThreads, 0, stream>>>(a);
  }
  check_launch("kdtree_defrag_copy", "copy_rows_kernel");
}

}  // namespace kdtree::defrag
