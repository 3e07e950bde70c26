//! Safe host entry points: the CPU verify reference and the merge's host twin
//! over slices. Every bound the library will read or write within is checked
//! here first (shapes are dense and row-major), so no input can make the
//! library touch memory outside the slices.
use crate::error::{check, Error, Result};
use kdtree_kernels_sys as sys;
use std::ffi::c_void;

const HEAD_DIM_LATENT: usize = 512;
const HEAD_DIM: usize = 576;

/// Input elements; bf16/fp16 are carried as their 16-bit patterns.
#[derive(Clone, Copy, Debug)]
pub enum HostData<'a> {
    F32(&'a [f32]),
    Bf16(&'a [u16]),
    F16(&'a [u16]),
    Fp8E4m3(&'a [u8]),
}

/// Output elements.
#[derive(Debug)]
pub enum HostDataMut<'a> {
    F32(&'a mut [f32]),
    Bf16(&'a mut [u16]),
    F16(&'a mut [u16]),
}

#[derive(Clone, Copy, Debug)]
pub enum HostIndices<'a> {
    I32(&'a [i32]),
    I64(&'a [i64]),
}

impl HostData<'_> {
    fn parts(&self) -> (i32, usize, *const c_void) {
        match self {
            HostData::F32(s) => (sys::KDTREE_DTYPE_F32, s.len(), s.as_ptr().cast()),
            HostData::Bf16(s) => (sys::KDTREE_DTYPE_BF16, s.len(), s.as_ptr().cast()),
            HostData::F16(s) => (sys::KDTREE_DTYPE_F16, s.len(), s.as_ptr().cast()),
            HostData::Fp8E4m3(s) => (sys::KDTREE_DTYPE_FP8_E4M3, s.len(), s.as_ptr().cast()),
        }
    }
}

impl HostDataMut<'_> {
    fn parts(&mut self) -> (i32, usize, *mut c_void) {
        match self {
            HostDataMut::F32(s) => (sys::KDTREE_DTYPE_F32, s.len(), s.as_mut_ptr().cast()),
            HostDataMut::Bf16(s) => (sys::KDTREE_DTYPE_BF16, s.len(), s.as_mut_ptr().cast()),
            HostDataMut::F16(s) => (sys::KDTREE_DTYPE_F16, s.len(), s.as_mut_ptr().cast()),
        }
    }
}

impl HostIndices<'_> {
    fn parts(&self) -> (i32, usize, *const c_void) {
        match self {
            HostIndices::I32(s) => (sys::KDTREE_DTYPE_INT32, s.len(), s.as_ptr().cast()),
            HostIndices::I64(s) => (sys::KDTREE_DTYPE_INT64, s.len(), s.as_ptr().cast()),
        }
    }
}

fn need(what: &str, have: usize, needed: usize) -> Result<()> {
    if have < needed {
        return Err(Error::invalid(format!(
            "verify_paged_host: {what} has {have} elements, needs {needed}"
        )));
    }
    Ok(())
}

/// Non-decreasing, non-negative, ending within `limit`.
fn check_indptr(what: &str, indptr: &[i32], limit: usize) -> Result<()> {
    let bad = |why: String| Err(Error::invalid(format!("verify_paged_host: {what} {why}")));
    if indptr.first().is_some_and(|&v| v < 0) {
        return bad("starts below 0".into());
    }
    if let Some(i) = indptr.windows(2).position(|w| w[1] < w[0]) {
        return bad(format!("decreases at {}", i + 1));
    }
    match indptr.last() {
        Some(&last) if last as usize > limit => bad(format!("ends at {last}, beyond {limit}")),
        _ => Ok(()),
    }
}

/// Arguments of the CPU reference, dense row-major: q [total_q, H, 576],
/// kv_cache [num_slots, 576], tail_kv [total_q, 576] (Some selects
/// TAIL_FROM_EXTEND), out [total_q, H, 512], lse [total_q, H].
#[derive(Debug)]
pub struct HostVerify<'a> {
    pub num_heads: i32,
    pub max_q_len: i32,
    pub sm_scale: f32,
    pub q: HostData<'a>,
    pub kv_cache: HostData<'a>,
    pub kv_scale: f32,
    pub qo_indptr: &'a [i32],
    pub kv_indptr: &'a [i32],
    pub kv_indices: HostIndices<'a>,
    pub tail_kv: Option<HostData<'a>>,
    pub mask_kind: i32,
    pub mask: Option<&'a [u8]>,
    pub mask_indptr: Option<&'a [i64]>,
    pub mask_row_bytes: i64,
    pub out: HostDataMut<'a>,
    pub lse: Option<&'a mut [f32]>,
    pub error_flag: Option<&'a mut i32>,
}

/// The CPU reference (fp64 accumulation) of kdtree_verify_paged.
pub fn verify_paged_host(a: &mut HostVerify<'_>) -> Result<()> {
    let heads = usize::try_from(a.num_heads)
        .ok()
        .filter(|&h| h > 0)
        .ok_or_else(|| Error::invalid("verify_paged_host: num_heads must be positive".into()))?;
    let (q_dtype, q_len, q_ptr) = a.q.parts();
    if q_len % (heads * HEAD_DIM) != 0 {
        return Err(Error::invalid(format!(
            "verify_paged_host: q has {q_len} elements, not a multiple of H * 576"
        )));
    }
    let total_q = q_len / (heads * HEAD_DIM);
    let batch = a.qo_indptr.len().checked_sub(1).ok_or_else(|| {
        Error::invalid("verify_paged_host: qo_indptr needs batch_size + 1 elements".into())
    })?;
    need("kv_indptr", a.kv_indptr.len(), batch + 1)?;
    let (index_dtype, num_indices, indices_ptr) = a.kv_indices.parts();
    check_indptr("qo_indptr", a.qo_indptr, total_q)?;
    check_indptr("kv_indptr", &a.kv_indptr[..batch + 1], num_indices)?;
    let (kv_dtype, kv_len, kv_ptr) = a.kv_cache.parts();
    let (out_dtype, out_len, out_ptr) = a.out.parts();
    need("out", out_len, total_q * heads * HEAD_DIM_LATENT)?;

    let mut p = crate::verify_paged_params();
    p.batch_size = batch as i32;
    p.num_heads = a.num_heads;
    p.max_q_len = a.max_q_len;
    p.total_q = total_q as i64;
    p.max_kv_len = (num_indices + a.max_q_len.max(0) as usize) as i64;
    p.sm_scale = a.sm_scale;
    p.q = q_ptr;
    p.q_dtype = q_dtype;
    p.q_stride_token = (heads * HEAD_DIM) as i64;
    p.q_stride_head = HEAD_DIM as i64;
    p.kv_cache = kv_ptr;
    p.kv_dtype = kv_dtype;
    p.kv_scale = a.kv_scale;
    p.kv_stride_slot = HEAD_DIM as i64;
    p.num_slots = (kv_len / HEAD_DIM) as i64;
    p.qo_indptr = a.qo_indptr.as_ptr();
    p.kv_indptr = a.kv_indptr.as_ptr();
    p.kv_indices = indices_ptr;
    p.index_dtype = index_dtype;
    p.out = out_ptr;
    p.out_dtype = out_dtype;
    p.out_stride_token = (heads * HEAD_DIM_LATENT) as i64;
    p.out_stride_head = HEAD_DIM_LATENT as i64;
    if let Some(tail) = &a.tail_kv {
        let (tail_dtype, tail_len, tail_ptr) = tail.parts();
        if tail_dtype != kv_dtype {
            return Err(Error::invalid("verify_paged_host: tail_kv and kv_cache dtypes differ".into()));
        }
        need("tail_kv", tail_len, total_q * HEAD_DIM)?;
        p.tail_source = sys::KDTREE_TAIL_FROM_EXTEND;
        p.tail_kv = tail_ptr;
        p.tail_kv_stride = HEAD_DIM as i64;
    }
    p.mask_kind = a.mask_kind;
    p.mask_row_bytes = a.mask_row_bytes;
    let tree_mask = [sys::KDTREE_MASK_TREE_DENSE, sys::KDTREE_MASK_TREE_BITS,
                     sys::KDTREE_MASK_SGLANG_FULL].contains(&a.mask_kind);
    if tree_mask {
        let (Some(mask), Some(mask_indptr)) = (a.mask, a.mask_indptr) else {
            return Err(Error::invalid(
                "verify_paged_host: this mask_kind needs mask and mask_indptr".into()));
        };
        need("mask_indptr", mask_indptr.len(), batch + 1)?;
        // The last byte the library may read: per request, its rows of mask.
        let mut mask_end = 0i64;
        for b in 0..batch {
            let q_b = (a.qo_indptr[b + 1] - a.qo_indptr[b]) as i64;
            let kv_b = (a.kv_indptr[b + 1] - a.kv_indptr[b]) as i64;
            let prefix = if a.tail_kv.is_some() { kv_b } else { (kv_b - q_b).max(0) };
            let row = match a.mask_kind {
                sys::KDTREE_MASK_TREE_DENSE => q_b,
                sys::KDTREE_MASK_TREE_BITS => a.mask_row_bytes.max((q_b + 7) / 8),
                _ => prefix + q_b,
            };
            if mask_indptr[b] < 0 {
                return Err(Error::invalid(format!("verify_paged_host: mask_indptr[{b}] < 0")));
            }
            mask_end = mask_end.max(mask_indptr[b] + q_b * row);
        }
        need("mask", mask.len(), mask_end as usize)?;
        p.mask = mask.as_ptr();
        p.mask_indptr = mask_indptr.as_ptr();
    }
    if let Some(lse) = a.lse.as_deref_mut() {
        need("lse", lse.len(), total_q * heads)?;
        p.lse = lse.as_mut_ptr();
    }
    if let Some(flag) = a.error_flag.as_deref_mut() {
        p.error_flag = flag;
    }
    // Safety: every pointer in p comes from a slice borrowed for this call, and
    // the checks above bound every offset the library derives from the params
    // and from the indptr values (indices out of [0, num_slots) are skipped by
    // the library itself).
    check(unsafe { sys::kdtree_verify_paged_host(&p) })
}

/// Arguments of the merge's host twin, dense row-major: states
/// [S, tokens, H, head_dim], states_lse [S, tokens, H], out [tokens, H, head_dim].
#[derive(Debug)]
pub struct MergeHost<'a> {
    pub num_states: i32,
    pub num_heads: i32,
    pub head_dim: i32,
    pub states: HostData<'a>,
    pub states_lse: &'a [f32],
    pub out: HostDataMut<'a>,
    pub lse: Option<&'a mut [f32]>,
}

/// kdtree_merge_attention_states_host over slices.
pub fn merge_attention_states_host(a: &mut MergeHost<'_>) -> Result<()> {
    let positive = |v: i32, what: &str| {
        usize::try_from(v).ok().filter(|&v| v > 0).ok_or_else(|| {
            Error::invalid(format!("merge_attention_states_host: {what} must be positive"))
        })
    };
    let (s, h, d) = (positive(a.num_states, "num_states")?, positive(a.num_heads, "num_heads")?,
                     positive(a.head_dim, "head_dim")?);
    let tokens = a.states_lse.len() / (s * h);
    let (states_dtype, states_len, states_ptr) = a.states.parts();
    let (out_dtype, out_len, out_ptr) = a.out.parts();
    need("states", states_len, s * tokens * h * d)?;
    need("out", out_len, tokens * h * d)?;
    let mut p = crate::merge_params();
    p.num_states = a.num_states;
    p.num_tokens = tokens as i64;
    p.num_heads = a.num_heads;
    p.head_dim = a.head_dim;
    p.states = states_ptr;
    p.states_dtype = states_dtype;
    p.states_stride_state = (tokens * h * d) as i64;
    p.states_stride_token = (h * d) as i64;
    p.states_stride_head = d as i64;
    p.states_lse = a.states_lse.as_ptr();
    p.out = out_ptr;
    p.out_dtype = out_dtype;
    p.out_stride_token = (h * d) as i64;
    p.out_stride_head = d as i64;
    if let Some(lse) = a.lse.as_deref_mut() {
        need("lse", lse.len(), tokens * h)?;
        p.lse = lse.as_mut_ptr();
    }
    // Safety: all pointers come from slices whose lengths cover the dense
    // shapes the params describe (checked above).
    check(unsafe { sys::kdtree_merge_attention_states_host(&p) })
}
