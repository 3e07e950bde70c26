#!/usr/bin/env bash
# One command for the whole suite: scripts/build_nvcc.sh (which installs missing
# build packages as root, builds $BUILD_DIR, default build/, incrementally, and runs
# kdtree-info), then ctest over everything in parallel. Without a GPU the `gpu`
# tests skip (exit 77) and everything else runs; without cmocka (so without the
# argument-validation and planner tests) it fails.
#   BUILD_DIR=dir                    build and test there instead of build/
#   KDTREE_CUDA_ARCHITECTURES="90"   build only these SMs (default: all five)
#   CTEST_ARGS="-L cpu"              extra ctest arguments
#   KDTREE_SANITIZE_HOST=1           then also scripts/sanitize_host.sh (host code
#                                    and CPU tests under ASan + UBSan; .ci/run sets it)
set -euo pipefail
cd "$(dirname "$0")/.."
export BUILD_DIR=${BUILD_DIR:-build}
start=$(date +%s)
scripts/build_nvcc.sh
ctest --test-dir "$BUILD_DIR" --output-on-failure -j"$(nproc)" ${CTEST_ARGS:-}
if grep -q "^KDTREE_BUILD_UNIT_TESTS:BOOL=OFF$" "$BUILD_DIR/CMakeCache.txt"; then
  echo "scripts/test.sh: tests/unit (argument validation, the planner) were not built: install libcmocka-dev"
  exit 1
fi
if [ "${KDTREE_SANITIZE_HOST:-0}" = 1 ]; then
  scripts/sanitize_host.sh
fi
echo "scripts/test.sh: $(( $(date +%s) - start )) s"
