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
IFS=, read -r batch heads q_len <<< "$family"
specs=()
for prefix in "$@"; do
  ncu --clock-control base --metrics gpu__time_duration.sum --csv \
    -k 'regex:pingpong_kernel|sm90a_kernel|split_merge_kernel|splitkv_mla_kernel|mla_combine_kernel|mla_metadata_kernel' \
    python3 bench/probes/tile_sweep.py --family "$family" --splits "$splits" --prefixes "$prefix" \
    --peer flashmla --site "$fm" --iters 4 > "$log/P$prefix.csv" 2> "$log/P$prefix.err"
  tiles=$(python3 -c "
import sys; sys.path.insert(0, 'bench/probes')
import torch
from tile_sweep import tiles_per_block, flashmla_tiles_per_cta
sms = torch.cuda.get_device_properties(0).multi_processor_count
print(f'{tiles_per_block($prefix, $q_len, $splits)}:{flashmla_tiles_per_cta($batch, $heads, $q_len, $prefix, sms)}')")
  specs+=("$tiles=$log/P$prefix.csv")
done
python3 bench/probes/ncu_durations.py "${specs[@]}"
