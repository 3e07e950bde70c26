/*
 * Validation of kdtree_verify_paged and its twins (SPEC section 4): every rule
 * gives its status and its exact message, and a rejected call writes nothing
 * (out and lse are poisoned before and checked after). Host buffers stand in
 * for device pointers: a rejected call dereferences nothing.
 */
#include <math.h>
#include <stdio.h>

#include "api_expect.h"

enum { B = 1, H = 2, Q = 4, PREFIX = 8, SLOTS = 16, D = 576, DL = 512, ROOM = 640 };
#define POISON 0xAB

/* Host "device" memory, 16-byte aligned, with room for wider strides. */
static _Alignas(16) uint16_t q_buf[Q * H * ROOM + 16];
static _Alignas(16) uint16_t kv_buf[SLOTS * ROOM + 16];
static _Alignas(16) uint16_t tail_buf[Q * ROOM];
static _Alignas(16) float out_buf[Q * H * ROOM];
static _Alignas(16) float lse_buf[Q * H + 4];
static _Alignas(16) int32_t qo_indptr[B + 1] = {0, Q};
static _Alignas(16) int32_t kv_indptr[B + 1] = {0, PREFIX + Q};
static _Alignas(16) int64_t kv_indices[PREFIX + Q + 2];
static _Alignas(16) uint8_t mask_buf[Q * Q];
static _Alignas(16) int64_t mask_indptr[B + 1] = {0, Q * Q};

static kdtree_verify_paged_params valid(void) {
  kdtree_verify_paged_params p;
  assert_int_equal(kdtree_verify_paged_params_init(&p), KDTREE_OK);
  p.batch_size = B;
  p.num_heads = H;
  p.max_q_len = Q;
  p.total_q = Q;
  p.max_kv_len = PREFIX + Q;
  p.sm_scale = 0.0416667f;
  p.q = q_buf;
  p.q_stride_token = H * D;
  p.q_stride_head = D;
  p.kv_cache = kv_buf;
  p.kv_stride_slot = D;
  p.num_slots = SLOTS;
  p.qo_indptr = qo_indptr;
  p.kv_indptr = kv_indptr;
  p.kv_indices = kv_indices;
  p.index_dtype = KDTREE_DTYPE_INT64;
  p.mask_kind = KDTREE_MASK_TREE_DENSE;
  p.mask = mask_buf;
  p.mask_indptr = mask_indptr;
  p.out = out_buf;
  p.out_dtype = KDTREE_DTYPE_F32;
  p.out_stride_token = H * DL;
  p.out_stride_head = DL;
  p.lse = lse_buf;
  return p;
}

static int setup(void** state) {
  (void)state;
  for (size_t i = 0; i < sizeof q_buf / sizeof q_buf[0]; ++i) q_buf[i] = 0x3f80; /* bf16 1.0 */
  for (size_t i = 0; i < sizeof kv_buf / sizeof kv_buf[0]; ++i) kv_buf[i] = 0x3f00; /* 0.5 */
  for (int i = 0; i < PREFIX + Q; ++i) kv_indices[i] = i;
  for (int i = 0; i < Q; ++i)
    for (int j = 0; j < Q; ++j) mask_buf[i * Q + j] = (uint8_t)(j <= i);
  memset(out_buf, POISON, sizeof out_buf);
  memset(lse_buf, POISON, sizeof lse_buf);
  return 0;
}

static void assert_outputs_untouched(void) {
  assert_untouched(out_buf, sizeof out_buf, POISON);
  assert_untouched(lse_buf, sizeof lse_buf, POISON);
}

/* One rule: a change to valid params and what kdtree_verify_paged says. */
typedef struct {
  void (*mutate)(kdtree_verify_paged_params*);
  kdtree_status status;
  const char* message; /* after "kdtree_verify_paged: " */
} Rule;

#define MUTATE(name, body) \
  static void name(kdtree_verify_paged_params* p) { body; }

