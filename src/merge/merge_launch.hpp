// Host-side interface of the merge kernel (kdtree_merge_attention_states).
#pragma once

#include <cuda_runtime_api.h>

#include "kdtree_kernels.h"

namespace kdtree::merge {

void launch_merge(const kdtree_merge_params& p, cudaStream_t stream);

}  // namespace kdtree::merge
