// Host-side interface of the verify kernels, called by src/api after
// validation. Nothing here validates arguments; everything here may throw
// kdtree::Error (CUDA failures) and only enqueues work on `stream`.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "common/device.hpp"
#include "kdtree_kernels.h"

namespace kdtree::verify {

// The most split-K partial states one verify call may ask for (num_splits);
// the merge keeps one weight per split in shared memory.
inline constexpr int kMaxSplits = 128;

// The split kernel a call runs: the portable tiles (mma.sync + cp.async,
// sm_80..sm_120), or on sm_90a, for every KV dtype, the single-warpgroup
// wgmma kernel (short splits) or the ping-pong kernel (long splits, lead
// plans).
enum class PagedKernel { kTiles, kSm90a, kSm90aPingPong };

// Host-only decisions for one call, a pure function of host fields and the
// device's SM count (so workspace size and grid are capture-stable).
struct Plan {
  int num_splits = 1;          // resolved split-K factor (>= 1)
  size_t workspace_bytes = 0;  // partial states; 0 when num_splits == 1
  // A lead plan (PagedArgs::lead_keys; 0: none): num_splits - 1 lead splits
  // of lead_keys keys and one last split, for the sm_90a ping-pong kernel.
  int64_t lead_keys = 0;
  PagedKernel kernel = PagedKernel::kTiles;
};

Plan make_plan(const kdtree_verify_paged_params& p, const DeviceInfo& dev);

// Sets kernel attributes (opt-in shared memory) for the current device.
// Called once per device by kdtree::prepared_device(); `function` names the
// entry point that triggered it, for the error message.
void prepare_kernels(const DeviceInfo& dev, const char* function);

// The production split-K tensor-core verify. `workspace` holds
// plan.workspace_bytes.
void launch_paged(const kdtree_verify_paged_params& p, const Plan& plan, void* workspace,
                  const DeviceInfo& dev, cudaStream_t stream);

// The naive fp32 GPU oracle (kdtree_verify_paged_reference).
void launch_paged_reference(const kdtree_verify_paged_params& p, cudaStream_t stream);

// kdtree_verify_contiguous.
void launch_contiguous(const kdtree_verify_contiguous_params& p, cudaStream_t stream);

}  // namespace kdtree::verify
