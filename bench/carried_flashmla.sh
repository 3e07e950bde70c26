#!/usr/bin/env bash
# FlashMLA for the benchmark's flashmla peer, from what a device call carries
# in .flashmla/ (ignored): the package bench/build_flashmla.sh built on an
# earlier call (.flashmla/flash_mla_pkg.tgz, unpacked), else a FlashMLA source
# tarball (.flashmla/FlashMLA-*.tar.gz, built: ~1.5 min on 16 cores).
#
#   bash bench/carried_flashmla.sh <output dir> <build log>
#   python3 bench/bench.py --site <output dir> ...
#
# Prints one line saying where the peer comes from (or why it does not run)
# and exits 0 when <output dir>/flash_mla/cuda.so is there. Used by
# scripts/gpu_check.sh and bench/probes/run_ncu_vs_flashmla.sh.
set -uo pipefail
[ $# = 2 ] || { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 2; }
dir=$(realpath -m "$1") log=$(realpath -m "$2")
cd "$(dirname "$0")/.." || exit 2
rm -rf "$dir"  # (none left from an earlier call on a warm machine)
note="flashmla: none carried in .flashmla/ (bench/build_flashmla.sh): the peer does not run"
if [ -f .flashmla/flash_mla_pkg.tgz ]; then
  mkdir -p "$dir" && tar -xzf .flashmla/flash_mla_pkg.tgz -C "$dir"
  note="flashmla: .flashmla/flash_mla_pkg.tgz did not unpack to $dir/flash_mla"
elif compgen -G ".flashmla/FlashMLA-*.tar.gz" >/dev/null; then
  bash bench/build_flashmla.sh "$(ls .flashmla/FlashMLA-*.tar.gz | tail -1)" "$dir" > "$log" 2>&1
  note="flashmla: bench/build_flashmla.sh failed ($(basename "$log"))"
fi
if [ -f "$dir/flash_mla/cuda.so" ]; then
  echo "flashmla: $dir/flash_mla (from .flashmla/, bench/build_flashmla.sh)"
  exit 0
fi
echo "$note"
exit 1