MUTATE(batch_negative, p->batch_size = -1)
MUTATE(batch_65536, p->batch_size = 65536)
MUTATE(total_q_2_31, p->total_q = INT64_C(1) << 31)
MUTATE(heads_zero, p->num_heads = 0)
MUTATE(heads_129, p->num_heads = 129)
MUTATE(dims_128, p->head_dim_latent = 128)
MUTATE(rope_0, p->head_dim_rope = 0)
MUTATE(q_len_zero, p->max_q_len = 0)
MUTATE(q_len_129, p->max_q_len = 129)
MUTATE(total_q_negative, p->total_q = -1)
MUTATE(max_kv_negative, p->max_kv_len = -5)
MUTATE(splits_negative, p->num_splits = -1)
MUTATE(splits_129, p->num_splits = 129)
MUTATE(scale_nan, p->sm_scale = NAN)
MUTATE(scale_inf, p->sm_scale = INFINITY)
MUTATE(q_f32, p->q_dtype = KDTREE_DTYPE_F32)
MUTATE(q_unknown, p->q_dtype = 99)
MUTATE(kv_mixed, p->kv_dtype = KDTREE_DTYPE_F16)
MUTATE(kv_int32, p->kv_dtype = KDTREE_DTYPE_INT32)
MUTATE(fp8_scale_zero, p->kv_dtype = KDTREE_DTYPE_FP8_E4M3; p->kv_scale = 0.0f)
MUTATE(fp8_scale_nan, p->kv_dtype = KDTREE_DTYPE_FP8_E4M3; p->kv_scale = NAN)
MUTATE(out_int64, p->out_dtype = KDTREE_DTYPE_INT64)
MUTATE(index_f32, p->index_dtype = KDTREE_DTYPE_F32)
MUTATE(tail_2, p->tail_source = 2)
MUTATE(mask_5, p->mask_kind = 5)
MUTATE(mask_negative, p->mask_kind = -1)
MUTATE(bits_short_row, p->mask_kind = KDTREE_MASK_TREE_BITS; p->max_q_len = 16; p->mask_row_bytes = 1)
MUTATE(bits_huge_row, p->mask_kind = KDTREE_MASK_TREE_BITS; p->max_q_len = 16; p->mask_row_bytes = INT64_MAX / 8)
MUTATE(reserved0_set, p->reserved0 = 3)
MUTATE(reserved1_set, p->reserved1 = 1)
MUTATE(reserved2_set, p->reserved2 = -1)
MUTATE(slots_negative, p->num_slots = -1)
MUTATE(q_null, p->q = NULL)
MUTATE(kv_null, p->kv_cache = NULL)
MUTATE(qo_null, p->qo_indptr = NULL)
MUTATE(kv_indptr_null, p->kv_indptr = NULL)
MUTATE(indices_null, p->kv_indices = NULL)
MUTATE(out_null, p->out = NULL)
MUTATE(tail_null, p->tail_source = KDTREE_TAIL_FROM_EXTEND; p->tail_kv = NULL; p->tail_kv_stride = D)
MUTATE(mask_null, p->mask = NULL)
MUTATE(mask_indptr_null, p->mask_kind = KDTREE_MASK_SGLANG_FULL; p->mask_indptr = NULL)
MUTATE(q_heads_overlap, p->q_stride_head = 100)
MUTATE(q_stride_negative, p->q_stride_token = -D)
MUTATE(out_rows_overlap, p->out_stride_token = DL; p->out_stride_head = DL)
MUTATE(kv_rows_overlap, p->kv_stride_slot = 512)
MUTATE(tail_rows_overlap, p->tail_source = KDTREE_TAIL_FROM_EXTEND; p->tail_kv = tail_buf; p->tail_kv_stride = 8)
MUTATE(kv_offsets_overflow, p->num_slots = INT64_MAX / 100)
MUTATE(q_offsets_overflow, p->total_q = INT32_MAX; p->q_stride_token = INT64_MAX / 1000)
MUTATE(q_misaligned, p->q = q_buf + 1)
MUTATE(q_stride_head_misaligned, p->q_stride_head = 580; p->q_stride_token = 2 * 580)
MUTATE(q_stride_token_misaligned, p->q_stride_token = 2 * D + 4)
MUTATE(kv_misaligned, p->kv_cache = kv_buf + 4)
MUTATE(kv_fp8_stride, p->kv_dtype = KDTREE_DTYPE_FP8_E4M3; p->kv_stride_slot = 584)
MUTATE(tail_misaligned, p->tail_source = KDTREE_TAIL_FROM_EXTEND; p->tail_kv = tail_buf + 2; p->tail_kv_stride = D)
MUTATE(out_misaligned, p->out = out_buf + 1)
MUTATE(out_f32_stride, p->out_stride_token = 2 * DL + 2)
MUTATE(out_bf16_stride, p->out_dtype = KDTREE_DTYPE_BF16; p->out_stride_head = 516; p->out_stride_token = 2 * 516)
MUTATE(indices_misaligned, p->kv_indices = (const char*)kv_indices + 4)
MUTATE(qo_misaligned, p->qo_indptr = (const int32_t*)((const char*)qo_indptr + 2))
MUTATE(mask_indptr_misaligned, p->mask_indptr = (const int64_t*)((const char*)mask_indptr + 4))
MUTATE(lse_misaligned, p->lse = (float*)((char*)lse_buf + 1))
MUTATE(flag_misaligned, p->error_flag = (int32_t*)((char*)lse_buf + 2))

