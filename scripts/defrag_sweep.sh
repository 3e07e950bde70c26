#!/usr/bin/env bash
# Defrag copy variant sweep (issue 4; docs/perf_notes.md "defrag copy, session 3").
#
# For each variant of src/defrag/copy.cu (compile-time macros): builds the
# library and tests/gpu/test_defrag.cu into build-sweep-<name> (sm_90 only,
# builds run concurrently), runs the defrag test (it must pass), then
# bench/bench_defrag.py and a locality control (the same 4096 x 61 x 1152 B
# copy with the moves sorted, with contiguous slot ranges, and with 4x the
# moves), one variant at a time. Prints one table.
#
#   scripts/defrag_sweep.sh                  # every variant below
#   scripts/defrag_sweep.sh base tma_w4s8    # just these
#   SWEEP_REPS=50 SWEEP_JOBS=4 OUT=/tmp/out scripts/defrag_sweep.sh
#
# Run from the repository root on the GPU machine (nvcc, cmake, ninja, python3
# with torch and numpy). Logs and the table go under $OUT when set (else
# build-sweep-logs/). Without a GPU it builds, then stops with exit 2 before
# the runs; nothing here waits without a time limit.
set -uo pipefail

# name | macros (-D...) ; "base" is the shipped default.
VARIANTS=(
  "base|"
  "warp_tasks|-DKDTREE_DEFRAG_TMA=0"
  "rows1_b6|-DKDTREE_DEFRAG_TMA=0 -DKDTREE_DEFRAG_ROWS=1 -DKDTREE_DEFRAG_BLOCKS_PER_SM=6"
  "rows2_b4|-DKDTREE_DEFRAG_TMA=0 -DKDTREE_DEFRAG_ROWS=2"
  "rows4_b3|-DKDTREE_DEFRAG_TMA=0 -DKDTREE_DEFRAG_ROWS=4 -DKDTREE_DEFRAG_BLOCKS_PER_SM=3"
  "rows6_b2|-DKDTREE_DEFRAG_TMA=0 -DKDTREE_DEFRAG_ROWS=6 -DKDTREE_DEFRAG_BLOCKS_PER_SM=2"
  "base_wb|-DKDTREE_DEFRAG_TMA=0 -DKDTREE_DEFRAG_STORE_CS=0"
  "tma_w4s8|-DKDTREE_DEFRAG_TMA=1 -DKDTREE_DEFRAG_TMA_WARPS=4 -DKDTREE_DEFRAG_TMA_STAGES=8"
  "tma_w2s16|-DKDTREE_DEFRAG_TMA=1 -DKDTREE_DEFRAG_TMA_WARPS=2 -DKDTREE_DEFRAG_TMA_STAGES=16"
  "tma_w8s4|-DKDTREE_DEFRAG_TMA=1 -DKDTREE_DEFRAG_TMA_WARPS=8 -DKDTREE_DEFRAG_TMA_STAGES=4"
  "tma_w1s32|-DKDTREE_DEFRAG_TMA=1 -DKDTREE_DEFRAG_TMA_WARPS=1 -DKDTREE_DEFRAG_TMA_STAGES=32"
  "tma_store_plain|-DKDTREE_DEFRAG_TMA_STORE_EVICT_LAST=0"
)

if [[ ${1:-} == --list ]]; then
  for v in "${VARIANTS[@]}"; do echo "${v%%|*}: ${v#*|}"; done
  exit 0
fi

ROOT=$(pwd)
if [[ ! -f src/defrag/copy.cu || ! -f bench/bench_defrag.py ]]; then
  echo "defrag_sweep: run from the repository root" >&2
  exit 2
fi
LOGS=${OUT:-$ROOT/build-sweep-logs}
mkdir -p "$LOGS"
REPS=${SWEEP_REPS:-30}
CORES=$(nproc)

