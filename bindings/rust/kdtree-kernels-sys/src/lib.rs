//! Raw declarations of `include/kdtree_kernels.h`, written by hand and pinned by
//! `tests/layout.rs`, which compiles a C program against the real header and
//! compares every size, field offset and constant with these.
//!
//! Statuses are a `#[repr(transparent)]` newtype with associated constants,
//! never a Rust enum: the library may one day return a value this crate does
//! not list, and an out-of-range enum discriminant would be undefined behaviour.
#![no_std]
#![allow(non_camel_case_types)]

use core::ffi::{c_char, c_void};

pub const KDTREE_VERSION_MAJOR: i32 = 0;
pub const KDTREE_VERSION_MINOR: i32 = 1;
pub const KDTREE_VERSION_PATCH: i32 = 0;
pub const KDTREE_VERSION_NUMBER: i32 =
    KDTREE_VERSION_MAJOR * 10000 + KDTREE_VERSION_MINOR * 100 + KDTREE_VERSION_PATCH;
pub const KDTREE_VERSION_STRING: &str = "0.1.0";
pub const KDTREE_ABI_VERSION: i32 = 1;

/// `kdtree_status`: 0 is success; the values never change.
#[repr(transparent)]
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Status(pub i32);

impl Status {
    pub const OK: Status = Status(0);
    pub const INVALID_ARGUMENT: Status = Status(1);
    pub const UNSUPPORTED: Status = Status(2);
    pub const MISALIGNED: Status = Status(3);
    pub const WORKSPACE_TOO_SMALL: Status = Status(4);
    pub const STRUCT_VERSION: Status = Status(5);
    pub const NO_DEVICE: Status = Status(6);
    pub const ARCH_NOT_BUILT: Status = Status(7);
    pub const CUDA: Status = Status(8);
    pub const INTERNAL: Status = Status(9);

    pub fn is_ok(self) -> bool {
        self == Status::OK
    }
}

/// Bits the device code ORs into the optional `error_flag`.
pub const KDTREE_FLAG_SLOT_OUT_OF_RANGE: i32 = 1;
pub const KDTREE_FLAG_KV_SHORTER_THAN_Q: i32 = 2;
pub const KDTREE_FLAG_BAD_INDPTR: i32 = 4;

pub const KDTREE_DTYPE_F32: i32 = 0;
pub const KDTREE_DTYPE_BF16: i32 = 1;
pub const KDTREE_DTYPE_F16: i32 = 2;
pub const KDTREE_DTYPE_FP8_E4M3: i32 = 3;
pub const KDTREE_DTYPE_INT32: i32 = 4;
pub const KDTREE_DTYPE_INT64: i32 = 5;

pub const KDTREE_MASK_NONE: i32 = 0;
pub const KDTREE_MASK_CAUSAL: i32 = 1;
pub const KDTREE_MASK_TREE_DENSE: i32 = 2;
pub const KDTREE_MASK_TREE_BITS: i32 = 3;
pub const KDTREE_MASK_SGLANG_FULL: i32 = 4;

pub const KDTREE_TAIL_FROM_INDICES: i32 = 0;
pub const KDTREE_TAIL_FROM_EXTEND: i32 = 1;