static const Rule rules[] = {
    {batch_negative, KDTREE_ERROR_INVALID_ARGUMENT, "batch_size = -1 is less than 0"},
    {batch_65536, KDTREE_ERROR_UNSUPPORTED, "batch_size = 65536 is out of range [1, 65535]"},
    {total_q_2_31, KDTREE_ERROR_INVALID_ARGUMENT, "total_q = 2147483648 is out of range [0, 2147483647]"},
    {heads_zero, KDTREE_ERROR_INVALID_ARGUMENT, "num_heads = 0 is out of range [1, 128]"},
    {heads_129, KDTREE_ERROR_UNSUPPORTED, "num_heads = 129 is out of range [1, 128]"},
    {dims_128, KDTREE_ERROR_UNSUPPORTED,
     "head_dim_latent = 128, head_dim_rope = 64 is not built (only 512, 64)"},
    {rope_0, KDTREE_ERROR_UNSUPPORTED,
     "head_dim_latent = 512, head_dim_rope = 0 is not built (only 512, 64)"},
    {q_len_zero, KDTREE_ERROR_INVALID_ARGUMENT, "max_q_len = 0 is out of range [1, 128]"},
    {q_len_129, KDTREE_ERROR_UNSUPPORTED, "max_q_len = 129 is out of range [1, 128]"},
    {total_q_negative, KDTREE_ERROR_INVALID_ARGUMENT, "total_q = -1 is less than 0"},
    {max_kv_negative, KDTREE_ERROR_INVALID_ARGUMENT, "max_kv_len = -5 is less than 0"},
    {splits_negative, KDTREE_ERROR_INVALID_ARGUMENT, "num_splits = -1 is out of range [0, 128]"},
    {splits_129, KDTREE_ERROR_INVALID_ARGUMENT, "num_splits = 129 is out of range [0, 128]"},
    {scale_nan, KDTREE_ERROR_INVALID_ARGUMENT, "sm_scale is not finite"},
    {scale_inf, KDTREE_ERROR_INVALID_ARGUMENT, "sm_scale is not finite"},
    {q_f32, KDTREE_ERROR_UNSUPPORTED,
     "q_dtype = KDTREE_DTYPE_F32 is not supported here (KDTREE_DTYPE_BF16, KDTREE_DTYPE_F16)"},
    {q_unknown, KDTREE_ERROR_INVALID_ARGUMENT, "q_dtype = 99 is not a KDTREE_DTYPE_* value"},
    {kv_mixed, KDTREE_ERROR_UNSUPPORTED,
     "kv_dtype = KDTREE_DTYPE_F16 must equal q_dtype = KDTREE_DTYPE_BF16 or be "
     "KDTREE_DTYPE_FP8_E4M3"},
    {kv_int32, KDTREE_ERROR_UNSUPPORTED,
     "kv_dtype = KDTREE_DTYPE_INT32 is not supported here (KDTREE_DTYPE_BF16, KDTREE_DTYPE_F16, "
     "KDTREE_DTYPE_FP8_E4M3)"},
    {fp8_scale_zero, KDTREE_ERROR_INVALID_ARGUMENT,
     "kv_scale = 0.000000 must be finite and > 0 for FP8 KV"},
    {fp8_scale_nan, KDTREE_ERROR_INVALID_ARGUMENT, "kv_scale = nan must be finite and > 0 for FP8 KV"},
    {out_int64, KDTREE_ERROR_UNSUPPORTED,
     "out_dtype = KDTREE_DTYPE_INT64 is not supported here (KDTREE_DTYPE_BF16, KDTREE_DTYPE_F16, "
     "KDTREE_DTYPE_F32)"},
    {index_f32, KDTREE_ERROR_UNSUPPORTED,
     "index_dtype = KDTREE_DTYPE_F32 is not supported here (KDTREE_DTYPE_INT32, KDTREE_DTYPE_INT64)"},
    {tail_2, KDTREE_ERROR_INVALID_ARGUMENT, "tail_source = 2 is out of range [0, 1]"},
    {mask_5, KDTREE_ERROR_INVALID_ARGUMENT, "mask_kind = 5 is out of range [0, 4]"},
    {mask_negative, KDTREE_ERROR_INVALID_ARGUMENT, "mask_kind = -1 is out of range [0, 4]"},
    {bits_short_row, KDTREE_ERROR_INVALID_ARGUMENT, "mask_row_bytes = 1 is less than 2"},
    {bits_huge_row, KDTREE_ERROR_INVALID_ARGUMENT, "max_q_len * mask_row_bytes (TREE_BITS offsets) overflows int64"},
    {reserved0_set, KDTREE_ERROR_INVALID_ARGUMENT, "reserved0 = 3 is reserved and must be 0"},
    {reserved1_set, KDTREE_ERROR_INVALID_ARGUMENT, "reserved1 = 1 is reserved and must be 0"},
    {reserved2_set, KDTREE_ERROR_INVALID_ARGUMENT, "reserved2 = -1 is reserved and must be 0"},
    {slots_negative, KDTREE_ERROR_INVALID_ARGUMENT, "num_slots = -1 is less than 0"},
    {q_null, KDTREE_ERROR_INVALID_ARGUMENT, "q is NULL"},
    {kv_null, KDTREE_ERROR_INVALID_ARGUMENT, "kv_cache is NULL"},
    {qo_null, KDTREE_ERROR_INVALID_ARGUMENT, "qo_indptr is NULL"},
    {kv_indptr_null, KDTREE_ERROR_INVALID_ARGUMENT, "kv_indptr is NULL"},
    {indices_null, KDTREE_ERROR_INVALID_ARGUMENT, "kv_indices is NULL"},
    {out_null, KDTREE_ERROR_INVALID_ARGUMENT, "out is NULL"},
    {tail_null, KDTREE_ERROR_INVALID_ARGUMENT, "tail_kv is NULL"},
    {mask_null, KDTREE_ERROR_INVALID_ARGUMENT, "mask is NULL"},
    {mask_indptr_null, KDTREE_ERROR_INVALID_ARGUMENT, "mask_indptr is NULL"},
    {q_heads_overlap, KDTREE_ERROR_INVALID_ARGUMENT,
     "q_stride_head = 100 makes rows of q overlap (needs >= 576)"},
    {q_stride_negative, KDTREE_ERROR_INVALID_ARGUMENT, "q_stride_token = -576 is negative"},
    {out_rows_overlap, KDTREE_ERROR_INVALID_ARGUMENT,
     "out_stride_head = 512 makes rows of out overlap (needs >= 2048)"},
    {kv_rows_overlap, KDTREE_ERROR_INVALID_ARGUMENT,
     "kv_stride_slot = 512 makes rows of kv_cache overlap (needs >= 576)"},
    {tail_rows_overlap, KDTREE_ERROR_INVALID_ARGUMENT,
     "tail_kv_stride = 8 makes rows of tail_kv overlap (needs >= 576)"},
    {kv_offsets_overflow, KDTREE_ERROR_INVALID_ARGUMENT,
     "kv_cache offsets overflow int64 (kv_stride_slot)"},
    {q_offsets_overflow, KDTREE_ERROR_INVALID_ARGUMENT, "q offsets overflow int64 (q_stride_token)"},
    {q_misaligned, KDTREE_ERROR_MISALIGNED, "q is not 16-byte aligned"},
    {q_stride_head_misaligned, KDTREE_ERROR_MISALIGNED,
     "q_stride_head = 580 is not a multiple of 8 elements (rows must stay 16-byte aligned)"},
    {q_stride_token_misaligned, KDTREE_ERROR_MISALIGNED,
     "q_stride_token = 1156 is not a multiple of 8 elements (rows must stay 16-byte aligned)"},
    {kv_misaligned, KDTREE_ERROR_MISALIGNED, "kv_cache is not 16-byte aligned"},
    {kv_fp8_stride, KDTREE_ERROR_MISALIGNED,
     "kv_stride_slot = 584 is not a multiple of 16 elements (rows must stay 16-byte aligned)"},
    {tail_misaligned, KDTREE_ERROR_MISALIGNED, "tail_kv is not 16-byte aligned"},
    {out_misaligned, KDTREE_ERROR_MISALIGNED, "out is not 16-byte aligned"},
    {out_f32_stride, KDTREE_ERROR_MISALIGNED,
     "out_stride_token = 1026 is not a multiple of 4 elements (rows must stay 16-byte aligned)"},
    {out_bf16_stride, KDTREE_ERROR_MISALIGNED,
     "out_stride_head = 516 is not a multiple of 8 elements (rows must stay 16-byte aligned)"},
    {indices_misaligned, KDTREE_ERROR_MISALIGNED, "kv_indices is not 8-byte aligned"},
    {qo_misaligned, KDTREE_ERROR_MISALIGNED, "qo_indptr is not 4-byte aligned"},
    {mask_indptr_misaligned, KDTREE_ERROR_MISALIGNED, "mask_indptr is not 8-byte aligned"},
    {lse_misaligned, KDTREE_ERROR_MISALIGNED, "lse is not 4-byte aligned"},
    {flag_misaligned, KDTREE_ERROR_MISALIGNED, "error_flag is not 4-byte aligned"},
};

