// Host-side interface of defragmentation: device copy / remap / sort launchers
// and the host planner. Called by src/api after validation.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kdtree_kernels.h"

namespace kdtree::defrag {

void launch_copy(const kdtree_defrag_copy_params& p, cudaStream_t stream);

size_t remap_workspace_bytes(const kdtree_defrag_remap_params& p);
void launch_remap(const kdtree_defrag_remap_params& p, void* workspace, cudaStream_t stream);

// `function`: the entry point that asks, named if CUB's size query fails.
size_t sort_workspace_bytes(int32_t index_dtype, int64_t count, int64_t num_slots, const char* function);
void launch_sort(void* slots, int32_t index_dtype, int64_t count, int64_t num_slots,
                 void* workspace, size_t workspace_bytes, cudaStream_t stream);

// Host planner; throws Error(INVALID_ARGUMENT, ...) naming the bad input
// (duplicate / out-of-range / live-and-free slot) before writing any output.
void plan(const kdtree_defrag_plan_params& p);
void fragmentation_stats(const kdtree_defrag_plan_params& p, int64_t* runs_per_request,
                         kdtree_fragmentation_stats* stats);

}  // namespace kdtree::defrag
