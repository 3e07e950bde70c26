#!/usr/bin/env bash
# One command on a fresh Debian machine with the CUDA toolkit (nvcc): install
# what the build and tests need (when root), configure a Release build in
# build/, build it in parallel and run kdtree-info.
#   KDTREE_CUDA_ARCHITECTURES="90"   build only these SMs (default 80;86;89;90;120)
#   BUILD_DIR=build                  where to build
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
missing=()

need_apt=()
command -v cmake >/dev/null || need_apt+=(cmake)
command -v g++ >/dev/null || need_apt+=(g++)
command -v pkg-config >/dev/null || need_apt+=(pkg-config)
command -v ninja >/dev/null || need_apt+=(ninja-build)
command -v abidiff >/dev/null || need_apt+=(abigail-tools)
[ -f /usr/include/cmocka.h ] || need_apt+=(libcmocka-dev)
command -v python3 >/dev/null || need_apt+=(python3 python3-pip)
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "installing: ${need_apt[*]}"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" \
      || missing+=("${need_apt[@]}")
  else
    missing+=("${need_apt[@]}")
  fi
fi
if command -v python3 >/dev/null && ! python3 -c 'import numpy, pytest' 2>/dev/null; then
  python3 -m pip install -q numpy pytest 2>/dev/null \
    || python3 -m pip install -q --break-system-packages numpy pytest 2>/dev/null \
    || missing+=("python3: numpy pytest")
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "could not install: ${missing[*]} (the build goes on; tests that need them will not run)"
fi

NVCC=${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
if [ ! -x "$NVCC" ]; then
  echo "nvcc not found (install the CUDA toolkit, or set CUDACXX)"; exit 1
fi
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
arch_args=()
[ -n "${KDTREE_CUDA_ARCHITECTURES:-}" ] && arch_args=(-DKDTREE_CUDA_ARCHITECTURES="$KDTREE_CUDA_ARCHITECTURES")
# The cmocka tests only where cmocka is (configuring fails without it);
# scripts/test.sh fails when they were left out.
unit_tests=ON
[ -f /usr/include/cmocka.h ] || unit_tests=OFF
if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
  cmake -S . -B "$BUILD_DIR" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_CUDA_COMPILER="$NVCC" -DKDTREE_BUILD_UNIT_TESTS=$unit_tests "${arch_args[@]}"
elif [ ${#arch_args[@]} -gt 0 ] || ! grep -q "^KDTREE_BUILD_UNIT_TESTS:BOOL=$unit_tests\$" "$BUILD_DIR/CMakeCache.txt"; then
  cmake -S . -B "$BUILD_DIR" -DKDTREE_BUILD_UNIT_TESTS=$unit_tests "${arch_args[@]}"
fi
cmake --build "$BUILD_DIR" -j"$(nproc)"
"$BUILD_DIR/kdtree-info"
