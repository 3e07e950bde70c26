//! The safe layer against the real library, on the CPU. Device entry points
//! are exercised only for their NO_DEVICE answer when no GPU is present.
use kdtree_kernels::{self as kk, sys, HostData, HostDataMut, HostIndices, HostVerify, Status};

const D: usize = 576;
const DL: usize = 512;

#[test]
fn versions_agree_with_header_constants() {
    assert_eq!(kk::version(), sys::KDTREE_VERSION_STRING);
    assert_eq!(kk::version_number(), sys::KDTREE_VERSION_NUMBER);
    assert_eq!(kk::abi_version(), sys::KDTREE_ABI_VERSION);
    assert!(kk::build_info().starts_with(&format!("kdtree_kernels {}", kk::version())));
}

#[test]
fn struct_sizes_agree_with_library() {
    use std::mem::size_of;
    let mirrors = [
        ("kdtree_verify_paged_params", size_of::<sys::kdtree_verify_paged_params>()),
        ("kdtree_verify_contiguous_params", size_of::<sys::kdtree_verify_contiguous_params>()),
        ("kdtree_merge_params", size_of::<sys::kdtree_merge_params>()),
        ("kdtree_defrag_copy_params", size_of::<sys::kdtree_defrag_copy_params>()),
        ("kdtree_defrag_remap_params", size_of::<sys::kdtree_defrag_remap_params>()),
        ("kdtree_defrag_plan_params", size_of::<sys::kdtree_defrag_plan_params>()),
        ("kdtree_fragmentation_stats", size_of::<sys::kdtree_fragmentation_stats>()),
    ];
    for (name, size) in mirrors {
        assert_eq!(kk::struct_size(name).unwrap(), size, "{name}");
    }
    let e = kk::struct_size("kdtree_no_such_struct").unwrap_err();
    assert_eq!(e.status, Status::INVALID_ARGUMENT);
}

#[test]
fn status_strings() {
    assert_eq!(kk::status_string(Status::OK), "KDTREE_OK");
    assert_eq!(kk::status_string(Status::MISALIGNED), "KDTREE_ERROR_MISALIGNED");
    assert_eq!(kk::status_string(Status::WORKSPACE_TOO_SMALL), "KDTREE_ERROR_WORKSPACE_TOO_SMALL");
    assert_eq!(kk::status_string(Status(77)), "KDTREE_STATUS_UNKNOWN");
}

#[test]
fn errors_carry_the_library_message() {
    let mut p = kk::verify_paged_params();
    p.batch_size = -1;
    // Safety: batch_size -1 is rejected before any pointer is read.
    let e = unsafe { kk::verify_paged_host_raw(&p) }.unwrap_err();
    assert_eq!(e.status, Status::INVALID_ARGUMENT);
    assert!(e.message.contains("batch_size"), "{}", e.message);
    assert!(e.to_string().ends_with("[KDTREE_ERROR_INVALID_ARGUMENT]"));

    p.batch_size = 1;
    p.num_heads = 1;
    p.max_q_len = 1;
    p.total_q = 1;
    // Safety: q is NULL, which the library rejects before reading anything.
    let e = unsafe { kk::verify_paged_host_raw(&p) }.unwrap_err();
    assert!(e.message.starts_with("kdtree_verify_paged_host") && e.message.contains("NULL"),
            "{}", e.message);
    assert_eq!(e.message, kk::last_error_message());

    p.struct_size = 4;
    // Safety: an unknown struct_size is rejected before anything else is read.
    let e = unsafe { kk::verify_paged_host_raw(&p) }.unwrap_err();
    assert_eq!(e.status, Status::STRUCT_VERSION);
}

/// A small deterministic generator (no external crates).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((self.0 >> 11) as f64 / (1u64 << 53) as f64) - 0.5
    }
}

fn to_bf16(x: f32) -> u16 {
    (x.to_bits() >> 16) as u16 // truncation: exact for the values made below
}
fn from_bf16(b: u16) -> f64 {
    f32::from_bits((b as u32) << 16) as f64
}

