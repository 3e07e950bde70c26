/*
 * Validation of the defragmentation entry points: copy, remap, sort (device)
 * and the host planner / statistics. Status, exact message, nothing written.
 */
#include <stdio.h>

#include "api_expect.h"

#define POISON 0xEE
static _Alignas(16) uint64_t layer_base[4];
static _Alignas(16) int64_t src[8] = {5, 6, 7};
static _Alignas(16) int64_t dst[8] = {1, 2, 3};
static _Alignas(16) int32_t table[4 * 16];
static _Alignas(16) int32_t flag;

static kdtree_defrag_copy_params valid_copy(void) {
  kdtree_defrag_copy_params p;
  assert_int_equal(kdtree_defrag_copy_params_init(&p), KDTREE_OK);
  p.num_layers = 4;
  p.layer_base = layer_base;
  p.slot_stride_bytes = 1152;
  p.row_bytes = 1152;
  p.num_slots = 16;
  p.src_slots = src;
  p.dst_slots = dst;
  p.index_dtype = KDTREE_DTYPE_INT64;
  p.max_moves = 3;
  p.error_flag = &flag;
  return p;
}

static void copy_rules(void** state) {
  (void)state;
  struct {
    kdtree_defrag_copy_params p;
    kdtree_status status;
    const char* message;
  } cases[20];
  int n = 0;
#define CASE(stmt, st, msg) ADD_CASE(kdtree_defrag_copy_params, valid_copy, stmt, st, msg)
  CASE(p->max_moves = -1, KDTREE_ERROR_INVALID_ARGUMENT, "max_moves = -1 is less than 0");
  CASE(p->num_layers = 0, KDTREE_ERROR_INVALID_ARGUMENT, "num_layers = 0 is less than 1");
  CASE(p->num_layers = INT32_MAX, KDTREE_ERROR_UNSUPPORTED, "num_layers = 2147483647 is out of range [1, 1048576]");
  CASE(p->row_bytes = 0, KDTREE_ERROR_INVALID_ARGUMENT, "row_bytes = 0 is less than 1");
  CASE(p->slot_stride_bytes = 1024, KDTREE_ERROR_INVALID_ARGUMENT,
       "slot_stride_bytes = 1024 is less than row_bytes = 1152");
  CASE(p->num_slots = -3, KDTREE_ERROR_INVALID_ARGUMENT, "num_slots = -3 is less than 0");
  CASE(p->index_dtype = KDTREE_DTYPE_BF16, KDTREE_ERROR_UNSUPPORTED,
       "index_dtype = KDTREE_DTYPE_BF16 is not supported here (KDTREE_DTYPE_INT32, "
       "KDTREE_DTYPE_INT64)");
  CASE(p->reserved0 = 9, KDTREE_ERROR_INVALID_ARGUMENT, "reserved0 = 9 is reserved and must be 0");
  CASE(p->layer_base = NULL, KDTREE_ERROR_INVALID_ARGUMENT, "layer_base is NULL");
  CASE(p->src_slots = NULL, KDTREE_ERROR_INVALID_ARGUMENT, "src_slots is NULL");
  CASE(p->dst_slots = NULL, KDTREE_ERROR_INVALID_ARGUMENT, "dst_slots is NULL");
  CASE(p->num_slots = INT64_MAX / 1000, KDTREE_ERROR_INVALID_ARGUMENT,
       "num_slots * slot_stride_bytes overflows int64");
  CASE(p->max_moves = INT64_MAX / 4, KDTREE_ERROR_INVALID_ARGUMENT,
       "max_moves * index bytes overflows int64");
  CASE(p->src_slots = (const char*)src + 4, KDTREE_ERROR_MISALIGNED, "src_slots is not 8-byte aligned");
  CASE(p->layer_base = (const uint64_t*)((const char*)layer_base + 4), KDTREE_ERROR_MISALIGNED,
       "layer_base is not 8-byte aligned");
  CASE(p->error_flag = (int32_t*)((char*)&flag + 1), KDTREE_ERROR_MISALIGNED,
       "error_flag is not 4-byte aligned");
#undef CASE
  char expected[512];
  for (int i = 0; i < n; ++i) {
    snprintf(expected, sizeof expected, "kdtree_defrag_copy: %s", cases[i].message);
    EXPECT_FAILURE(kdtree_defrag_copy(&cases[i].p, NULL), cases[i].status, expected);
  }
  EXPECT_FAILURE(kdtree_defrag_copy(NULL, NULL), KDTREE_ERROR_INVALID_ARGUMENT,
                 "kdtree_defrag_copy: params is NULL");
  /* No moves: a no-op that needs no pointer and no device. */
  kdtree_defrag_copy_params p;
  kdtree_defrag_copy_params_init(&p);
  EXPECT_OK(kdtree_defrag_copy(&p, NULL));
  if (!gpu_present()) {
    p = valid_copy();
    EXPECT_NO_DEVICE(kdtree_defrag_copy(&p, NULL), "kdtree_defrag_copy");
  }
}

