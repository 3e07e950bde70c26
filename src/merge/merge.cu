// kdtree_merge_attention_states: S partial states (out_s, lse_s) -> one.
//
// Tiling: a block per (token, chunk of heads); grid (num_tokens,
// ceil(H / heads_per_block)), block (head_dim / 8, heads_per_block) with
// about 256 threads. Each thread owns 8 consecutive value dims of one head:
// it computes the merged lse from the S lse values (merge_math::merged_lse,
// the same few loads for every thread of the head, served by L1), then walks
// the states s = 0..S-1 in order adding exp(lse_s - lse) * out_s in fp32, and
// writes its 8 outputs. The order is fixed, so results are bitwise
// reproducible. The 8 dims are one 16-byte load for bf16 / fp16 (two for f32)
// when the base pointers and strides allow; otherwise the same thread mapping
// reads them one by one. States with weight 0 (lse -inf) are not read, so
// their out may hold anything, NaN included.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>

#include "common/cuda_check.hpp"
#include "merge/merge_launch.hpp"
#include "merge/merge_math.cuh"

namespace kdtree::merge {
namespace {

constexpr int kDimsPerThread = 8;
constexpr int kTargetThreads = 256;

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ void from_float(float v, float* p) { *p = v; }
__device__ __forceinline__ void from_float(float v, __nv_bfloat16* p) { *p = __float2bfloat16_rn(v); }
__device__ __forceinline__ void from_float(float v, __half* p) { *p = __float2half_rn(v); }

// 8 elements of T at p, as 16-byte accesses when kVector (p 16-byte aligned).
template <bool kVector, class T>
__device__ __forceinline__ void load8(const T* p, float (&v)[kDimsPerThread]) {
  if constexpr (kVector) {
    constexpr int kPerVector = 16 / sizeof(T);
    for (int c = 0; c < kDimsPerThread / kPerVector; ++c) {
      uint4 raw = reinterpret_cast<const uint4*>(p)[c];
      const T* elems = reinterpret_cast<const T*>(&raw);
      for (int e = 0; e < kPerVector; ++e) v[c * kPerVector + e] = to_float(elems[e]);
    }
  } else {
    for (int e = 0; e < kDimsPerThread; ++e) v[e] = to_float(p[e]);
  }
}

template <bool kVector, class T>
__device__ __forceinline__ void store8(T* p, const float (&v)[kDimsPerThread]) {
  if constexpr (kVector) {
    constexpr int kPerVector = 16 / sizeof(T);
    for (int c = 0; c < kDimsPerThread / kPerVector; ++c) {
      uint4 raw;
      T* elems = reinterpret_cast<T*>(&raw);
      for (int e = 0; e < kPerVector; ++e) from_float(v[c * kPerVector + e], &elems[e]);
      reinterpret_cast<uint4*>(p)[c] = raw;
    }
  } else {
    for (int e = 0; e < kDimsPerThread; ++e) from_float(v[e], &p[e]);
  }
}

template <bool kVector, class StateT, class OutT>
__global__ void merge_states_kernel(const kdtree_merge_params p) {
  const int64_t t = blockIdx.x;
  const int32_t h = blockIdx.y * blockDim.y + threadIdx.y;
  if (h >= p.num_heads) return;
  const int32_t d0 = threadIdx.x * kDimsPerThread;
  const int64_t rows = p.num_tokens * p.num_heads;
  const int64_t row = t * p.num_heads + h;

  const float* lse_s = p.states_lse + row;
  auto lse_at = [&](int s) { return lse_s[s * rows]; };
  const float lse = merge_math::merged_lse<float>(p.num_states, lse_at);

  float acc[kDimsPerThread] = {};
  const StateT* states = static_cast<const StateT*>(p.states) + t * p.states_stride_token +
                         int64_t(h) * p.states_stride_head + d0;
  for (int s = 0; s < p.num_states; ++s) {
    const float weight = merge_math::state_weight(lse_at(s), lse);
    if (weight == 0.0f) continue;
    float v[kDimsPerThread];
    load8<kVector>(states + s * p.states_stride_state, v);
    for (int e = 0; e < kDimsPerThread; ++e) acc[e] = fmaf(weight, v[e], acc[e]);
  }
  OutT* out = static_cast<OutT*>(p.out) + t * p.out_stride_token + int64_t(h) * p.out_stride_head + d0;
  store8<kVector>(out, acc);
  if (threadIdx.x == 0 && p.lse) p.lse[row] = lse;
}

bool vector_friendly(const void* base, size_t elem_bytes, std::initializer_list<int64_t> strides) {
  if (reinterpret_cast<uintptr_t>(base) % 16 != 0) return false;
  for (int64_t stride : strides)
    if ((stride * int64_t(elem_bytes)) % 16 != 0) return false;
  return true;
}

template <class StateT, class OutT>
void launch_typed(const kdtree_merge_params& p, cudaStream_t stream) {
  const int threads_per_head = p.head_dim / kDimsPerThread;
  const int heads_per_block = std::max(1, std::min(p.num_heads, kTargetThreads / threads_per_head));
  dim3 block(threads_per_head, heads_per_block);
  dim3 grid(static_cast<unsigned>(p.num_tokens),
            static_cast<unsigned>((p.num_heads + heads_per_block - 1) / heads_per_block));
  const bool vector =
      vector_friendly(p.states, sizeof(StateT),
                      {p.states_stride_state, p.states_stride_token, p.states_stride_head}) &&
      vector_friendly(p.out, sizeof(OutT), {p.out_stride_token, p.out_stride_head});
  if (vector) {
    merge_states_kernel<true, StateT, OutT><<<grid, block, 0, stream>>>(p);
  } else {
    merge_states_kernel<false, StateT, OutT><<<grid, block, 0, stream>>>(p);
  }
}

template <class StateT>
void launch_for_out(const kdtree_merge_params& p, cudaStream_t stream) {
  switch (p.out_dtype) {
    case KDTREE_DTYPE_F32:
      launch_typed<StateT, float>(p, stream);
      break;
    case KDTREE_DTYPE_BF16:
      launch_typed<StateT, __nv_bfloat16>(p, stream);
      break;
    default:
      launch_typed<StateT, __half>(p, stream);
      break;
  }
}

}  // namespace

void launch_merge(const kdtree_merge_params& p, cudaStream_t stream) {
  if (p.num_tokens == 0) return;
  switch (p.states_dtype) {
    case KDTREE_DTYPE_F32:
      launch_for_out<float>(p, stream);
      break;
    case KDTREE_DTYPE_BF16:
      launch_for_out<__nv_bfloat16>(p, stream);
      break;
    default:
      launch_for_out<__half>(p, stream);
      break;
  }
  check_launch("kdtree_merge_attention_states", "merge_states_kernel");
}

}  // namespace kdtree::merge
