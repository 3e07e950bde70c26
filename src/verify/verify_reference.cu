// kdtree_verify_paged_reference: the naive GPU oracle, fp32 math.
//
// Tiling: one block of kWarps warps per (query row t, head h); grid
// (total_q, H), so the grid depends only on host fields. The block finds its
// request by a binary search of qo_indptr on the device. Warp w takes keys
// w, w + kWarps, ... of the request (prefix, then tail) and keeps its own
// online softmax state: the score is a warp-reduced dot product over the 576
// dims (lane l holds dims l + 32k), and each lane owns 16 of the 512 value
// accumulators plus the running max and denominator. The kWarps states are
// merged at the end through shared memory with the merge_math weights.
// Nothing is tiled or cached: every key is read straight from global memory
// once per (row, head). Slow by design; the point is a second, independent
// reading of SPEC section 2 that runs at GPU scale.
//
// Flag rules match the CPU reference (src/reference/verify_paged_host.cpp):
// block (0, 0) checks every request's indptr for BAD_INDPTR, so requests
// without a row are covered too; a block of a bad request writes nothing.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <type_traits>

#include "common/cuda_check.hpp"
#include "common/mla_dims.hpp"
#include "common/request_rules.hpp"
#include "merge/merge_math.cuh"
#include "verify/verify_launch.hpp"

