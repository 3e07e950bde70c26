/*
 * kdtree_kernels.h - the public C ABI of libkdtree_kernels_c.so
 *
 * Tree-verify attention for MLA models (DeepSeek-V3/R1, Kimi-K2) over a paged
 * KV cache, the split-K merge of attention states, and KV-cache
 * defragmentation. The contract is ../shared/SPEC.md; this header is the
 * manual.
 *
 * Conventions that hold for every function below:
 *  - Every function returns kdtree_status (0 = KDTREE_OK). On failure,
 *    kdtree_last_error_message() (thread-local) names the function, the
 *    argument and the reason, e.g. "kdtree_verify_paged: kv_indices is NULL".
 *  - A rejected call launches nothing and writes nothing.
 *  - Params structs start with uint32_t struct_size and are filled by the
 *    matching kdtree_*_params_init(); fields may be appended in later minor
 *    versions. Enum-typed fields are int32_t holding the KDTREE_* constants.
 *  - Strides are int64 and counted in elements, never bytes, unless the name
 *    ends in _bytes.
 *  - "device" pointers are CUDA device (or managed) memory; "host" pointers
 *    are ordinary host memory.
 *  - Device entry points only enqueue work on `stream` (last argument): no
 *    allocation, no synchronization, no host read of device memory, no host
 *    callback. They are legal inside cudaStreamBeginCapture(...,
 *    cudaStreamCaptureModeGlobal). Their grid depends only on host fields.
 *  - All functions are thread-safe. Device state (kernel attributes) is kept
 *    per CUDA device; the current device of the calling thread is used.
 *  - No C++ exception crosses this ABI and the process is never aborted.
 */
#ifndef KDTREE_KERNELS_H
#define KDTREE_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define KDTREE_API
#else
#define KDTREE_API __attribute__((visibility("default")))
#endif

/* ------------------------------------------------------------------------ */
/* Versions                                                                 */
/* ------------------------------------------------------------------------ */

#define KDTREE_VERSION_MAJOR 0
#define KDTREE_VERSION_MINOR 1
#define KDTREE_VERSION_PATCH 0
/* MAJOR * 10000 + MINOR * 100 + PATCH */
#define KDTREE_VERSION_NUMBER \
  (KDTREE_VERSION_MAJOR * 10000 + KDTREE_VERSION_MINOR * 100 + KDTREE_VERSION_PATCH)
#define KDTREE_VERSION_STRING "0.1.0"
/* Bumped on any incompatible change of a struct layout or a signature. */
#define KDTREE_ABI_VERSION 1

/* The same CUDA stream type as cudaStream_t, without a CUDA header. NULL is
 * the legacy default stream. */
typedef struct CUstream_st* kdtree_stream_t;

/* ------------------------------------------------------------------------ */
/* Statuses. Values never change.                                           */
/* ------------------------------------------------------------------------ */

typedef int32_t kdtree_status;

enum {
  KDTREE_OK = 0,
  KDTREE_ERROR_INVALID_ARGUMENT = 1,  /* NULL, negative, out of range, ... */
  KDTREE_ERROR_UNSUPPORTED = 2,       /* dims, dtypes, heads not built      */
  KDTREE_ERROR_MISALIGNED = 3,        /* base pointer or stride breaks 16 B */
  KDTREE_ERROR_WORKSPACE_TOO_SMALL = 4,
  KDTREE_ERROR_STRUCT_VERSION = 5,    /* struct_size unknown                */
  KDTREE_ERROR_NO_DEVICE = 6,         /* no CUDA device or no driver        */
  KDTREE_ERROR_ARCH_NOT_BUILT = 7,    /* no kernel image for this arch      */
  KDTREE_ERROR_CUDA = 8,              /* a CUDA runtime call failed         */
  KDTREE_ERROR_INTERNAL = 9
};

/* Bits that device code sets (atomicOr) in the optional int32 error_flag. The
 * offending key / move is skipped, never dereferenced. */
