#!/usr/bin/env bash
# The GPU run (on the lent H200: nvcc, cmake, ninja, python3 with torch/numpy,
# no cmocka, no internet). Builds build-gpu for sm_90, runs the gpu and cpu
# tests, compute-sanitizer over every GPU test executable (with
# KDTREE_TEST_SANITIZER set: the tests' light mode, every kind of case at
# smaller counts), and bench/bench.py when present. Logs go to $OUT (few
# files: summary, build, ctest, sanitizer, bench); a short table is printed
# last: test counts, each python test's pytest outcome with its skip reasons,
# where SGLang's kernel comes from, the sanitizer totals and the first error
# of each executable that had one (sanitizer.log keeps every error block, up
# to 30 lines each).
#   SM120_CONFIG=1    also build build-gpu-sm120cfg with -DKDTREE_FORCE_SM120_CONFIG=ON
#                     and run its gpu tests (the sm_120 tile config on the H200);
#                     bench.py times it beside build-gpu (--compare-lib sm120cfg=...);
#                     the sanitizer also runs over its verify tests (so with IMAGE_CHECK
#                     and PORTABLE_CHECK)
#   PORTABLE_CHECK=1  also build build-gpu-portable with -DKDTREE_SM90A=OFF and run
#                     its gpu tests (the portable mma.sync verify path on the H200);
#                     bench.py times it beside build-gpu (--compare-lib portable=...);
#                     the sanitizer also runs over its verify tests
#   IMAGE_CHECK=1     also build build-gpu-sm80 for sm_80 alone and run its gpu tests:
#                     the H200 then runs JIT-compiled compute_80 PTX, so the host must
#                     pick the paths that image has bodies for (DeviceInfo::image_arch);
#                     bench.py times it beside build-gpu (the medium config, --compare-lib sm80=...)
#   SCHEDULE_CHECK=1  also build build-gpu-pingpong and build-gpu-single with
#                     -DKDTREE_SM90A_SCHEDULE=PINGPONG / SINGLE (each sm_90a verify
#                     kernel on every shape) and run their gpu tests; the
#                     sanitizer then also runs over build-gpu-pingpong's verify tests
#   FULL_SANITIZE=1   racecheck, initcheck and synccheck too (memcheck always)
#   SANITIZE_TOOLS=racecheck,memcheck  exactly these tools instead
#   SANITIZE_JOBS=n   compute-sanitizer jobs (tool x executable) run n at a time (6)
#   SANITIZE_TIMEOUT=s per-job limit under compute-sanitizer (300)
#   SANITIZE_FILTER=regex  only executables whose path matches, e.g.
#                     'sm120cfg/.*verify_(exact|paged_grid)' (GPU_TEST_FILTER applies too)
#   SANITIZE=0        skip compute-sanitizer;   BENCH=0  skip the benchmarks
#   NCU_SHAPES=S1,S7  Nsight Compute's source counters on one verify launch per shape
#                     (bench.py --quick; NCU_KERNEL, a regex, picks the kernel: default
#                     the sm_90a ones; NCU_LIB, the library: default build-gpu's, e.g.
#                     build-gpu-sm120cfg/libkdtree_kernels_c.so with SM120_CONFIG=1 and
#                     NCU_KERNEL=verify_paged_kernel): ncu_<shape>_sass.csv.gz per shape, ncu.log and
#                     scripts/ncu_regions.py's summary, ncu_regions.txt (with BENCH=0
#                     SANITIZE=0 the call's files stay within what a device call returns)
#   CTEST=0           skip the ctest runs (a sanitizer-only call on a built tree)
#   BENCH_ARGS=...    extra arguments for bench/bench.py (e.g. --sweep-splits)
#   (carried .flashmla/: FlashMLA as the benchmark's peer, built or unpacked
#   here by bench/build_flashmla.sh; the summary says which)
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
  # (Tests, tools and examples named ON: a build dir a probe configured
  # without them on the same warm machine keeps its cache otherwise.)
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKDTREE_CUDA_ARCHITECTURES=90 \
        -DKDTREE_LINEINFO=ON -DKDTREE_BUILD_TESTS=ON -DKDTREE_BUILD_GPU_TESTS=ON -DKDTREE_BUILD_TOOLS=ON \
        -DKDTREE_BUILD_EXAMPLES=ON "${prefix_args[@]}" "$@" >>"$OUT/build.log" 2>&1 &&
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
gpu_result="" cpu_result="" python_result=""
: > "$OUT/ctest.log"
if [ "${CTEST:-1}" = 1 ]; then
  ctest --test-dir build-gpu -L gpu "${filter[@]}" --output-on-failure -j4 --timeout 600 > "$OUT/ctest.log" 2>&1
  gpu_result="gpu tests: $(ctest_counts "$OUT/ctest.log")"
  ctest --test-dir build-gpu -L cpu --output-on-failure -j8 --timeout 600 > "$OUT/ctest_cpu.log" 2>&1
  cpu_result="cpu tests: $(ctest_counts "$OUT/ctest_cpu.log")"
  python_result=$(python_outcomes build-gpu/Testing/Temporary/LastTest.log)
  cat "$OUT/ctest_cpu.log" >> "$OUT/ctest.log" && rm -f "$OUT/ctest_cpu.log"
