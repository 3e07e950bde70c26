/*
 * ABI pin: the size and offset of every field of every public struct and the
 * value of every public constant, as compiled on x86-64 LP64 (the bindings
 * mirror these in ctypes and Rust). A change here is an ABI change: bump
 * KDTREE_ABI_VERSION or append fields instead. At run time: the version
 * macros equal the library's answers (liburing test/version.c) and
 * kdtree_struct_size() agrees with sizeof for every struct.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "kdtree_kernels.h"

#if !defined(__x86_64__) || !defined(__LP64__)
#error "the pinned layout below is the x86-64 LP64 one"
#endif

/* kdtree_verify_paged_params */
_Static_assert(sizeof(kdtree_verify_paged_params) == 240, "sizeof(kdtree_verify_paged_params)");
_Static_assert(offsetof(kdtree_verify_paged_params, struct_size) == 0, "kdtree_verify_paged_params.struct_size");
_Static_assert(offsetof(kdtree_verify_paged_params, batch_size) == 4, "kdtree_verify_paged_params.batch_size");
_Static_assert(offsetof(kdtree_verify_paged_params, num_heads) == 8, "kdtree_verify_paged_params.num_heads");
_Static_assert(offsetof(kdtree_verify_paged_params, head_dim_latent) == 12, "kdtree_verify_paged_params.head_dim_latent");
_Static_assert(offsetof(kdtree_verify_paged_params, head_dim_rope) == 16, "kdtree_verify_paged_params.head_dim_rope");
_Static_assert(offsetof(kdtree_verify_paged_params, max_q_len) == 20, "kdtree_verify_paged_params.max_q_len");
_Static_assert(offsetof(kdtree_verify_paged_params, total_q) == 24, "kdtree_verify_paged_params.total_q");
_Static_assert(offsetof(kdtree_verify_paged_params, max_kv_len) == 32, "kdtree_verify_paged_params.max_kv_len");
_Static_assert(offsetof(kdtree_verify_paged_params, num_splits) == 40, "kdtree_verify_paged_params.num_splits");
_Static_assert(offsetof(kdtree_verify_paged_params, sm_scale) == 44, "kdtree_verify_paged_params.sm_scale");
_Static_assert(offsetof(kdtree_verify_paged_params, q) == 48, "kdtree_verify_paged_params.q");
_Static_assert(offsetof(kdtree_verify_paged_params, q_dtype) == 56, "kdtree_verify_paged_params.q_dtype");
_Static_assert(offsetof(kdtree_verify_paged_params, reserved0) == 60, "kdtree_verify_paged_params.reserved0");
_Static_assert(offsetof(kdtree_verify_paged_params, q_stride_token) == 64, "kdtree_verify_paged_params.q_stride_token");
_Static_assert(offsetof(kdtree_verify_paged_params, q_stride_head) == 72, "kdtree_verify_paged_params.q_stride_head");
_Static_assert(offsetof(kdtree_verify_paged_params, kv_cache) == 80, "kdtree_verify_paged_params.kv_cache");
_Static_assert(offsetof(kdtree_verify_paged_params, kv_dtype) == 88, "kdtree_verify_paged_params.kv_dtype");
_Static_assert(offsetof(kdtree_verify_paged_params, kv_scale) == 92, "kdtree_verify_paged_params.kv_scale");
_Static_assert(offsetof(kdtree_verify_paged_params, kv_stride_slot) == 96, "kdtree_verify_paged_params.kv_stride_slot");
_Static_assert(offsetof(kdtree_verify_paged_params, num_slots) == 104, "kdtree_verify_paged_params.num_slots");
_Static_assert(offsetof(kdtree_verify_paged_params, qo_indptr) == 112, "kdtree_verify_paged_params.qo_indptr");
_Static_assert(offsetof(kdtree_verify_paged_params, kv_indptr) == 120, "kdtree_verify_paged_params.kv_indptr");
_Static_assert(offsetof(kdtree_verify_paged_params, kv_indices) == 128, "kdtree_verify_paged_params.kv_indices");
_Static_assert(offsetof(kdtree_verify_paged_params, index_dtype) == 136, "kdtree_verify_paged_params.index_dtype");
_Static_assert(offsetof(kdtree_verify_paged_params, tail_source) == 140, "kdtree_verify_paged_params.tail_source");
_Static_assert(offsetof(kdtree_verify_paged_params, tail_kv) == 144, "kdtree_verify_paged_params.tail_kv");
_Static_assert(offsetof(kdtree_verify_paged_params, tail_kv_stride) == 152, "kdtree_verify_paged_params.tail_kv_stride");
_Static_assert(offsetof(kdtree_verify_paged_params, mask_kind) == 160, "kdtree_verify_paged_params.mask_kind");
_Static_assert(offsetof(kdtree_verify_paged_params, reserved1) == 164, "kdtree_verify_paged_params.reserved1");
_Static_assert(offsetof(kdtree_verify_paged_params, mask) == 168, "kdtree_verify_paged_params.mask");
_Static_assert(offsetof(kdtree_verify_paged_params, mask_indptr) == 176, "kdtree_verify_paged_params.mask_indptr");
_Static_assert(offsetof(kdtree_verify_paged_params, mask_row_bytes) == 184, "kdtree_verify_paged_params.mask_row_bytes");
_Static_assert(offsetof(kdtree_verify_paged_params, out) == 192, "kdtree_verify_paged_params.out");
_Static_assert(offsetof(kdtree_verify_paged_params, out_dtype) == 200, "kdtree_verify_paged_params.out_dtype");
_Static_assert(offsetof(kdtree_verify_paged_params, reserved2) == 204, "kdtree_verify_paged_params.reserved2");
_Static_assert(offsetof(kdtree_verify_paged_params, out_stride_token) == 208, "kdtree_verify_paged_params.out_stride_token");
_Static_assert(offsetof(kdtree_verify_paged_params, out_stride_head) == 216, "kdtree_verify_paged_params.out_stride_head");
_Static_assert(offsetof(kdtree_verify_paged_params, lse) == 224, "kdtree_verify_paged_params.lse");
_Static_assert(offsetof(kdtree_verify_paged_params, error_flag) == 232, "kdtree_verify_paged_params.error_flag");

