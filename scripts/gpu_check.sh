#!/usr/bin/env bash
# The GPU run (on the lent H200: nvcc, cmake, ninja, python3 with torch/numpy,
# no cmocka, no internet). Builds build-gpu for sm_90, runs the gpu and cpu
# tests, compute-sanitizer over every GPU test executable, and bench/bench.py
# when present. Logs go to $OUT (few files: summary, build, ctest, sanitizer,
# bench); a short table is printed last: test counts, each python test's
# pytest outcome with its skip reasons, where SGLang's kernel comes from, the
# sanitizer totals and the first error of each executable that had one
# (sanitizer.log keeps every error block, up to 30 lines each).
#   SM120_CONFIG=1    also build build-gpu-sm120cfg with -DKDTREE_FORCE_SM120_CONFIG=ON
#                     and run its gpu tests (the sm_120 tile config on the H200)
#   FULL_SANITIZE=1   racecheck, initcheck and synccheck too (memcheck always)
#   SANITIZE_TIMEOUT=s per-executable limit under compute-sanitizer (300)
#   SANITIZE=0        skip compute-sanitizer;   BENCH=0  skip the benchmarks
#   BENCH_ARGS=...    extra arguments for bench/bench.py (e.g. --sweep-splits)
#   GPU_TEST_FILTER=regex   only GPU tests whose name matches (ctest -R)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
summary=$OUT/summary.txt
: > "$summary"
note() { echo "$*" | tee -a "$summary"; }

