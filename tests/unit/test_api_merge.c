/*
 * Validation of kdtree_merge_attention_states (device) and its host twin, and
 * of kdtree_verify_contiguous: status, exact message, nothing written.
 */
#include <math.h>
#include <stdio.h>

#include "api_expect.h"

#define POISON 0xCD
enum { S = 2, T = 3, H = 2, HD = 64 };

static _Alignas(16) float states[S * T * H * HD + 8];
static _Alignas(16) float states_lse[S * T * H];
static _Alignas(16) float out_buf[T * H * HD + 8];
static _Alignas(16) float lse_buf[T * H + 4];

static kdtree_merge_params valid_merge(void) {
  kdtree_merge_params p;
  assert_int_equal(kdtree_merge_params_init(&p), KDTREE_OK);
  p.num_states = S;
  p.num_tokens = T;
  p.num_heads = H;
  p.head_dim = HD;
  p.states = states;
  p.states_stride_state = T * H * HD;
  p.states_stride_token = H * HD;
  p.states_stride_head = HD;
  p.states_lse = states_lse;
  p.out = out_buf;
  p.out_stride_token = H * HD;
  p.out_stride_head = HD;
  p.lse = lse_buf;
  return p;
}

static int setup(void** state) {
  (void)state;
  for (int i = 0; i < S * T * H * HD; ++i) states[i] = (float)(i / (T * H * HD)); /* state s: all s */
  for (int i = 0; i < S * T * H; ++i) states_lse[i] = 0.0f;
  memset(out_buf, POISON, sizeof out_buf);
  memset(lse_buf, POISON, sizeof lse_buf);
  return 0;
}

typedef struct {
  void (*mutate)(kdtree_merge_params*);
  kdtree_status status;
  const char* message;
  int host_too; /* 0 for the device-only alignment rules */
} Rule;

#define MUTATE(name, body) \
  static void name(kdtree_merge_params* p) { body; }

MUTATE(tokens_negative, p->num_tokens = -1)
MUTATE(states_zero, p->num_states = 0)
MUTATE(heads_zero, p->num_heads = 0)
MUTATE(heads_65536, p->num_heads = 65536)
MUTATE(tokens_2_31, p->num_tokens = INT64_C(1) << 31)
MUTATE(dim_zero, p->head_dim = 0)
MUTATE(dim_12, p->head_dim = 12)
MUTATE(dim_2048, p->head_dim = 2048)
MUTATE(states_fp8, p->states_dtype = KDTREE_DTYPE_FP8_E4M3)
MUTATE(out_int32, p->out_dtype = KDTREE_DTYPE_INT32)
MUTATE(reserved1_set, p->reserved1 = 2)
MUTATE(states_null, p->states = NULL)
MUTATE(states_lse_null, p->states_lse = NULL)
MUTATE(out_null, p->out = NULL)
MUTATE(states_overlap, p->states_stride_state = HD)
MUTATE(out_overlap, p->out_stride_head = 32)
MUTATE(states_overflow, p->num_tokens = INT32_MAX; p->states_stride_token = INT64_MAX / 1024)
MUTATE(states_misaligned, p->states = states + 1)
MUTATE(states_stride_misaligned, p->states_stride_state = T * H * HD + 2)
MUTATE(out_misaligned, p->out = out_buf + 2)
MUTATE(out_bf16_stride, p->out_dtype = KDTREE_DTYPE_BF16; p->out_stride_token = H * HD + 4)
MUTATE(lse_misaligned, p->lse = (float*)((char*)lse_buf + 2))

