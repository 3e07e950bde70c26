#!/usr/bin/env bash
# The library's host code under AddressSanitizer + UndefinedBehaviorSanitizer:
# configures a second build dir with -DKDTREE_SANITIZE=address,undefined (one
# SM, no GPU tests, tools or examples), builds it and runs the CPU tests that
# link the library natively: cmocka (tests/unit), the ABI pins that run code
# (layout, dlopen, symbols, header, no_cuda_deps) and the fuzz seed-corpus
# replay (tests/fuzz). Left out, because a sanitized .so cannot be loaded by
# an uninstrumented host process: python (ctypes in the system python),
# rust (cargo test binaries), install.consumer, and abi.abidiff (its baseline
# is the gcc Release build's DWARF). Also left out: abi.kernel_resources
# (device code only, no host code runs). unit.test_planner runs with its 4M-slot
# timing bound raised from 1 s to 30 s (about 2 s under ASan).
# clang is preferred (it also builds the libFuzzer binary, fuzz_entry_points);
# gcc works too (then the .cu host code is instrumented as well).
#   SANITIZE_BUILD_DIR=build-sanitize   where to build
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${SANITIZE_BUILD_DIR:-build-sanitize}
start=$(date +%s)

compilers=()
if command -v clang++ >/dev/null && command -v clang >/dev/null; then
  compilers=(-DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++)
fi
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
  cmake -S . -B "$BUILD_DIR" "${generator[@]}" "${compilers[@]}" -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_C_FLAGS=-g -DCMAKE_CXX_FLAGS=-g -DKDTREE_SANITIZE=address,undefined \
        -DKDTREE_CUDA_ARCHITECTURES="${KDTREE_SANITIZE_ARCH:-90}" -DKDTREE_BUILD_GPU_TESTS=OFF \
        -DKDTREE_BUILD_TOOLS=OFF -DKDTREE_BUILD_EXAMPLES=OFF -DCMAKE_CUDA_COMPILER="${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
fi
cmake --build "$BUILD_DIR" -j"$(nproc)"

# Any report fails the test: halt on the first UBSan finding, abort on ASan's.
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
KDTREE_PLANNER_TIME_BOUND_S=30 ctest --test-dir "$BUILD_DIR" -L cpu -E '^(python\.|rust\.|install\.|abi\.abidiff$|abi\.kernel_resources$)' \
      --output-on-failure -j"$(nproc)"
echo "scripts/sanitize_host.sh: $(( $(date +%s) - start )) s"
