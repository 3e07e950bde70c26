// extern "C" verify entry points: validate -> device -> size workspace -> enqueue.
#include <cmath>
#include <cstring>

#include "api/validate.hpp"
#include "common/device.hpp"
#include "common/error.hpp"
#include "common/mla_dims.hpp"
#include "common/request_rules.hpp"
#include "reference/reference.hpp"
#include "verify/verify_launch.hpp"

namespace kdtree::api {
namespace {

// What a caller is about to do with the params decides how much is checked:
// sizing the workspace needs only shapes, the host reference reads host
// memory (no alignment rule), the device paths need everything.
enum class Use { kSizeOnly, kHost, kDevice };

void check_head_dims(const Checker& c, int32_t latent, int32_t rope) {
  if (latent != kLatentDim || rope != kRopeDim) {
    c.fail(KDTREE_ERROR_UNSUPPORTED, "head_dim_latent = " + std::to_string(latent) +
                                         ", head_dim_rope = " + std::to_string(rope) +
                                         " is not built (only 512, 64)");
  }
}

// Returns false when batch_size == 0: a successful no-op that reads nothing
// else (data-parallel ranks call with zero tokens and may pass NULLs).
bool validate_paged(const Checker& c, const kdtree_verify_paged_params* p, Use use) {
  c.not_null(p, "params");
  c.struct_size(p->struct_size, sizeof(kdtree_verify_paged_params), "kdtree_verify_paged_params");
  c.at_least(p->batch_size, 0, "batch_size");
  if (p->batch_size == 0) return false;
  c.built_range(p->batch_size, 1, kMaxBatch, "batch_size");  // one grid dimension per request

  c.built_range(p->num_heads, 1, kMaxHeads, "num_heads");
  check_head_dims(c, p->head_dim_latent, p->head_dim_rope);
  c.built_range(p->max_q_len, 1, kMaxQLen, "max_q_len");
  c.at_least(p->total_q, 0, "total_q");
  c.in_range(p->total_q, 0, INT32_MAX, "total_q");  // qo_indptr is int32
  c.at_least(p->max_kv_len, 0, "max_kv_len");
  c.in_range(p->num_splits, 0, verify::kMaxSplits, "num_splits");
  c.finite(p->sm_scale, "sm_scale");

  c.dtype_in(p->q_dtype, {KDTREE_DTYPE_BF16, KDTREE_DTYPE_F16}, "q_dtype");
  c.dtype_in(p->kv_dtype, {KDTREE_DTYPE_BF16, KDTREE_DTYPE_F16, KDTREE_DTYPE_FP8_E4M3}, "kv_dtype");
  if (p->kv_dtype != KDTREE_DTYPE_FP8_E4M3 && p->kv_dtype != p->q_dtype) {
    c.fail(KDTREE_ERROR_UNSUPPORTED, "kv_dtype = " + dtype_name(p->kv_dtype) +
                                         " must equal q_dtype = " + dtype_name(p->q_dtype) +
                                         " or be KDTREE_DTYPE_FP8_E4M3");
  }
  if (p->kv_dtype == KDTREE_DTYPE_FP8_E4M3 && !(std::isfinite(p->kv_scale) && p->kv_scale > 0.0f)) {
    c.fail(KDTREE_ERROR_INVALID_ARGUMENT, "kv_scale = " + std::to_string(p->kv_scale) +
                                              " must be finite and > 0 for FP8 KV");
  }
  c.dtype_in(p->out_dtype, {KDTREE_DTYPE_BF16, KDTREE_DTYPE_F16, KDTREE_DTYPE_F32}, "out_dtype");
  c.dtype_in(p->index_dtype, {KDTREE_DTYPE_INT32, KDTREE_DTYPE_INT64}, "index_dtype");
  c.enum_in(p->tail_source, KDTREE_TAIL_FROM_INDICES, KDTREE_TAIL_FROM_EXTEND, "tail_source");
  c.enum_in(p->mask_kind, KDTREE_MASK_NONE, KDTREE_MASK_SGLANG_FULL, "mask_kind");
  if (p->mask_kind == KDTREE_MASK_TREE_BITS) {
    c.at_least(p->mask_row_bytes, (p->max_q_len + 7) / 8, "mask_row_bytes");
    c.product(p->max_q_len, p->mask_row_bytes, "max_q_len * mask_row_bytes (TREE_BITS offsets)");
  }
  c.zero(p->reserved0, "reserved0");
  c.zero(p->reserved1, "reserved1");
  c.zero(p->reserved2, "reserved2");
  c.at_least(p->num_slots, 0, "num_slots");
  if (use == Use::kSizeOnly) return true;

  c.not_null(p->q, "q");
  c.not_null(p->kv_cache, "kv_cache");
  c.not_null(p->qo_indptr, "qo_indptr");
  c.not_null(p->kv_indptr, "kv_indptr");
  c.not_null(p->kv_indices, "kv_indices");
  c.not_null(p->out, "out");
  const bool extend = p->tail_source == KDTREE_TAIL_FROM_EXTEND;
  if (extend) c.not_null(p->tail_kv, "tail_kv");
  if (mask_reads_bytes(p->mask_kind)) {
    c.not_null(p->mask, "mask");
    c.not_null(p->mask_indptr, "mask_indptr");
  }

  const size_t q_bytes = dtype_bytes(p->q_dtype);
  const size_t kv_bytes = dtype_bytes(p->kv_dtype);
  const size_t out_bytes = dtype_bytes(p->out_dtype);
  const std::initializer_list<Dim> q_dims = {{"q_stride_token", p->total_q, p->q_stride_token},
                                             {"q_stride_head", p->num_heads, p->q_stride_head}};
  const std::initializer_list<Dim> kv_dims = {{"kv_stride_slot", p->num_slots, p->kv_stride_slot}};
  const std::initializer_list<Dim> tail_kv_dims = {{"tail_kv_stride", p->total_q, p->tail_kv_stride}};
  const std::initializer_list<Dim> out_dims = {{"out_stride_token", p->total_q, p->out_stride_token},
                                               {"out_stride_head", p->num_heads, p->out_stride_head}};
  c.strided_span(q_dims, kHeadDim, q_bytes, "q");
  c.strided_span(kv_dims, kHeadDim, kv_bytes, "kv_cache");
  if (extend) c.strided_span(tail_kv_dims, kHeadDim, kv_bytes, "tail_kv");
  c.strided_span(out_dims, kLatentDim, out_bytes, "out");
  c.product(p->total_q, p->num_heads, "total_q * num_heads (lse)");
  if (use == Use::kHost) return true;

  // Kernels move 16-byte vectors: every row start must stay 16-byte aligned.
  c.rows_aligned(p->q, q_dims, q_bytes, "q");
  c.rows_aligned(p->kv_cache, kv_dims, kv_bytes, "kv_cache");
  if (extend) c.rows_aligned(p->tail_kv, tail_kv_dims, kv_bytes, "tail_kv");
  c.rows_aligned(p->out, out_dims, out_bytes, "out");
  c.aligned(p->qo_indptr, 4, "qo_indptr");
  c.aligned(p->kv_indptr, 4, "kv_indptr");
  c.aligned(p->kv_indices, dtype_bytes(p->index_dtype), "kv_indices");
  if (mask_reads_bytes(p->mask_kind)) c.aligned(p->mask_indptr, 8, "mask_indptr");
  c.aligned(p->lse, 4, "lse");
  c.aligned(p->error_flag, 4, "error_flag");
  return true;
}

// Returns false when q_len == 0 (a successful no-op).
bool validate_contiguous(const Checker& c, const kdtree_verify_contiguous_params* p) {
  c.not_null(p, "params");
  c.struct_size(p->struct_size, sizeof(kdtree_verify_contiguous_params),
                "kdtree_verify_contiguous_params");
  c.built_range(p->q_len, 0, kMaxQLen, "q_len");
  if (p->q_len == 0) return false;

  c.built_range(p->num_heads, 1, kMaxHeads, "num_heads");
  check_head_dims(c, p->head_dim_latent, p->head_dim_rope);
  if (p->kv_len < p->q_len) {
    c.fail(KDTREE_ERROR_INVALID_ARGUMENT, "kv_len = " + std::to_string(p->kv_len) +
                                              " is less than q_len = " + std::to_string(p->q_len));
  }
  c.finite(p->sm_scale, "sm_scale");
  c.dtype_in(p->dtype, {KDTREE_DTYPE_F32, KDTREE_DTYPE_BF16}, "dtype");
  c.dtype_in(p->out_dtype, {KDTREE_DTYPE_F32, KDTREE_DTYPE_BF16}, "out_dtype");
  c.enum_in(p->mask_kind, KDTREE_MASK_NONE, KDTREE_MASK_SGLANG_FULL, "mask_kind");
  if (p->mask_kind == KDTREE_MASK_SGLANG_FULL) {
    c.fail(KDTREE_ERROR_UNSUPPORTED,
           "mask_kind = KDTREE_MASK_SGLANG_FULL is not supported here (NONE, CAUSAL, TREE_DENSE, "
           "TREE_BITS)");
  }
  if (p->mask_kind == KDTREE_MASK_TREE_BITS) {
    c.at_least(p->mask_row_bytes, (p->q_len + 7) / 8, "mask_row_bytes");
    c.product(p->q_len, p->mask_row_bytes, "q_len * mask_row_bytes (TREE_BITS offsets)");
  }
  c.zero(p->reserved0, "reserved0");

  c.not_null(p->q, "q");
  c.not_null(p->kv, "kv");
  c.not_null(p->out, "out");
  const bool tree = p->mask_kind == KDTREE_MASK_TREE_DENSE || p->mask_kind == KDTREE_MASK_TREE_BITS;
  if (tree) c.not_null(p->mask, "mask");

  const size_t in_bytes = dtype_bytes(p->dtype);
  const size_t out_bytes = dtype_bytes(p->out_dtype);
  const std::initializer_list<Dim> q_dims = {{"q_stride_token", p->q_len, p->q_stride_token},
                                             {"q_stride_head", p->num_heads, p->q_stride_head}};
  const std::initializer_list<Dim> kv_dims = {{"kv_stride", p->kv_len, p->kv_stride}};
  const std::initializer_list<Dim> out_dims = {{"out_stride_token", p->q_len, p->out_stride_token},
                                               {"out_stride_head", p->num_heads, p->out_stride_head}};
  c.strided_span(q_dims, kHeadDim, in_bytes, "q");
  c.strided_span(kv_dims, kHeadDim, in_bytes, "kv");
  c.strided_span(out_dims, kLatentDim, out_bytes, "out");

  c.rows_aligned(p->q, q_dims, in_bytes, "q");
  c.rows_aligned(p->kv, kv_dims, in_bytes, "kv");
  c.rows_aligned(p->out, out_dims, out_bytes, "out");
  c.aligned(p->lse, 4, "lse");
  return true;
}

}  // namespace
}  // namespace kdtree::api