static void every_rule_rejects_and_writes_nothing(void** state) {
  (void)state;
  char expected[512];
  for (size_t i = 0; i < sizeof rules / sizeof rules[0]; ++i) {
    kdtree_verify_paged_params p = valid();
    rules[i].mutate(&p);
    snprintf(expected, sizeof expected, "kdtree_verify_paged: %s", rules[i].message);
    EXPECT_FAILURE(kdtree_verify_paged(&p, NULL, 0, NULL), rules[i].status, expected);
    assert_outputs_untouched();
  }
}

/* The same rules hold for the naive GPU oracle. */
static void reference_applies_the_same_rules(void** state) {
  (void)state;
  char expected[512];
  for (size_t i = 0; i < sizeof rules / sizeof rules[0]; ++i) {
    kdtree_verify_paged_params p = valid();
    rules[i].mutate(&p);
    snprintf(expected, sizeof expected, "kdtree_verify_paged_reference: %s", rules[i].message);
    EXPECT_FAILURE(kdtree_verify_paged_reference(&p, NULL), rules[i].status, expected);
    assert_outputs_untouched();
  }
}

/* The host reference checks everything but device alignment. */
static void host_applies_all_but_alignment(void** state) {
  (void)state;
  char expected[512];
  for (size_t i = 0; i < sizeof rules / sizeof rules[0]; ++i) {
    if (rules[i].status == KDTREE_ERROR_MISALIGNED) continue;
    kdtree_verify_paged_params p = valid();
    rules[i].mutate(&p);
    snprintf(expected, sizeof expected, "kdtree_verify_paged_host: %s", rules[i].message);
    EXPECT_FAILURE(kdtree_verify_paged_host(&p), rules[i].status, expected);
    assert_outputs_untouched();
  }
}

