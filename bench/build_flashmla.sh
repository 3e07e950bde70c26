#!/usr/bin/env bash
# Builds FlashMLA's dense sm_90a decode as an importable `flash_mla` package,
# for the benchmark's flashmla peer (bench/peers.py FlashMLAPeer), on the GPU
# machine (nvcc, torch and ninja there; no internet):
#
#   bash bench/build_flashmla.sh <FlashMLA source> <output dir>
#   python3 bench/bench.py --site <output dir> ...
#
# <FlashMLA source>: a checkout of github.com/deepseek-ai/FlashMLA with its
# csrc/cutlass submodule (git clone --recursive), or a .tar.gz of one, made
# where the internet is and carried to the GPU machine in .flashmla/ (ignored;
# bench/carried_flashmla.sh builds from .flashmla/FlashMLA-*.tar.gz, or unpacks
# a package built earlier, .flashmla/flash_mla_pkg.tgz = tar -czf of
# <output dir>/flash_mla):
#   tar -czf .flashmla/FlashMLA-<rev>.tar.gz -C <checkout> csrc flash_mla
# (csrc/cutlass's include/ and tools/util/include/ are all it needs of CUTLASS).
# Nothing of it is committed here. FlashMLA's setup.py also compiles its sparse and
# sm_100 kernels, which take far longer; this builds only what dense decode
# runs, with setup.py's nvcc flags and sm_90a only: the scheduler and combine
# kernels, the bf16 and fp16 decode kernels, and a binding of
# dense_attn_decode_interface as flash_mla.cuda.dense_decode_fwd (the one entry
# flash_mla_with_kvcache calls without indices). Output: <output
# dir>/flash_mla/ (FlashMLA's Python files and cuda.so), build log in
# <output dir>/build.log.
set -euo pipefail
[ $# = 2 ] || { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 2; }
out=$(mkdir -p "$2" && cd "$2" && pwd)
src=$1
if [ -f "$src" ]; then
  mkdir -p "$out/src" && tar -xzf "$src" -C "$out/src" && src=$out/src
fi
src=$(cd "$src" && pwd)
[ -f "$src/csrc/api/dense_decode.h" ] && [ -d "$src/csrc/cutlass/include/cute" ] ||
  { echo "$src: not a FlashMLA checkout with csrc/cutlass" >&2; exit 2; }

mkdir -p "$out/flash_mla" "$out/build"
cp "$src"/flash_mla/*.py "$out/flash_mla/"
cat > "$out/build/dense_decode_binding.cpp" <<'EOF'
// flash_mla.cuda with FlashMLA's dense decode entry only (bench/build_flashmla.sh).
#include <pybind11/pybind11.h>

#include "dense_decode.h"

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("dense_decode_fwd", &dense_attn_decode_interface); }
EOF
TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=${MAX_JOBS:-$(nproc)} python3 - "$src" "$out" > "$out/build.log" 2>&1 <<'EOF'
import sys
from pathlib import Path
from torch.utils.cpp_extension import CUDA_HOME, load

src, out = (Path(p) for p in sys.argv[1:])
csrc = src / "csrc"
# CUDA 13 keeps libcu++ (cuda/std/...), which CUTLASS includes from host code
# too, under include/cccl: nvcc finds it, the host compiler needs it named.
cccl = [str(Path(CUDA_HOME) / "include/cccl")] if (Path(CUDA_HOME) / "include/cccl").is_dir() else []
load(
    name="cuda",
    sources=[str(out / "build" / "dense_decode_binding.cpp"),
             str(csrc / "smxx/decode/get_decoding_sched_meta/get_decoding_sched_meta.cu"),
             str(csrc / "smxx/decode/combine/combine.cu"),
             str(csrc / "sm90/decode/dense/instantiations/bf16.cu"),
             str(csrc / "sm90/decode/dense/instantiations/fp16.cu")],
    extra_include_paths=[str(p) for p in (csrc / "api", csrc, csrc / "kerutils/include", csrc / "sm90",
                                          csrc / "cutlass/include", csrc / "cutlass/tools/util/include")] + cccl,
    extra_cflags=["-O3", "-std=c++20", "-DNDEBUG", "-Wno-deprecated-declarations"],
    extra_cuda_cflags=["-O3", "-std=c++20", "-DNDEBUG", "-D_USE_MATH_DEFINES", "-Wno-deprecated-declarations",
                       "-U__CUDA_NO_HALF_OPERATORS__", "-U__CUDA_NO_HALF_CONVERSIONS__",
                       "-U__CUDA_NO_HALF2_OPERATORS__", "-U__CUDA_NO_BFLOAT16_CONVERSIONS__",
                       "--expt-relaxed-constexpr", "--expt-extended-lambda", "--use_fast_math",
                       "--ptxas-options=-v,--register-usage-level=10", "-lineinfo"],
    build_directory=str(out / "build"),
    verbose=True,
)
EOF
cp "$out/build/cuda.so" "$out/flash_mla/cuda.so"
echo "built $out/flash_mla ($(du -h "$out/flash_mla/cuda.so" | cut -f1))"