enum {
  KDTREE_FLAG_SLOT_OUT_OF_RANGE = 1,  /* a slot index outside [0, num_slots)  */
  KDTREE_FLAG_KV_SHORTER_THAN_Q = 2,  /* kv_len_b < q_len_b, TAIL_FROM_INDICES */
  KDTREE_FLAG_BAD_INDPTR = 4          /* indptr decreasing, q_len_b > max_q_len,
                                         rows beyond total_q, a kv range past
                                         kv_indptr[B], or mask bytes outside
                                         [0, mask_indptr[B]): request skipped */
};

/* ------------------------------------------------------------------------ */
/* Enumerations (stored as int32_t in the params structs)                   */
/* ------------------------------------------------------------------------ */

enum {
  KDTREE_DTYPE_F32 = 0,
  KDTREE_DTYPE_BF16 = 1,
  KDTREE_DTYPE_F16 = 2,
  KDTREE_DTYPE_FP8_E4M3 = 3, /* KV only, scaled by kv_scale */
  KDTREE_DTYPE_INT32 = 4,    /* indices */
  KDTREE_DTYPE_INT64 = 5     /* indices */
};

enum {
  KDTREE_MASK_NONE = 0,        /* every tail key visible                     */
  KDTREE_MASK_CAUSAL = 1,      /* tail key j visible to row i iff j <= i      */
  KDTREE_MASK_TREE_DENSE = 2,  /* u8[mask_indptr[b] + i*q_len_b + j] != 0     */
  KDTREE_MASK_TREE_BITS = 3,   /* bit j%8 of u8[mask_indptr[b] +
                                  i*mask_row_bytes + j/8]                    */
  KDTREE_MASK_SGLANG_FULL = 4  /* u8[mask_indptr[b] + i*(prefix_b+q_len_b) +
                                  prefix_b + j] != 0; prefix columns unread  */
};

enum {
  /* kv_indices cover prefix and tail: prefix_b = kv_len_b - q_len_b. */
  KDTREE_TAIL_FROM_INDICES = 0,
  /* kv_indices cover the prefix only (SGLang's extend layout); tail key j of
   * request b is the row tail_kv + (qo_indptr[b] + j) * tail_kv_stride. */
  KDTREE_TAIL_FROM_EXTEND = 1
};

/* ------------------------------------------------------------------------ */
/* Version and errors                                                       */
/* ------------------------------------------------------------------------ */

/* KDTREE_VERSION_NUMBER of the loaded library. Never fails. */
KDTREE_API int32_t kdtree_version_number(void);
/* KDTREE_VERSION_STRING of the loaded library (static storage). */
KDTREE_API const char* kdtree_version_string(void);
/* KDTREE_ABI_VERSION of the loaded library. */
KDTREE_API int32_t kdtree_abi_version(void);
/* A static, human-readable name of a status ("KDTREE_ERROR_MISALIGNED"), or
 * "KDTREE_STATUS_UNKNOWN" for a value not listed above. */
KDTREE_API const char* kdtree_status_string(kdtree_status status);
/* The message of the last failing call on this thread ("" if none): names the
 * function, the argument and the reason. Valid until the next call of this
 * library on the same thread. Calls that succeed clear it. */
KDTREE_API const char* kdtree_last_error_message(void);
/* A static one-line description: version, CUDA version the library was built
 * with, compiled SM list and verify paths, e.g.
 * "kdtree_kernels 0.1.0 cuda 13.0 sm 80,86,89,90,120 ptx 120". */
KDTREE_API const char* kdtree_build_info(void);
/* Size in bytes of the public struct named `struct_name` (e.g.
 * "kdtree_verify_paged_params") as this library was compiled, so bindings can
 * check their mirrors at load time. INVALID_ARGUMENT for an unknown name. */
KDTREE_API kdtree_status kdtree_struct_size(const char* struct_name, size_t* size);

