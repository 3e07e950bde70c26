#!/usr/bin/env bash
# tile_sweep.py --peer flashmla under Nsight Compute's locked clock, on the
# GPU machine: each kernel launch timed alone (`--clock-control base`, caches
# flushed), one ncu run per prefix, then ncu_durations.py's medians per kernel
# and both lines fixed + per_tile x tiles. Where the interleaved sweep compares
# the two kernels at whatever clock the power cap leaves them, this compares
# them at one clock (docs/perf_notes.md, session 37). Builds the library for
# sm_90 (build-sweep/) unless KDTREE_KERNELS_LIB names one; FlashMLA from
# .flashmla/ (bench/carried_flashmla.sh).
#
#   device (carry .flashmla): FAMILY=1,16,64 SPLITS=8 \
#     bash bench/probes/run_tile_sweep_locked.sh 49152 98304 196608 262144
#
# Writes ${OUT:-/tmp}/sweep-locked/P<prefix>.csv and prints the table.
set -uo pipefail
cd "$(dirname "$0")/../.."
[ $# -ge 2 ] || { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 2; }
family=${FAMILY:-1,16,64} splits=${SPLITS:-8}
log=${OUT:-/tmp}/sweep-locked
mkdir -p "$log"
. bench/probes/build_sm90_lib.sh
[ -n "${KDTREE_KERNELS_LIB:-}" ] || build_sm90_lib run_tile_sweep_locked build-sweep "$log/build.log"
fm=/tmp/kdtree_flashmla
bash bench/carried_flashmla.sh "$fm" "$log/flashmla_build.log" || exit 1
kernels=$(python3 bench/probes/ncu_durations.py --kernel-regex)  # (the kernels it sums)
files=()
for prefix in "$@"; do
  ncu --clock-control base --metrics gpu__time_duration.sum --csv -k "$kernels" \
    python3 bench/probes/tile_sweep.py --family "$family" --splits "$splits" --prefixes "$prefix" \
    --peer flashmla --site "$fm" --iters 4 > "$log/P$prefix.csv" 2> "$log/P$prefix.err"
  files+=("$log/P$prefix.csv")
done
python3 bench/probes/ncu_durations.py "${files[@]}"  # (tile counts: tile_sweep.py's lines in them)
