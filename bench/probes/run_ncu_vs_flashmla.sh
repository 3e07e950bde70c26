#!/usr/bin/env bash
# Ours against FlashMLA under Nsight Compute, one launch of each on one shape
# (clocks locked, caches flushed: the figures say where a tile's time goes,
# they are not the benchmark's): ours is this tree's build-gpu (built here,
# sm_90 only), FlashMLA from .flashmla/ (bench/carried_flashmla.sh: the
# package bench/build_flashmla.sh made, or a source tarball built here).
#
#   device (carry .flashmla .deb): bash bench/probes/run_ncu_vs_flashmla.sh S5
#
# Writes $OUT/ncu-{ours,flashmla}-<shape>.csv (the raw pages) and prints the
# two side by side: duration, grid, registers, instructions, tensor-pipe and
# shared-memory activity, and the top warp-stall reasons (bench/probes/ncu_raw.py).
# NCU_MEMORY=1 adds the L2 tables (sectors by source, lookups, hit rate, DRAM
# bytes), as run_ncu_stalls.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
shape=${1:?usage: run_ncu_vs_flashmla.sh SHAPE}
out=${OUT:-$PWD/ncu-out}
mkdir -p "$out"
SANITIZE=0 CTEST=0 BENCH=0 bash scripts/gpu_check.sh > "$out/ncu-vs-build.log" 2>&1
fm=/tmp/kdtree_flashmla
bash bench/carried_flashmla.sh "$fm" "$out/flashmla_build.log"
export KDTREE_KERNELS_LIB=$PWD/build-gpu/libkdtree_kernels_c.so PYTHONPATH=$PWD/bindings/python
memory_sections=() memory_keys=()
if [ "${NCU_MEMORY:-0}" = 1 ]; then
  memory_sections=(--section MemoryWorkloadAnalysis_Tables)
  memory_keys=(--memory)
fi
run() {  # <name> <kernel regex> <peers>
  ncu --section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis "${memory_sections[@]}" \
      --section LaunchStats -k "regex:$2" -s 2 -c 1 -f -o "/tmp/ncu-$1-$shape" \
      python3 bench/bench.py --peers "$3" --site "$fm" --quick --shapes "$shape" > "$out/ncu-$1-$shape.log" 2>&1 || true
  ncu -i "/tmp/ncu-$1-$shape.ncu-rep" --csv --page raw > "$out/ncu-$1-$shape.csv" 2>> "$out/ncu-$1-$shape.log" || true
}
run ours "verify_paged_sm90a_pingpong_kernel|verify_paged_sm90a_kernel" none
run flashmla "flash_fwd_splitkv_mla_kernel" flashmla
keys=gpu__time_duration.sum,launch__grid_size,launch__block_size,launch__registers_per_thread
keys+=,inst_executed,sm__issue_active.avg.pct_of_peak_sustained_elapsed
keys+=,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed
keys+=,l1tex__data_bank_reads.avg.pct_of_peak_sustained_elapsed,l1tex__data_bank_writes.avg.pct_of_peak_sustained_elapsed
keys+=,l1tex__data_pipe_lsu_wavefronts.avg.pct_of_peak_sustained_elapsed
keys+=,lts__t_sectors.avg.pct_of_peak_sustained_elapsed,lts__t_sector_hit_rate.pct
keys+=,dram__bytes.sum.per_second,sm__cycles_active.avg
python3 bench/probes/ncu_raw.py --keys "$keys" "${memory_keys[@]}" --top 8 \
  "ours=$out/ncu-ours-$shape.csv" "flashmla=$out/ncu-flashmla-$shape.csv"