/* kdtree_verify_contiguous_params */
_Static_assert(sizeof(kdtree_verify_contiguous_params) == 136, "sizeof(kdtree_verify_contiguous_params)");
_Static_assert(offsetof(kdtree_verify_contiguous_params, struct_size) == 0, "kdtree_verify_contiguous_params.struct_size");
_Static_assert(offsetof(kdtree_verify_contiguous_params, num_heads) == 4, "kdtree_verify_contiguous_params.num_heads");
_Static_assert(offsetof(kdtree_verify_contiguous_params, head_dim_latent) == 8, "kdtree_verify_contiguous_params.head_dim_latent");
_Static_assert(offsetof(kdtree_verify_contiguous_params, head_dim_rope) == 12, "kdtree_verify_contiguous_params.head_dim_rope");
_Static_assert(offsetof(kdtree_verify_contiguous_params, q_len) == 16, "kdtree_verify_contiguous_params.q_len");
_Static_assert(offsetof(kdtree_verify_contiguous_params, dtype) == 20, "kdtree_verify_contiguous_params.dtype");
_Static_assert(offsetof(kdtree_verify_contiguous_params, kv_len) == 24, "kdtree_verify_contiguous_params.kv_len");
_Static_assert(offsetof(kdtree_verify_contiguous_params, sm_scale) == 32, "kdtree_verify_contiguous_params.sm_scale");
_Static_assert(offsetof(kdtree_verify_contiguous_params, mask_kind) == 36, "kdtree_verify_contiguous_params.mask_kind");
_Static_assert(offsetof(kdtree_verify_contiguous_params, q) == 40, "kdtree_verify_contiguous_params.q");
_Static_assert(offsetof(kdtree_verify_contiguous_params, q_stride_token) == 48, "kdtree_verify_contiguous_params.q_stride_token");
_Static_assert(offsetof(kdtree_verify_contiguous_params, q_stride_head) == 56, "kdtree_verify_contiguous_params.q_stride_head");
_Static_assert(offsetof(kdtree_verify_contiguous_params, kv) == 64, "kdtree_verify_contiguous_params.kv");
_Static_assert(offsetof(kdtree_verify_contiguous_params, kv_stride) == 72, "kdtree_verify_contiguous_params.kv_stride");
_Static_assert(offsetof(kdtree_verify_contiguous_params, mask) == 80, "kdtree_verify_contiguous_params.mask");
_Static_assert(offsetof(kdtree_verify_contiguous_params, mask_row_bytes) == 88, "kdtree_verify_contiguous_params.mask_row_bytes");
_Static_assert(offsetof(kdtree_verify_contiguous_params, out) == 96, "kdtree_verify_contiguous_params.out");
_Static_assert(offsetof(kdtree_verify_contiguous_params, out_dtype) == 104, "kdtree_verify_contiguous_params.out_dtype");
_Static_assert(offsetof(kdtree_verify_contiguous_params, reserved0) == 108, "kdtree_verify_contiguous_params.reserved0");
_Static_assert(offsetof(kdtree_verify_contiguous_params, out_stride_token) == 112, "kdtree_verify_contiguous_params.out_stride_token");
_Static_assert(offsetof(kdtree_verify_contiguous_params, out_stride_head) == 120, "kdtree_verify_contiguous_params.out_stride_head");
_Static_assert(offsetof(kdtree_verify_contiguous_params, lse) == 128, "kdtree_verify_contiguous_params.lse");