/* ------------------------------------------------------------------------ */
/* Device                                                                   */
/* ------------------------------------------------------------------------ */

/* Sets every kernel attribute the library needs on `device` (opt-in shared
 * memory) and caches the device's properties. Call it once per device before
 * capturing a graph; entry points call it lazily otherwise. Thread-safe.
 * It makes `device` current for the call and restores the thread's previous
 * device: on a thread that never chose one, that restores device 0 and so
 * creates its context; a rank that owns another GPU should call
 * cudaSetDevice(device) first. kdtree_device_supported behaves the same.
 * NO_DEVICE, ARCH_NOT_BUILT, INVALID_ARGUMENT (device out of range),
 * UNSUPPORTED (the build's image for this device, e.g. sm_80's on an sm_86
 * without its own, needs more shared memory than the device offers). */
KDTREE_API kdtree_status kdtree_prepare(int32_t device);
/* *ok = 1 when the library has a kernel image for `device`'s architecture and
 * the device can run it, else 0 (with OK). NO_DEVICE without a driver/GPU. */
KDTREE_API kdtree_status kdtree_device_supported(int32_t device, int32_t* ok);

/* ------------------------------------------------------------------------ */
/* Verify attention                                                         */
/* ------------------------------------------------------------------------ */

/*
 * Attention of each request's q_len_b draft tokens against its KV prefix and
 * the draft tokens' own keys under a tree mask (SPEC section 2):
 *   s = sm_scale * q[t,h,0:D] . k[0:D];   out[t,h,:] = sum softmax(s) * k[0:D_L]
 *   lse[t,h] = ln(sum exp(s)) over visible keys; no visible key: out 0, lse -inf.
 * D = head_dim_latent + head_dim_rope = 512 + 64 (the only built pair).
 * Every pointer is device memory, except for kdtree_verify_paged_host where
 * every pointer is host memory.
 */
typedef struct kdtree_verify_paged_params {
  uint32_t struct_size;    /* sizeof(kdtree_verify_paged_params)             */
  int32_t batch_size;      /* B in 0..65535; 0 is a successful no-op          */
  int32_t num_heads;       /* H in 1..128                                    */
  int32_t head_dim_latent; /* D_L = 512 (also the value dim)                 */
  int32_t head_dim_rope;   /* D_R = 64                                       */
  int32_t max_q_len;       /* host bound on every q_len_b, 1..128; sizes grid */
  int64_t total_q;         /* rows of q / out / lse (< 2^31); qo_indptr[B] <= it */
  int64_t max_kv_len;      /* host hint: max prefix_b + q_len_b (splits)     */
  int32_t num_splits;      /* split-K factor; 0 = pick from max_kv_len + SMs */
  float sm_scale;          /* softmax scale applied to q.k                    */

  /* queries */
  const void* q;           /* [total_q, H, D] q_dtype, unit stride in D       */
  int32_t q_dtype;         /* BF16 or F16                                    */
  int32_t reserved0;       /* 0                                              */
  int64_t q_stride_token;  /* elements between tokens                         */
  int64_t q_stride_head;   /* elements between heads                          */

  /* paged KV cache: row r is the key; its first D_L elements are the value */
  const void* kv_cache;    /* [num_slots, D] rows, kv_stride_slot apart       */
  int32_t kv_dtype;        /* BF16, F16 (== q_dtype) or FP8_E4M3              */
  float kv_scale;          /* FP8 only: value = fp8 * kv_scale (else ignored) */
  int64_t kv_stride_slot;  /* elements between slots                          */
  int64_t num_slots;       /* rows of kv_cache; indices outside are flagged   */

  /* segmented batch (device, int32) */
  const int32_t* qo_indptr; /* [B+1] query rows of request b                  */
  const int32_t* kv_indptr; /* [B+1] ranges of kv_indices                     */
  const void* kv_indices;   /* [kv_indptr[B]] slot ids, index_dtype           */
  int32_t index_dtype;      /* INT32 or INT64                                 */

  /* tail keys */
  int32_t tail_source;      /* KDTREE_TAIL_FROM_INDICES / _FROM_EXTEND        */
  const void* tail_kv;      /* FROM_EXTEND: [total_q, D] kv_dtype rows        */
  int64_t tail_kv_stride;   /* FROM_EXTEND: elements between tail rows        */

  /* tree mask */
  int32_t mask_kind;        /* KDTREE_MASK_*                                  */
  int32_t reserved1;        /* 0                                              */
  const uint8_t* mask;      /* TREE_DENSE / TREE_BITS / SGLANG_FULL bytes     */
  const int64_t* mask_indptr; /* [B+1] byte offsets into mask (device)        */
  int64_t mask_row_bytes;   /* TREE_BITS: bytes per row, >= ceil(max_q_len/8) */

  /* outputs */
  void* out;                /* [total_q, H, D_L] out_dtype                    */
  int32_t out_dtype;        /* BF16, F16 or F32                               */
  int32_t reserved2;        /* 0                                              */
  int64_t out_stride_token; /* elements between tokens                        */
  int64_t out_stride_head;  /* elements between heads                         */
  float* lse;               /* optional [total_q, H] f32, natural log         */
  int32_t* error_flag;      /* optional device int32, KDTREE_FLAG_* bits ORed  */
} kdtree_verify_paged_params;

