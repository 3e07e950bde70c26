// Device-side view of one kdtree_verify_paged call, shared by the split-K
// kernel and its merge: a POD copied into the kernel parameters, and the
// per-request bounds both kernels derive from the device-resident lengths.
#pragma once

#include <cstdint>

#include "common/mla_dims.hpp"
#include "common/request_rules.hpp"
#include "kdtree_kernels.h"

namespace kdtree::verify {


struct PagedArgs {
  int32_t batch_size;
  int32_t num_heads;
  int32_t max_q_len;
  int32_t num_splits;
  int64_t total_q;
  float scale_log2;  // sm_scale * log2(e) (* kv_scale for fp8): softmax runs in base 2
  float out_scale;   // kv_scale for fp8 KV (values enter the tensor cores unscaled), else 1

  const void* q;
  int64_t q_stride_token;
  int64_t q_stride_head;

  const void* kv_cache;
  int64_t kv_stride_slot;
  int64_t num_slots;
  int32_t index_is_64;

  const int32_t* qo_indptr;
  const int32_t* kv_indptr;
  const void* kv_indices;

  int32_t tail_source;
  int32_t mask_kind;
  const void* tail_kv;
  int64_t tail_kv_stride;
  const uint8_t* mask;
  const int64_t* mask_indptr;
  int64_t mask_row_bytes;

  void* out;
  int32_t out_dtype;
  int64_t out_stride_token;
  int64_t out_stride_head;
  float* lse;
  int32_t* error_flag;

  // Split-K partial states (num_splits > 1): [splits, total_q, H, D_L] and
  // [splits, total_q, H], indexed by the global query row.
  float* partial_out;
  float* partial_lse;
};

// One request's bounds as read from the device-resident indptrs. A request
// whose indptrs are inconsistent, or whose mask bytes would lie outside
// [0, mask_indptr[B]), is skipped (valid = false) and flagged; a
// TAIL_FROM_INDICES request with kv_len < q_len keeps its rows (they get
// out 0, lse -inf) but sees no key.
struct Request {
  bool valid;
  int32_t q_start;   // first global query row
  int32_t q_len;
  int64_t kv_start;  // offset into kv_indices
  int64_t prefix;    // prefix keys (from kv_indices)
  int64_t num_keys;  // prefix + tail keys this request attends over
};

__device__ __forceinline__ void raise_flag(int32_t* flag, int32_t bit) {
  if (flag != nullptr) atomicOr(flag, bit);
}

// `report` selects the one thread that raises flags for this request.
__device__ __forceinline__ Request load_request(const PagedArgs& a, int b, bool report) {
  Request r;
  const int32_t q0 = a.qo_indptr[b], q1 = a.qo_indptr[b + 1];
  const int32_t k0 = a.kv_indptr[b], k1 = a.kv_indptr[b + 1];
  r.q_start = q0;
  r.q_len = q1 - q0;
  r.kv_start = k0;
  const int64_t kv_len = static_cast<int64_t>(k1) - k0;
  r.valid = request_ranges_ok(a, b);
  if (!r.valid) {
    if (report) raise_flag(a.error_flag, KDTREE_FLAG_BAD_INDPTR);
    r.q_len = 0;
    r.prefix = r.num_keys = 0;
    return r;
  }
  if (a.tail_source == KDTREE_TAIL_FROM_EXTEND) {
    r.prefix = kv_len;
    r.num_keys = kv_len + r.q_len;
  } else if (kv_len < r.q_len) {
    if (report) raise_flag(a.error_flag, KDTREE_FLAG_KV_SHORTER_THAN_Q);
    r.prefix = r.num_keys = 0;
  } else {
    r.prefix = kv_len - r.q_len;
    r.num_keys = kv_len;
  }
  // The mask's extent is checked once here, so the tile loop reads it unchecked.
  if (r.num_keys > r.prefix && !request_mask_in_bounds(a, b, r.prefix, r.q_len)) {
    if (report) raise_flag(a.error_flag, KDTREE_FLAG_BAD_INDPTR);
    r.valid = false;
    r.q_len = 0;
    r.prefix = r.num_keys = 0;
  }
  return r;
}

// Keys [begin, end) of split `split` of a request: equal chunks rounded up to
// `granule` keys so every split but the last starts on a tile boundary.
__device__ __forceinline__ void split_range(int64_t num_keys, int num_splits, int split, int granule,
                                            int64_t* begin, int64_t* end) {
  int64_t chunk = (num_keys + num_splits - 1) / num_splits;
  chunk = (chunk + granule - 1) / granule * granule;
  const int64_t b = chunk * split;
  *begin = b < num_keys ? b : num_keys;
  const int64_t e = b + chunk;
  *end = e < num_keys ? e : num_keys;
}

}  // namespace kdtree::verify
