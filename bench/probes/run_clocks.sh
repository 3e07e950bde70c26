#!/usr/bin/env bash
# The SM clock, power and the driver's clock-event reasons while each shape's
# benchmark runs, on the GPU machine: whether a long shape runs at a lower
# clock than a short one (the power cap), which the efficiency table alone
# cannot tell from a slower kernel. Builds the library for sm_90 (build-gpu/)
# unless KDTREE_KERNELS_LIB names one, then per shape samples nvidia-smi every
# 50 ms while sustained.py calls that shape cold for SECONDS_PER_SHAPE seconds
# (default 2; it prints the call times by tenth of the run), and summarizes
# the samples taken while the GPU was busy (clocks_summary.py).
#   SECONDS_PER_SHAPE=3 bash bench/probes/run_clocks.sh S5 S6   (logs under ${OUT:-/tmp}/clocks)
set -uo pipefail
cd "$(dirname "$0")/../.."
log=${OUT:-/tmp}/clocks
mkdir -p "$log"
if [ -z "${KDTREE_KERNELS_LIB:-}" ]; then
  cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DKDTREE_CUDA_ARCHITECTURES=90 \
    -DKDTREE_BUILD_TESTS=OFF -DKDTREE_BUILD_TOOLS=OFF -DKDTREE_BUILD_EXAMPLES=OFF > "$log/build.log" 2>&1 &&
    cmake --build build-gpu -j"$(nproc)" --target kdtree_kernels_c >> "$log/build.log" 2>&1 ||
    { echo "run_clocks: build failed"; tail -20 "$log/build.log"; exit 1; }
  export KDTREE_KERNELS_LIB=$PWD/build-gpu/libkdtree_kernels_c.so
fi
fields=timestamp,utilization.gpu,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active
for shape in "${@:-S5 S6}"; do
  nvidia-smi --query-gpu="$fields" --format=csv,noheader,nounits -lms 50 > "$log/$shape.csv" 2> "$log/$shape.smi.err" &
  smi=$!
  timeout 120 python3 bench/probes/sustained.py --shape "$shape" --seconds "${SECONDS_PER_SHAPE:-2}" > "$log/$shape.log" 2>&1
  kill "$smi" 2> /dev/null
  wait "$smi" 2> /dev/null
  echo "== $shape"
  cat "$log/$shape.log"
  python3 bench/probes/clocks_summary.py "$log/$shape.csv"
done
