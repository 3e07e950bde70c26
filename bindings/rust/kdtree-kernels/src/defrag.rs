//! Safe host planner and fragmentation statistics over slices.
use crate::error::{check, Error, Result};
use kdtree_kernels_sys as sys;

pub use sys::kdtree_fragmentation_stats as FragmentationStats;

/// The pool as the planner sees it; every slot id is int64.
#[derive(Clone, Copy, Debug)]
pub struct PlanInput<'a> {
    pub num_slots: i64,
    /// [num_requests + 1] offsets into request_slots.
    pub request_indptr: &'a [i64],
    /// Live slots of each request, in token order.
    pub request_slots: &'a [i64],
    pub free_slots: &'a [i64],
    /// Never moved (shared by the radix cache).
    pub pinned_slots: &'a [i64],
    /// Never a destination (slot 0).
    pub reserved_slots: &'a [i64],
}

impl PlanInput<'_> {
    fn params(&self, function: &str) -> Result<sys::kdtree_defrag_plan_params> {
        let ip = self.request_indptr;
        let bad = |why: &str| Err(Error::invalid(format!("{function}: request_indptr {why}")));
        if ip.is_empty() {
            return bad("needs num_requests + 1 elements");
        }
        if ip[0] < 0 || ip.windows(2).any(|w| w[1] < w[0]) {
            return bad("must be non-negative and non-decreasing");
        }
        if ip[ip.len() - 1] as usize > self.request_slots.len() {
            return bad("ends beyond request_slots");
        }
        let mut p = crate::defrag_plan_params();
        p.num_slots = self.num_slots;
        p.num_requests = (ip.len() - 1) as i64;
        p.request_indptr = ip.as_ptr();
        p.request_slots = self.request_slots.as_ptr();
        p.free_slots = self.free_slots.as_ptr();
        p.num_free = self.free_slots.len() as i64;
        p.pinned_slots = self.pinned_slots.as_ptr();
        p.num_pinned = self.pinned_slots.len() as i64;
        p.reserved_slots = self.reserved_slots.as_ptr();
        p.num_reserved = self.reserved_slots.len() as i64;
        Ok(p)
    }
}

/// At most `budget` moves (src, dst) into free slots that make requests'
/// slots contiguous and ascending, most fragmented request first.
pub fn defrag_plan(input: &PlanInput<'_>, budget: usize) -> Result<(Vec<i64>, Vec<i64>)> {
    let mut p = input.params("defrag_plan")?;
    let mut src = vec![0i64; budget];
    let mut dst = vec![0i64; budget];
    let mut count = 0i64;
    p.budget = budget as i64;
    p.move_src = src.as_mut_ptr();
    p.move_dst = dst.as_mut_ptr();
    p.num_moves = &mut count;
    // Safety: the input arrays are slices whose lengths match the counts in p
    // (request_indptr checked to stay within request_slots); the outputs hold
    // `budget` elements each and count is a valid out pointer.
    check(unsafe { sys::kdtree_defrag_plan(&p) })?;
    let n = usize::try_from(count).unwrap_or(0).min(budget);
    src.truncate(n);
    dst.truncate(n);
    Ok((src, dst))
}

/// Fragmentation statistics and the number of runs of each request.
pub fn fragmentation_stats(input: &PlanInput<'_>) -> Result<(FragmentationStats, Vec<i64>)> {
    let p = input.params("fragmentation_stats")?;
    let mut runs = vec![0i64; p.num_requests as usize];
    let mut stats = FragmentationStats::zeroed();
    stats.struct_size = std::mem::size_of::<FragmentationStats>() as u32;
    // Safety: inputs as in defrag_plan; runs holds num_requests elements and
    // stats is a valid, sized out struct.
    check(unsafe { sys::kdtree_fragmentation_stats_compute(&p, runs.as_mut_ptr(), &mut stats) })?;
    Ok((stats, runs))
}
