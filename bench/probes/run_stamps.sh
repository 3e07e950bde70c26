#!/usr/bin/env bash
# An sm_90a verify kernel's per-block timeline on the GPU machine: builds the
# library for sm_90 with -DKDTREE_SM90A_STAMPS=ON (build-stamps/), runs bench.py
# --quick on each shape with KDTREE_PROBE_STAMPS=30 (the 30th launch, a cold-L2
# timing call, prints its stamps) and summarizes them (stamps_summary.py).
#   bash bench/probes/run_stamps.sh S1:63 S7:65     (shape:tiles per block)
#   bash bench/probes/run_stamps.sh S8:9:single      (the single-warpgroup kernel)
#   bash bench/probes/run_stamps.sh S1:63:merge S8:9:merge
#                                   (the split merge of the same call, after the verify kernel)
#   bash bench/probes/run_stamps.sh S5:248:pairs    (the ping-pong's steady pair: its hand-offs,
#                                   each stage half from its free to the wait for its refill)
#   STAMPS_BENCH_ARGS="--kv-dtype fp8" bash bench/probes/run_stamps.sh S5:248:pairs
#                                   (extra bench.py arguments: here the fp8 gather, whose pair
#                                   points keep their meaning: past the half's free, copies issued;
#                                   the score warpgroups' "at" and "past" waits then include
#                                   their own part of the half's conversion)
set -uo pipefail
cd "$(dirname "$0")/../.."
log=${TMPDIR:-/tmp}/stamps
mkdir -p "$log"
. bench/probes/build_sm90_lib.sh
build_sm90_lib run_stamps build-stamps "$log/build.log" -DKDTREE_SM90A_STAMPS=ON
for spec in "${@:-S1:63}"; do
  shape=${spec%%:*} rest=${spec#*:}
  tiles=${rest%%:*} kernel=pingpong
  [ "$rest" != "$tiles" ] && kernel=${rest#*:}
  # shellcheck disable=SC2086  # STAMPS_BENCH_ARGS: several words on purpose
  KDTREE_PROBE_STAMPS=30 timeout 120 python3 bench/bench.py --shapes "$shape" --peers none --quick \
    ${STAMPS_BENCH_ARGS:-} > "$log/$shape.log" 2>&1
  echo "== $shape: $(grep -m1 "^\[$shape\]" "$log/$shape.log" | cut -c1-90)"
  if [ "$kernel" = merge ] || [ "$kernel" = pairs ]; then
    python3 bench/probes/stamps_summary.py "$log/$shape.log" --kernel "$kernel"
  else
    by_arrival=()
    [ "$kernel" = pingpong ] && by_arrival=(--by-arrival 5)
    python3 bench/probes/stamps_summary.py "$log/$shape.log" --tiles "$tiles" --kernel "$kernel" "${by_arrival[@]}"
  fi
done
