// The Hopper (sm_90a, wgmma) split-K verify kernel's host interface
// (verify_paged_sm90a.cu). Its grid, split plan, workspace and merge are the
// portable kernel's; only the block's inner loop differs.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "verify/verify_paged_args.cuh"

namespace kdtree::verify {

// Query rows per block and keys per KV tile (the split plan's granules).
constexpr int kSm90aRows = 64;
constexpr int kSm90aKeys = 64;

// Whether this library carries the sm_90a cubin (built with KDTREE_SM90A).
bool sm90a_built();

// T: __nv_bfloat16 or __half (q and KV; fp8 KV takes the portable path).
template <class T>
void launch_sm90a(const PagedArgs& a, cudaStream_t stream);
// Raises the kernel's opt-in shared memory; fails UNSUPPORTED if the device
// offers less.
template <class T>
void prepare_sm90a(size_t smem_optin, const char* function);

}  // namespace kdtree::verify