# cmocka from the carried .debs (scripts/fetch_device_deps.sh), unpacked locally.
prefix_args=()
if compgen -G ".deb/*.deb" >/dev/null; then
  deps=$PWD/build-deps
  rm -rf "$deps" && mkdir -p "$deps"
  for deb in .deb/*.deb; do dpkg -x "$deb" "$deps"; done
  prefix_args=(-DCMAKE_PREFIX_PATH="$deps/usr" -DCMAKE_LIBRARY_PATH="$deps/usr/lib/x86_64-linux-gnu"
               -DCMAKE_INCLUDE_PATH="$deps/usr/include")
  export LD_LIBRARY_PATH="$deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | tee -a "$summary"

configure_and_build() {  # <build dir> <extra cmake args...>
  local dir=$1; shift
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKDTREE_CUDA_ARCHITECTURES=90 \
        -DKDTREE_LINEINFO=ON "${prefix_args[@]}" "$@" >>"$OUT/build.log" 2>&1 &&
  cmake --build "$dir" -j16 >>"$OUT/build.log" 2>&1
}

build_ok=1
start=$(date +%s)
configure_and_build build-gpu || build_ok=0
note "build-gpu: $([ $build_ok = 1 ] && echo ok || echo FAILED) in $(( $(date +%s) - start )) s"
grep -E "Registers are spilled|error" "$OUT/build.log" | sort -u | head -20 >> "$summary"
if [ $build_ok = 0 ]; then tail -60 "$OUT/build.log"; exit 1; fi

# SGLang's Triton extend_attention_fwd for test_sglang_adapter.py and the
# benchmark: an installed sglang, else the carried .whl/sglang-*.whl, which
# bench/peers.py unzips (kernel files only) and imports with stubs.
wheel=$(ls .whl/sglang-*.whl 2>/dev/null | tail -1)
if python3 -c "import importlib.util as u, sys; sys.exit(u.find_spec('sglang') is None)" 2>/dev/null; then
  sglang_note="sglang: installed package"
elif [ -n "$wheel" ]; then
  sglang_note="sglang: $wheel (loaded by bench/peers.py)"
else
  sglang_note="sglang: none (no .whl/sglang-*.whl): the SGLang comparison test skips"
fi

ctest_counts() {  # <log> -> "passed/failed/skipped"
  local log=$1
  local total failed skipped
  total=$(grep -cE "^ *[0-9]+/[0-9]+ Test +#" "$log")
  failed=$(grep -cE "\*\*\*Failed|\*\*\*Exception|\*\*\*Timeout|Not Run" "$log")
  skipped=$(grep -cE "\*\*\*Skipped" "$log")
  echo "$(( total - failed - skipped )) passed, $failed failed, $skipped skipped"
}

# Each python test's pytest outcome, from ctest's full log of the last run:
# its counts line, then its skip / failure lines (pytest -rs gives reasons).
python_outcomes() {  # <LastTest.log>
  awk '
    /^[0-9]+\/[0-9]+ Test: python\./ { name = $3; reasons = ""; counts = ""; next }
    name == "" { next }
    /^(SKIPPED|FAILED|ERROR|XFAIL|XPASS) / { reasons = reasons "\n    " $0; next }
    / in [0-9.]+s/ && /[0-9]+ (passed|failed|skipped|errors?|xfailed|xpassed|deselected)/ {
      counts = $0; gsub(/^=+ | =+$/, "", counts); next }
    /^<end of output>/ {
      printf "%s: %s%s\n", name, counts == "" ? "no pytest summary (see ctest.log)" : counts, reasons
      name = "" }
  ' "$1"
}

# compute-sanitizer's report, kept readable: every "=========" line except the
# banner, at most 30 lines per error block (a block starts at an unindented
# message: Invalid ..., Leaked ..., Program hit ..., Race ...) and 20 blocks
# per executable; the SUMMARY lines always.
sanitizer_blocks() {  # <raw compute-sanitizer output>
  awk '
    !/^=========/ || /^========= COMPUTE-SANITIZER/ { next }
    /^========= [A-Z ]*SUMMARY/ { print; next }
    /^========= [^ ]/ { blocks++; lines = 0
                        if (blocks == 21) print "========= (further error blocks left out)" }
    blocks <= 20 && lines++ < 30 { print }
  ' "$1"
}

filter=()
[ -n "${GPU_TEST_FILTER:-}" ] && filter=(-R "$GPU_TEST_FILTER")
ctest --test-dir build-gpu -L gpu "${filter[@]}" --output-on-failure -j4 --timeout 600 > "$OUT/ctest.log" 2>&1
gpu_result="gpu tests: $(ctest_counts "$OUT/ctest.log")"
ctest --test-dir build-gpu -L cpu --output-on-failure -j8 --timeout 600 > "$OUT/ctest_cpu.log" 2>&1
cpu_result="cpu tests: $(ctest_counts "$OUT/ctest_cpu.log")"
python_result=$(python_outcomes build-gpu/Testing/Temporary/LastTest.log)
cat "$OUT/ctest_cpu.log" >> "$OUT/ctest.log" && rm -f "$OUT/ctest_cpu.log"
build-gpu/kdtree-info >> "$summary" 2>&1 || note "kdtree-info: FAILED"

sm120_result=""
if [ "${SM120_CONFIG:-0}" = 1 ]; then
  if configure_and_build build-gpu-sm120cfg -DKDTREE_FORCE_SM120_CONFIG=ON; then
    ctest --test-dir build-gpu-sm120cfg -L gpu "${filter[@]}" --output-on-failure -j4 --timeout 600 \
      > "$OUT/ctest_sm120cfg.log" 2>&1
    sm120_result="gpu tests (sm120 config forced): $(ctest_counts "$OUT/ctest_sm120cfg.log")"
    cat "$OUT/ctest_sm120cfg.log" >> "$OUT/ctest.log" && rm -f "$OUT/ctest_sm120cfg.log"
  else
    sm120_result="build-gpu-sm120cfg: BUILD FAILED"
  fi
fi

# compute-sanitizer over each GPU test executable.
sanitizer_rows=()
sanitizer_failures=()
if [ "${SANITIZE:-1}" = 1 ] && command -v compute-sanitizer >/dev/null; then
  tools=(memcheck)
  [ "${FULL_SANITIZE:-0}" = 1 ] && tools+=(racecheck initcheck synccheck)
  : > "$OUT/sanitizer.log"
  for tool in "${tools[@]}"; do
    errors=0 runs=0
    for exe in build-gpu/tests/gpu_test_*; do
      [ -x "$exe" ] || continue
      if [ -n "${GPU_TEST_FILTER:-}" ] && ! [[ $(basename "$exe") =~ $GPU_TEST_FILTER ]]; then continue; fi
      extra=()
      [ "$tool" = memcheck ] && extra=(--leak-check full --padding 64)
      echo "=== $tool $exe" >> "$OUT/sanitizer.log"
      timeout "${SANITIZE_TIMEOUT:-300}" compute-sanitizer --tool "$tool" "${extra[@]}" --error-exitcode 99 "$exe" \
        > "$OUT/sanitizer.tmp" 2>&1
      rc=$?
      sanitizer_blocks "$OUT/sanitizer.tmp" >> "$OUT/sanitizer.log"
      n=$(grep -oE "ERROR SUMMARY: [0-9]+" "$OUT/sanitizer.tmp" | awk '{s+=$3} END {print s+0}')
      [ "$rc" = 99 ] && [ "$n" = 0 ] && n=1
      [ "$rc" = 124 ] && echo "timed out after ${SANITIZE_TIMEOUT:-300} s" >> "$OUT/sanitizer.log"
      if [ "$rc" != 0 ] && [ "$rc" != 99 ] && [ "$rc" != 124 ]; then  # the test itself failed
        echo "--- last lines of the program's own output:" >> "$OUT/sanitizer.log"
        grep -v "^=========" "$OUT/sanitizer.tmp" | tail -15 >> "$OUT/sanitizer.log"
      fi
      echo "exit $rc, $n errors" >> "$OUT/sanitizer.log"
      if [ "$n" != 0 ] || { [ "$rc" != 0 ] && [ "$rc" != 99 ]; }; then
        first=$(grep -E "^========= [^ ]" "$OUT/sanitizer.tmp" | grep -v "COMPUTE-SANITIZER\|SUMMARY" | head -1 | cut -c11-160)
        sanitizer_failures+=("$tool $(basename "$exe"): exit $rc, $n errors${first:+: $first}")
      fi
      errors=$(( errors + n )); runs=$(( runs + 1 ))
    done
    sanitizer_rows+=("$(printf '%-10s %3d executables %5d errors' "$tool" "$runs" "$errors")")
  done
  rm -f "$OUT/sanitizer.tmp"
fi

bench_result=""
if [ "${BENCH:-1}" = 1 ] && [ -f bench/bench.py ]; then
  export KDTREE_KERNELS_LIB=$PWD/build-gpu/libkdtree_kernels_c.so
  PYTHONPATH=$PWD/bindings/python timeout 400 python3 bench/bench.py --markdown \
    --json "$OUT/bench.json" --plot "$OUT/bench.png" ${BENCH_ARGS:-} > "$OUT/bench.log" 2>&1
  bench_result="bench/bench.py: exit $? (bench.log)"
  if [ -f bench/bench_defrag.py ]; then
    echo "=============== bench/bench_defrag.py ===============" >> "$OUT/bench.log"
    timeout 200 python3 bench/bench_defrag.py --json "$OUT/bench_defrag.json" >> "$OUT/bench.log" 2>&1
    bench_result+="; bench/bench_defrag.py: exit $?"
  fi
fi

{
  echo "================ gpu_check summary ================"
  echo "$gpu_result"
  echo "$cpu_result"
  [ -n "$sm120_result" ] && echo "$sm120_result"
  echo "$python_result"
  echo "$sglang_note"
  for row in "${sanitizer_rows[@]}"; do echo "sanitizer $row"; done
  for row in "${sanitizer_failures[@]}"; do echo "  $row (sanitizer.log)"; done
  [ -n "$bench_result" ] && echo "$bench_result"
  grep -E "FAILED|Failed|Exception|Timeout" "$OUT/ctest.log" | grep -E "^ *[0-9]+/" | head -20
} | tee -a "$summary"