fi
build-gpu/kdtree-info >> "$summary" 2>&1 || note "kdtree-info: FAILED"

# A second configuration (one extra CMake flag): builds it, runs its gpu
# tests, appends their log to ctest.log and prints the summary line.
extra_config_gpu_tests() {  # <build dir> <what it forces> <cmake args...>
  local dir=$1 what=$2; shift 2
  local log=$OUT/ctest_$dir.log
  if configure_and_build "$dir" "$@"; then
    ctest --test-dir "$dir" -L gpu "${filter[@]}" --output-on-failure -j4 --timeout 600 > "$log" 2>&1
    echo "gpu tests ($what): $(ctest_counts "$log")"
    cat "$log" >> "$OUT/ctest.log" && rm -f "$log"
  else
    echo "$dir: BUILD FAILED"
  fi
}

sm120_result="" portable_result="" pingpong_result="" single_result="" image_result=""
if [ "${SM120_CONFIG:-0}" = 1 ]; then
  sm120_result=$(extra_config_gpu_tests build-gpu-sm120cfg "sm120 config forced" -DKDTREE_FORCE_SM120_CONFIG=ON)
fi
if [ "${SCHEDULE_CHECK:-0}" = 1 ]; then
  pingpong_result=$(extra_config_gpu_tests build-gpu-pingpong "sm_90a ping-pong kernel forced" \
                    -DKDTREE_SM90A_SCHEDULE=PINGPONG)
  single_result=$(extra_config_gpu_tests build-gpu-single "sm_90a single-warpgroup kernel forced" \
                  -DKDTREE_SM90A_SCHEDULE=SINGLE)
fi
if [ "${IMAGE_CHECK:-0}" = 1 ]; then
  image_result=$(extra_config_gpu_tests build-gpu-sm80 "sm_80 image JIT-compiled on the H200" \
                 -DKDTREE_CUDA_ARCHITECTURES=80)
fi
if [ "${PORTABLE_CHECK:-0}" = 1 ]; then
  portable_result=$(extra_config_gpu_tests build-gpu-portable "portable mma.sync path, KDTREE_SM90A=OFF" \
                    -DKDTREE_SM90A=OFF)
fi

# compute-sanitizer over each GPU test executable: one job per tool x
# executable, SANITIZE_JOBS at a time, each with its own raw log. The
# accounting then reads the logs in tool, executable order, so sanitizer.log
# reads as if the jobs had run one after the other.
sanitize_timeout=${SANITIZE_TIMEOUT:-300}
sanitize_jobs=${SANITIZE_JOBS:-6}
sanitize_one() {  # <tool> <executable> <raw log>; writes "<exit code> <seconds>" to <raw log>.rc
  local tool=$1 exe=$2 raw=$3 start=$SECONDS rc
  local extra=()
  [ "$tool" = memcheck ] && extra=(--leak-check full --padding 64)
  KDTREE_TEST_SANITIZER=1 timeout -k 10 "$sanitize_timeout" \
    compute-sanitizer --tool "$tool" "${extra[@]}" --error-exitcode 99 "$exe" > "$raw" 2>&1
  rc=$?
  echo "$rc $(( SECONDS - start ))" > "$raw.rc"
}