/* Fills *params with defaults: struct_size set, D_L 512, D_R 64, bf16 q, kv
 * and out, int32 indices, TAIL_FROM_INDICES, MASK_NONE, kv_scale 1,
 * num_splits 0, everything else 0 / NULL. INVALID_ARGUMENT if params is NULL. */
KDTREE_API kdtree_status kdtree_verify_paged_params_init(kdtree_verify_paged_params* params);

/* Bytes of device workspace kdtree_verify_paged needs for these params
 * (split-K partial states). Depends only on host fields and, for
 * num_splits == 0, on the current device's SM count. May be 0. */
KDTREE_API kdtree_status kdtree_verify_workspace_size(const kdtree_verify_paged_params* params,
                                                      size_t* workspace_bytes);

/* The production verify: tensor cores, split-K with a merge. `workspace` is
 * device memory of at least kdtree_verify_workspace_size bytes (may be NULL
 * when that is 0). The split-K partial states in it hold their values in
 * bf16 when out_dtype is BF16 (the output's own precision: half the bytes to
 * write and merge), else in f32; accumulation and lse stay f32. Identical
 * inputs and num_splits give bitwise-identical results. Capture-safe. */
KDTREE_API kdtree_status kdtree_verify_paged(const kdtree_verify_paged_params* params,
                                             void* workspace, size_t workspace_bytes,
                                             kdtree_stream_t stream);

/* Naive GPU oracle: one thread block per (token, head), fp32 math, no
 * workspace, num_splits ignored. Slow; for tests. Capture-safe. */
KDTREE_API kdtree_status kdtree_verify_paged_reference(const kdtree_verify_paged_params* params,
                                                       kdtree_stream_t stream);

/* CPU reference: same params, every pointer host memory, fp64 accumulation.
 * error_flag, if given, is a host int32. Synchronous; uses no GPU. */
KDTREE_API kdtree_status kdtree_verify_paged_host(const kdtree_verify_paged_params* params);

/*
 * One request with a contiguous KV: q [q_len, H, D], kv [kv_len, D] rows
 * kv_stride apart, the last q_len rows of kv are the tail (q_len <= kv_len).
 * Masks NONE, CAUSAL, TREE_DENSE ([q_len, q_len] u8) and TREE_BITS
 * ([q_len, mask_row_bytes]).
 */