/// `cudaStream_t` without a CUDA dependency; null is the legacy default stream.
pub type kdtree_stream_t = *mut c_void;

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct kdtree_verify_paged_params {
    pub struct_size: u32,
    pub batch_size: i32,
    pub num_heads: i32,
    pub head_dim_latent: i32,
    pub head_dim_rope: i32,
    pub max_q_len: i32,
    pub total_q: i64,
    pub max_kv_len: i64,
    pub num_splits: i32,
    pub sm_scale: f32,
    pub q: *const c_void,
    pub q_dtype: i32,
    pub reserved0: i32,
    pub q_stride_token: i64,
    pub q_stride_head: i64,
    pub kv_cache: *const c_void,
    pub kv_dtype: i32,
    pub kv_scale: f32,
    pub kv_stride_slot: i64,
    pub num_slots: i64,
    pub qo_indptr: *const i32,
    pub kv_indptr: *const i32,
    pub kv_indices: *const c_void,
    pub index_dtype: i32,
    pub tail_source: i32,
    pub tail_kv: *const c_void,
    pub tail_kv_stride: i64,
    pub mask_kind: i32,
    pub reserved1: i32,
    pub mask: *const u8,
    pub mask_indptr: *const i64,
    pub mask_row_bytes: i64,
    pub out: *mut c_void,
    pub out_dtype: i32,
    pub reserved2: i32,
    pub out_stride_token: i64,
    pub out_stride_head: i64,
    pub lse: *mut f32,
    pub error_flag: *mut i32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct kdtree_verify_contiguous_params {
    pub struct_size: u32,
    pub num_heads: i32,
    pub head_dim_latent: i32,
    pub head_dim_rope: i32,
    pub q_len: i32,
    pub dtype: i32,
    pub kv_len: i64,
    pub sm_scale: f32,
    pub mask_kind: i32,
    pub q: *const c_void,
    pub q_stride_token: i64,
    pub q_stride_head: i64,
    pub kv: *const c_void,
    pub kv_stride: i64,
    pub mask: *const u8,
    pub mask_row_bytes: i64,
    pub out: *mut c_void,
    pub out_dtype: i32,
    pub reserved0: i32,
    pub out_stride_token: i64,
    pub out_stride_head: i64,
    pub lse: *mut f32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct kdtree_merge_params {
    pub struct_size: u32,
    pub num_states: i32,
    pub num_tokens: i64,
    pub num_heads: i32,
    pub head_dim: i32,
    pub states: *const c_void,
    pub states_dtype: i32,
    pub reserved0: i32,
    pub states_stride_state: i64,
    pub states_stride_token: i64,
    pub states_stride_head: i64,
    pub states_lse: *const f32,
    pub out: *mut c_void,
    pub out_dtype: i32,
    pub reserved1: i32,
    pub out_stride_token: i64,
    pub out_stride_head: i64,
    pub lse: *mut f32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct kdtree_defrag_copy_params {
    pub struct_size: u32,
    pub num_layers: i32,
    pub layer_base: *const u64,
    pub slot_stride_bytes: i64,
    pub row_bytes: i64,
    pub num_slots: i64,
    pub src_slots: *const c_void,
    pub dst_slots: *const c_void,
    pub index_dtype: i32,
    pub reserved0: i32,
    pub max_moves: i64,
    pub num_moves: *const i64,
    pub error_flag: *mut i32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct kdtree_defrag_remap_params {
    pub struct_size: u32,
    pub table_dtype: i32,
    pub table: *mut c_void,
    pub rows: i64,
    pub cols: i64,
    pub row_stride: i64,
    pub row_lengths: *const i32,
    pub num_slots: i64,
    pub src_slots: *const c_void,
    pub dst_slots: *const c_void,
    pub index_dtype: i32,
    pub reserved0: i32,
    pub max_moves: i64,
    pub num_moves: *const i64,
    pub error_flag: *mut i32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct kdtree_defrag_plan_params {
    pub struct_size: u32,
    pub reserved0: i32,
    pub num_slots: i64,
    pub num_requests: i64,
    pub request_indptr: *const i64,
    pub request_slots: *const i64,
    pub free_slots: *const i64,
    pub num_free: i64,
    pub pinned_slots: *const i64,
    pub num_pinned: i64,
    pub reserved_slots: *const i64,
    pub num_reserved: i64,
    pub budget: i64,
    pub move_src: *mut i64,
    pub move_dst: *mut i64,
    pub num_moves: *mut i64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct kdtree_fragmentation_stats {
    pub struct_size: u32,
    pub reserved0: i32,
    pub num_requests: i64,
    pub total_slots: i64,
    pub total_runs: i64,
    pub max_runs: i64,
    pub mean_run_length: f64,
    pub largest_free_run: i64,
    pub num_free: i64,
}

/// Zeroed params structs, for `*_params_init` to fill (all fields are integers,
/// floats or raw pointers, for which all-zero bits are valid).
macro_rules! zeroed {
    ($($t:ty),*) => {$(
        impl $t {
            pub fn zeroed() -> Self {
                // Safety: every field is an integer, a float or a raw pointer;
                // the all-zero bit pattern is a valid value of each.
                unsafe { core::mem::zeroed() }
            }
        }
    )*};
}
zeroed!(
    kdtree_verify_paged_params,
    kdtree_verify_contiguous_params,
    kdtree_merge_params,
    kdtree_defrag_copy_params,
    kdtree_defrag_remap_params,
    kdtree_defrag_plan_params,
    kdtree_fragmentation_stats
);

extern "C" {
    pub fn kdtree_version_number() -> i32;
    pub fn kdtree_version_string() -> *const c_char;
    pub fn kdtree_abi_version() -> i32;
    pub fn kdtree_status_string(status: Status) -> *const c_char;
    pub fn kdtree_last_error_message() -> *const c_char;
    pub fn kdtree_build_info() -> *const c_char;
    pub fn kdtree_struct_size(struct_name: *const c_char, size: *mut usize) -> Status;

    pub fn kdtree_prepare(device: i32) -> Status;
    pub fn kdtree_device_supported(device: i32, ok: *mut i32) -> Status;

    pub fn kdtree_verify_paged_params_init(params: *mut kdtree_verify_paged_params) -> Status;
    pub fn kdtree_verify_workspace_size(
        params: *const kdtree_verify_paged_params,
        workspace_bytes: *mut usize,
    ) -> Status;
    pub fn kdtree_verify_paged(
        params: *const kdtree_verify_paged_params,
        workspace: *mut c_void,
        workspace_bytes: usize,
        stream: kdtree_stream_t,
    ) -> Status;
    pub fn kdtree_verify_paged_reference(
        params: *const kdtree_verify_paged_params,
        stream: kdtree_stream_t,
    ) -> Status;
    pub fn kdtree_verify_paged_host(params: *const kdtree_verify_paged_params) -> Status;

    pub fn kdtree_verify_contiguous_params_init(
        params: *mut kdtree_verify_contiguous_params,
    ) -> Status;
    pub fn kdtree_verify_contiguous(
        params: *const kdtree_verify_contiguous_params,
        stream: kdtree_stream_t,
    ) -> Status;

    pub fn kdtree_merge_params_init(params: *mut kdtree_merge_params) -> Status;
    pub fn kdtree_merge_attention_states(
        params: *const kdtree_merge_params,
        stream: kdtree_stream_t,
    ) -> Status;
    pub fn kdtree_merge_attention_states_host(params: *const kdtree_merge_params) -> Status;

    pub fn kdtree_defrag_copy_params_init(params: *mut kdtree_defrag_copy_params) -> Status;
    pub fn kdtree_defrag_copy(
        params: *const kdtree_defrag_copy_params,
        stream: kdtree_stream_t,
    ) -> Status;
    pub fn kdtree_defrag_remap_params_init(params: *mut kdtree_defrag_remap_params) -> Status;
    pub fn kdtree_defrag_remap_workspace_size(
        params: *const kdtree_defrag_remap_params,
        workspace_bytes: *mut usize,
    ) -> Status;
    pub fn kdtree_defrag_remap(
        params: *const kdtree_defrag_remap_params,
        workspace: *mut c_void,
        workspace_bytes: usize,
        stream: kdtree_stream_t,
    ) -> Status;
    pub fn kdtree_defrag_plan_params_init(params: *mut kdtree_defrag_plan_params) -> Status;
    pub fn kdtree_defrag_plan(params: *const kdtree_defrag_plan_params) -> Status;
    pub fn kdtree_fragmentation_stats_compute(
        plan_params: *const kdtree_defrag_plan_params,
        runs_per_request: *mut i64,
        stats: *mut kdtree_fragmentation_stats,
    ) -> Status;
    pub fn kdtree_sort_slots_workspace_size(
        index_dtype: i32,
        count: i64,
        num_slots: i64,
        workspace_bytes: *mut usize,
    ) -> Status;
    pub fn kdtree_sort_slots(
        slots: *mut c_void,
        index_dtype: i32,
        count: i64,
        num_slots: i64,
        workspace: *mut c_void,
        workspace_bytes: usize,
        stream: kdtree_stream_t,
    ) -> Status;
}
