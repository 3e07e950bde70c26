// extern "C" defragmentation entry points: copy, remap, sort (device) and the
// host planner / statistics. Validation here covers the arguments' shape; the
// planner's own input checks (duplicates, live-and-free slots) live in
// src/defrag and report through the same guard.
#include <cstring>

#include "api/validate.hpp"
#include "common/device.hpp"
#include "common/error.hpp"
#include "defrag/defrag_launch.hpp"

namespace kdtree::api {
namespace {

void check_index_dtype(const Checker& c, int32_t dtype, const char* name) {
  c.dtype_in(dtype, {KDTREE_DTYPE_INT32, KDTREE_DTYPE_INT64}, name);
}

// The move list copy and remap share: src_slots / dst_slots of max_moves
// index_dtype entries, the optional device count and error flag.
template <class Params>
void validate_moves(const Checker& c, const Params* p) {
  c.not_null(p->src_slots, "src_slots");
  c.not_null(p->dst_slots, "dst_slots");
  const size_t index_bytes = dtype_bytes(p->index_dtype);
  c.product(p->max_moves, static_cast<int64_t>(index_bytes), "max_moves * index bytes");
  c.aligned(p->src_slots, index_bytes, "src_slots");
  c.aligned(p->dst_slots, index_bytes, "dst_slots");
  c.aligned(p->num_moves, 8, "num_moves");
  c.aligned(p->error_flag, 4, "error_flag");
}

// Returns false when max_moves == 0 (a successful no-op).
bool validate_copy(const Checker& c, const kdtree_defrag_copy_params* p) {
  c.not_null(p, "params");
  c.struct_size(p->struct_size, sizeof(kdtree_defrag_copy_params), "kdtree_defrag_copy_params");
  c.at_least(p->max_moves, 0, "max_moves");
  if (p->max_moves == 0) return false;

  c.at_least(p->num_layers, 1, "num_layers");
  c.built_range(p->num_layers, 1, kMaxLayers, "num_layers");
  c.at_least(p->row_bytes, 1, "row_bytes");
  if (p->slot_stride_bytes < p->row_bytes) {
    c.fail(KDTREE_ERROR_INVALID_ARGUMENT, "slot_stride_bytes = " + std::to_string(p->slot_stride_bytes) +
                                              " is less than row_bytes = " + std::to_string(p->row_bytes));
  }
  c.at_least(p->num_slots, 0, "num_slots");
  check_index_dtype(c, p->index_dtype, "index_dtype");
  c.zero(p->reserved0, "reserved0");
  c.not_null(p->layer_base, "layer_base");
  c.product(p->num_slots, p->slot_stride_bytes, "num_slots * slot_stride_bytes");
  c.aligned(p->layer_base, 8, "layer_base");
  validate_moves(c, p);
  return true;
}

// Shape checks shared by the remap size query and the remap itself.
void validate_remap_shape(const Checker& c, const kdtree_defrag_remap_params* p) {
  c.not_null(p, "params");
  c.struct_size(p->struct_size, sizeof(kdtree_defrag_remap_params), "kdtree_defrag_remap_params");
  check_index_dtype(c, p->table_dtype, "table_dtype");
  c.at_least(p->rows, 0, "rows");
  c.at_least(p->cols, 0, "cols");
  c.at_least(p->num_slots, 0, "num_slots");
  c.in_range(p->num_slots, 0, int64_t(1) << 31, "num_slots");  // the slot map is int32
  c.at_least(p->max_moves, 0, "max_moves");
  check_index_dtype(c, p->index_dtype, "index_dtype");
  c.zero(p->reserved0, "reserved0");
}

// Returns false when there is nothing to do (no moves). With moves and an
// empty table (no rows or cols) the moves are still scanned, so that
// out-of-range ones are flagged as kdtree_defrag_copy flags them.
bool validate_remap(const Checker& c, const kdtree_defrag_remap_params* p) {
  validate_remap_shape(c, p);
  if (p->max_moves == 0) return false;

  validate_moves(c, p);
  if (p->rows == 0 || p->cols == 0) return true;

  c.not_null(p->table, "table");
  if (p->row_stride < p->cols) {
    c.fail(KDTREE_ERROR_INVALID_ARGUMENT, "row_stride = " + std::to_string(p->row_stride) +
                                              " is less than cols = " + std::to_string(p->cols));
  }
  c.strided_span({{"row_stride", p->rows, p->row_stride}}, p->cols,
                 dtype_bytes(p->table_dtype), "table");
  c.aligned(p->table, dtype_bytes(p->table_dtype), "table");
  c.aligned(p->row_lengths, 4, "row_lengths");
  return true;
}

void validate_sort_shape(const Checker& c, int32_t index_dtype, int64_t count, int64_t num_slots) {
  check_index_dtype(c, index_dtype, "index_dtype");
  c.at_least(count, 0, "count");
  const int64_t max_slots = index_dtype == KDTREE_DTYPE_INT32 ? int64_t{1} << 31 : INT64_MAX;
  c.in_range(num_slots, 1, max_slots, "num_slots");
}

// The request / free / pinned arrays the planner and the statistics both read.
void validate_slot_lists(const Checker& c, const kdtree_defrag_plan_params* p) {
  c.at_least(p->num_slots, 0, "num_slots");
  c.built_range(p->num_slots, 0, kMaxPlannerSlots, "num_slots");
  c.at_least(p->num_requests, 0, "num_requests");
  c.at_least(p->num_free, 0, "num_free");
  c.at_least(p->num_pinned, 0, "num_pinned");
  if (p->num_requests > 0) {
    c.not_null(p->request_indptr, "request_indptr");
    // Host memory: the total decides whether request_slots may be NULL. Its
    // consistency (ascending, starting at 0) is the planner's check.
    if (p->request_indptr[p->num_requests] != 0) c.not_null(p->request_slots, "request_slots");
  }
  if (p->num_free > 0) c.not_null(p->free_slots, "free_slots");
  if (p->num_pinned > 0) c.not_null(p->pinned_slots, "pinned_slots");
}

}  // namespace
}  // namespace kdtree::api

