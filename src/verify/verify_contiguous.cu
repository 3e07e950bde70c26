// kdtree_verify_contiguous: one request, contiguous f32 or bf16 KV.
//
// Tiling: a block of 8 warps per (query row i, group of 8 heads); grid
// (q_len, ceil(H / 8)). The block walks the kv rows in tiles of kTileKeys:
// all 256 threads stage a tile in shared memory as fp32 (36 KiB, coalesced
// row loads), then warp w serves head 8*group + w against the whole tile, so
// each kv row read from global memory feeds 8 heads. Per tile a warp computes
// the kTileKeys scores (lane l holds q dims l + 32k in registers; dot products
// are warp-reduced with shuffles), raises its running max once, rescales, and
// accumulates p * v into the 16 value dims each lane owns. All math is fp32
// FMA; the f32 path stays within 1e-5 relative of the fp64 reference for the
// kv lengths this entry point is meant for (tests, small requests). There is
// no split over kv: long requests with few heads get few blocks, which is
// accepted here; kdtree_verify_paged is the fast path.
//
// Visibility: rows r < kv_len - q_len are the prefix (always visible); tail
// key j = r - prefix is visible per mask_kind (NONE, CAUSAL, TREE_DENSE
// [q_len, q_len] bytes, TREE_BITS [q_len, mask_row_bytes] bits).
#include <cuda_bf16.h>

#include <cstdint>

#include "common/cuda_check.hpp"
#include "common/mla_dims.hpp"
#include "common/request_rules.hpp"
#include "merge/merge_math.cuh"
#include "verify/verify_launch.hpp"

namespace kdtree::verify {
namespace {

constexpr int kWarps = 8;  // = heads per block
constexpr int kThreads = kWarps * 32;
constexpr int kTileKeys = 16;
constexpr int kScorePerLane = kHeadDim / 32;        // 18
constexpr int kValuePerLane = kLatentDim / 32;  // 16

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ void store(float* p, float v) { *p = v; }
__device__ __forceinline__ void store(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }

template <class InT, class OutT>
__global__ void __launch_bounds__(kThreads)
verify_contiguous_kernel(const kdtree_verify_contiguous_params p) {
  __shared__ float tile[kTileKeys][kHeadDim];

  const int32_t i = blockIdx.x;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int32_t h = blockIdx.y * kWarps + warp;
  const bool has_head = h < p.num_heads;  // idle warps still help stage tiles
  const int64_t prefix = p.kv_len - p.q_len;

  float q[kScorePerLane];
  if (has_head) {
    const InT* q_row = static_cast<const InT*>(p.q) + int64_t(i) * p.q_stride_token + int64_t(h) * p.q_stride_head;
    for (int k = 0; k < kScorePerLane; ++k) q[k] = to_float(q_row[lane + 32 * k]) * p.sm_scale;
  }
  merge_math::RunningLse<float> state;
  float acc[kValuePerLane];
  for (int k = 0; k < kValuePerLane; ++k) acc[k] = 0.0f;

  const InT* kv = static_cast<const InT*>(p.kv);
  for (int64_t tile_begin = 0; tile_begin < p.kv_len; tile_begin += kTileKeys) {
    __syncthreads();  // the previous tile is consumed
#pragma unroll 1
    for (int e = threadIdx.x; e < kTileKeys * kHeadDim; e += kThreads) {
      int r = e / kHeadDim, d = e % kHeadDim;
      int64_t row = tile_begin + r;
      tile[r][d] = row < p.kv_len ? to_float(kv[row * p.kv_stride + d]) : 0.0f;
    }
    __syncthreads();
    if (!has_head) continue;

    float score[kTileKeys];
    float tile_max = merge_math::negative_infinity<float>();
    // Both loops over the tile fully unrolled: score[] must stay in registers
    // (sm_120's ptxas otherwise kept the mask switch loop rolled and put
    // score[] in a 64-byte stack frame). Same operations in the same order.
#pragma unroll
    for (int r = 0; r < kTileKeys; ++r) {
      float dot = 0.0f;
      for (int k = 0; k < kScorePerLane; ++k) dot = fmaf(q[k], tile[r][lane + 32 * k], dot);
      for (int offset = 16; offset > 0; offset /= 2) dot += __shfl_xor_sync(0xffffffffu, dot, offset);
      const int64_t row = tile_begin + r;
      const bool visible =
          row < p.kv_len &&
          (row < prefix || tail_key_visible(p.mask_kind, p.mask, p.mask_row_bytes, prefix, p.q_len, i, int32_t(row - prefix)));
      score[r] = visible ? dot : merge_math::negative_infinity<float>();
      tile_max = fmaxf(tile_max, score[r]);
    }
    if (tile_max == merge_math::negative_infinity<float>()) continue;
    // A fence for the compiler: re-read the tile below instead of keeping the
    // 16 x 16 values of the score loop alive in registers (which spills).
    __syncwarp();

    const float rescale = merge_math::running_max_raise(state, tile_max);
    state.sum *= rescale;
    for (int k = 0; k < kValuePerLane; ++k) acc[k] *= rescale;
#pragma unroll
    for (int r = 0; r < kTileKeys; ++r) {
      const float weight = merge_math::scaled_exp(score[r], state.max);
      state.sum = fmaf(weight, 1.0f, state.sum);  // same rounding as the value columns
      for (int k = 0; k < kValuePerLane; ++k) acc[k] = fmaf(weight, tile[r][lane + 32 * k], acc[k]);
    }
  }
  if (!has_head) return;

  OutT* out = static_cast<OutT*>(p.out) + int64_t(i) * p.out_stride_token + int64_t(h) * p.out_stride_head;
  for (int k = 0; k < kValuePerLane; ++k)
    store(&out[lane + 32 * k], state.sum > 0.0f ? acc[k] / state.sum : 0.0f);
  if (lane == 0 && p.lse) p.lse[int64_t(i) * p.num_heads + h] = merge_math::lse_of(state.max, state.sum);
}

template <class InT>
void launch_for_out(const kdtree_verify_contiguous_params& p, dim3 grid, cudaStream_t stream) {
  if (p.out_dtype == KDTREE_DTYPE_F32) {
    verify_contiguous_kernel<InT, float><<<grid, kThreads, 0, stream>>>(p);
  } else {
    verify_contiguous_kernel<InT, __nv_bfloat16><<<grid, kThreads, 0, stream>>>(p);
  }
}

}  // namespace

void launch_contiguous(const kdtree_verify_contiguous_params& p, cudaStream_t stream) {
  if (p.q_len == 0) return;
  dim3 grid(static_cast<unsigned>(p.q_len), static_cast<unsigned>((p.num_heads + kWarps - 1) / kWarps));
  if (p.dtype == KDTREE_DTYPE_F32) {
    launch_for_out<float>(p, grid, stream);
  } else {
    launch_for_out<__nv_bfloat16>(p, grid, stream);
  }
  check_launch("kdtree_verify_contiguous", "verify_contiguous_kernel");
}

}  // namespace kdtree::verify
