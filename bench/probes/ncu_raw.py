#!/usr/bin/env python3
"""Nsight Compute's raw page (`ncu -i REPORT --csv --page raw`, one kernel launch
per file) side by side: the metrics named, then each file's largest warp-stall
reasons (warps per issue slot, WarpStateStats). Used by run_ncu_stalls.sh and
run_ncu_vs_flashmla.sh.

    python3 bench/probes/ncu_raw.py [--keys a,b,...] [--like REGEX] [--memory] NAME=CSV [NAME=CSV ...]
"""

import argparse
import csv
import re
import sys
from typing import Dict, List, Optional, Tuple

STALL_PREFIX, STALL_SUFFIX = "smsp__average_warps_issue_stalled_", "_per_issue_active.ratio"
DEFAULT_KEYS = ("gpu__time_duration.sum", "smsp__cycles_active.avg", "sm__cycles_elapsed.avg.per_second")
# --memory (the MemoryWorkloadAnalysis sections): DRAM bytes, sectors into the
# SMs, the SMs' request cycles, and L2's lookups by source (the SMs, the
# fabric between L2's two partitions) with their hits and misses.
_PCT = r"\.avg\.pct_of_peak_sustained_elapsed"
MEMORY_PATTERN = (r"^(dram__bytes_(read|write)\.sum|l1tex__m_xbar2l1tex_read_sectors_mem_lg_op_ld\.sum"
                  r"|l1tex__m_l1tex2xbar_req_cycles_active" + _PCT +
                  r"|lts__t_(requests|sectors)(_srcunit_(tex|ltcfabric))?(_lookup_(hit|miss))?\.sum"
                  r"|lts__t_sector_hit_rate\.pct|lts__(lts2xbar|xbar2lts)_cycles_active" + _PCT +
                  r"|lts__t_(sectors|tag_requests)" + _PCT + ")$")


def read_page(path: str) -> Dict[str, Tuple[str, str]]:
    """metric -> (value, unit) of the page's one launch; {} when it has none."""
    with open(path, newline="") as f:
        rows = [r for r in csv.reader(f) if len(r) > 10]
    if len(rows) < 3:
        return {}
    names, units, values = rows[0], rows[1], rows[2]  # (names, units, one launch)
    return {n: (v, u) for n, v, u in zip(names, values, units)}


def number(text: str) -> Optional[float]:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def stalls(page: Dict[str, Tuple[str, str]], top: int) -> List[Tuple[str, float]]:
    """The `top` largest stall reasons, (reason, warps per issue)."""
    found = [(name[len(STALL_PREFIX):-len(STALL_SUFFIX)], number(value))
             for name, (value, _) in page.items()
             if name.startswith(STALL_PREFIX) and name.endswith(STALL_SUFFIX)]
    return sorted(((r, v) for r, v in found if v is not None), key=lambda rv: -rv[1])[:top]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", default=",".join(DEFAULT_KEYS), help="comma list of metrics to print")
    ap.add_argument("--like", help="also every metric whose name matches this regex (e.g. '^lts__t_sectors_srcunit.*sum$')")
    ap.add_argument("--memory", action="store_true", help="also the memory metrics (MEMORY_PATTERN)")
    ap.add_argument("--top", type=int, default=10, help="stall reasons per file")
    ap.add_argument("pages", nargs="+", metavar="NAME=CSV")
    args = ap.parse_args(argv)
    named = [p.partition("=")[::2] if "=" in p else (p, p) for p in args.pages]
    pages = [(name, read_page(path)) for name, path in named]
    for name, page in pages:
        if not page:
            print(f"{name}: no ncu rows")
    pages = [(n, p) for n, p in pages if p]
    if not pages:
        return 0  # (a report: the probe goes on to its next version)
    print(f"{'metric':68s} " + " ".join(f"{n:>16s}" for n, _ in pages))
    keys = args.keys.split(",")
    for like in (args.like, MEMORY_PATTERN if args.memory else None):
        if not like:
            continue
        pattern = re.compile(like)
        keys += sorted({k for _, p in pages for k in p if pattern.search(k) and k not in keys})
    for key in keys:
        if not any(key in p for _, p in pages):
            continue  # (not on this page: another section collects it)
        units = next((p[key][1] for _, p in pages if key in p), "")
        print(f"{key:68s} " + " ".join(f"{p.get(key, ('-', ''))[0]:>16s}" for _, p in pages) + f"  {units}")
    for name, page in pages:
        print(f"stalls {name} (warps per issue): "
              + ", ".join(f"{r} {v:.2f}" for r, v in stalls(page, args.top)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