/* kdtree_merge_params */
_Static_assert(sizeof(kdtree_merge_params) == 112, "sizeof(kdtree_merge_params)");
_Static_assert(offsetof(kdtree_merge_params, struct_size) == 0, "kdtree_merge_params.struct_size");
_Static_assert(offsetof(kdtree_merge_params, num_states) == 4, "kdtree_merge_params.num_states");
_Static_assert(offsetof(kdtree_merge_params, num_tokens) == 8, "kdtree_merge_params.num_tokens");
_Static_assert(offsetof(kdtree_merge_params, num_heads) == 16, "kdtree_merge_params.num_heads");
_Static_assert(offsetof(kdtree_merge_params, head_dim) == 20, "kdtree_merge_params.head_dim");
_Static_assert(offsetof(kdtree_merge_params, states) == 24, "kdtree_merge_params.states");
_Static_assert(offsetof(kdtree_merge_params, states_dtype) == 32, "kdtree_merge_params.states_dtype");
_Static_assert(offsetof(kdtree_merge_params, reserved0) == 36, "kdtree_merge_params.reserved0");
_Static_assert(offsetof(kdtree_merge_params, states_stride_state) == 40, "kdtree_merge_params.states_stride_state");
_Static_assert(offsetof(kdtree_merge_params, states_stride_token) == 48, "kdtree_merge_params.states_stride_token");
_Static_assert(offsetof(kdtree_merge_params, states_stride_head) == 56, "kdtree_merge_params.states_stride_head");
_Static_assert(offsetof(kdtree_merge_params, states_lse) == 64, "kdtree_merge_params.states_lse");
_Static_assert(offsetof(kdtree_merge_params, out) == 72, "kdtree_merge_params.out");
_Static_assert(offsetof(kdtree_merge_params, out_dtype) == 80, "kdtree_merge_params.out_dtype");
_Static_assert(offsetof(kdtree_merge_params, reserved1) == 84, "kdtree_merge_params.reserved1");
_Static_assert(offsetof(kdtree_merge_params, out_stride_token) == 88, "kdtree_merge_params.out_stride_token");
_Static_assert(offsetof(kdtree_merge_params, out_stride_head) == 96, "kdtree_merge_params.out_stride_head");
_Static_assert(offsetof(kdtree_merge_params, lse) == 104, "kdtree_merge_params.lse");

/* kdtree_defrag_copy_params */
_Static_assert(sizeof(kdtree_defrag_copy_params) == 88, "sizeof(kdtree_defrag_copy_params)");
_Static_assert(offsetof(kdtree_defrag_copy_params, struct_size) == 0, "kdtree_defrag_copy_params.struct_size");
_Static_assert(offsetof(kdtree_defrag_copy_params, num_layers) == 4, "kdtree_defrag_copy_params.num_layers");
_Static_assert(offsetof(kdtree_defrag_copy_params, layer_base) == 8, "kdtree_defrag_copy_params.layer_base");
_Static_assert(offsetof(kdtree_defrag_copy_params, slot_stride_bytes) == 16, "kdtree_defrag_copy_params.slot_stride_bytes");
_Static_assert(offsetof(kdtree_defrag_copy_params, row_bytes) == 24, "kdtree_defrag_copy_params.row_bytes");
_Static_assert(offsetof(kdtree_defrag_copy_params, num_slots) == 32, "kdtree_defrag_copy_params.num_slots");
_Static_assert(offsetof(kdtree_defrag_copy_params, src_slots) == 40, "kdtree_defrag_copy_params.src_slots");
_Static_assert(offsetof(kdtree_defrag_copy_params, dst_slots) == 48, "kdtree_defrag_copy_params.dst_slots");
_Static_assert(offsetof(kdtree_defrag_copy_params, index_dtype) == 56, "kdtree_defrag_copy_params.index_dtype");
_Static_assert(offsetof(kdtree_defrag_copy_params, reserved0) == 60, "kdtree_defrag_copy_params.reserved0");
_Static_assert(offsetof(kdtree_defrag_copy_params, max_moves) == 64, "kdtree_defrag_copy_params.max_moves");
_Static_assert(offsetof(kdtree_defrag_copy_params, num_moves) == 72, "kdtree_defrag_copy_params.num_moves");
_Static_assert(offsetof(kdtree_defrag_copy_params, error_flag) == 80, "kdtree_defrag_copy_params.error_flag");