static void null_params(void** state) {
  (void)state;
  size_t bytes = 7;
  EXPECT_FAILURE(kdtree_verify_paged(NULL, NULL, 0, NULL), KDTREE_ERROR_INVALID_ARGUMENT,
                 "kdtree_verify_paged: params is NULL");
  EXPECT_FAILURE(kdtree_verify_paged_host(NULL), KDTREE_ERROR_INVALID_ARGUMENT,
                 "kdtree_verify_paged_host: params is NULL");
  EXPECT_FAILURE(kdtree_verify_workspace_size(NULL, &bytes), KDTREE_ERROR_INVALID_ARGUMENT,
                 "kdtree_verify_workspace_size: params is NULL");
  assert_int_equal(bytes, 7);
  kdtree_verify_paged_params p = valid();
  EXPECT_FAILURE(kdtree_verify_workspace_size(&p, NULL), KDTREE_ERROR_INVALID_ARGUMENT,
                 "kdtree_verify_workspace_size: workspace_bytes is NULL");
  EXPECT_FAILURE(kdtree_verify_paged_params_init(NULL), KDTREE_ERROR_INVALID_ARGUMENT,
                 "kdtree_verify_paged_params_init: params is NULL");
}

/* Only the exact size of this library's struct is accepted: an older caller's
 * smaller struct and a newer caller's larger one are both refused. */