using kdtree::api::Checker;
using kdtree::api::Use;

extern "C" {

KDTREE_API kdtree_status kdtree_verify_paged_params_init(kdtree_verify_paged_params* params) {
  return kdtree::guard("kdtree_verify_paged_params_init", [&] {
    Checker("kdtree_verify_paged_params_init").not_null(params, "params");
    std::memset(params, 0, sizeof(*params));
    params->struct_size = sizeof(*params);
    params->head_dim_latent = kdtree::kLatentDim;
    params->head_dim_rope = kdtree::kRopeDim;
    params->q_dtype = KDTREE_DTYPE_BF16;
    params->kv_dtype = KDTREE_DTYPE_BF16;
    params->out_dtype = KDTREE_DTYPE_BF16;
    params->index_dtype = KDTREE_DTYPE_INT32;
    params->tail_source = KDTREE_TAIL_FROM_INDICES;
    params->mask_kind = KDTREE_MASK_NONE;
    params->kv_scale = 1.0f;
    params->num_splits = 0;
  });
}

KDTREE_API kdtree_status kdtree_verify_workspace_size(const kdtree_verify_paged_params* params,
                                                      size_t* workspace_bytes) {
  const char* fn = "kdtree_verify_workspace_size";
  return kdtree::guard(fn, [&] {
    const Checker c(fn);
    c.not_null(workspace_bytes, "workspace_bytes");
    if (!kdtree::api::validate_paged(c, params, Use::kSizeOnly)) {
      *workspace_bytes = 0;
      return;
    }
    const kdtree::DeviceInfo& device = kdtree::current_device(fn);
    *workspace_bytes = kdtree::verify::make_plan(*params, device).workspace_bytes;
  });
}

KDTREE_API kdtree_status kdtree_verify_paged(const kdtree_verify_paged_params* params,
                                             void* workspace, size_t workspace_bytes,
                                             kdtree_stream_t stream) {
  const char* fn = "kdtree_verify_paged";
  return kdtree::guard(fn, [&] {
    const Checker c(fn);
    if (!kdtree::api::validate_paged(c, params, Use::kDevice)) return;
    const kdtree::DeviceInfo& device = kdtree::current_device(fn);
    const kdtree::verify::Plan plan = kdtree::verify::make_plan(*params, device);
    c.workspace(workspace, workspace_bytes, plan.workspace_bytes, "kdtree_verify_workspace_size");
    kdtree::verify::launch_paged(*params, plan, workspace, device, stream);
  });
}

KDTREE_API kdtree_status kdtree_verify_paged_reference(const kdtree_verify_paged_params* params,
                                                       kdtree_stream_t stream) {
  const char* fn = "kdtree_verify_paged_reference";
  return kdtree::guard(fn, [&] {
    if (!kdtree::api::validate_paged(Checker(fn), params, Use::kDevice)) return;
    kdtree::current_device(fn);
    kdtree::verify::launch_paged_reference(*params, stream);
  });
}

KDTREE_API kdtree_status kdtree_verify_paged_host(const kdtree_verify_paged_params* params) {
  const char* fn = "kdtree_verify_paged_host";
  return kdtree::guard(fn, [&] {
    if (!kdtree::api::validate_paged(Checker(fn), params, Use::kHost)) return;
    kdtree::reference::verify_paged_host(*params);
  });
}

KDTREE_API kdtree_status kdtree_verify_contiguous_params_init(kdtree_verify_contiguous_params* params) {
  return kdtree::guard("kdtree_verify_contiguous_params_init", [&] {
    Checker("kdtree_verify_contiguous_params_init").not_null(params, "params");
    std::memset(params, 0, sizeof(*params));
    params->struct_size = sizeof(*params);
    params->head_dim_latent = kdtree::kLatentDim;
    params->head_dim_rope = kdtree::kRopeDim;
    params->dtype = KDTREE_DTYPE_BF16;
    params->out_dtype = KDTREE_DTYPE_BF16;
    params->mask_kind = KDTREE_MASK_NONE;
  });
}

KDTREE_API kdtree_status kdtree_verify_contiguous(const kdtree_verify_contiguous_params* params,
                                                  kdtree_stream_t stream) {
  const char* fn = "kdtree_verify_contiguous";
  return kdtree::guard(fn, [&] {
    if (!kdtree::api::validate_contiguous(Checker(fn), params)) return;
    kdtree::current_device(fn);
    kdtree::verify::launch_contiguous(*params, stream);
  });
}

}  // extern "C"