typedef struct kdtree_verify_contiguous_params {
  uint32_t struct_size;     /* sizeof(kdtree_verify_contiguous_params)        */
  int32_t num_heads;        /* H in 1..128                                    */
  int32_t head_dim_latent;  /* 512                                            */
  int32_t head_dim_rope;    /* 64                                             */
  int32_t q_len;            /* 0..128 (0 is a no-op)                          */
  int32_t dtype;            /* F32 or BF16: q and kv                          */
  int64_t kv_len;           /* >= q_len                                       */
  float sm_scale;
  int32_t mask_kind;        /* NONE, CAUSAL, TREE_DENSE, TREE_BITS            */
  const void* q;            /* [q_len, H, D] device                           */
  int64_t q_stride_token;
  int64_t q_stride_head;
  const void* kv;           /* [kv_len, D] device                             */
  int64_t kv_stride;        /* elements between rows                          */
  const uint8_t* mask;      /* device; see mask_kind                          */
  int64_t mask_row_bytes;   /* TREE_BITS only                                 */
  void* out;                /* [q_len, H, D_L] out_dtype                      */
  int32_t out_dtype;        /* F32 or BF16                                    */
  int32_t reserved0;
  int64_t out_stride_token;
  int64_t out_stride_head;
  float* lse;               /* optional [q_len, H]                            */
} kdtree_verify_contiguous_params;

KDTREE_API kdtree_status kdtree_verify_contiguous_params_init(kdtree_verify_contiguous_params* params);
/* Capture-safe; needs no workspace. */
KDTREE_API kdtree_status kdtree_verify_contiguous(const kdtree_verify_contiguous_params* params,
                                                  kdtree_stream_t stream);

/* ------------------------------------------------------------------------ */
/* Merge of attention states                                                */
/* ------------------------------------------------------------------------ */

/*
 * S partial states (out_s normalized, lse_s natural log) of the same rows into
 * one: lse = ln(sum_s exp(lse_s)); out = sum_s exp(lse_s - lse) * out_s.
 * States with lse_s = -inf contribute nothing; all -inf gives out 0, lse -inf.
 * Summation runs s = 0..S-1 in order (deterministic).
 */
typedef struct kdtree_merge_params {
  uint32_t struct_size;      /* sizeof(kdtree_merge_params)                   */
  int32_t num_states;        /* S >= 1                                        */
  int64_t num_tokens;        /* rows; 0 is a no-op                            */
  int32_t num_heads;         /* >= 1                                          */
  int32_t head_dim;          /* value dim, multiple of 8, <= 1024              */
  const void* states;        /* [S, tokens, H, head_dim] states_dtype          */
  int32_t states_dtype;      /* F32, BF16 or F16                              */
  int32_t reserved0;
  int64_t states_stride_state; /* elements                                    */
  int64_t states_stride_token;
  int64_t states_stride_head;
  const float* states_lse;   /* [S, tokens, H] contiguous                      */
  void* out;                 /* [tokens, H, head_dim] out_dtype                */
  int32_t out_dtype;         /* F32, BF16 or F16                              */
  int32_t reserved1;
  int64_t out_stride_token;
  int64_t out_stride_head;
  float* lse;                /* optional [tokens, H]                           */
} kdtree_merge_params;

KDTREE_API kdtree_status kdtree_merge_params_init(kdtree_merge_params* params);
/* Device pointers; capture-safe. */
KDTREE_API kdtree_status kdtree_merge_attention_states(const kdtree_merge_params* params,
                                                       kdtree_stream_t stream);
/* Host twin: host pointers, fp64 accumulation. */
KDTREE_API kdtree_status kdtree_merge_attention_states_host(const kdtree_merge_params* params);

/* ------------------------------------------------------------------------ */
/* KV-cache defragmentation                                                 */
/* ------------------------------------------------------------------------ */

