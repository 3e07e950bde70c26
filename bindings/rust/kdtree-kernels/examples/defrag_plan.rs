//! The README example: fragmentation statistics and a defrag plan, on the CPU.
use kdtree_kernels::{self as kk, PlanInput};
fn main() -> kk::Result<()> {
    println!("{}", kk::build_info());
    let (indptr, slots) = ([0i64, 3, 5], [7i64, 2, 9, 4, 5]);
    let free: Vec<i64> = (1..16).filter(|s| !slots.contains(s)).collect();
    let pool = PlanInput { num_slots: 16, request_indptr: &indptr, request_slots: &slots,
                           free_slots: &free, pinned_slots: &[], reserved_slots: &[0] };
    let (stats, _runs) = kk::fragmentation_stats(&pool)?;
    let (src, dst) = kk::defrag_plan(&pool, 8)?;          // moves src[i] -> dst[i]
    println!("{} runs, moves {:?} -> {:?}", stats.total_runs, src, dst);
    Ok(())                 // Err(e): e.status (Status), e.message (the library's text)
}