static kdtree_defrag_remap_params valid_remap(void) {
  kdtree_defrag_remap_params p;
  assert_int_equal(kdtree_defrag_remap_params_init(&p), KDTREE_OK);
  p.table = table;
  p.rows = 4;
  p.cols = 16;
  p.row_stride = 16;
  p.num_slots = 16;
  p.src_slots = src;
  p.dst_slots = dst;
  p.index_dtype = KDTREE_DTYPE_INT64;
  p.max_moves = 3;
  return p;
}

static void remap_rules(void** state) {
  (void)state;
  memset(table, POISON, sizeof table);
  struct {
    kdtree_defrag_remap_params p;
    kdtree_status status;
    const char* message;
  } cases[16];
  int n = 0;
#define CASE(stmt, st, msg) ADD_CASE(kdtree_defrag_remap_params, valid_remap, stmt, st, msg)
  CASE(p->table_dtype = KDTREE_DTYPE_F32, KDTREE_ERROR_UNSUPPORTED,
       "table_dtype = KDTREE_DTYPE_F32 is not supported here (KDTREE_DTYPE_INT32, "
       "KDTREE_DTYPE_INT64)");
  CASE(p->rows = -1, KDTREE_ERROR_INVALID_ARGUMENT, "rows = -1 is less than 0");
  CASE(p->cols = -1, KDTREE_ERROR_INVALID_ARGUMENT, "cols = -1 is less than 0");
  CASE(p->num_slots = -1, KDTREE_ERROR_INVALID_ARGUMENT, "num_slots = -1 is less than 0");
  CASE(p->num_slots = (INT64_C(1) << 31) + 1, KDTREE_ERROR_INVALID_ARGUMENT,
       "num_slots = 2147483649 is out of range [0, 2147483648]");
  CASE(p->max_moves = -1, KDTREE_ERROR_INVALID_ARGUMENT, "max_moves = -1 is less than 0");
  CASE(p->table = NULL, KDTREE_ERROR_INVALID_ARGUMENT, "table is NULL");
  CASE(p->dst_slots = NULL, KDTREE_ERROR_INVALID_ARGUMENT, "dst_slots is NULL");
  CASE(p->row_stride = 8, KDTREE_ERROR_INVALID_ARGUMENT, "row_stride = 8 is less than cols = 16");
  CASE(p->table = (char*)table + 2, KDTREE_ERROR_MISALIGNED, "table is not 4-byte aligned");
  CASE(p->rows = INT64_MAX / 8, KDTREE_ERROR_INVALID_ARGUMENT,
       "table offsets overflow int64 (row_stride)");
  /* An empty table still has its moves scanned (and flagged on the GPU). */
  CASE((p->rows = 0, p->src_slots = NULL), KDTREE_ERROR_INVALID_ARGUMENT, "src_slots is NULL");
  CASE(p->max_moves = INT64_MAX / 4, KDTREE_ERROR_INVALID_ARGUMENT,
       "max_moves * index bytes overflows int64");
#undef CASE
  char expected[512];
  for (int i = 0; i < n; ++i) {
    snprintf(expected, sizeof expected, "kdtree_defrag_remap: %s", cases[i].message);
    EXPECT_FAILURE(kdtree_defrag_remap(&cases[i].p, NULL, 0, NULL), cases[i].status, expected);
    assert_untouched(table, sizeof table, POISON);
  }
  kdtree_defrag_remap_params p = valid_remap();
  size_t bytes = 0;
  EXPECT_OK(kdtree_defrag_remap_workspace_size(&p, &bytes));
  assert_true(bytes >= 16 * sizeof(int32_t));
  EXPECT_FAILURE(kdtree_defrag_remap_workspace_size(&p, NULL), KDTREE_ERROR_INVALID_ARGUMENT,
                 "kdtree_defrag_remap_workspace_size: workspace_bytes is NULL");
  /* No map for an empty table or pool. */
  p.cols = 0;
  EXPECT_OK(kdtree_defrag_remap_workspace_size(&p, &bytes));
  assert_int_equal(bytes, 0);
  p = valid_remap();
  p.num_slots = 0;
  EXPECT_OK(kdtree_defrag_remap_workspace_size(&p, &bytes));
  assert_int_equal(bytes, 0);
  p.max_moves = 0;
  p.table = NULL;
  EXPECT_OK(kdtree_defrag_remap(&p, NULL, 0, NULL));
  if (!gpu_present()) {
    p = valid_remap();
    EXPECT_NO_DEVICE(kdtree_defrag_remap(&p, NULL, 0, NULL), "kdtree_defrag_remap");
    p.rows = 0;
    p.table = NULL;
    EXPECT_NO_DEVICE(kdtree_defrag_remap(&p, NULL, 0, NULL), "kdtree_defrag_remap");
  }
  assert_untouched(table, sizeof table, POISON);
}

