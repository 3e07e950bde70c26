// The split-K reduce of kdtree_verify_paged: merges the num_splits partial
// states of each (request row, head) into the output. The math of
// kdtree_merge_attention_states (out = sum_s exp(lse_s - lse) out_s), written
// as sum_s w_s out_s / sum_s w_s with w_s = exp(lse_s - max_s lse_s) so that
// states that are all exactly 1 merge to exactly 1; splits are summed in
// order, so the result is deterministic for a fixed num_splits.
//
// Grid (batch * max_q_len, H), 128 threads: thread k owns latent dims
// [4k, 4k + 4). Rows past a request's q_len exit at once; a split whose lse is
// -inf (no visible key) is never read.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>

#include "verify/verify_paged_tiles.cuh"

namespace kdtree::verify {

namespace {

constexpr int kMergeThreads = kLatentDim / 4;

__global__ void __launch_bounds__(kMergeThreads) verify_split_merge_kernel(const PagedArgs a) {
  const int b = blockIdx.x / a.max_q_len, i = blockIdx.x % a.max_q_len, h = blockIdx.y;
  const Request req = load_request(a, b, false);
  if (!req.valid || i >= req.q_len) return;
  const int64_t t = req.q_start + i;
  const int64_t stride = a.total_q * a.num_heads;  // between splits, in states
  const int64_t state0 = t * a.num_heads + h;

  float lse_max = -INFINITY;
  for (int s = 0; s < a.num_splits; ++s) lse_max = fmaxf(lse_max, a.partial_lse[state0 + s * stride]);

  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
  float weight_sum = 0.f;
  if (lse_max != -INFINITY) {
    for (int s = 0; s < a.num_splits; ++s) {
      const float lse = a.partial_lse[state0 + s * stride];
      if (lse == -INFINITY) continue;
      const float w = __expf(lse - lse_max);
      const float4 v = reinterpret_cast<const float4*>(a.partial_out + (state0 + s * stride) * kLatentDim)[threadIdx.x];
      acc.x += w * v.x;
      acc.y += w * v.y;
      acc.z += w * v.z;
      acc.w += w * v.w;
      weight_sum += w;
    }
    // Divide (not multiply by 1/sum): states that all hold exactly 1 merge to exactly 1.
    acc = make_float4(acc.x / weight_sum, acc.y / weight_sum, acc.z / weight_sum, acc.w / weight_sum);
  }

  const int64_t at = t * a.out_stride_token + h * a.out_stride_head + 4 * threadIdx.x;
  if (a.out_dtype == KDTREE_DTYPE_F32) {
    *reinterpret_cast<float4*>(static_cast<float*>(a.out) + at) = acc;
  } else if (a.out_dtype == KDTREE_DTYPE_BF16) {
    __nv_bfloat162 lo = __floats2bfloat162_rn(acc.x, acc.y), hi = __floats2bfloat162_rn(acc.z, acc.w);
    uint2 packed = make_uint2(*reinterpret_cast<uint32_t*>(&lo), *reinterpret_cast<uint32_t*>(&hi));
    *reinterpret_cast<uint2*>(static_cast<__nv_bfloat16*>(a.out) + at) = packed;
  } else {
    __half2 lo = __floats2half2_rn(acc.x, acc.y), hi = __floats2half2_rn(acc.z, acc.w);
    uint2 packed = make_uint2(*reinterpret_cast<uint32_t*>(&lo), *reinterpret_cast<uint32_t*>(&hi));
    *reinterpret_cast<uint2*>(static_cast<__half*>(a.out) + at) = packed;
  }
  if (a.lse != nullptr && threadIdx.x == 0) {
    a.lse[state0] = lse_max == -INFINITY ? -INFINITY : lse_max + logf(weight_sum);
  }
}

}  // namespace

void launch_split_merge(const PagedArgs& a, cudaStream_t stream) {
  const dim3 grid(a.batch_size * a.max_q_len, a.num_heads);
  verify_split_merge_kernel<<<grid, kMergeThreads, 0, stream>>>(a);
  check_launch("kdtree_verify_paged", "verify_split_merge_kernel");
}

}  // namespace kdtree::verify
