// The per-request rules of kdtree_verify_paged, in one place for the host
// reference, the GPU oracle and the split-K kernel (the contiguous kernel
// shares the mask rule): which requests are skipped as BAD_INDPTR (SPEC
// section 4: nothing outside the described arrays is read), and whether tail
// key j is visible to local query row i (SPEC section 2).
#pragma once

#include <cstdint>

#include "kdtree_kernels.h"

#include "common/host_device.hpp"

namespace kdtree {

// Whether mask kind `mask_kind` reads mask bytes (NONE and CAUSAL do not).
KDTREE_HOST_DEVICE constexpr bool mask_reads_bytes(int32_t mask_kind) {
  return mask_kind == KDTREE_MASK_TREE_DENSE || mask_kind == KDTREE_MASK_TREE_BITS ||
         mask_kind == KDTREE_MASK_SGLANG_FULL;
}

// The index entries request b's rules read: qo_indptr[b], [b + 1];
// kv_indptr[b], [b + 1], [B]; mask_indptr[b], [B] (0 for the kinds that read
// no mask bytes). Loaded once, together, before any rule reads them: the
// split kernels' prologue pays one memory round trip for them. Params:
// kdtree_verify_paged_params or the kernels' device view of it.
struct RequestIndptr {
  int64_t q0, q1, k0, k1, kv_total, mask_begin, mask_total;
};
template <class Params>
KDTREE_HOST_DEVICE RequestIndptr request_indptr(const Params& p, int64_t b) {
  const bool masked = mask_reads_bytes(p.mask_kind);
  return {p.qo_indptr[b],
          p.qo_indptr[b + 1],
          p.kv_indptr[b],
          p.kv_indptr[b + 1],
          p.kv_indptr[p.batch_size],
          masked ? int64_t{p.mask_indptr[b]} : 0,
          masked ? int64_t{p.mask_indptr[p.batch_size]} : 0};
}

// Request b's qo / kv ranges are usable: non-decreasing, starting at >= 0,
// q_len <= max_q_len, rows below total_q, and kv range inside kv_indices
// (kv_indptr[B] entries).
template <class Params>
KDTREE_HOST_DEVICE bool request_ranges_ok(const Params& p, const RequestIndptr& r) {
  // & rather than &&: no test waits behind another's branch for its load.
  return (r.q0 >= 0) & (r.q1 >= r.q0) & (r.q1 - r.q0 <= p.max_q_len) & (r.q1 <= p.total_q) & (r.k0 >= 0) &
         (r.k1 >= r.k0) & (r.k1 <= r.kv_total);
}

// A request's tail (SPEC section 2): with TAIL_FROM_EXTEND its q_len tail
// keys follow its kv_len prefix keys; with TAIL_FROM_INDICES they are the last
// q_len of its kv_len keys, which must then number at least q_len (else
// KV_SHORTER_THAN_Q: its rows get out 0, lse -inf, and no mask byte is read).
KDTREE_HOST_DEVICE constexpr bool request_tail_fits(int32_t tail_source, int64_t kv_len, int64_t q_len) {
  return tail_source != KDTREE_TAIL_FROM_INDICES || kv_len >= q_len;
}
KDTREE_HOST_DEVICE constexpr int64_t request_prefix(int32_t tail_source, int64_t kv_len, int64_t q_len) {
  return tail_source == KDTREE_TAIL_FROM_INDICES ? kv_len - q_len : kv_len;
}

// For the kinds that read bytes: the byte that holds local query row i's
// entry for tail key j lies at tail_mask_row_offset(i) +
// tail_mask_column(j) in the request's mask bytes, and
// tail_mask_byte_visible says whether it makes the key visible. `prefix` and
// `q_len` are the request's; `row_bytes` is TREE_BITS' bytes per row. Row i
// and tail key j are below q_len <= 128.
KDTREE_HOST_DEVICE int64_t tail_mask_row_offset(int32_t mask_kind, int64_t row_bytes, int64_t prefix, int32_t q_len,
                                                int32_t i) {
  switch (mask_kind) {
    case KDTREE_MASK_TREE_BITS:
      return int64_t(i) * row_bytes;
    case KDTREE_MASK_SGLANG_FULL:
      return int64_t(i) * (prefix + q_len) + prefix;
    default:  // KDTREE_MASK_TREE_DENSE
      return int64_t(i) * q_len;
  }
}
KDTREE_HOST_DEVICE int32_t tail_mask_column(int32_t mask_kind, int32_t j) {
  return mask_kind == KDTREE_MASK_TREE_BITS ? j / 8 : j;
}
KDTREE_HOST_DEVICE bool tail_mask_byte_visible(int32_t mask_kind, uint8_t byte, int32_t j) {
  return mask_kind == KDTREE_MASK_TREE_BITS ? (byte >> (j % 8)) & 1 : byte != 0;
}

// Whether tail key j is visible to local query row i. `mask` points at the
// request's mask bytes (mask + mask_indptr[b]); the rest as above.
KDTREE_HOST_DEVICE bool tail_key_visible(int32_t mask_kind, const uint8_t* mask, int64_t row_bytes,
                                         int64_t prefix, int32_t q_len, int32_t i, int32_t j) {
  switch (mask_kind) {
    case KDTREE_MASK_NONE:
      return true;
    case KDTREE_MASK_CAUSAL:
      return j <= i;
    case KDTREE_MASK_TREE_BITS:  // a case of its own: the GPU oracle's code stays spill-free
      return tail_mask_byte_visible(KDTREE_MASK_TREE_BITS,
                                    mask[tail_mask_row_offset(KDTREE_MASK_TREE_BITS, row_bytes, prefix, q_len, i) +
                                         tail_mask_column(KDTREE_MASK_TREE_BITS, j)],
                                    j);
    default:
      return tail_mask_byte_visible(mask_kind,
                                    mask[tail_mask_row_offset(mask_kind, row_bytes, prefix, q_len, i) +
                                         tail_mask_column(mask_kind, j)],
                                    j);
  }
}

// Bytes of one request's mask: 0 for the kinds that read none.
KDTREE_HOST_DEVICE int64_t request_mask_bytes(int32_t mask_kind, int64_t row_bytes, int64_t prefix,
                                              int64_t q_len) {
  switch (mask_kind) {
    case KDTREE_MASK_TREE_DENSE:
      return q_len * q_len;
    case KDTREE_MASK_TREE_BITS:
      return q_len * row_bytes;
    case KDTREE_MASK_SGLANG_FULL:
      return q_len * (prefix + q_len);
    default:
      return 0;
  }
}

// Whether request b's mask bytes lie inside the mask array, whose extent is
// mask_indptr[B] bytes: an offset outside it is never read (BAD_INDPTR).
template <class Params>
KDTREE_HOST_DEVICE bool request_mask_in_bounds(const Params& p, const RequestIndptr& r, int64_t prefix,
                                               int64_t q_len) {
  const int64_t bytes = request_mask_bytes(p.mask_kind, p.mask_row_bytes, prefix, q_len);
  return bytes == 0 || (r.mask_begin >= 0 && r.mask_begin <= r.mask_total - bytes);
}

// Request b's mask bytes (mask + mask_indptr[b]); NULL for the kinds that read
// none. Params: kdtree_verify_paged_params or the kernels' device view of it.
template <class Params>
KDTREE_HOST_DEVICE const uint8_t* request_mask(const Params& p, int64_t b) {
  if (!mask_reads_bytes(p.mask_kind)) return nullptr;
  return p.mask + p.mask_indptr[b];
}

}  // namespace kdtree
