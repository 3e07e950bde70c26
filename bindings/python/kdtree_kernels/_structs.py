"""ctypes mirrors of the constants and structs of include/kdtree_kernels.h.

Field order, types and names follow the header exactly; the loader checks each
Structure's size against kdtree_struct_size() at import, so a drift between
this file and the compiled library fails loudly instead of corrupting memory.
"""

import ctypes

# --- versions the bindings were written against (header macros) -------------
VERSION_MAJOR = 0
VERSION_MINOR = 1
VERSION_PATCH = 0
VERSION_NUMBER = VERSION_MAJOR * 10000 + VERSION_MINOR * 100 + VERSION_PATCH
VERSION_STRING = "0.1.0"
ABI_VERSION = 1

# --- statuses (values never change) -----------------------------------------
OK = 0
ERROR_INVALID_ARGUMENT = 1
ERROR_UNSUPPORTED = 2
ERROR_MISALIGNED = 3
ERROR_WORKSPACE_TOO_SMALL = 4
ERROR_STRUCT_VERSION = 5
ERROR_NO_DEVICE = 6
ERROR_ARCH_NOT_BUILT = 7
ERROR_CUDA = 8
ERROR_INTERNAL = 9

# --- device error-flag bits ---------------------------------------------------
FLAG_SLOT_OUT_OF_RANGE = 1
FLAG_KV_SHORTER_THAN_Q = 2
FLAG_BAD_INDPTR = 4

# --- dtypes --------------------------------------------------------------------
DTYPE_F32 = 0
DTYPE_BF16 = 1
DTYPE_F16 = 2
DTYPE_FP8_E4M3 = 3
DTYPE_INT32 = 4
DTYPE_INT64 = 5

# --- mask kinds ----------------------------------------------------------------
MASK_NONE = 0
MASK_CAUSAL = 1
MASK_TREE_DENSE = 2
MASK_TREE_BITS = 3
MASK_SGLANG_FULL = 4

# --- tail sources --------------------------------------------------------------
TAIL_FROM_INDICES = 0
TAIL_FROM_EXTEND = 1

_vp = ctypes.c_void_p
_i32 = ctypes.c_int32
_i64 = ctypes.c_int64
_u32 = ctypes.c_uint32
_f32 = ctypes.c_float


class VerifyPagedParams(ctypes.Structure):
    """kdtree_verify_paged_params (fill with lib.kdtree_verify_paged_params_init)."""

    _fields_ = [
        ("struct_size", _u32),
        ("batch_size", _i32),
        ("num_heads", _i32),
        ("head_dim_latent", _i32),
        ("head_dim_rope", _i32),
        ("max_q_len", _i32),
        ("total_q", _i64),
        ("max_kv_len", _i64),
        ("num_splits", _i32),
        ("sm_scale", _f32),
        # queries
        ("q", _vp),
        ("q_dtype", _i32),
        ("reserved0", _i32),
        ("q_stride_token", _i64),
        ("q_stride_head", _i64),
        # paged KV cache
        ("kv_cache", _vp),
        ("kv_dtype", _i32),
        ("kv_scale", _f32),
        ("kv_stride_slot", _i64),
        ("num_slots", _i64),
        # segmented batch
        ("qo_indptr", _vp),
        ("kv_indptr", _vp),
        ("kv_indices", _vp),
        ("index_dtype", _i32),
        # tail keys
        ("tail_source", _i32),
        ("tail_kv", _vp),
        ("tail_kv_stride", _i64),
        # tree mask
        ("mask_kind", _i32),
        ("reserved1", _i32),
        ("mask", _vp),
        ("mask_indptr", _vp),
        ("mask_row_bytes", _i64),
        # outputs
        ("out", _vp),
        ("out_dtype", _i32),
        ("reserved2", _i32),
        ("out_stride_token", _i64),
        ("out_stride_head", _i64),
        ("lse", _vp),
        ("error_flag", _vp),
    ]


