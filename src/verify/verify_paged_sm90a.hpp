// The Hopper (sm_90a, wgmma) split-K verify kernels' host interface
// (verify_paged_sm90a.cu, verify_paged_sm90a_pingpong.cu). Their grid, split
// plan, workspace and merge are the portable kernel's; only the block's
// inner loop differs.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "verify/verify_paged_args.cuh"

namespace kdtree::verify {

// Query rows per block and keys per KV tile (the split plan's granules).
constexpr int kSm90aRows = 64;
constexpr int kSm90aKeys = 64;

// Splits of at least this many tiles run the ping-pong kernel
// (verify_paged_sm90a_pingpong.cu), shorter ones the single score warpgroup
// kernel (verify_paged_sm90a.cu). Measured on an H200 (session 15, once the
// ping-pong's gather stopped prefetching to L2): the ping-pong is 4-6% faster
// at 62-65 tiles per split and ~2% at 48; 1%, 6%, 13% and 23% slower at 32,
// 24, 16 and 8-9 (its longer start).
constexpr int64_t kSm90aPingPongTiles = 48;

// Whether this library carries the sm_90a cubin (built with KDTREE_SM90A).
bool sm90a_built();

// Whether a call whose longest request has max_kv_len keys, in num_splits
// splits, runs the ping-pong kernel (KDTREE_SM90A_SCHEDULE: 1 never, 2
// always, else by kSm90aPingPongTiles).
bool sm90a_pingpong(int64_t max_kv_len, int num_splits);

// T: __nv_bfloat16 or __half, q's type and KV's, or with kKvFp8 q's for fp8
// e4m3 KV (converted to T in shared memory).
template <class T, bool kKvFp8>
void launch_sm90a(const PagedArgs& a, cudaStream_t stream);
template <class T, bool kKvFp8>
void launch_sm90a_pingpong(const PagedArgs& a, cudaStream_t stream);
// Raise the kernels' opt-in shared memory; fail UNSUPPORTED if the device
// offers less.
template <class T, bool kKvFp8>
void prepare_sm90a(size_t smem_optin, const char* function);
template <class T, bool kKvFp8>
void prepare_sm90a_pingpong(size_t smem_optin, const char* function);

}  // namespace kdtree::verify
