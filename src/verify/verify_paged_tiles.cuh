// Launch and attribute helpers for one (element type, KV storage) pair of the
// split-K kernel, instantiated in the small verify_paged_*.cu files so the
// build compiles them in parallel.
#pragma once

#include <cuda_runtime_api.h>

#include "common/cuda_check.hpp"
#include "verify/verify_paged_kernel.cuh"

namespace kdtree::verify {

template <class Cfg, class T, bool kKvFp8>
void launch_config(const PagedArgs& a, cudaStream_t stream) {
  const int rows = a.max_q_len * a.num_heads;
  const dim3 grid((rows + Cfg::kBlockM - 1) / Cfg::kBlockM, a.num_splits, a.batch_size);
  verify_paged_kernel<Cfg, T, kKvFp8><<<grid, Cfg::kThreads, Cfg::kSmemBytes, stream>>>(a);
  check_launch("kdtree_verify_paged", "verify_paged_kernel");
}

template <class T, bool kKvFp8>
void launch_tiles(const PagedArgs& a, TileConfigId config, cudaStream_t stream) {
  switch (config) {
    case TileConfigId::kLarge: return launch_config<LargeConfig, T, kKvFp8>(a, stream);
    case TileConfigId::kMedium: return launch_config<MediumConfig, T, kKvFp8>(a, stream);
    case TileConfigId::kSmall: return launch_config<SmallConfig, T, kKvFp8>(a, stream);
  }
}

template <class Cfg, class T, bool kKvFp8>
void allow_smem(size_t smem_optin, const char* function) {
  allow_dynamic_smem(verify_paged_kernel<Cfg, T, kKvFp8>, Cfg::kSmemBytes, smem_optin, function, "the verify tiles",
                     "verify_paged_kernel");
}

// Raises the opt-in shared memory of the config this device launches.
template <class T, bool kKvFp8>
void prepare_tiles(TileConfigId config, size_t smem_optin, const char* function) {
  switch (config) {
    case TileConfigId::kLarge: return allow_smem<LargeConfig, T, kKvFp8>(smem_optin, function);
    case TileConfigId::kMedium: return allow_smem<MediumConfig, T, kKvFp8>(smem_optin, function);
    case TileConfigId::kSmall: return allow_smem<SmallConfig, T, kKvFp8>(smem_optin, function);
  }
}

#define KDTREE_INSTANTIATE_VERIFY_TILES(T, FP8)                                                      \
  template void launch_tiles<T, FP8>(const PagedArgs&, TileConfigId, cudaStream_t);                  \
  template void prepare_tiles<T, FP8>(TileConfigId, size_t, const char*);

// Each (type, KV storage) pair is compiled once, in its verify_paged_*.cu.
#define KDTREE_DECLARE_VERIFY_TILES(T, FP8)                                                          \
  extern template void launch_tiles<T, FP8>(const PagedArgs&, TileConfigId, cudaStream_t);           \
  extern template void prepare_tiles<T, FP8>(TileConfigId, size_t, const char*);
KDTREE_DECLARE_VERIFY_TILES(__nv_bfloat16, false)
KDTREE_DECLARE_VERIFY_TILES(__half, false)
KDTREE_DECLARE_VERIFY_TILES(__nv_bfloat16, true)
KDTREE_DECLARE_VERIFY_TILES(__half, true)

}  // namespace kdtree::verify

namespace kdtree::verify {
// Reduces the num_splits partial states of every request row into out / lse
// (verify_paged_merge.cu); sm_count sizes its split parts. dependent_launch
// (compute capability 9.0+): launched as a programmatic dependent of the
// split kernel just before it.
void launch_split_merge(const PagedArgs& a, int sm_count, bool dependent_launch, cudaStream_t stream);
}  // namespace kdtree::verify
