#!/usr/bin/env bash
# Each kernel's duration in a verify call (the split kernel, the merge), per
# version, under Nsight Compute: one launch at a time, clocks locked, caches
# flushed, so a kernel's own time apart from its overlap with the next (the
# benchmark's A/B gives the call's). Versions are trees exported by
# `scripts/ab_bench.sh export` (carry .ab), built by `scripts/ab_bench.sh build`.
#
#   device: bash bench/probes/run_ncu_durations.sh S8 main tail
#
# Writes $OUT/ncu-durations-<name>-<shape>.csv (and .log) and prints, per
# version, the median of each kernel's launches and their sum
# (bench/probes/ncu_durations.py --plain). NCU_LAUNCHES: launches profiled
# per version (30); NCU_BENCH_ARGS adds bench.py arguments.
set -euo pipefail
cd "$(dirname "$0")/../.."
shape=$1; shift
out=${OUT:-$PWD/ncu-out}
mkdir -p "$out"
bash scripts/ab_bench.sh build "$@"
regex=$(python3 bench/probes/ncu_durations.py --kernel-regex)
csvs=()
for name in "$@"; do
  csv="$out/ncu-durations-$name-$shape.csv"
  ncu -k "$regex" -c "${NCU_LAUNCHES:-30}" --metrics gpu__time_duration.sum --csv \
      python3 bench/bench.py --lib "build-ab-$name/libkdtree_kernels_c.so" --peers none --quick --shapes "$shape" \
      ${NCU_BENCH_ARGS:-} > "$csv" 2> "$out/ncu-durations-$name-$shape.log" || true
  csvs+=("$csv")
done
python3 bench/probes/ncu_durations.py --plain "${csvs[@]}"