static const Rule rules[] = {
    {tokens_negative, KDTREE_ERROR_INVALID_ARGUMENT, "num_tokens = -1 is less than 0", 1},
    {states_zero, KDTREE_ERROR_INVALID_ARGUMENT, "num_states = 0 is less than 1", 1},
    {heads_zero, KDTREE_ERROR_INVALID_ARGUMENT, "num_heads = 0 is less than 1", 1},
    {heads_65536, KDTREE_ERROR_UNSUPPORTED, "num_heads = 65536 is out of range [1, 65535]", 1},
    {tokens_2_31, KDTREE_ERROR_UNSUPPORTED, "num_tokens = 2147483648 is out of range [1, 2147483647]", 1},
    {dim_zero, KDTREE_ERROR_INVALID_ARGUMENT, "head_dim = 0 is out of range [1, 1024]", 1},
    {dim_12, KDTREE_ERROR_UNSUPPORTED, "head_dim = 12 is not a multiple of 8", 1},
    {dim_2048, KDTREE_ERROR_UNSUPPORTED, "head_dim = 2048 is out of range [1, 1024]", 1},
    {states_fp8, KDTREE_ERROR_UNSUPPORTED,
     "states_dtype = KDTREE_DTYPE_FP8_E4M3 is not supported here (KDTREE_DTYPE_F32, "
     "KDTREE_DTYPE_BF16, KDTREE_DTYPE_F16)", 1},
    {out_int32, KDTREE_ERROR_UNSUPPORTED,
     "out_dtype = KDTREE_DTYPE_INT32 is not supported here (KDTREE_DTYPE_F32, KDTREE_DTYPE_BF16, "
     "KDTREE_DTYPE_F16)", 1},
    {reserved1_set, KDTREE_ERROR_INVALID_ARGUMENT, "reserved1 = 2 is reserved and must be 0", 1},
    {states_null, KDTREE_ERROR_INVALID_ARGUMENT, "states is NULL", 1},
    {states_lse_null, KDTREE_ERROR_INVALID_ARGUMENT, "states_lse is NULL", 1},
    {out_null, KDTREE_ERROR_INVALID_ARGUMENT, "out is NULL", 1},
    {states_overlap, KDTREE_ERROR_INVALID_ARGUMENT,
     "states_stride_head = 64 makes rows of states overlap (needs >= 128)", 1},
    {out_overlap, KDTREE_ERROR_INVALID_ARGUMENT,
     "out_stride_head = 32 makes rows of out overlap (needs >= 64)", 1},
    {states_overflow, KDTREE_ERROR_INVALID_ARGUMENT,
     "states offsets overflow int64 (states_stride_token)", 1},
    {states_misaligned, KDTREE_ERROR_MISALIGNED, "states is not 16-byte aligned", 0},
    {states_stride_misaligned, KDTREE_ERROR_MISALIGNED,
     "states_stride_state = 386 is not a multiple of 4 elements (rows must stay 16-byte aligned)", 0},
    {out_misaligned, KDTREE_ERROR_MISALIGNED, "out is not 16-byte aligned", 0},
    {out_bf16_stride, KDTREE_ERROR_MISALIGNED,
     "out_stride_token = 132 is not a multiple of 8 elements (rows must stay 16-byte aligned)", 0},
    {lse_misaligned, KDTREE_ERROR_MISALIGNED, "lse is not 4-byte aligned", 0},
};

static void merge_rules(void** state) {
  (void)state;
  char expected[512];
  for (size_t i = 0; i < sizeof rules / sizeof rules[0]; ++i) {
    kdtree_merge_params p = valid_merge();
    rules[i].mutate(&p);
    snprintf(expected, sizeof expected, "kdtree_merge_attention_states: %s", rules[i].message);
    EXPECT_FAILURE(kdtree_merge_attention_states(&p, NULL), rules[i].status, expected);
    if (rules[i].host_too) {
      snprintf(expected, sizeof expected, "kdtree_merge_attention_states_host: %s", rules[i].message);
      EXPECT_FAILURE(kdtree_merge_attention_states_host(&p), rules[i].status, expected);
    }
    assert_untouched(out_buf, sizeof out_buf, POISON);
    assert_untouched(lse_buf, sizeof lse_buf, POISON);
  }
}

static void merge_edges(void** state) {
  (void)state;
  EXPECT_FAILURE(kdtree_merge_attention_states(NULL, NULL), KDTREE_ERROR_INVALID_ARGUMENT,
                 "kdtree_merge_attention_states: params is NULL");
  kdtree_merge_params p = valid_merge();
  p.struct_size = 8;
  assert_int_equal(kdtree_merge_attention_states(&p, NULL), KDTREE_ERROR_STRUCT_VERSION);
  p = valid_merge();
  p.num_tokens = 0;
  p.states = NULL;
  p.out = NULL;
  EXPECT_OK(kdtree_merge_attention_states(&p, NULL));
  EXPECT_OK(kdtree_merge_attention_states_host(&p));
}

/* Equal LSEs: the merge is the mean of the states (0 and 1 -> 0.5), lse ln 2. */
static void merge_host_runs(void** state) {
  (void)state;
  kdtree_merge_params p = valid_merge();
  EXPECT_OK(kdtree_merge_attention_states_host(&p));
  for (int i = 0; i < T * H * HD; ++i) assert_true(fabsf(out_buf[i] - 0.5f) < 1e-6f);
  for (int i = 0; i < T * H; ++i) assert_true(fabsf(lse_buf[i] - logf(2.0f)) < 1e-6f);
}

static void merge_without_gpu(void** state) {
  (void)state;
  SKIP_IF_GPU();
  kdtree_merge_params p = valid_merge();
  EXPECT_NO_DEVICE(kdtree_merge_attention_states(&p, NULL), "kdtree_merge_attention_states");
  assert_untouched(out_buf, sizeof out_buf, POISON);
}

/* ---- kdtree_verify_contiguous ---------------------------------------- */

enum { CQ = 4, CKV = 12, CH = 2, D = 576, DL = 512 };
static _Alignas(16) float cq[CQ * CH * D + 8];
static _Alignas(16) float ckv[CKV * D + 8];
static _Alignas(16) uint8_t cmask[CQ * CQ];
static _Alignas(16) float cout[CQ * CH * DL + 8];