/*
 * The protocol (SPEC section 5). Each step leaves every request's KV reachable
 * and identical through its table, so a stop after any step loses nothing and
 * re-running the plan (its same moves, steps 2-4 again) converges; a new plan
 * takes the free list of a finished step 4 (a destination still listed free
 * while a request holds it is rejected as both live and free):
 *   1. kdtree_defrag_plan (host): moves src -> dst, every dst a free slot.
 *   2. kdtree_defrag_copy: copy rows src -> dst in every layer. Old rows stay.
 *   3. kdtree_defrag_remap (same stream, after 2): rewrite slot tables; the
 *      engine updates its host references to the same moves.
 *   4. Only then return the old src slots to the free list and take the dst
 *      slots out of it (kdtree_sort_slots keeps a sorted device free list).
 */

typedef struct kdtree_defrag_copy_params {
  uint32_t struct_size;        /* sizeof(kdtree_defrag_copy_params)           */
  int32_t num_layers;          /* 1 .. 2^20                                   */
  const uint64_t* layer_base;  /* [num_layers] device array of layer base
                                  addresses (device pointers as integers)    */
  int64_t slot_stride_bytes;   /* bytes between consecutive slots of a layer  */
  int64_t row_bytes;           /* bytes copied per slot, <= slot_stride_bytes */
  int64_t num_slots;           /* slots per layer; moves outside are flagged  */
  const void* src_slots;       /* [max_moves] device, index_dtype             */
  const void* dst_slots;       /* [max_moves] device, index_dtype             */
  int32_t index_dtype;         /* INT32 or INT64                              */
  int32_t reserved0;
  int64_t max_moves;           /* host bound; sizes the grid                  */
  const int64_t* num_moves;    /* optional device count (<= max_moves) so a
                                  captured graph takes new plans; NULL: all  */
  int32_t* error_flag;         /* optional device int32                       */
} kdtree_defrag_copy_params;

KDTREE_API kdtree_status kdtree_defrag_copy_params_init(kdtree_defrag_copy_params* params);
/* Copies every move in every layer in one launch. Destinations must be unique
 * and disjoint from all sources (the planner guarantees it). Capture-safe.
 * On sm_90+ the written rows are left in L2 with evict-last priority (the
 * rows a verify reads next); building with CMAKE_CUDA_FLAGS containing
 * -DKDTREE_DEFRAG_TMA_STORE_EVICT_LAST=0 writes them with the default one. */
KDTREE_API kdtree_status kdtree_defrag_copy(const kdtree_defrag_copy_params* params,
                                            kdtree_stream_t stream);

typedef struct kdtree_defrag_remap_params {
  uint32_t struct_size;        /* sizeof(kdtree_defrag_remap_params)          */
  int32_t table_dtype;         /* INT32 or INT64                              */
  void* table;                 /* [rows, cols] device slot table (req_to_token) */
  int64_t rows;
  int64_t cols;
  int64_t row_stride;          /* elements between rows, >= cols              */
  const int32_t* row_lengths;  /* optional [rows] device: entries >= length
                                  are left alone                             */
  int64_t num_slots;           /* pool size; table values outside are left  */
  const void* src_slots;       /* [max_moves] device, index_dtype             */
  const void* dst_slots;       /* [max_moves] device, index_dtype             */
  int32_t index_dtype;         /* INT32 or INT64                              */
  int32_t reserved0;
  int64_t max_moves;
  const int64_t* num_moves;    /* optional device count, as for copy          */
  int32_t* error_flag;         /* optional device int32                       */
} kdtree_defrag_remap_params;

KDTREE_API kdtree_status kdtree_defrag_remap_params_init(kdtree_defrag_remap_params* params);
/* Workspace: the dense slot map, num_slots int32 (plus alignment); none when
 * the table is empty (rows or cols 0) or num_slots is 0. */
KDTREE_API kdtree_status kdtree_defrag_remap_workspace_size(const kdtree_defrag_remap_params* params,
                                                            size_t* workspace_bytes);
/* Rewrites every table entry equal to a moved source into its destination.
 * A move with src or dst outside [0, num_slots) is skipped and flagged in
 * error_flag, also when the table is empty. Capture-safe. */