/* kdtree_defrag_remap_params */
_Static_assert(sizeof(kdtree_defrag_remap_params) == 104, "sizeof(kdtree_defrag_remap_params)");
_Static_assert(offsetof(kdtree_defrag_remap_params, struct_size) == 0, "kdtree_defrag_remap_params.struct_size");
_Static_assert(offsetof(kdtree_defrag_remap_params, table_dtype) == 4, "kdtree_defrag_remap_params.table_dtype");
_Static_assert(offsetof(kdtree_defrag_remap_params, table) == 8, "kdtree_defrag_remap_params.table");
_Static_assert(offsetof(kdtree_defrag_remap_params, rows) == 16, "kdtree_defrag_remap_params.rows");
_Static_assert(offsetof(kdtree_defrag_remap_params, cols) == 24, "kdtree_defrag_remap_params.cols");
_Static_assert(offsetof(kdtree_defrag_remap_params, row_stride) == 32, "kdtree_defrag_remap_params.row_stride");
_Static_assert(offsetof(kdtree_defrag_remap_params, row_lengths) == 40, "kdtree_defrag_remap_params.row_lengths");
_Static_assert(offsetof(kdtree_defrag_remap_params, num_slots) == 48, "kdtree_defrag_remap_params.num_slots");
_Static_assert(offsetof(kdtree_defrag_remap_params, src_slots) == 56, "kdtree_defrag_remap_params.src_slots");
_Static_assert(offsetof(kdtree_defrag_remap_params, dst_slots) == 64, "kdtree_defrag_remap_params.dst_slots");
_Static_assert(offsetof(kdtree_defrag_remap_params, index_dtype) == 72, "kdtree_defrag_remap_params.index_dtype");
_Static_assert(offsetof(kdtree_defrag_remap_params, reserved0) == 76, "kdtree_defrag_remap_params.reserved0");
_Static_assert(offsetof(kdtree_defrag_remap_params, max_moves) == 80, "kdtree_defrag_remap_params.max_moves");
_Static_assert(offsetof(kdtree_defrag_remap_params, num_moves) == 88, "kdtree_defrag_remap_params.num_moves");
_Static_assert(offsetof(kdtree_defrag_remap_params, error_flag) == 96, "kdtree_defrag_remap_params.error_flag");

/* kdtree_defrag_plan_params */
_Static_assert(sizeof(kdtree_defrag_plan_params) == 120, "sizeof(kdtree_defrag_plan_params)");
_Static_assert(offsetof(kdtree_defrag_plan_params, struct_size) == 0, "kdtree_defrag_plan_params.struct_size");
_Static_assert(offsetof(kdtree_defrag_plan_params, reserved0) == 4, "kdtree_defrag_plan_params.reserved0");
_Static_assert(offsetof(kdtree_defrag_plan_params, num_slots) == 8, "kdtree_defrag_plan_params.num_slots");
_Static_assert(offsetof(kdtree_defrag_plan_params, num_requests) == 16, "kdtree_defrag_plan_params.num_requests");
_Static_assert(offsetof(kdtree_defrag_plan_params, request_indptr) == 24, "kdtree_defrag_plan_params.request_indptr");
_Static_assert(offsetof(kdtree_defrag_plan_params, request_slots) == 32, "kdtree_defrag_plan_params.request_slots");
_Static_assert(offsetof(kdtree_defrag_plan_params, free_slots) == 40, "kdtree_defrag_plan_params.free_slots");
_Static_assert(offsetof(kdtree_defrag_plan_params, num_free) == 48, "kdtree_defrag_plan_params.num_free");
_Static_assert(offsetof(kdtree_defrag_plan_params, pinned_slots) == 56, "kdtree_defrag_plan_params.pinned_slots");
_Static_assert(offsetof(kdtree_defrag_plan_params, num_pinned) == 64, "kdtree_defrag_plan_params.num_pinned");
_Static_assert(offsetof(kdtree_defrag_plan_params, reserved_slots) == 72, "kdtree_defrag_plan_params.reserved_slots");
_Static_assert(offsetof(kdtree_defrag_plan_params, num_reserved) == 80, "kdtree_defrag_plan_params.num_reserved");
_Static_assert(offsetof(kdtree_defrag_plan_params, budget) == 88, "kdtree_defrag_plan_params.budget");
_Static_assert(offsetof(kdtree_defrag_plan_params, move_src) == 96, "kdtree_defrag_plan_params.move_src");
_Static_assert(offsetof(kdtree_defrag_plan_params, move_dst) == 104, "kdtree_defrag_plan_params.move_dst");
_Static_assert(offsetof(kdtree_defrag_plan_params, num_moves) == 112, "kdtree_defrag_plan_params.num_moves");