class VerifyContiguousParams(ctypes.Structure):
    """kdtree_verify_contiguous_params."""

    _fields_ = [
        ("struct_size", _u32),
        ("num_heads", _i32),
        ("head_dim_latent", _i32),
        ("head_dim_rope", _i32),
        ("q_len", _i32),
        ("dtype", _i32),
        ("kv_len", _i64),
        ("sm_scale", _f32),
        ("mask_kind", _i32),
        ("q", _vp),
        ("q_stride_token", _i64),
        ("q_stride_head", _i64),
        ("kv", _vp),
        ("kv_stride", _i64),
        ("mask", _vp),
        ("mask_row_bytes", _i64),
        ("out", _vp),
        ("out_dtype", _i32),
        ("reserved0", _i32),
        ("out_stride_token", _i64),
        ("out_stride_head", _i64),
        ("lse", _vp),
    ]


class MergeParams(ctypes.Structure):
    """kdtree_merge_params."""

    _fields_ = [
        ("struct_size", _u32),
        ("num_states", _i32),
        ("num_tokens", _i64),
        ("num_heads", _i32),
        ("head_dim", _i32),
        ("states", _vp),
        ("states_dtype", _i32),
        ("reserved0", _i32),
        ("states_stride_state", _i64),
        ("states_stride_token", _i64),
        ("states_stride_head", _i64),
        ("states_lse", _vp),
        ("out", _vp),
        ("out_dtype", _i32),
        ("reserved1", _i32),
        ("out_stride_token", _i64),
        ("out_stride_head", _i64),
        ("lse", _vp),
    ]


class DefragCopyParams(ctypes.Structure):
    """kdtree_defrag_copy_params."""

    _fields_ = [
        ("struct_size", _u32),
        ("num_layers", _i32),
        ("layer_base", _vp),
        ("slot_stride_bytes", _i64),
        ("row_bytes", _i64),
        ("num_slots", _i64),
        ("src_slots", _vp),
        ("dst_slots", _vp),
        ("index_dtype", _i32),
        ("reserved0", _i32),
        ("max_moves", _i64),
        ("num_moves", _vp),
        ("error_flag", _vp),
    ]


class DefragRemapParams(ctypes.Structure):
    """kdtree_defrag_remap_params."""

    _fields_ = [
        ("struct_size", _u32),
        ("table_dtype", _i32),
        ("table", _vp),
        ("rows", _i64),
        ("cols", _i64),
        ("row_stride", _i64),
        ("row_lengths", _vp),
        ("num_slots", _i64),
        ("src_slots", _vp),
        ("dst_slots", _vp),
        ("index_dtype", _i32),
        ("reserved0", _i32),
        ("max_moves", _i64),
        ("num_moves", _vp),
        ("error_flag", _vp),
    ]


class DefragPlanParams(ctypes.Structure):
    """kdtree_defrag_plan_params (host pointers, int64 slot ids)."""

    _fields_ = [
        ("struct_size", _u32),
        ("reserved0", _i32),
        ("num_slots", _i64),
        ("num_requests", _i64),
        ("request_indptr", _vp),
        ("request_slots", _vp),
        ("free_slots", _vp),
        ("num_free", _i64),
        ("pinned_slots", _vp),
        ("num_pinned", _i64),
        ("reserved_slots", _vp),
        ("num_reserved", _i64),
        ("budget", _i64),
        ("move_src", _vp),
        ("move_dst", _vp),
        ("num_moves", _vp),
    ]


class FragmentationStats(ctypes.Structure):
    """kdtree_fragmentation_stats."""

    _fields_ = [
        ("struct_size", _u32),
        ("reserved0", _i32),
        ("num_requests", _i64),
        ("total_slots", _i64),
        ("total_runs", _i64),
        ("max_runs", _i64),
        ("mean_run_length", ctypes.c_double),
        ("largest_free_run", _i64),
        ("num_free", _i64),
    ]


# C struct name -> mirror, checked against kdtree_struct_size() at import.
STRUCTS = {
    "kdtree_verify_paged_params": VerifyPagedParams,
    "kdtree_verify_contiguous_params": VerifyContiguousParams,
    "kdtree_merge_params": MergeParams,
    "kdtree_defrag_copy_params": DefragCopyParams,
    "kdtree_defrag_remap_params": DefragRemapParams,
    "kdtree_defrag_plan_params": DefragPlanParams,
    "kdtree_fragmentation_stats": FragmentationStats,
}