static void struct_size_must_match(void** state) {
  (void)state;
  char expected[256];
  const uint32_t sizes[] = {0, (uint32_t)sizeof(kdtree_verify_paged_params) - 8,
                            (uint32_t)sizeof(kdtree_verify_paged_params) + 8};
  for (size_t i = 0; i < 3; ++i) {
    kdtree_verify_paged_params p = valid();
    p.struct_size = sizes[i];
    snprintf(expected, sizeof expected,
             "kdtree_verify_paged: struct_size = %u is not sizeof(kdtree_verify_paged_params) = "
             "%zu of this library (call the _params_init function)",
             sizes[i], sizeof(kdtree_verify_paged_params));
    EXPECT_FAILURE(kdtree_verify_paged(&p, NULL, 0, NULL), KDTREE_ERROR_STRUCT_VERSION, expected);
    assert_outputs_untouched();
  }
}

/* batch_size == 0 succeeds, touches nothing, needs no device and no pointer. */
static void zero_batch_is_a_no_op(void** state) {
  (void)state;
  kdtree_verify_paged_params p;
  assert_int_equal(kdtree_verify_paged_params_init(&p), KDTREE_OK);
  p.batch_size = 0;
  EXPECT_OK(kdtree_verify_paged(&p, NULL, 0, NULL));
  EXPECT_OK(kdtree_verify_paged_reference(&p, NULL));
  EXPECT_OK(kdtree_verify_paged_host(&p));
  size_t bytes = 99;
  EXPECT_OK(kdtree_verify_workspace_size(&p, &bytes));
  assert_int_equal(bytes, 0);
}

static void params_init_defaults(void** state) {
  (void)state;
  kdtree_verify_paged_params p;
  memset(&p, 0x5A, sizeof p);
  EXPECT_OK(kdtree_verify_paged_params_init(&p));
  assert_int_equal(p.struct_size, sizeof p);
  assert_int_equal(p.head_dim_latent, 512);
  assert_int_equal(p.head_dim_rope, 64);
  assert_int_equal(p.q_dtype, KDTREE_DTYPE_BF16);
  assert_int_equal(p.kv_dtype, KDTREE_DTYPE_BF16);
  assert_int_equal(p.out_dtype, KDTREE_DTYPE_BF16);
  assert_int_equal(p.index_dtype, KDTREE_DTYPE_INT32);
  assert_int_equal(p.tail_source, KDTREE_TAIL_FROM_INDICES);
  assert_int_equal(p.mask_kind, KDTREE_MASK_NONE);
  assert_true(p.kv_scale == 1.0f);
  assert_int_equal(p.num_splits, 0);
  assert_int_equal(p.batch_size, 0);
  assert_null(p.q);
  assert_null(p.lse);
  assert_null(p.error_flag);
}

/* Argument checks come before the device lookup, so with no GPU a valid call
 * is the first to see NO_DEVICE, and writes nothing. */