static void sort_rules(void** state) {
  (void)state;
  size_t bytes = 77;
  EXPECT_FAILURE(kdtree_sort_slots(table, KDTREE_DTYPE_F16, 4, 16, NULL, 0, NULL),
                 KDTREE_ERROR_UNSUPPORTED,
                 "kdtree_sort_slots: index_dtype = KDTREE_DTYPE_F16 is not supported here "
                 "(KDTREE_DTYPE_INT32, KDTREE_DTYPE_INT64)");
  EXPECT_FAILURE(kdtree_sort_slots(table, KDTREE_DTYPE_INT32, -1, 16, NULL, 0, NULL),
                 KDTREE_ERROR_INVALID_ARGUMENT, "kdtree_sort_slots: count = -1 is less than 0");
  EXPECT_FAILURE(kdtree_sort_slots(table, KDTREE_DTYPE_INT32, 4, 0, NULL, 0, NULL),
                 KDTREE_ERROR_INVALID_ARGUMENT,
                 "kdtree_sort_slots: num_slots = 0 is out of range [1, 2147483648]");
  EXPECT_FAILURE(kdtree_sort_slots(table, KDTREE_DTYPE_INT32, 4, INT64_C(1) << 32, NULL, 0, NULL),
                 KDTREE_ERROR_INVALID_ARGUMENT,
                 "kdtree_sort_slots: num_slots = 4294967296 is out of range [1, 2147483648]");
  EXPECT_FAILURE(kdtree_sort_slots(NULL, KDTREE_DTYPE_INT32, 4, 16, NULL, 0, NULL),
                 KDTREE_ERROR_INVALID_ARGUMENT, "kdtree_sort_slots: slots is NULL");
  EXPECT_FAILURE(kdtree_sort_slots((char*)table + 4, KDTREE_DTYPE_INT64, 4, 16, NULL, 0, NULL),
                 KDTREE_ERROR_MISALIGNED, "kdtree_sort_slots: slots is not 8-byte aligned");
  EXPECT_FAILURE(kdtree_sort_slots_workspace_size(KDTREE_DTYPE_INT32, 4, 16, NULL),
                 KDTREE_ERROR_INVALID_ARGUMENT,
                 "kdtree_sort_slots_workspace_size: workspace_bytes is NULL");
  EXPECT_OK(kdtree_sort_slots(NULL, KDTREE_DTYPE_INT32, 0, 16, NULL, 0, NULL));
  EXPECT_OK(kdtree_sort_slots_workspace_size(KDTREE_DTYPE_INT64, 0, 16, &bytes));
  assert_int_equal(bytes, 0);
  if (!gpu_present()) {
    EXPECT_NO_DEVICE(kdtree_sort_slots(table, KDTREE_DTYPE_INT32, 4, 16, NULL, 0, NULL),
                     "kdtree_sort_slots");
  }
}

/* Planner: two requests over 8 slots, free list, outputs poisoned. */
static _Alignas(16) int64_t indptr[3] = {0, 2, 4};
static _Alignas(16) int64_t live[4] = {6, 2, 7, 3};
static _Alignas(16) int64_t free_list[3] = {0, 4, 5};
static _Alignas(16) int64_t move_src[4], move_dst[4], moves;

static kdtree_defrag_plan_params valid_plan(void) {
  kdtree_defrag_plan_params p;
  assert_int_equal(kdtree_defrag_plan_params_init(&p), KDTREE_OK);
  p.num_slots = 8;
  p.num_requests = 2;
  p.request_indptr = indptr;
  p.request_slots = live;
  p.free_slots = free_list;
  p.num_free = 3;
  p.budget = 4;
  p.move_src = move_src;
  p.move_dst = move_dst;
  p.num_moves = &moves;
  return p;
}

