# Sourced by the probes that run on the GPU machine: build_sm90_lib builds
# the library alone for sm_90 (no tests, tools or examples) in BUILD_DIR and
# exports KDTREE_KERNELS_LIB for bench/ to load; on a failed build it prints
# the log's tail and exits.
#
#   . bench/probes/build_sm90_lib.sh
#   build_sm90_lib PROBE BUILD_DIR LOG [cmake -D options...]
build_sm90_lib() {
  local probe=$1 dir=$2 log=$3
  shift 3
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKDTREE_CUDA_ARCHITECTURES=90 "$@" \
    -DKDTREE_BUILD_TESTS=OFF -DKDTREE_BUILD_TOOLS=OFF -DKDTREE_BUILD_EXAMPLES=OFF > "$log" 2>&1 &&
    cmake --build "$dir" -j"$(nproc)" --target kdtree_kernels_c >> "$log" 2>&1 ||
    { echo "$probe: build failed"; tail -20 "$log"; exit 1; }
  export KDTREE_KERNELS_LIB=$PWD/$dir/libkdtree_kernels_c.so
}