namespace kdtree::verify {
namespace {

constexpr int kWarps = 4;
constexpr int kScorePerLane = kHeadDim / 32;    // 18 q / k dims per lane
constexpr int kValuePerLane = kLatentDim / 32;  // 16 value dims per lane

template <class T>
__device__ float to_float(T x);
template <>
__device__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
template <>
__device__ float to_float(__half x) { return __half2float(x); }
// e4m3 decoded from its bits (sign, 4 exponent bits with bias 7, 3 mantissa
// bits; exponent 0 is subnormal, S.1111.111 is NaN), exact in fp32 and equal
// to cuda_fp8's conversion for all 256 codes. Written out because cuda_fp8's
// software path below sm_89 (a normalization loop per value, inlined 34 times
// per key) made ptxas spill on sm_80/86; this form is branch-light and does
// not. It is also a reading of the format independent of the fast kernel's.
template <>
__device__ float to_float(__nv_fp8_e4m3 x) {
  const unsigned bits = x.__x;
  if ((bits & 0x7Fu) == 0x7Fu) return __int_as_float(0x7fffffff);
  const unsigned exponent = (bits >> 3) & 0xFu, mantissa = bits & 0x7u;
  const float magnitude = exponent == 0 ? float(mantissa) * 0x1p-9f
                                        : __uint_as_float(((exponent + 120u) << 23) | (mantissa << 20));
  return (bits & 0x80u) ? -magnitude : magnitude;
}

__device__ void store(float* p, float v) { *p = v; }
__device__ void store(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }
__device__ void store(__half* p, float v) { *p = __float2half_rn(v); }

__device__ int64_t load_index(const void* indices, int64_t position, int32_t index_dtype) {
  if (index_dtype == KDTREE_DTYPE_INT64) return static_cast<const int64_t*>(indices)[position];
  return static_cast<const int32_t*>(indices)[position];
}

__device__ bool request_is_bad(const kdtree_verify_paged_params& p, int64_t b) {
  const RequestIndptr ix = request_indptr(p, b);
  if (!request_ranges_ok(p, ix)) return true;
  const int64_t q_len = ix.q1 - ix.q0, kv_len = ix.k1 - ix.k0;
  if (!request_tail_fits(p.tail_source, kv_len, q_len)) return false;  // mask never read
  return !request_mask_in_bounds(p, ix, request_prefix(p.tail_source, kv_len, q_len), q_len);
}

// The request whose rows contain t: the last b with qo_indptr[b] <= t, or -1.
__device__ int64_t find_request(const int32_t* qo_indptr, int64_t batch_size, int64_t t) {
  int64_t lo = 0, hi = batch_size + 1;  // answer in [lo, hi) of positions with indptr <= t
  while (hi - lo > 1) {
    int64_t mid = (lo + hi) / 2;
    if (qo_indptr[mid] <= t) lo = mid; else hi = mid;
  }
  if (qo_indptr[lo] > t || lo >= batch_size || t >= qo_indptr[lo + 1]) return -1;
  return lo;
}

template <class QT, class KvT, class OutT>
__global__ void __launch_bounds__(kWarps * 32)
verify_paged_reference_kernel(const kdtree_verify_paged_params p) {
  const int64_t t = blockIdx.x;
  const int32_t h = blockIdx.y;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;

  if (t == 0 && h == 0 && p.error_flag) {
    for (int64_t b = threadIdx.x; b < p.batch_size; b += blockDim.x)
      if (request_is_bad(p, b)) atomicOr(p.error_flag, KDTREE_FLAG_BAD_INDPTR);
  }
  const int64_t b = find_request(p.qo_indptr, p.batch_size, t);
  if (b < 0 || request_is_bad(p, b)) return;

  const int64_t qo_begin = p.qo_indptr[b];
  const int32_t q_len = p.qo_indptr[b + 1] - p.qo_indptr[b];
  const int32_t i = int32_t(t - qo_begin);
  const int64_t kv_begin = p.kv_indptr[b];
  const int64_t kv_len = p.kv_indptr[b + 1] - kv_begin;
  const bool tail_from_indices = p.tail_source == KDTREE_TAIL_FROM_INDICES;
  OutT* out = static_cast<OutT*>(p.out) + t * p.out_stride_token + int64_t(h) * p.out_stride_head;
  float* lse = p.lse ? p.lse + t * p.num_heads + h : nullptr;

  if (tail_from_indices && kv_len < q_len) {
    for (int d = threadIdx.x; d < kLatentDim; d += blockDim.x) store(&out[d], 0.0f);
    if (threadIdx.x == 0) {
      if (lse) *lse = -INFINITY;
      if (p.error_flag) atomicOr(p.error_flag, KDTREE_FLAG_KV_SHORTER_THAN_Q);
    }
    return;
  }
  const int64_t prefix = tail_from_indices ? kv_len - q_len : kv_len;
  const int64_t num_keys = prefix + q_len;
  const float kv_scale = std::is_same<KvT, __nv_fp8_e4m3>::value ? p.kv_scale : 1.0f;

  float q[kScorePerLane];
  const QT* q_row = static_cast<const QT*>(p.q) + t * p.q_stride_token + int64_t(h) * p.q_stride_head;
  for (int k = 0; k < kScorePerLane; ++k) q[k] = to_float(q_row[lane + 32 * k]);

  merge_math::RunningLse<float> state;
  float acc[kValuePerLane];
  for (int k = 0; k < kValuePerLane; ++k) acc[k] = 0.0f;

  const KvT* cache = static_cast<const KvT*>(p.kv_cache);
  for (int64_t j = warp; j < num_keys; j += kWarps) {
    const KvT* key;
    if (j < kv_len) {  // from kv_indices: the prefix, and the tail with TAIL_FROM_INDICES
      int64_t slot = load_index(p.kv_indices, kv_begin + j, p.index_dtype);
      if (slot < 0 || slot >= p.num_slots) {
        if (lane == 0 && p.error_flag) atomicOr(p.error_flag, KDTREE_FLAG_SLOT_OUT_OF_RANGE);
        continue;
      }
      key = cache + slot * p.kv_stride_slot;
    } else {
      key = static_cast<const KvT*>(p.tail_kv) + (qo_begin + (j - prefix)) * p.tail_kv_stride;
    }
    if (j >= prefix &&
        !tail_key_visible(p.mask_kind, request_mask(p, b), p.mask_row_bytes, prefix, q_len, i, int32_t(j - prefix))) {
      continue;
    }

    float dot = 0.0f;
    for (int k = 0; k < kScorePerLane; ++k) dot = fmaf(q[k], to_float(key[lane + 32 * k]) * kv_scale, dot);
    for (int offset = 16; offset > 0; offset /= 2) dot += __shfl_xor_sync(0xffffffffu, dot, offset);
    const float score = dot * p.sm_scale;

    // The denominator and the values take the same fmaf, so all-ones values give exactly 1.
    const float rescale = merge_math::running_max_raise(state, score);
    const float weight = merge_math::scaled_exp(score, state.max);
    state.sum = fmaf(state.sum, rescale, weight);
    for (int k = 0; k < kValuePerLane; ++k)
      acc[k] = fmaf(acc[k], rescale, weight * (to_float(key[lane + 32 * k]) * kv_scale));
  }

  // Merge the warps' states: out = sum_w exp(max_w - M) acc_w / sum_w exp(max_w - M) sum_w.
  __shared__ float warp_max[kWarps], warp_sum[kWarps];
  __shared__ float warp_acc[kWarps][kLatentDim];
  if (lane == 0) {
    warp_max[warp] = state.max;
    warp_sum[warp] = state.sum;
  }
  for (int k = 0; k < kValuePerLane; ++k) warp_acc[warp][lane + 32 * k] = acc[k];
  __syncthreads();

  float max = merge_math::negative_infinity<float>();
  for (int w = 0; w < kWarps; ++w) max = fmaxf(max, warp_max[w]);
  float sum = 0.0f;
  for (int w = 0; w < kWarps; ++w) sum = fmaf(warp_sum[w], merge_math::scaled_exp(warp_max[w], max), sum);
  for (int d = threadIdx.x; d < kLatentDim; d += blockDim.x) {
    float value = 0.0f;
    for (int w = 0; w < kWarps; ++w) value = fmaf(warp_acc[w][d], merge_math::scaled_exp(warp_max[w], max), value);
    store(&out[d], sum > 0.0f ? value / sum : 0.0f);
  }
  if (threadIdx.x == 0 && lse) *lse = merge_math::lse_of(max, sum);
}

template <class QT, class KvT>
void launch_for_out(const kdtree_verify_paged_params& p, dim3 grid, cudaStream_t stream) {
  switch (p.out_dtype) {
    case KDTREE_DTYPE_F32:
      verify_paged_reference_kernel<QT, KvT, float><<<grid, kWarps * 32, 0, stream>>>(p);
      break;
    case KDTREE_DTYPE_BF16:
      verify_paged_reference_kernel<QT, KvT, __nv_bfloat16><<<grid, kWarps * 32, 0, stream>>>(p);
      break;
    default:
      verify_paged_reference_kernel<QT, KvT, __half><<<grid, kWarps * 32, 0, stream>>>(p);
      break;
  }
}

template <class QT>
void launch_for_kv(const kdtree_verify_paged_params& p, dim3 grid, cudaStream_t stream) {
  switch (p.kv_dtype) {
    case KDTREE_DTYPE_FP8_E4M3:
      launch_for_out<QT, __nv_fp8_e4m3>(p, grid, stream);
      break;
    default:  // KV matches q (BF16 or F16), as the API checks
      launch_for_out<QT, QT>(p, grid, stream);
      break;
  }
}

}  // namespace

void launch_paged_reference(const kdtree_verify_paged_params& p, cudaStream_t stream) {
  if (p.batch_size == 0 || p.total_q == 0) return;
  dim3 grid(static_cast<unsigned>(p.total_q), static_cast<unsigned>(p.num_heads));
  if (p.q_dtype == KDTREE_DTYPE_F16) {
    launch_for_kv<__half>(p, grid, stream);
  } else {
    launch_for_kv<__nv_bfloat16>(p, grid, stream);
  }
  check_launch("kdtree_verify_paged_reference", "verify_paged_reference_kernel");
}

}  // namespace kdtree::verify