static void valid_call_without_gpu_is_no_device(void** state) {
  (void)state;
  SKIP_IF_GPU();
  kdtree_verify_paged_params p = valid();
  EXPECT_NO_DEVICE(kdtree_verify_paged(&p, NULL, 0, NULL), "kdtree_verify_paged");
  EXPECT_NO_DEVICE(kdtree_verify_paged_reference(&p, NULL), "kdtree_verify_paged_reference");
  size_t bytes = 5;
  EXPECT_NO_DEVICE(kdtree_verify_workspace_size(&p, &bytes), "kdtree_verify_workspace_size");
  assert_int_equal(bytes, 5);
  assert_outputs_untouched();
}

/* The size query reads only host shape fields: pointers may still be NULL. */
static void workspace_size_ignores_pointers(void** state) {
  (void)state;
  SKIP_IF_GPU();
  kdtree_verify_paged_params p = valid();
  p.q = NULL;
  p.out = NULL;
  size_t bytes = 5;
  EXPECT_NO_DEVICE(kdtree_verify_workspace_size(&p, &bytes), "kdtree_verify_workspace_size");
  p.num_heads = 0;
  EXPECT_FAILURE(kdtree_verify_workspace_size(&p, &bytes), KDTREE_ERROR_INVALID_ARGUMENT,
                 "kdtree_verify_workspace_size: num_heads = 0 is out of range [1, 128]");
  assert_int_equal(bytes, 5);
}

/* With a GPU: a workspace smaller than the size query's answer is refused
 * before any launch (host pointers are never dereferenced). */
static void workspace_too_small_with_gpu(void** state) {
  (void)state;
  if (kdtree_prepare(0) != KDTREE_OK) skip();
  kdtree_verify_paged_params p = valid();
  p.num_splits = 8;
  p.max_kv_len = 1 << 20;
  size_t needed = 0;
  EXPECT_OK(kdtree_verify_workspace_size(&p, &needed));
  if (needed == 0) skip();
  char expected[256];
  snprintf(expected, sizeof expected,
           "kdtree_verify_paged: workspace is NULL but kdtree_verify_workspace_size needs %zu bytes",
           needed);
  EXPECT_FAILURE(kdtree_verify_paged(&p, NULL, needed, NULL), KDTREE_ERROR_WORKSPACE_TOO_SMALL,
                 expected);
  snprintf(expected, sizeof expected,
           "kdtree_verify_paged: workspace_bytes = %zu is less than the %zu bytes "
           "kdtree_verify_workspace_size reports",
           needed - 1, needed);
  EXPECT_FAILURE(kdtree_verify_paged(&p, q_buf, needed - 1, NULL),
                 KDTREE_ERROR_WORKSPACE_TOO_SMALL, expected);
  assert_outputs_untouched();
}

/* The host reference runs on host memory with strides the device path would
 * refuse as misaligned; out = the mean of all-0.5 value rows = 0.5. */
static void host_reference_accepts_unaligned_strides(void** state) {
  (void)state;
  kdtree_verify_paged_params p = valid();
  p.q_stride_head = 580;
  p.q_stride_token = 2 * 580;
  p.out_stride_head = 514;
  p.out_stride_token = 2 * 514;
  EXPECT_OK(kdtree_verify_paged_host(&p));
  for (int t = 0; t < Q; ++t)
    for (int h = 0; h < H; ++h)
      for (int d = 0; d < DL; ++d) assert_true(fabsf(out_buf[t * 2 * 514 + h * 514 + d] - 0.5f) < 1e-6f);
  memset(out_buf, POISON, sizeof out_buf);
  memset(lse_buf, POISON, sizeof lse_buf);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(every_rule_rejects_and_writes_nothing, setup),
      cmocka_unit_test_setup(reference_applies_the_same_rules, setup),
      cmocka_unit_test_setup(host_applies_all_but_alignment, setup),
      cmocka_unit_test_setup(null_params, setup),
      cmocka_unit_test_setup(struct_size_must_match, setup),
      cmocka_unit_test_setup(zero_batch_is_a_no_op, setup),
      cmocka_unit_test_setup(params_init_defaults, setup),
      cmocka_unit_test_setup(valid_call_without_gpu_is_no_device, setup),
      cmocka_unit_test_setup(workspace_size_ignores_pointers, setup),
      cmocka_unit_test_setup(workspace_too_small_with_gpu, setup),
      cmocka_unit_test_setup(host_reference_accepts_unaligned_strides, setup),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