#[test]
fn verify_paged_host_matches_f64_reference() {
    // Two requests, causal tail, indices cover prefix + tail (TAIL_FROM_INDICES).
    let (heads, q_lens, prefixes) = (2usize, [3usize, 2], [4usize, 1]);
    let total_q: usize = q_lens.iter().sum();
    let kv_lens: Vec<usize> = q_lens.iter().zip(prefixes).map(|(q, p)| q + p).collect();
    let num_slots = kv_lens.iter().sum::<usize>() + 3;
    let mut rng = Lcg(7);
    let bf = |rng: &mut Lcg| to_bf16(f32::from_bits((rng.next() as f32).to_bits() & 0xffff_0000));
    let q: Vec<u16> = (0..total_q * heads * D).map(|_| bf(&mut rng)).collect();
    let kv: Vec<u16> = (0..num_slots * D).map(|_| bf(&mut rng)).collect();
    // A fragmented pool: slots in reverse order.
    let slots: Vec<i64> = (0..kv_lens.iter().sum::<usize>() as i64).rev().map(|s| s + 2).collect();
    let qo = [0, 3, 5];
    let kvp = [0, 7, 10];
    let mut out = vec![0f32; total_q * heads * DL];
    let mut lse = vec![0f32; total_q * heads];
    let sm_scale = 0.06f32;
    kk::verify_paged_host(&mut HostVerify {
        num_heads: heads as i32,
        max_q_len: 3,
        sm_scale,
        q: HostData::Bf16(&q),
        kv_cache: HostData::Bf16(&kv),
        kv_scale: 1.0,
        qo_indptr: &qo,
        kv_indptr: &kvp,
        kv_indices: HostIndices::I64(&slots),
        tail_kv: None,
        mask_kind: sys::KDTREE_MASK_CAUSAL,
        mask: None,
        mask_indptr: None,
        mask_row_bytes: 0,
        out: HostDataMut::F32(&mut out),
        lse: Some(&mut lse),
        error_flag: None,
    })
    .unwrap();

    let mut worst = 0f64;
    for b in 0..2 {
        for i in 0..q_lens[b] {
            let t = qo[b] as usize + i;
            let visible = prefixes[b] + i + 1; // prefix + causal tail
            for h in 0..heads {
                let qrow = &q[(t * heads + h) * D..][..D];
                let scores: Vec<f64> = (0..visible)
                    .map(|j| {
                        let k = &kv[slots[kvp[b] as usize + j] as usize * D..][..D];
                        sm_scale as f64
                            * qrow.iter().zip(k).map(|(&a, &c)| from_bf16(a) * from_bf16(c)).sum::<f64>()
                    })
                    .collect();
                let m = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let sum: f64 = scores.iter().map(|s| (s - m).exp()).sum();
                assert!((lse[t * heads + h] as f64 - (m + sum.ln())).abs() < 1e-5);
                for d in 0..DL {
                    let want: f64 = (0..visible)
                        .map(|j| {
                            let k = slots[kvp[b] as usize + j] as usize * D;
                            (scores[j] - m).exp() / sum * from_bf16(kv[k + d])
                        })
                        .sum();
                    worst = worst.max((out[(t * heads + h) * DL + d] as f64 - want).abs());
                }
            }
        }
    }
    assert!(worst < 1e-6, "max abs error {worst}");
}

#[test]
fn verify_paged_host_checks_slice_bounds() {
    let q = vec![0u16; D];
    let kv = vec![0u16; D];
    let mut out = vec![0f32; DL - 1]; // one element short
    let e = kk::verify_paged_host(&mut HostVerify {
        num_heads: 1, max_q_len: 1, sm_scale: 1.0,
        q: HostData::Bf16(&q), kv_cache: HostData::Bf16(&kv), kv_scale: 1.0,
        qo_indptr: &[0, 1], kv_indptr: &[0, 1], kv_indices: HostIndices::I32(&[0]),
        tail_kv: None, mask_kind: sys::KDTREE_MASK_NONE, mask: None, mask_indptr: None,
        mask_row_bytes: 0, out: HostDataMut::F32(&mut out), lse: None, error_flag: None,
    })
    .unwrap_err();
    assert_eq!(e.status, Status::INVALID_ARGUMENT);
    assert!(e.message.contains("out"), "{}", e.message);
}

#[test]
fn zero_size_batch_is_ok() {
    let mut out: Vec<f32> = Vec::new();
    kk::verify_paged_host(&mut HostVerify {
        num_heads: 1, max_q_len: 1, sm_scale: 1.0,
        q: HostData::Bf16(&[]), kv_cache: HostData::Bf16(&vec![0u16; D]), kv_scale: 1.0,
        qo_indptr: &[0], kv_indptr: &[0], kv_indices: HostIndices::I32(&[]),
        tail_kv: None, mask_kind: sys::KDTREE_MASK_NONE, mask: None, mask_indptr: None,
        mask_row_bytes: 0, out: HostDataMut::F32(&mut out), lse: None, error_flag: None,
    })
    .unwrap();
}