/* kdtree_fragmentation_stats */
_Static_assert(sizeof(kdtree_fragmentation_stats) == 64, "sizeof(kdtree_fragmentation_stats)");
_Static_assert(offsetof(kdtree_fragmentation_stats, struct_size) == 0, "kdtree_fragmentation_stats.struct_size");
_Static_assert(offsetof(kdtree_fragmentation_stats, reserved0) == 4, "kdtree_fragmentation_stats.reserved0");
_Static_assert(offsetof(kdtree_fragmentation_stats, num_requests) == 8, "kdtree_fragmentation_stats.num_requests");
_Static_assert(offsetof(kdtree_fragmentation_stats, total_slots) == 16, "kdtree_fragmentation_stats.total_slots");
_Static_assert(offsetof(kdtree_fragmentation_stats, total_runs) == 24, "kdtree_fragmentation_stats.total_runs");
_Static_assert(offsetof(kdtree_fragmentation_stats, max_runs) == 32, "kdtree_fragmentation_stats.max_runs");
_Static_assert(offsetof(kdtree_fragmentation_stats, mean_run_length) == 40, "kdtree_fragmentation_stats.mean_run_length");
_Static_assert(offsetof(kdtree_fragmentation_stats, largest_free_run) == 48, "kdtree_fragmentation_stats.largest_free_run");
_Static_assert(offsetof(kdtree_fragmentation_stats, num_free) == 56, "kdtree_fragmentation_stats.num_free");

/* constants */
_Static_assert(KDTREE_OK == 0, "KDTREE_OK");
_Static_assert(KDTREE_ERROR_INVALID_ARGUMENT == 1, "KDTREE_ERROR_INVALID_ARGUMENT");
_Static_assert(KDTREE_ERROR_UNSUPPORTED == 2, "KDTREE_ERROR_UNSUPPORTED");
_Static_assert(KDTREE_ERROR_MISALIGNED == 3, "KDTREE_ERROR_MISALIGNED");
_Static_assert(KDTREE_ERROR_WORKSPACE_TOO_SMALL == 4, "KDTREE_ERROR_WORKSPACE_TOO_SMALL");
_Static_assert(KDTREE_ERROR_STRUCT_VERSION == 5, "KDTREE_ERROR_STRUCT_VERSION");
_Static_assert(KDTREE_ERROR_NO_DEVICE == 6, "KDTREE_ERROR_NO_DEVICE");
_Static_assert(KDTREE_ERROR_ARCH_NOT_BUILT == 7, "KDTREE_ERROR_ARCH_NOT_BUILT");
_Static_assert(KDTREE_ERROR_CUDA == 8, "KDTREE_ERROR_CUDA");
_Static_assert(KDTREE_ERROR_INTERNAL == 9, "KDTREE_ERROR_INTERNAL");
_Static_assert(KDTREE_FLAG_SLOT_OUT_OF_RANGE == 1, "KDTREE_FLAG_SLOT_OUT_OF_RANGE");
_Static_assert(KDTREE_FLAG_KV_SHORTER_THAN_Q == 2, "KDTREE_FLAG_KV_SHORTER_THAN_Q");
_Static_assert(KDTREE_FLAG_BAD_INDPTR == 4, "KDTREE_FLAG_BAD_INDPTR");
_Static_assert(KDTREE_DTYPE_F32 == 0, "KDTREE_DTYPE_F32");
_Static_assert(KDTREE_DTYPE_BF16 == 1, "KDTREE_DTYPE_BF16");
_Static_assert(KDTREE_DTYPE_F16 == 2, "KDTREE_DTYPE_F16");
_Static_assert(KDTREE_DTYPE_FP8_E4M3 == 3, "KDTREE_DTYPE_FP8_E4M3");
_Static_assert(KDTREE_DTYPE_INT32 == 4, "KDTREE_DTYPE_INT32");
_Static_assert(KDTREE_DTYPE_INT64 == 5, "KDTREE_DTYPE_INT64");
_Static_assert(KDTREE_MASK_NONE == 0, "KDTREE_MASK_NONE");
_Static_assert(KDTREE_MASK_CAUSAL == 1, "KDTREE_MASK_CAUSAL");
_Static_assert(KDTREE_MASK_TREE_DENSE == 2, "KDTREE_MASK_TREE_DENSE");
_Static_assert(KDTREE_MASK_TREE_BITS == 3, "KDTREE_MASK_TREE_BITS");
_Static_assert(KDTREE_MASK_SGLANG_FULL == 4, "KDTREE_MASK_SGLANG_FULL");
_Static_assert(KDTREE_TAIL_FROM_INDICES == 0, "KDTREE_TAIL_FROM_INDICES");
_Static_assert(KDTREE_TAIL_FROM_EXTEND == 1, "KDTREE_TAIL_FROM_EXTEND");
_Static_assert(KDTREE_VERSION_MAJOR == 0, "KDTREE_VERSION_MAJOR");
_Static_assert(KDTREE_VERSION_MINOR == 1, "KDTREE_VERSION_MINOR");
_Static_assert(KDTREE_VERSION_PATCH == 0, "KDTREE_VERSION_PATCH");
_Static_assert(KDTREE_VERSION_NUMBER == 100, "KDTREE_VERSION_NUMBER");
_Static_assert(KDTREE_ABI_VERSION == 1, "KDTREE_ABI_VERSION");

