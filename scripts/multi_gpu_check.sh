#!/usr/bin/env bash
# The two-GPU run of issue 7 (on an nvidia-h200-x2 machine or larger): builds
# once (scripts/gpu_check.sh, the build only), then
#   1. one process per GPU on GPUs 0 and 1 at the same time, as tensor-parallel
#      ranks do: the GPU suite and the benchmark, each pinned with
#      CUDA_VISIBLE_DEVICES (on a larger machine the other GPUs stay idle);
#   2. one process driving every GPU from its own thread (test_concurrency's
#      multi-device part runs when it sees two or more GPUs).
# Logs under $OUT: multi_build.log, multi_rank<d>.log, multi_bench<d>.json,
# multi_threads.log, multi_summary.txt.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
gpus=$(nvidia-smi --query-gpu=index --format=csv,noheader | wc -l)
summary=$OUT/multi_summary.txt
echo "GPUs visible: $gpus" | tee "$summary"
[ "$gpus" -ge 2 ] || { echo "needs two GPUs: nothing run" | tee -a "$summary"; exit 77; }

SANITIZE=0 BENCH=0 CTEST=0 bash scripts/gpu_check.sh > "$OUT/multi_build.log" 2>&1 || true
[ -f build-gpu/libkdtree_kernels_c.so ] || { echo "build failed (multi_build.log)" | tee -a "$summary"; exit 1; }
[ -d build-deps ] && export LD_LIBRARY_PATH=$PWD/build-deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

rank() {  # <device>: the GPU suite, then the benchmark, on one GPU
  local d=$1
  CUDA_VISIBLE_DEVICES=$d ctest --test-dir build-gpu -L gpu --timeout 600 --output-on-failure
  CUDA_VISIBLE_DEVICES=$d KDTREE_KERNELS_LIB=$PWD/build-gpu/libkdtree_kernels_c.so \
    python3 bench/bench.py --peers none --json "$OUT/multi_bench$d.json"
}
pids=()
for d in 0 1; do rank "$d" > "$OUT/multi_rank$d.log" 2>&1 & pids+=($!); done
for i in 0 1; do
  wait "${pids[$i]}"; rc=$?
  echo "rank $i (GPU $i, concurrent): exit $rc; $(grep -E 'tests passed' "$OUT/multi_rank$i.log" | tail -1); $(grep -E '^geomean efficiency' "$OUT/multi_rank$i.log" | tail -1)" | tee -a "$summary"
done

# One process, one thread per GPU (cudaSetDevice per thread): bitwise equal to one GPU.
build-gpu/tests/gpu_test_concurrency > "$OUT/multi_threads.log" 2>&1
echo "one process, threads on all GPUs: exit $? ($(tail -1 "$OUT/multi_threads.log"))" | tee -a "$summary"