sanitizer_rows=()
sanitizer_failures=()
if [ "${SANITIZE:-1}" = 1 ] && command -v compute-sanitizer >/dev/null; then
  tools=(memcheck)
  [ "${FULL_SANITIZE:-0}" = 1 ] && tools+=(racecheck initcheck synccheck)
  [ -n "${SANITIZE_TOOLS:-}" ] && read -ra tools <<< "${SANITIZE_TOOLS//,/ }"
  exes=()
  sanitize_exes=(build-gpu/tests/gpu_test_*)
  [ "${SCHEDULE_CHECK:-0}" = 1 ] && sanitize_exes+=(build-gpu-pingpong/tests/gpu_test_verify*)
  [ "${SM120_CONFIG:-0}" = 1 ] && sanitize_exes+=(build-gpu-sm120cfg/tests/gpu_test_verify*)
  [ "${IMAGE_CHECK:-0}" = 1 ] && sanitize_exes+=(build-gpu-sm80/tests/gpu_test_verify*)
  [ "${PORTABLE_CHECK:-0}" = 1 ] && sanitize_exes+=(build-gpu-portable/tests/gpu_test_verify*)
  for exe in "${sanitize_exes[@]}"; do
    [ -x "$exe" ] || continue
    if [ -n "${GPU_TEST_FILTER:-}" ] && ! [[ $(basename "$exe") =~ $GPU_TEST_FILTER ]]; then continue; fi
    if [ -n "${SANITIZE_FILTER:-}" ] && ! [[ $exe =~ $SANITIZE_FILTER ]]; then continue; fi
    exes+=("$exe")
  done
  raw_dir=$(mktemp -d "$OUT/sanitizer.XXXXXX")
  raw_log() { echo "$raw_dir/$1.${2//\//_}"; }  # <tool> <executable path>

  # racecheck's jobs are the longest: they start first, not last.
  launch_order=()
  [[ " ${tools[*]} " == *" racecheck "* ]] && launch_order=(racecheck)
  for tool in "${tools[@]}"; do [ "$tool" != racecheck ] && launch_order+=("$tool"); done
  campaign_start=$SECONDS
  for tool in "${launch_order[@]}"; do
    for exe in "${exes[@]}"; do
      while [ "$(jobs -rp | wc -l)" -ge "$sanitize_jobs" ]; do wait -n; done
      sanitize_one "$tool" "$exe" "$(raw_log "$tool" "$exe")" &
    done
  done
  wait
  campaign_seconds=$(( SECONDS - campaign_start ))

  : > "$OUT/sanitizer.log"
  for tool in "${tools[@]}"; do
    errors=0 runs=0
    for exe in "${exes[@]}"; do
      raw=$(raw_log "$tool" "$exe")
      # 125: the job left no exit code (it was killed before writing it).
      read -r rc seconds < "$raw.rc" 2>/dev/null || { rc=125; seconds=0; }
      echo "=== $tool $exe" >> "$OUT/sanitizer.log"
      sanitizer_blocks "$raw" >> "$OUT/sanitizer.log"
      n=$(grep -oE "ERROR SUMMARY: [0-9]+" "$raw" | awk '{s+=$3} END {print s+0}')
      [ "$rc" = 99 ] && [ "$n" = 0 ] && n=1
      [ "$rc" = 124 ] && echo "timed out after $sanitize_timeout s" >> "$OUT/sanitizer.log"
      if [ "$rc" != 0 ] && [ "$rc" != 99 ] && [ "$rc" != 124 ]; then  # the test itself failed
        echo "--- last lines of the program's own output:" >> "$OUT/sanitizer.log"
        grep -v "^=========" "$raw" | tail -15 >> "$OUT/sanitizer.log"
      fi
      echo "exit $rc, $n errors, $seconds s" >> "$OUT/sanitizer.log"
      if [ "$n" != 0 ] || { [ "$rc" != 0 ] && [ "$rc" != 99 ]; }; then
        first=$(grep -E "^========= [^ ]" "$raw" | grep -v "COMPUTE-SANITIZER\|SUMMARY" | head -1 | cut -c11-160)
        sanitizer_failures+=("$tool $(basename "$exe"): exit $rc, $n errors${first:+: $first}")
      fi
      errors=$(( errors + n )); runs=$(( runs + 1 ))
    done
    sanitizer_rows+=("$(printf '%-10s %3d executables %5d errors' "$tool" "$runs" "$errors")")
  done
  sanitizer_rows+=("$(printf '%-10s %3d jobs, %d at a time, %d s' wall \
                     $(( ${#tools[@]} * ${#exes[@]} )) "$sanitize_jobs" "$campaign_seconds")")
  rm -rf "$raw_dir"
fi