static void plan_rules(void** state) {
  (void)state;
  memset(move_src, POISON, sizeof move_src);
  memset(move_dst, POISON, sizeof move_dst);
  memset(&moves, POISON, sizeof moves);
  struct {
    kdtree_defrag_plan_params p;
    kdtree_status status;
    const char* message;
  } cases[12];
  int n = 0;
#define CASE(stmt, msg) \
  ADD_CASE(kdtree_defrag_plan_params, valid_plan, stmt, KDTREE_ERROR_INVALID_ARGUMENT, msg)
  CASE(p->num_requests = -1, "num_requests = -1 is less than 0");
  CASE(p->num_free = -1, "num_free = -1 is less than 0");
  CASE(p->request_indptr = NULL, "request_indptr is NULL");
  CASE(p->request_slots = NULL, "request_slots is NULL");
  CASE(p->free_slots = NULL, "free_slots is NULL");
  CASE(p->num_pinned = 2, "pinned_slots is NULL");
  CASE(p->num_reserved = 1, "reserved_slots is NULL");
  CASE(p->budget = -1, "budget = -1 is less than 0");
  CASE(p->move_src = NULL, "move_src is NULL");
  CASE(p->num_moves = NULL, "num_moves is NULL");
  CASE(p->reserved0 = 4, "reserved0 = 4 is reserved and must be 0");
#undef CASE
  char expected[256];
  for (int i = 0; i < n; ++i) {
    snprintf(expected, sizeof expected, "kdtree_defrag_plan: %s", cases[i].message);
    EXPECT_FAILURE(kdtree_defrag_plan(&cases[i].p), cases[i].status, expected);
    assert_untouched(move_src, sizeof move_src, POISON);
    assert_untouched(move_dst, sizeof move_dst, POISON);
    assert_untouched(&moves, sizeof moves, POISON);
  }
  kdtree_defrag_plan_params p = valid_plan();
  p.struct_size = 0;
  assert_int_equal(kdtree_defrag_plan(&p), KDTREE_ERROR_STRUCT_VERSION);
  EXPECT_FAILURE(kdtree_defrag_plan(NULL), KDTREE_ERROR_INVALID_ARGUMENT,
                 "kdtree_defrag_plan: params is NULL");
  /* Budget 0: no move arrays needed; the planner reports zero moves. */
  p = valid_plan();
  p.budget = 0;
  p.move_src = NULL;
  p.move_dst = NULL;
  EXPECT_OK(kdtree_defrag_plan(&p));
  assert_int_equal(moves, 0);
}

static void stats_rules(void** state) {
  (void)state;
  kdtree_defrag_plan_params p = valid_plan();
  kdtree_fragmentation_stats stats;
  memset(&stats, POISON, sizeof stats);
  stats.struct_size = 12;
  char expected[256];
  snprintf(expected, sizeof expected,
           "kdtree_fragmentation_stats_compute: struct_size = 12 is not "
           "sizeof(kdtree_fragmentation_stats) = %zu of this library (call the _params_init "
           "function)",
           sizeof stats);
  EXPECT_FAILURE(kdtree_fragmentation_stats_compute(&p, NULL, &stats), KDTREE_ERROR_STRUCT_VERSION,
                 expected);
  EXPECT_FAILURE(kdtree_fragmentation_stats_compute(&p, NULL, NULL), KDTREE_ERROR_INVALID_ARGUMENT,
                 "kdtree_fragmentation_stats_compute: stats is NULL");
  EXPECT_FAILURE(kdtree_fragmentation_stats_compute(NULL, NULL, &stats),
                 KDTREE_ERROR_INVALID_ARGUMENT,
                 "kdtree_fragmentation_stats_compute: plan_params is NULL");
  stats.struct_size = sizeof stats;
  p.request_slots = NULL;
  EXPECT_FAILURE(kdtree_fragmentation_stats_compute(&p, NULL, &stats),
                 KDTREE_ERROR_INVALID_ARGUMENT,
                 "kdtree_fragmentation_stats_compute: request_slots is NULL");
  p = valid_plan();
  p.num_pinned = 2;
  p.pinned_slots = NULL; /* the statistics read pinned_slots too */
  EXPECT_FAILURE(kdtree_fragmentation_stats_compute(&p, NULL, &stats),
                 KDTREE_ERROR_INVALID_ARGUMENT,
                 "kdtree_fragmentation_stats_compute: pinned_slots is NULL");
  p = valid_plan();
  EXPECT_OK(kdtree_fragmentation_stats_compute(&p, NULL, &stats));
  assert_int_equal(stats.num_requests, 2);
  assert_int_equal(stats.total_slots, 4);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(copy_rules),
      cmocka_unit_test(remap_rules),
      cmocka_unit_test(sort_rules),
      cmocka_unit_test(plan_rules),
      cmocka_unit_test(stats_rules),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
