#!/usr/bin/env python3
"""Kernel durations from `ncu --metrics gpu__time_duration.sum --csv` (the
default details page: one row per kernel launch), one file per prefix of a
tile_sweep.py --peer flashmla run under a locked clock
(run_tile_sweep_locked.sh): the median duration of each kernel, a call's time
as the sum of its kernels' medians (ours: the split kernel and the merge;
FlashMLA: its main kernel and its combine, the metadata kernel apart since it
runs once per peer), and each side's line fixed + per_tile x tiles. Each
file's tile counts are those tile_sweep.py printed into it (its prefix line).

    python3 bench/probes/ncu_durations.py CSV [...]
    python3 bench/probes/ncu_durations.py --plain CSV [...]   (each file's medians alone:
        run_ncu_durations.sh's versions of one shape, no tile lines, no fit)
    python3 bench/probes/ncu_durations.py --kernel-regex   (ncu -k's filter for those kernels)
"""

import argparse
import csv
import os
import re
import statistics
import sys
from typing import Dict, List, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from tile_sweep import fit  # noqa: E402

# Kernel name fragment -> (side, part); the first match names a launch.
KERNELS = (
    ("pingpong_kernel", ("ours", "split kernel")),
    ("verify_paged_sm90a_kernel", ("ours", "split kernel")),
    ("split_merge_kernel", ("ours", "merge")),
    ("splitkv_mla_kernel", ("flashmla", "main")),
    ("mla_combine_kernel", ("flashmla", "combine")),
    ("mla_metadata_kernel", ("flashmla", "metadata")),
)
PER_CALL = {"ours": ("split kernel", "merge"), "flashmla": ("main", "combine")}
# tile_sweep.py --peer's line for one prefix: our tiles per block, its per CTA.
TILES_LINE = re.compile(r"prefix\s+\d+:\s+(\d+) tiles per block.*?([\d.]+) tiles per CTA")


def tiles_of(path: str) -> Tuple[float, float]:
    """(our tiles per block, the peer's per CTA) from tile_sweep.py's line in the file."""
    with open(path) as f:
        for line in f:
            m = TILES_LINE.search(line)
            if m:
                return float(m.group(1)), float(m.group(2))
    raise ValueError(f"{path}: no tile_sweep.py --peer line (prefix ...: N tiles per block ... M tiles per CTA)")


def kernel_regex() -> str:
    """ncu's --kernel-name filter (regex:...) for the kernels KERNELS names."""
    return "regex:" + "|".join(fragment for fragment, _ in KERNELS)


def kernel_of(name: str):
    for fragment, key in KERNELS:
        if fragment in name:
            return key
    return None


def durations_us(path: str) -> Dict[Tuple[str, str], float]:
    """(side, part) -> the median of its launches' gpu__time_duration, in us."""
    launches: Dict[Tuple[str, str], List[float]] = {}
    with open(path, newline="") as f:
        rows = [r for r in csv.reader(f) if len(r) > 10]
    if not rows:
        return {}
    head = rows[0]
    name_at, metric_at, unit_at, value_at = (head.index(k) for k in
                                             ("Kernel Name", "Metric Name", "Metric Unit", "Metric Value"))
    scale = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}
    for row in rows[1:]:
        key = kernel_of(row[name_at])
        if key is None or row[metric_at] != "gpu__time_duration.sum":
            continue
        launches.setdefault(key, []).append(float(row[value_at].replace(",", "")) * scale[row[unit_at]])
    return {key: statistics.median(v) for key, v in launches.items()}


def per_call_us(medians: Dict[Tuple[str, str], float], side: str) -> float:
    """A call's time: the sum of its kernels' medians (0 for a kernel it did not run)."""
    return sum(medians.get((side, part), 0.0) for part in PER_CALL[side])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*",
                    help="ncu's CSV of one tile_sweep.py --peer prefix (with --plain: of any verify run)")
    ap.add_argument("--kernel-regex", action="store_true", help="print ncu -k's filter for the kernels read, and exit")
    ap.add_argument("--plain", action="store_true", help="each file's kernel medians and call time, no tiles or fit")
    args = ap.parse_args(argv)
    if args.kernel_regex:
        print(kernel_regex())
        return 0
    if not args.files:
        ap.error("no CSV files")
    if args.plain:
        for path in args.files:
            medians = durations_us(path)
            parts = ", ".join(f"{part} {us:.2f}" for (side, part), us in sorted(medians.items()) if side == "ours")
            print(f"{os.path.basename(path)}: {parts}; per call {per_call_us(medians, 'ours'):.2f} us")
        return 0
    points = {"ours": [], "flashmla": []}
    for path in args.files:
        ours_tiles, peer_tiles = tiles_of(path)
        medians = durations_us(path)
        parts = ", ".join(f"{side} {part} {us:.1f}" for (side, part), us in sorted(medians.items()))
        print(f"{f'{ours_tiles:g}:{peer_tiles:g}':>14}: {parts}")
        for side, x in (("ours", ours_tiles), ("flashmla", peer_tiles)):
            if any(s == side for s, _ in medians):
                points[side].append((x, per_call_us(medians, side)))
    for side, pts in points.items():
        if len(pts) >= 2:
            fixed, per_tile, worst = fit([p[0] for p in pts], [p[1] for p in pts])
            print(f"{side} per call: {fixed:.1f} us fixed + {per_tile:.3f} us per tile "
                  f"(largest residual {worst:.1f} us)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