static int failures = 0;

#define EXPECT(cond, ...)                     \
  do {                                        \
    if (!(cond)) {                            \
      fprintf(stderr, "FAIL: " __VA_ARGS__);  \
      fputc('\n', stderr);                    \
      ++failures;                             \
    }                                         \
  } while (0)

static void expect_struct_size(const char* name, size_t compiled) {
  size_t reported = 0;
  kdtree_status status = kdtree_struct_size(name, &reported);
  EXPECT(status == KDTREE_OK, "kdtree_struct_size(%s) = %d (%s)", name, (int)status,
         kdtree_last_error_message());
  EXPECT(reported == compiled, "kdtree_struct_size(%s) = %zu, sizeof = %zu", name, reported,
         compiled);
}

int main(void) {
  EXPECT(kdtree_version_number() == KDTREE_VERSION_NUMBER, "kdtree_version_number() = %d",
         (int)kdtree_version_number());
  EXPECT(strcmp(kdtree_version_string(), KDTREE_VERSION_STRING) == 0,
         "kdtree_version_string() = %s", kdtree_version_string());
  EXPECT(kdtree_abi_version() == KDTREE_ABI_VERSION, "kdtree_abi_version() = %d",
         (int)kdtree_abi_version());
  {
    char expected[32];
    snprintf(expected, sizeof expected, "%d.%d.%d", KDTREE_VERSION_MAJOR, KDTREE_VERSION_MINOR,
             KDTREE_VERSION_PATCH);
    EXPECT(strcmp(expected, KDTREE_VERSION_STRING) == 0, "KDTREE_VERSION_STRING %s != %s",
           KDTREE_VERSION_STRING, expected);
    EXPECT(strncmp(kdtree_build_info(), "kdtree_kernels " KDTREE_VERSION_STRING " ",
                   strlen("kdtree_kernels " KDTREE_VERSION_STRING " ")) == 0,
           "kdtree_build_info() = %s", kdtree_build_info());
  }

  expect_struct_size("kdtree_verify_paged_params", sizeof(kdtree_verify_paged_params));
  expect_struct_size("kdtree_verify_contiguous_params", sizeof(kdtree_verify_contiguous_params));
  expect_struct_size("kdtree_merge_params", sizeof(kdtree_merge_params));
  expect_struct_size("kdtree_defrag_copy_params", sizeof(kdtree_defrag_copy_params));
  expect_struct_size("kdtree_defrag_remap_params", sizeof(kdtree_defrag_remap_params));
  expect_struct_size("kdtree_defrag_plan_params", sizeof(kdtree_defrag_plan_params));
  expect_struct_size("kdtree_fragmentation_stats", sizeof(kdtree_fragmentation_stats));

  if (failures == 0) printf("layout, constants and versions agree (%s)\n", kdtree_build_info());
  return failures == 0 ? 0 : 1;
}