bench_result=""
flashmla_note=""
if [ "${BENCH:-1}" = 1 ] && [ -f bench/bench.py ]; then
  export KDTREE_KERNELS_LIB=$PWD/build-gpu/libkdtree_kernels_c.so
  # The extra builds this run made and tested, timed beside build-gpu (a library
  # left in an earlier run's build dir would be stale): the portable path (both
  # verify kernels in one table, issue #8), the small tile config (sm_86/89/120,
  # fp8 KV everywhere) and the sm_80 image (the medium config, from compute_80).
  bench_args=()
  compare_build() {  # <label> <build dir> <that build's test summary line, empty if not built>
    local lib=$2/libkdtree_kernels_c.so
    if [ -n "$3" ] && [[ $3 != *"BUILD FAILED"* ]] && [ -f "$lib" ]; then
      bench_args+=(--compare-lib "$1=$PWD/$lib")
    fi
  }
  compare_build portable build-gpu-portable "$portable_result"
  compare_build sm120cfg build-gpu-sm120cfg "$sm120_result"
  compare_build sm80 build-gpu-sm80 "$image_result"
  # FlashMLA as a peer (issue #8) where one is carried in .flashmla/.
  fm_dir=/tmp/kdtree_flashmla
  flashmla_note=$(bash bench/carried_flashmla.sh "$fm_dir" "$OUT/flashmla_build.log") &&
    bench_args+=(--site "$fm_dir")
  PYTHONPATH=$PWD/bindings/python timeout 400 python3 bench/bench.py --markdown \
    --json "$OUT/bench.json" --plot "$OUT/bench.png" "${bench_args[@]}" ${BENCH_ARGS:-} \
    > "$OUT/bench.log" 2>&1
  bench_result="bench/bench.py: exit $? (bench.log)"
  if [ -f bench/bench_defrag.py ]; then
    echo "=============== bench/bench_defrag.py ===============" >> "$OUT/bench.log"
    timeout 200 python3 bench/bench_defrag.py --json "$OUT/bench_defrag.json" >> "$OUT/bench.log" 2>&1
    bench_result+="; bench/bench_defrag.py: exit $?"
  fi
fi

ncu_result=""
if [ -n "${NCU_SHAPES:-}" ] && command -v ncu >/dev/null; then
  for shape in ${NCU_SHAPES//,/ }; do
    rep=$OUT/ncu_$shape
    KDTREE_KERNELS_LIB=${NCU_LIB:-$PWD/build-gpu/libkdtree_kernels_c.so} PYTHONPATH=$PWD/bindings/python \
      timeout 200 ncu --section WarpStateStats --section SourceCounters --import-source yes \
      -k "regex:${NCU_KERNEL:-verify_paged_sm90a}" -c 1 -f -o "$rep" \
      python3 bench/bench.py --shapes "$shape" --peers none --quick >> "$OUT/ncu.log" 2>&1
    ncu -i "$rep.ncu-rep" --page source --csv --print-source sass 2>> "$OUT/ncu.log" | gzip > "${rep}_sass.csv.gz"
    rm -f "$rep.ncu-rep"
  done
  python3 scripts/ncu_regions.py "$OUT"/ncu_*_sass.csv.gz > "$OUT/ncu_regions.txt" 2>&1
  ncu_result="ncu: $NCU_SHAPES (ncu_regions.txt)"
fi

{
  echo "================ gpu_check summary ================"
  [ -n "$gpu_result" ] && echo "$gpu_result"
  [ -n "$cpu_result" ] && echo "$cpu_result"
  [ -n "$sm120_result" ] && echo "$sm120_result"
  [ -n "$portable_result" ] && echo "$portable_result"
  [ -n "$image_result" ] && echo "$image_result"
  [ -n "$pingpong_result" ] && echo "$pingpong_result"
  [ -n "$single_result" ] && echo "$single_result"
  [ -n "$python_result" ] && echo "$python_result"
  echo "$sglang_note"
  for row in "${sanitizer_rows[@]}"; do echo "sanitizer $row"; done
  for row in "${sanitizer_failures[@]}"; do echo "  $row (sanitizer.log)"; done
  [ -n "$bench_result" ] && echo "$bench_result" && echo "$flashmla_note"
  [ -n "$ncu_result" ] && echo "$ncu_result"
  grep -E "FAILED|Failed|Exception|Timeout" "$OUT/ctest.log" | grep -E "^ *[0-9]+/" | head -20
} | tee -a "$summary"
# Exit status: 1 when a test failed or a sanitizer job reported errors or failed.
if grep -qE "tests.*: [0-9]+ passed, [1-9][0-9]* failed|BUILD FAILED" "$summary" || [ ${#sanitizer_failures[@]} -gt 0 ]; then
  exit 1
fi
exit 0
