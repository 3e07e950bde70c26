#!/usr/bin/env bash
# Warp-stall reasons of a verify kernel (the ping-pong unless NCU_KERNEL says),
# one launch per version and shape, under Nsight Compute (clocks locked, caches
# flushed: the figures locate time, they are not the benchmark's). Versions are
# trees exported by `scripts/ab_bench.sh export` (carry .ab), built by
# `scripts/ab_bench.sh build`.
#
#   device: bash bench/probes/run_ncu_stalls.sh S5 main pad32
#           bash bench/probes/run_ncu_stalls.sh S1 --cmake "-DKDTREE_FORCE_SM120_CONFIG=ON" main v4
#           (--cmake first: the builds' extra CMake arguments, as ab_bench.sh takes them)
#
# Writes $OUT/ncu-<name>-<shape>.csv (the raw page) and -sass.csv.gz (the
# source page by SASS instruction, as scripts/ncu_regions.py reads) and prints, per
# version, the kernel's duration and its stall reasons (warps per issue
# slot, WarpStateStats) largest first (bench/probes/ncu_raw.py). NCU_MEMORY=1
# adds the memory sections (and the pipes' use, ComputeWorkloadAnalysis, in the
# raw page) and prints the L1 / L2 / DRAM traffic (sectors,
# requests, hit rate, the L2 fabric between its two partitions).
# NCU_BENCH_ARGS adds bench.py arguments (e.g. --contiguous-slots).
# NCU_KERNEL names another kernel to profile, as a regex (default
# pingpong_kernel; S8's split kernel is verify_paged_sm90a_kernel).
set -euo pipefail
cd "$(dirname "$0")/../.."
shape=$1; shift
out=${OUT:-$PWD/ncu-out}
mkdir -p "$out"
build_args=()
if [ "${1:-}" = --cmake ]; then build_args=(--cmake "$2"); shift 2; fi
bash scripts/ab_bench.sh build "${build_args[@]}" "$@"
memory_sections=() memory_keys=()
if [ "${NCU_MEMORY:-0}" = 1 ]; then
  memory_sections=(--section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables
                   --section ComputeWorkloadAnalysis)
  memory_keys=(--memory)
fi
for name in "$@"; do
  csv="$out/ncu-$name-$shape.csv"
  KDTREE_KERNELS_LIB="$PWD/build-ab-$name/libkdtree_kernels_c.so" \
    ncu --section SpeedOfLight --section WarpStateStats --section SourceCounters "${memory_sections[@]}" \
        -k "regex:${NCU_KERNEL:-pingpong_kernel}" -s 2 -c 1 \
        -f -o "/tmp/ncu-$name-$shape" \
        python3 bench/bench.py --peers none --quick --shapes "$shape" ${NCU_BENCH_ARGS:-} \
        > "$out/ncu-$name-$shape.log" 2>&1 || true
  ncu -i "/tmp/ncu-$name-$shape.ncu-rep" --csv --page raw > "$csv" 2>> "$out/ncu-$name-$shape.log" || true
  # (per SASS instruction, for scripts/ncu_regions.py or a look by address)
  ncu -i "/tmp/ncu-$name-$shape.ncu-rep" --csv --page source --print-source sass 2>> "$out/ncu-$name-$shape.log" |
    gzip > "$out/ncu-$name-$shape-sass.csv.gz" || true
  echo "== $name ($(cat ".ab/$name/COMMIT" 2>/dev/null || echo "?")) $shape"
  python3 bench/probes/ncu_raw.py "${memory_keys[@]}" "$name=$csv"
done