KDTREE_API kdtree_status kdtree_defrag_remap(const kdtree_defrag_remap_params* params,
                                             void* workspace, size_t workspace_bytes,
                                             kdtree_stream_t stream);

/* Host planner. Every pointer is host memory; slot ids are int64. */
typedef struct kdtree_defrag_plan_params {
  uint32_t struct_size;          /* sizeof(kdtree_defrag_plan_params)         */
  int32_t reserved0;
  int64_t num_slots;             /* pool size                                 */
  int64_t num_requests;
  const int64_t* request_indptr; /* [num_requests+1] into request_slots       */
  const int64_t* request_slots;  /* live slots of each request, in token order */
  const int64_t* free_slots;     /* [num_free] free slots (any order)         */
  int64_t num_free;
  const int64_t* pinned_slots;   /* [num_pinned] never moved (radix cache); may
                                    be in several requests (a shared prefix) */
  int64_t num_pinned;
  const int64_t* reserved_slots; /* [num_reserved] never moved nor a destination
                                    (slot 0)                                  */
  int64_t num_reserved;
  int64_t budget;                /* most moves to produce                     */
  int64_t* move_src;             /* [budget] out                              */
  int64_t* move_dst;             /* [budget] out                              */
  int64_t* num_moves;            /* out                                       */
} kdtree_defrag_plan_params;

KDTREE_API kdtree_status kdtree_defrag_plan_params_init(kdtree_defrag_plan_params* params);
/* Produces at most `budget` moves into free slots that make requests' slots
 * contiguous and ascending, most fragmented request first: in each request
 * the slots after its last pinned or reserved one. Every destination is free,
 * unique, not reserved and not a source; pinned and reserved slots never move.
 * Input slots out of range, duplicated (but for pinned slots shared by
 * requests), or both live (or pinned) and free are rejected (INVALID_ARGUMENT,
 * outputs untouched); num_slots above 2^40, or more than the host can map at
 * a byte per slot, is UNSUPPORTED. */
KDTREE_API kdtree_status kdtree_defrag_plan(const kdtree_defrag_plan_params* params);

typedef struct kdtree_fragmentation_stats {
  uint32_t struct_size;          /* sizeof(kdtree_fragmentation_stats)        */
  int32_t reserved0;
  int64_t num_requests;
  int64_t total_slots;           /* live slots over all requests              */
  int64_t total_runs;            /* maximal runs of consecutive ascending slots */
  int64_t max_runs;              /* most runs in one request                  */
  double mean_run_length;        /* total_slots / total_runs (0 if none)      */
  int64_t largest_free_run;      /* longest run of consecutive free slots     */
  int64_t num_free;
} kdtree_fragmentation_stats;

/* Host. Reads request_indptr/request_slots/free_slots/pinned_slots/num_* of
 * `plan_params` (the other fields are ignored; the planner's input rules).
 * runs_per_request: optional host [num_requests] out. stats->struct_size must
 * be set by the caller. */
KDTREE_API kdtree_status kdtree_fragmentation_stats_compute(const kdtree_defrag_plan_params* plan_params,
                                                            int64_t* runs_per_request,
                                                            kdtree_fragmentation_stats* stats);

/* Sorts `count` slot ids (device, INT32 or INT64, values in [0, num_slots))
 * ascending in place with CUB radix sort over ceil(log2(num_slots)) bits.
 * Workspace from kdtree_sort_slots_workspace_size. Capture-safe. */
KDTREE_API kdtree_status kdtree_sort_slots_workspace_size(int32_t index_dtype, int64_t count,
                                                          int64_t num_slots,
                                                          size_t* workspace_bytes);
KDTREE_API kdtree_status kdtree_sort_slots(void* slots, int32_t index_dtype, int64_t count,
                                           int64_t num_slots, void* workspace,
                                           size_t workspace_bytes, kdtree_stream_t stream);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* KDTREE_KERNELS_H */