# The variants asked for (all by default).
SELECTED=()
if (($#)); then
  for want in "$@"; do
    found=
    for v in "${VARIANTS[@]}"; do [[ ${v%%|*} == "$want" ]] && SELECTED+=("$v") && found=1; done
    [[ -n $found ]] || { echo "defrag_sweep: no variant '$want' (--list)" >&2; exit 2; }
  done
else
  SELECTED=("${VARIANTS[@]}")
fi
COUNT=${#SELECTED[@]}
# Concurrent builds share the cores (one build alone is bound by its longest
# file, not the core count); each gets its slice of ninja jobs.
JOBS=${SWEEP_JOBS:-$COUNT}
NINJA_J=$(( CORES / JOBS > 2 ? CORES / JOBS : 2 ))

build_variant() {  # name flags
  local name=$1 flags=$2 dir=build-sweep-$1 log=$LOGS/build-$1.log
  {
    echo "== $name: $flags"
    timeout 600 cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DKDTREE_CUDA_ARCHITECTURES=90 -DKDTREE_BUILD_TOOLS=OFF -DKDTREE_BUILD_EXAMPLES=OFF \
      -DKDTREE_BUILD_TESTS=ON -DKDTREE_BUILD_GPU_TESTS=ON -DKDTREE_BUILD_UNIT_TESTS=OFF "-DCMAKE_CUDA_FLAGS=$flags" &&
    timeout 900 cmake --build "$dir" -j "$NINJA_J" --target kdtree_kernels_c gpu_test_defrag
  } >"$log" 2>&1
}

echo "defrag_sweep: building $COUNT variant(s), $JOBS at a time x -j$NINJA_J (logs: $LOGS)"
start=$SECONDS
declare -A BUILD_OK
running=0
for v in "${SELECTED[@]}"; do
  name=${v%%|*} flags=${v#*|}
  build_variant "$name" "$flags" &
  pids[$running]=$! names[$running]=$name
  running=$((running + 1))
  if ((running == JOBS)); then
    for i in "${!pids[@]}"; do
      wait "${pids[$i]}" && BUILD_OK[${names[$i]}]=1 || BUILD_OK[${names[$i]}]=0
    done
    pids=() names=() running=0
  fi
done
for i in "${!pids[@]}"; do
  wait "${pids[$i]}" && BUILD_OK[${names[$i]}]=1 || BUILD_OK[${names[$i]}]=0
done
echo "defrag_sweep: builds done in $((SECONDS - start)) s"
for v in "${SELECTED[@]}"; do
  name=${v%%|*}
  if [[ ${BUILD_OK[$name]} != 1 ]]; then
    echo "  $name: BUILD FAILED (tail of $LOGS/build-$name.log):"
    tail -n 15 "$LOGS/build-$name.log" | sed 's/^/    /'
  fi
done

# No GPU: stop after the builds (they are what can be checked here).
if ! timeout 60 nvidia-smi -L >/dev/null 2>&1 &&
   ! timeout 120 python3 -c 'import torch, sys; sys.exit(not torch.cuda.is_available())' 2>/dev/null; then
  echo "defrag_sweep: no GPU (nvidia-smi -L and torch.cuda both fail): builds only, nothing run" >&2
  exit 2
fi

# The locality control: the benchmark's copy with the moves' slots random
# (as the benchmark), sorted, contiguous, and 4x the moves; prints one
# line: eff_random eff_sorted eff_contiguous eff_4x_moves.
CONTROL=$(cat <<'PY'
import os, sys
sys.path.insert(0, os.path.join(os.getcwd(), "bench"))
import torch
import bench_defrag as bd

lib = bd.load_library(os.environ["KDTREE_KERNELS_LIB"])
reps = int(os.environ.get("SWEEP_REPS", "30"))
flush = bd.Flush()
copy_bw = bd.copy_bandwidth(flush, reps)
layers, row, num_slots = 61, 1152, 1 << 17
kv, bases = bd.make_layers(layers, num_slots, row)
torch.manual_seed(1)

def efficiency(src, dst):
    run = bd.copy_runner(lib, kv, bases, src, dst, check_layer=layers - 1)
    ms = bd.time_cuda(run, reps, flush.clean)
    return 2 * src.numel() * layers * row / (ms * 1e-3) / copy_bw

m = 4096
perm = torch.randperm(num_slots, device="cuda")
out = [efficiency(perm[:m].contiguous(), perm[m:2 * m].contiguous()),
       efficiency(perm[:m].sort().values, perm[m:2 * m].sort().values),
       efficiency(torch.arange(0, m, device="cuda"), torch.arange(m, 2 * m, device="cuda")),
       efficiency(perm[:4 * m].contiguous(), perm[4 * m:8 * m].contiguous())]
print(" ".join(f"{e:.3f}" for e in out))
PY
)

TABLE=$LOGS/defrag_sweep_table.txt
{
  printf '%-11s %-5s %6s %7s %8s | %6s %6s %6s %6s\n' variant test eff 'TB/s' ms \
    random sorted contig 4xmoves
} >"$TABLE"
for v in "${SELECTED[@]}"; do
  name=${v%%|*} dir=build-sweep-${v%%|*}
  if [[ ${BUILD_OK[$name]} != 1 ]]; then
    printf '%-11s %-5s\n' "$name" build >>"$TABLE"
    continue
  fi
  lib=$ROOT/$dir/libkdtree_kernels_c.so
  if timeout 300 "$dir/tests/gpu_test_defrag" >"$LOGS/test-$name.log" 2>&1; then
    test=pass
  else
    test=FAIL
  fi
  eff=- bw=- ms=- control="- - - -"
  if KDTREE_KERNELS_LIB=$lib timeout 300 python3 bench/bench_defrag.py --reps "$REPS" \
      --json "$LOGS/bench-$name.json" >"$LOGS/bench-$name.log" 2>&1; then
    read -r eff bw ms < <(python3 - "$LOGS/bench-$name.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["defrag_copy"]
print(f"{r['efficiency']:.3f} {r['ours_bw'] / 1e12:.3f} {r['ours_ms']:.4f}")
PY
)
  fi
  if out=$(KDTREE_KERNELS_LIB=$lib SWEEP_REPS=$REPS timeout 300 python3 -c "$CONTROL" \
      2>"$LOGS/control-$name.log"); then
    control=$out
  fi
  read -r c1 c2 c3 c4 <<<"$control"
  printf '%-11s %-5s %6s %7s %8s | %6s %6s %6s %6s\n' "$name" "$test" "$eff" "$bw" "$ms" \
    "$c1" "$c2" "$c3" "$c4" >>"$TABLE"
  echo "defrag_sweep: $name done ($((SECONDS - start)) s)"
done

echo
echo "efficiency = 2 x moves x 61 x 1152 B / time / torch copy bandwidth (bench_defrag.py);"
echo "right of |: the same copy, moves' slots random / sorted / contiguous / 4x moves"
cat "$TABLE"
awk 'NR > 1 && $2 != "pass" { bad = 1 } END { exit bad }' "$TABLE"

