// The visibility rule of a draft token's key (SPEC section 2), in one place for
// the host reference, the GPU oracle, the contiguous kernel and the split-K
// kernel: is tail key j visible to local query row i of a request?
#pragma once

#include <cstdint>

#include "kdtree_kernels.h"

#include "common/host_device.hpp"

namespace kdtree {

// `mask` points at the request's mask bytes (mask + mask_indptr[b]); `prefix`
// and `q_len` are the request's; `row_bytes` is TREE_BITS' bytes per row. Row
// i and tail key j are below q_len <= 128.
KDTREE_HOST_DEVICE bool tail_key_visible(int32_t mask_kind, const uint8_t* mask, int64_t row_bytes,
                                         int64_t prefix, int32_t q_len, int32_t i, int32_t j) {
  switch (mask_kind) {
    case KDTREE_MASK_NONE:
      return true;
    case KDTREE_MASK_CAUSAL:
      return j <= i;
    case KDTREE_MASK_TREE_DENSE:
      return mask[int64_t(i) * q_len + j] != 0;
    case KDTREE_MASK_TREE_BITS:
      return (mask[int64_t(i) * row_bytes + j / 8] >> (j % 8)) & 1;
    default:  // KDTREE_MASK_SGLANG_FULL
      return mask[int64_t(i) * (prefix + q_len) + prefix + j] != 0;
  }
}

// Request b's mask bytes (mask + mask_indptr[b]); NULL for the kinds that read
// none. Params: kdtree_verify_paged_params or the kernels' device view of it.
template <class Params>
KDTREE_HOST_DEVICE const uint8_t* request_mask(const Params& p, int64_t b) {
  if (p.mask_kind == KDTREE_MASK_NONE || p.mask_kind == KDTREE_MASK_CAUSAL) return nullptr;
  return p.mask + p.mask_indptr[b];
}

}  // namespace kdtree
