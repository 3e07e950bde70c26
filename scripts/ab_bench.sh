#!/usr/bin/env bash
# A/B timing of several versions of the library in one device call: each
# version's libkdtree_kernels_c.so built side by side, then bench/bench.py
# --quick --interleave --compare-lib over the chosen shapes (every version on
# the same inputs, shape by shape, timed in one loop that calls each version
# in turn), the first version rotated round by round.
#
# The lent GPU machine gets the working tree, but its git history can be
# older than this checkout's, so versions travel as exported trees:
#
#   here:    scripts/ab_bench.sh export main=main pp=sm90a-pp-warp-arrive
#            (git archive of each revision into .ab/<name>, with a COMMIT file)
#   device:  scripts/ab_bench.sh run [--shapes S3,S5,S6] [--rounds 2]
#                                    [--cmake "-DKDTREE_SM90A_SCHEDULE=PINGPONG"]
#                                    [--bench-args "--contiguous-slots"] main pp
#            (carry [".ab"]; prints bench.py's line per shape and round: each
#            version's ms, efficiency and ok / FAIL; also $OUT/ab.txt; then
#            scripts/ab_summary.py's means and changes by position against
#            the first version named, also $OUT/ab_summary.txt; bench.py's
#            whole output in $OUT/bench.log, each build's in build-ab-<name>/,
#            copied to $OUT only when it fails: the device returns 8 files)
#   device:  scripts/ab_bench.sh build [--cmake ...] main pp
#            (the builds alone, for a probe that runs them its own way:
#            bench/probes/run_ncu_stalls.sh)
#
# A tree under .ab/ can also be edited by hand before the call (a probe that
# is not committed); its COMMIT file then says what it was exported from.
set -euo pipefail
cd "$(dirname "$0")/.."
AB=.ab

usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 2; }

export_trees() {
  [ $# -gt 0 ] || usage
  mkdir -p "$AB"
  for spec in "$@"; do
    local name=${spec%%=*} rev=${spec#*=}
    if [ "$name" = "$spec" ] || [ -z "$name" ] || [ -z "$rev" ]; then
      echo "ab_bench: expected NAME=REV, got '$spec'" >&2
      exit 2
    fi
    local commit
    commit=$(git rev-parse --short "$rev^{commit}")
    rm -rf "${AB:?}/$name" && mkdir -p "$AB/$name"
    git archive "$commit" | tar -x -C "$AB/$name"
    echo "$commit" > "$AB/$name/COMMIT"
    echo "$AB/$name: $rev ($commit)"
  done
}

# Builds each named tree's library in build-ab-<name>/, side by side; a
# failed build's log goes to $out.
build_trees() {
  local cmake_args=$1 out=$2
  shift 2
  local names=("$@")
  local jobs=$(( $(nproc) / ${#names[@]} ))
  [ "$jobs" -ge 1 ] || jobs=1
  local name
  for name in "${names[@]}"; do
    [ -f "$AB/$name/CMakeLists.txt" ] || { echo "ab_bench: no tree $AB/$name (run 'export' here first)" >&2; exit 2; }
    mkdir -p "build-ab-$name"
    # A fresh cache each time: options of an earlier call's --cmake (e.g.
    # KDTREE_FORCE_SM120_CONFIG=ON) must not carry into this one's build.
    rm -f "build-ab-$name/CMakeCache.txt"
    # shellcheck disable=SC2086  # cmake_args: several words on purpose
    ( cmake -S "$AB/$name" -B "build-ab-$name" -G Ninja -DCMAKE_BUILD_TYPE=Release \
          -DKDTREE_CUDA_ARCHITECTURES=90 -DKDTREE_BUILD_TESTS=OFF $cmake_args > "build-ab-$name/ab-build.log" 2>&1 &&
      cmake --build "build-ab-$name" -j"$jobs" --target kdtree_kernels_c >> "build-ab-$name/ab-build.log" 2>&1 ) &
  done
  local failed=0
  for job in $(jobs -p); do wait "$job" || failed=1; done
  if [ $failed = 1 ]; then
    for name in "${names[@]}"; do
      if [ ! -f "build-ab-$name/libkdtree_kernels_c.so" ]; then
        echo "ab_bench: $name did not build:" >&2
        tail -20 "build-ab-$name/ab-build.log" >&2
        cp "build-ab-$name/ab-build.log" "$out/build-$name.log"
      fi
    done
    exit 1
  fi
}

# run: build, then time; build: the builds alone (only --cmake taken).
run_trees() {
  local mode=$1
  shift
  local shapes=S3,S5,S6 rounds=2 cmake_args="" bench_args=""
  local names=()
  while [ $# -gt 0 ]; do
    case $1 in
      --shapes | --rounds) [ "$mode" = run ] || usage
        if [ "$1" = --shapes ]; then shapes=$2; else rounds=$2; fi
        shift 2 ;;
      --cmake) cmake_args=$2; shift 2 ;;
      --bench-args) [ "$mode" = run ] || usage
        bench_args=$2; shift 2 ;;
      -*) usage ;;
      *) names+=("$1"); shift ;;
    esac
  done
  [ ${#names[@]} -gt 0 ] || usage
  local out=${OUT:-$PWD/ab-out}
  mkdir -p "$out"
  build_trees "$cmake_args" "$out" "${names[@]}"
  [ "$mode" = run ] || return 0

  # Timing is bench.py's --compare-lib: every version on the same inputs, shape
  # by shape, in one process, interleaved call by call (--interleave: a clock
  # drift over the run reaches every version alike; timed one after another,
  # the same build read up to 6% apart by position, session 18). The first
  # version takes the "ours" column; the rounds rotate which one that is.
  : > "$out/ab.txt"
  : > "$out/bench.log"
  local round log
  log=$(mktemp)
  for round in $(seq 1 "$rounds"); do
    local first=$(( (round - 1) % ${#names[@]} )) k
    local order=("${names[@]:first}" "${names[@]:0:first}")
    local compare=()
    for k in "${order[@]:1}"; do compare+=(--compare-lib "$k=$PWD/build-ab-$k/libkdtree_kernels_c.so"); done
    echo "round $round: ours = ${order[0]} ($(cat "$AB/${order[0]}/COMMIT" 2>/dev/null || echo "?"))" | tee -a "$out/ab.txt"
    # shellcheck disable=SC2086  # bench_args: several words on purpose
    KDTREE_KERNELS_LIB="$PWD/build-ab-${order[0]}/libkdtree_kernels_c.so" \
      python3 bench/bench.py --peers none --quick --interleave --shapes "$shapes" "${compare[@]}" $bench_args \
              --commit "$(cat "$AB/${order[0]}/COMMIT" 2>/dev/null || echo "${order[0]}")" \
              > "$log" 2>&1 || true
    { echo "=============== round $round ==============="; cat "$log"; } >> "$out/bench.log"
    grep -E '^\[S[0-9]+\]' "$log" | tee -a "$out/ab.txt" ||
      echo "  no result (bench.py failed: round $round in $out/bench.log)" | tee -a "$out/ab.txt"
  done
  rm -f "$log"
  python3 scripts/ab_summary.py "$out/ab.txt" --base "${names[0]}" | tee "$out/ab_summary.txt" || true
}

case ${1:-} in
  export) shift; export_trees "$@" ;;
  build | run) run_trees "$@" ;;
  *) usage ;;
esac
