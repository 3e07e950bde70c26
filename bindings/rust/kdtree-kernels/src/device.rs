//! Device entry points. They take CUDA device pointers inside the params
//! structs, so they are `unsafe fn`s: the library checks sizes, dtypes and
//! alignment it can see on the host, but cannot know that a pointer is live
//! device memory of the size the params describe. Each only enqueues work on
//! `stream` (no synchronisation); results are visible after the stream does.
use crate::error::{check, Result};
use kdtree_kernels_sys as sys;
use std::ffi::c_void;

pub use sys::kdtree_stream_t as Stream;
pub use sys::{
    kdtree_defrag_copy_params as DefragCopyParams, kdtree_defrag_plan_params as DefragPlanParams,
    kdtree_defrag_remap_params as DefragRemapParams, kdtree_merge_params as MergeParams,
    kdtree_verify_contiguous_params as VerifyContiguousParams,
    kdtree_verify_paged_params as VerifyPagedParams,
};

/// Bytes of workspace kdtree_verify_paged needs; reads only host fields.
pub fn verify_workspace_size(params: &VerifyPagedParams) -> Result<usize> {
    let mut bytes = 0usize;
    // Safety: the library reads only the host fields of params (documented:
    // the size depends on them alone); bytes is a valid out pointer.
    check(unsafe { sys::kdtree_verify_workspace_size(params, &mut bytes) })?;
    Ok(bytes)
}

/// kdtree_verify_paged.
///
/// # Safety
/// Every pointer in `params` must be device memory holding the arrays the
/// params describe (SPEC section 2), alive until `stream` has run the work;
/// `workspace` must be device memory of `workspace_bytes` bytes (or null when 0).
pub unsafe fn verify_paged(
    params: &VerifyPagedParams,
    workspace: *mut c_void,
    workspace_bytes: usize,
    stream: Stream,
) -> Result<()> {
    // Safety: forwarded from the caller's contract.
    check(unsafe { sys::kdtree_verify_paged(params, workspace, workspace_bytes, stream) })
}

/// kdtree_verify_paged_reference (naive GPU oracle, fp32 math).
///
/// # Safety
/// As for [`verify_paged`].
pub unsafe fn verify_paged_reference(params: &VerifyPagedParams, stream: Stream) -> Result<()> {
    // Safety: forwarded from the caller's contract.
    check(unsafe { sys::kdtree_verify_paged_reference(params, stream) })
}

/// kdtree_verify_paged_host on raw host pointers (see [`crate::verify_paged_host`]
/// for the safe form over slices).
///
/// # Safety
/// Every pointer in `params` must be host memory holding the arrays the params
/// and the indptr/index values describe.
pub unsafe fn verify_paged_host_raw(params: &VerifyPagedParams) -> Result<()> {
    // Safety: forwarded from the caller's contract.
    check(unsafe { sys::kdtree_verify_paged_host(params) })
}

/// kdtree_verify_contiguous.
///
/// # Safety
/// Pointers in `params` are device memory of the described shapes, alive until
/// `stream` has run the work.
pub unsafe fn verify_contiguous(params: &VerifyContiguousParams, stream: Stream) -> Result<()> {
    // Safety: forwarded from the caller's contract.
    check(unsafe { sys::kdtree_verify_contiguous(params, stream) })
}

/// kdtree_merge_attention_states.
///
/// # Safety
/// Pointers in `params` are device memory of the described shapes, alive until
/// `stream` has run the work.
pub unsafe fn merge_attention_states(params: &MergeParams, stream: Stream) -> Result<()> {
    // Safety: forwarded from the caller's contract.
    check(unsafe { sys::kdtree_merge_attention_states(params, stream) })
}

/// kdtree_merge_attention_states_host on raw host pointers.
///
/// # Safety
/// Pointers in `params` are host memory of the described shapes.
pub unsafe fn merge_attention_states_host_raw(params: &MergeParams) -> Result<()> {
    // Safety: forwarded from the caller's contract.
    check(unsafe { sys::kdtree_merge_attention_states_host(params) })
}

/// kdtree_defrag_copy: every move in every layer, one launch.
///
/// # Safety
/// `layer_base` and the slot arrays are device memory; each layer base address
/// points at `num_slots * slot_stride_bytes` bytes of device memory.
pub unsafe fn defrag_copy(params: &DefragCopyParams, stream: Stream) -> Result<()> {
    // Safety: forwarded from the caller's contract.
    check(unsafe { sys::kdtree_defrag_copy(params, stream) })
}

/// Bytes of workspace kdtree_defrag_remap needs (host fields only).
pub fn defrag_remap_workspace_size(params: &DefragRemapParams) -> Result<usize> {
    let mut bytes = 0usize;
    // Safety: only host fields are read; bytes is a valid out pointer.
    check(unsafe { sys::kdtree_defrag_remap_workspace_size(params, &mut bytes) })?;
    Ok(bytes)
}

/// kdtree_defrag_remap: rewrites moved slot ids in a req_to_token-style table.
///
/// # Safety
/// Pointers in `params` are device memory of the described shapes; `workspace`
/// is device memory of `workspace_bytes` bytes.
pub unsafe fn defrag_remap(
    params: &DefragRemapParams,
    workspace: *mut c_void,
    workspace_bytes: usize,
    stream: Stream,
) -> Result<()> {
    // Safety: forwarded from the caller's contract.
    check(unsafe { sys::kdtree_defrag_remap(params, workspace, workspace_bytes, stream) })
}

/// Bytes of workspace kdtree_sort_slots needs.
pub fn sort_slots_workspace_size(index_dtype: i32, count: i64, num_slots: i64) -> Result<usize> {
    let mut bytes = 0usize;
    // Safety: integer arguments and a valid out pointer.
    check(unsafe {
        sys::kdtree_sort_slots_workspace_size(index_dtype, count, num_slots, &mut bytes)
    })?;
    Ok(bytes)
}

/// kdtree_sort_slots: sorts `count` device slot ids ascending in place.
///
/// # Safety
/// `slots` is device memory of `count` elements of `index_dtype`; `workspace`
/// is device memory of `workspace_bytes` bytes.
pub unsafe fn sort_slots(
    slots: *mut c_void,
    index_dtype: i32,
    count: i64,
    num_slots: i64,
    workspace: *mut c_void,
    workspace_bytes: usize,
    stream: Stream,
) -> Result<()> {
    // Safety: forwarded from the caller's contract.
    check(unsafe {
        sys::kdtree_sort_slots(slots, index_dtype, count, num_slots, workspace, workspace_bytes,
                               stream)
    })
}