using kdtree::api::Checker;

extern "C" {

KDTREE_API kdtree_status kdtree_defrag_copy_params_init(kdtree_defrag_copy_params* params) {
  return kdtree::guard("kdtree_defrag_copy_params_init", [&] {
    Checker("kdtree_defrag_copy_params_init").not_null(params, "params");
    std::memset(params, 0, sizeof(*params));
    params->struct_size = sizeof(*params);
    params->index_dtype = KDTREE_DTYPE_INT32;
  });
}

KDTREE_API kdtree_status kdtree_defrag_copy(const kdtree_defrag_copy_params* params,
                                            kdtree_stream_t stream) {
  const char* fn = "kdtree_defrag_copy";
  return kdtree::guard(fn, [&] {
    if (!kdtree::api::validate_copy(Checker(fn), params)) return;
    kdtree::current_device(fn);
    kdtree::defrag::launch_copy(*params, stream);
  });
}

KDTREE_API kdtree_status kdtree_defrag_remap_params_init(kdtree_defrag_remap_params* params) {
  return kdtree::guard("kdtree_defrag_remap_params_init", [&] {
    Checker("kdtree_defrag_remap_params_init").not_null(params, "params");
    std::memset(params, 0, sizeof(*params));
    params->struct_size = sizeof(*params);
    params->table_dtype = KDTREE_DTYPE_INT32;
    params->index_dtype = KDTREE_DTYPE_INT32;
  });
}

KDTREE_API kdtree_status kdtree_defrag_remap_workspace_size(const kdtree_defrag_remap_params* params,
                                                            size_t* workspace_bytes) {
  const char* fn = "kdtree_defrag_remap_workspace_size";
  return kdtree::guard(fn, [&] {
    const Checker c(fn);
    c.not_null(workspace_bytes, "workspace_bytes");
    kdtree::api::validate_remap_shape(c, params);
    *workspace_bytes = kdtree::defrag::remap_workspace_bytes(*params);
  });
}

KDTREE_API kdtree_status kdtree_defrag_remap(const kdtree_defrag_remap_params* params,
                                             void* workspace, size_t workspace_bytes,
                                             kdtree_stream_t stream) {
  const char* fn = "kdtree_defrag_remap";
  return kdtree::guard(fn, [&] {
    const Checker c(fn);
    if (!kdtree::api::validate_remap(c, params)) return;
    kdtree::current_device(fn);
    c.workspace(workspace, workspace_bytes, kdtree::defrag::remap_workspace_bytes(*params),
                "kdtree_defrag_remap_workspace_size");
    kdtree::defrag::launch_remap(*params, workspace, stream);
  });
}

KDTREE_API kdtree_status kdtree_defrag_plan_params_init(kdtree_defrag_plan_params* params) {
  return kdtree::guard("kdtree_defrag_plan_params_init", [&] {
    Checker("kdtree_defrag_plan_params_init").not_null(params, "params");
    std::memset(params, 0, sizeof(*params));
    params->struct_size = sizeof(*params);
  });
}

KDTREE_API kdtree_status kdtree_defrag_plan(const kdtree_defrag_plan_params* params) {
  const char* fn = "kdtree_defrag_plan";
  return kdtree::guard(fn, [&] {
    const Checker c(fn);
    c.not_null(params, "params");
    c.struct_size(params->struct_size, sizeof(kdtree_defrag_plan_params), "kdtree_defrag_plan_params");
    c.zero(params->reserved0, "reserved0");
    kdtree::api::validate_slot_lists(c, params);
    c.at_least(params->num_reserved, 0, "num_reserved");
    if (params->num_reserved > 0) c.not_null(params->reserved_slots, "reserved_slots");
    c.at_least(params->budget, 0, "budget");
    if (params->budget > 0) {
      c.not_null(params->move_src, "move_src");
      c.not_null(params->move_dst, "move_dst");
    }
    c.not_null(params->num_moves, "num_moves");
    kdtree::defrag::plan(*params);
  });
}

KDTREE_API kdtree_status kdtree_fragmentation_stats_compute(const kdtree_defrag_plan_params* plan_params,
                                                            int64_t* runs_per_request,
                                                            kdtree_fragmentation_stats* stats) {
  const char* fn = "kdtree_fragmentation_stats_compute";
  return kdtree::guard(fn, [&] {
    const Checker c(fn);
    c.not_null(plan_params, "plan_params");
    c.struct_size(plan_params->struct_size, sizeof(kdtree_defrag_plan_params),
                  "kdtree_defrag_plan_params");
    c.not_null(stats, "stats");
    c.struct_size(stats->struct_size, sizeof(kdtree_fragmentation_stats),
                  "kdtree_fragmentation_stats");
    kdtree::api::validate_slot_lists(c, plan_params);
    kdtree::defrag::fragmentation_stats(*plan_params, runs_per_request, stats);
  });
}

KDTREE_API kdtree_status kdtree_sort_slots_workspace_size(int32_t index_dtype, int64_t count,
                                                          int64_t num_slots,
                                                          size_t* workspace_bytes) {
  const char* fn = "kdtree_sort_slots_workspace_size";
  return kdtree::guard(fn, [&] {
    const Checker c(fn);
    c.not_null(workspace_bytes, "workspace_bytes");
    kdtree::api::validate_sort_shape(c, index_dtype, count, num_slots);
    if (count == 0) {
      *workspace_bytes = 0;
      return;
    }
    // CUB's size query asks the runtime for the device's PTX version.
    kdtree::current_device(fn);
    *workspace_bytes = kdtree::defrag::sort_workspace_bytes(index_dtype, count, num_slots, fn);
  });
}

KDTREE_API kdtree_status kdtree_sort_slots(void* slots, int32_t index_dtype, int64_t count,
                                           int64_t num_slots, void* workspace,
                                           size_t workspace_bytes, kdtree_stream_t stream) {
  const char* fn = "kdtree_sort_slots";
  return kdtree::guard(fn, [&] {
    const Checker c(fn);
    kdtree::api::validate_sort_shape(c, index_dtype, count, num_slots);
    if (count == 0) return;
    c.not_null(slots, "slots");
    c.aligned(slots, kdtree::api::dtype_bytes(index_dtype), "slots");
    kdtree::current_device(fn);
    c.workspace(workspace, workspace_bytes,
                kdtree::defrag::sort_workspace_bytes(index_dtype, count, num_slots, fn),
                "kdtree_sort_slots_workspace_size");
    kdtree::defrag::launch_sort(slots, index_dtype, count, num_slots, workspace, workspace_bytes,
                                stream);
  });
}

}  // extern "C"
