//! Safe Rust layer over libkdtree_kernels_c (include/kdtree_kernels.h):
//! tree-verify attention for MLA models, the merge of attention states and
//! KV-cache defragmentation.
//!
//! Host entry points (the CPU reference, the merge's host twin, the planner
//! and fragmentation statistics) are safe functions over slices: this crate
//! checks that every element the library will read or write lies inside them.
//! Device entry points take raw device pointers and are `unsafe fn`s; the
//! library validates everything it can see on the host and reports failures as
//! `Error { status, message }` with its own message.
mod defrag;
mod device;
mod error;
mod host;

pub use defrag::{defrag_plan, fragmentation_stats, FragmentationStats, PlanInput};
pub use device::*;
pub use error::{check, last_error_message, status_string, Error, Result, Status};
pub use host::{merge_attention_states_host, verify_paged_host, HostData, HostDataMut,
               HostIndices, HostVerify, MergeHost};
pub use kdtree_kernels_sys as sys;

use std::ffi::CString;

/// The loaded library's version string ("0.1.0").
pub fn version() -> &'static str {
    // Safety: kdtree_version_string returns a static NUL-terminated string.
    unsafe { error::static_str(sys::kdtree_version_string()) }
}

/// MAJOR * 10000 + MINOR * 100 + PATCH of the loaded library.
pub fn version_number() -> i32 {
    // Safety: takes no arguments and never fails.
    unsafe { sys::kdtree_version_number() }
}

/// The ABI version of the loaded library (sys::KDTREE_ABI_VERSION when they agree).
pub fn abi_version() -> i32 {
    // Safety: takes no arguments and never fails.
    unsafe { sys::kdtree_abi_version() }
}

/// Version, CUDA version and compiled SM list of the loaded library.
pub fn build_info() -> &'static str {
    // Safety: kdtree_build_info returns a static NUL-terminated string.
    unsafe { error::static_str(sys::kdtree_build_info()) }
}

/// sizeof a public struct as the library was compiled ("kdtree_merge_params").
pub fn struct_size(name: &str) -> Result<usize> {
    let c_name = CString::new(name)
        .map_err(|_| Error::invalid(format!("struct_size: {name:?} contains NUL")))?;
    let mut size = 0usize;
    // Safety: c_name is NUL-terminated and outlives the call; size is a valid out pointer.
    check(unsafe { sys::kdtree_struct_size(c_name.as_ptr(), &mut size) })?;
    Ok(size)
}

/// Sets kernel attributes on `device` ahead of CUDA-graph capture.
pub fn prepare(device: i32) -> Result<()> {
    // Safety: plain integer argument.
    check(unsafe { sys::kdtree_prepare(device) })
}

/// Whether the library has a kernel image that runs on `device`.
pub fn device_supported(device: i32) -> Result<bool> {
    let mut ok = 0i32;
    // Safety: ok is a valid out pointer for the duration of the call.
    check(unsafe { sys::kdtree_device_supported(device, &mut ok) })?;
    Ok(ok != 0)
}

macro_rules! init_fn {
    ($(#[$doc:meta] $name:ident -> $t:ident via $init:ident;)*) => {$(
        #[$doc]
        pub fn $name() -> sys::$t {
            let mut p = sys::$t::zeroed();
            // Safety: p is a valid, writable params struct; init only fails on NULL.
            check(unsafe { sys::$init(&mut p) }).expect(concat!(stringify!($init), " failed"));
            p
        }
    )*};
}

init_fn! {
    /// kdtree_verify_paged_params with the library's defaults.
    verify_paged_params -> kdtree_verify_paged_params via kdtree_verify_paged_params_init;
    /// kdtree_verify_contiguous_params with the library's defaults.
    verify_contiguous_params -> kdtree_verify_contiguous_params via kdtree_verify_contiguous_params_init;
    /// kdtree_merge_params with the library's defaults.
    merge_params -> kdtree_merge_params via kdtree_merge_params_init;
    /// kdtree_defrag_copy_params with the library's defaults.
    defrag_copy_params -> kdtree_defrag_copy_params via kdtree_defrag_copy_params_init;
    /// kdtree_defrag_remap_params with the library's defaults.
    defrag_remap_params -> kdtree_defrag_remap_params via kdtree_defrag_remap_params_init;
    /// kdtree_defrag_plan_params with the library's defaults.
    defrag_plan_params -> kdtree_defrag_plan_params via kdtree_defrag_plan_params_init;
}