#[test]
fn merge_host_twin() {
    let (s, t, h, d) = (2usize, 3usize, 1usize, 8usize);
    let states: Vec<f32> = (0..s * t * h * d).map(|i| i as f32 * 0.25).collect();
    let states_lse = [0.0f32, 1.0, f32::NEG_INFINITY, 0.5, 1.0, f32::NEG_INFINITY];
    let mut out = vec![0f32; t * h * d];
    let mut lse = vec![0f32; t * h];
    kk::merge_attention_states_host(&mut kk::MergeHost {
        num_states: s as i32, num_heads: h as i32, head_dim: d as i32,
        states: HostData::F32(&states), states_lse: &states_lse,
        out: HostDataMut::F32(&mut out), lse: Some(&mut lse),
    })
    .unwrap();
    for tok in 0..t {
        let (l0, l1) = (states_lse[tok] as f64, states_lse[t + tok] as f64);
        let m = l0.max(l1);
        if m == f64::NEG_INFINITY {
            assert_eq!(lse[tok], f32::NEG_INFINITY);
            assert!(out[tok * d..][..d].iter().all(|&x| x == 0.0));
            continue;
        }
        let l = m + ((l0 - m).exp() + (l1 - m).exp()).ln();
        assert!((lse[tok] as f64 - l).abs() < 1e-6);
        for k in 0..d {
            let want = (l0 - l).exp() * states[tok * d + k] as f64
                + (l1 - l).exp() * states[(t + tok) * d + k] as f64;
            assert!((out[tok * d + k] as f64 - want).abs() < 1e-5);
        }
    }
}

#[test]
fn planner_and_fragmentation_stats() {
    let indptr = [0i64, 4, 7];
    let slots = [3i64, 9, 4, 20, 5, 6, 7];
    let free: Vec<i64> = (1..32).filter(|x| !slots.contains(x)).collect();
    let input = kk::PlanInput {
        num_slots: 32, request_indptr: &indptr, request_slots: &slots, free_slots: &free,
        pinned_slots: &[], reserved_slots: &[0],
    };
    let (stats, runs) = kk::fragmentation_stats(&input).unwrap();
    assert_eq!(runs, vec![4, 1]);
    assert_eq!((stats.num_requests, stats.total_slots, stats.total_runs), (2, 7, 5));
    assert_eq!(stats.num_free, free.len() as i64);

    let (src, dst) = kk::defrag_plan(&input, 8).unwrap();
    assert!(!src.is_empty() && src.len() == dst.len());
    for d in &dst {
        assert!(free.contains(d) && *d != 0);
    }
    let moved: Vec<i64> = slots.iter()
        .map(|s| src.iter().position(|x| x == s).map_or(*s, |m| dst[m]))
        .collect();
    let free_after: Vec<i64> = free.iter().filter(|f| !dst.contains(f)).chain(&src).copied().collect();
    let after = kk::PlanInput { request_slots: &moved, free_slots: &free_after, ..input };
    assert!(kk::fragmentation_stats(&after).unwrap().0.total_runs < stats.total_runs);

    let bad = kk::PlanInput { request_indptr: &[0, 9], ..input };
    assert_eq!(kk::defrag_plan(&bad, 4).unwrap_err().status, Status::INVALID_ARGUMENT);
    let dup = kk::PlanInput { free_slots: &[3], ..input };
    let e = kk::defrag_plan(&dup, 4).unwrap_err();
    assert!(e.message.starts_with("kdtree_defrag_plan"), "{}", e.message);
}

#[test]
fn device_entry_points_without_a_gpu() {
    match kk::device_supported(0) {
        Ok(ok) => {
            println!("note: a CUDA device is present (supported: {ok}); GPU tests run elsewhere");
            return;
        }
        Err(e) => assert_eq!(e.status, Status::NO_DEVICE, "{e}"),
    }
    println!("note: no CUDA device; checking that device entry points answer NO_DEVICE");
    assert_eq!(kk::prepare(0).unwrap_err().status, Status::NO_DEVICE);
    let mut p = kk::verify_paged_params();
    p.batch_size = 1;
    p.num_heads = 1;
    p.max_q_len = 1;
    p.total_q = 1;
    p.max_kv_len = 1;
    p.num_slots = 1;
    // Safety: with no device the library returns before dereferencing any
    // pointer (and these are all NULL besides).
    let e = unsafe { kk::verify_paged(&p, std::ptr::null_mut(), 0, std::ptr::null_mut()) };
    assert!(matches!(e.unwrap_err().status, Status::NO_DEVICE | Status::INVALID_ARGUMENT));
}