static kdtree_verify_contiguous_params valid_contiguous(void) {
  kdtree_verify_contiguous_params p;
  assert_int_equal(kdtree_verify_contiguous_params_init(&p), KDTREE_OK);
  p.num_heads = CH;
  p.q_len = CQ;
  p.kv_len = CKV;
  p.dtype = KDTREE_DTYPE_F32;
  p.out_dtype = KDTREE_DTYPE_F32;
  p.sm_scale = 0.04f;
  p.mask_kind = KDTREE_MASK_TREE_DENSE;
  p.q = cq;
  p.q_stride_token = CH * D;
  p.q_stride_head = D;
  p.kv = ckv;
  p.kv_stride = D;
  p.mask = cmask;
  p.out = cout;
  p.out_stride_token = CH * DL;
  p.out_stride_head = DL;
  return p;
}

static void contiguous_rules(void** state) {
  (void)state;
  memset(cout, POISON, sizeof cout);
  struct {
    kdtree_verify_contiguous_params p;
    kdtree_status status;
    const char* message;
  } cases[16];
  int n = 0;
#define CASE(stmt, st, msg) ADD_CASE(kdtree_verify_contiguous_params, valid_contiguous, stmt, st, msg)
  CASE(p->q_len = -1, KDTREE_ERROR_INVALID_ARGUMENT, "q_len = -1 is out of range [0, 128]");
  CASE(p->q_len = 129, KDTREE_ERROR_UNSUPPORTED, "q_len = 129 is out of range [0, 128]");
  CASE(p->num_heads = 200, KDTREE_ERROR_UNSUPPORTED, "num_heads = 200 is out of range [1, 128]");
  CASE(p->kv_len = 3, KDTREE_ERROR_INVALID_ARGUMENT, "kv_len = 3 is less than q_len = 4");
  CASE(p->dtype = KDTREE_DTYPE_F16, KDTREE_ERROR_UNSUPPORTED,
       "dtype = KDTREE_DTYPE_F16 is not supported here (KDTREE_DTYPE_F32, KDTREE_DTYPE_BF16)");
  CASE(p->mask_kind = KDTREE_MASK_SGLANG_FULL, KDTREE_ERROR_UNSUPPORTED,
       "mask_kind = KDTREE_MASK_SGLANG_FULL is not supported here (NONE, CAUSAL, TREE_DENSE, "
       "TREE_BITS)");
  CASE(p->mask = NULL, KDTREE_ERROR_INVALID_ARGUMENT, "mask is NULL");
  CASE(p->mask_kind = KDTREE_MASK_TREE_BITS; p->mask_row_bytes = 0, KDTREE_ERROR_INVALID_ARGUMENT,
       "mask_row_bytes = 0 is less than 1");
  CASE(p->mask_kind = KDTREE_MASK_TREE_BITS; p->mask_row_bytes = INT64_MAX / 2, KDTREE_ERROR_INVALID_ARGUMENT,
       "q_len * mask_row_bytes (TREE_BITS offsets) overflows int64");
  CASE(p->kv = NULL, KDTREE_ERROR_INVALID_ARGUMENT, "kv is NULL");
  CASE(p->kv_stride = 100, KDTREE_ERROR_INVALID_ARGUMENT,
       "kv_stride = 100 makes rows of kv overlap (needs >= 576)");
  CASE(p->kv = ckv + 2, KDTREE_ERROR_MISALIGNED, "kv is not 16-byte aligned");
  CASE(p->kv_stride = 578, KDTREE_ERROR_MISALIGNED,
       "kv_stride = 578 is not a multiple of 4 elements (rows must stay 16-byte aligned)");
  CASE(p->reserved0 = 1, KDTREE_ERROR_INVALID_ARGUMENT, "reserved0 = 1 is reserved and must be 0");
  CASE(p->sm_scale = -INFINITY, KDTREE_ERROR_INVALID_ARGUMENT, "sm_scale is not finite");
#undef CASE
  char expected[512];
  for (int i = 0; i < n; ++i) {
    snprintf(expected, sizeof expected, "kdtree_verify_contiguous: %s", cases[i].message);
    EXPECT_FAILURE(kdtree_verify_contiguous(&cases[i].p, NULL), cases[i].status, expected);
    assert_untouched(cout, sizeof cout, POISON);
  }
  kdtree_verify_contiguous_params p = valid_contiguous();
  p.q_len = 0;
  p.q = NULL;
  EXPECT_OK(kdtree_verify_contiguous(&p, NULL));
  if (!gpu_present()) {
    p = valid_contiguous();
    EXPECT_NO_DEVICE(kdtree_verify_contiguous(&p, NULL), "kdtree_verify_contiguous");
  }
  assert_untouched(cout, sizeof cout, POISON);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(merge_rules, setup),
      cmocka_unit_test_setup(merge_edges, setup),
      cmocka_unit_test_setup(merge_host_runs, setup),
      cmocka_unit_test_setup(merge_without_gpu, setup),
      cmocka_unit_test(contiguous_rules),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
