#!/usr/bin/env bash
# The SM clock, power and the driver's clock-event reasons while each shape
# runs for seconds, on the GPU machine: whether a long shape runs at a lower
# clock than a short one (the power cap), which the efficiency table alone
# cannot tell from a slower kernel. Builds the library for sm_90 (build-clocks/)
# unless KDTREE_KERNELS_LIB names one, then per shape runs sustained.py: cold
# calls for SECONDS_PER_SHAPE seconds (default 2), their times by tenth of the
# run and nvidia-smi's samples over them.
#   SECONDS_PER_SHAPE=3 bash bench/probes/run_clocks.sh S5 S6   (logs under ${OUT:-/tmp}/clocks)
set -uo pipefail
cd "$(dirname "$0")/../.."
log=${OUT:-/tmp}/clocks
mkdir -p "$log"
. bench/probes/build_sm90_lib.sh
[ -n "${KDTREE_KERNELS_LIB:-}" ] || build_sm90_lib run_clocks build-clocks "$log/build.log"
for shape in "${@:-S5 S6}"; do
  timeout 120 python3 bench/probes/sustained.py --shape "$shape" --seconds "${SECONDS_PER_SHAPE:-2}" \
    > "$log/$shape.log" 2>&1
  echo "== $shape"
  cat "$log/$shape.log"
done
