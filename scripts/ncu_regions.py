#!/usr/bin/env python3
"""Where a kernel's warp samples sit, by stretch of SASS: the per-instruction CSV that
`ncu -i REPORT --page source --csv --print-source sass` writes (gzipped or not), from a
report taken with `--section WarpStateStats --section SourceCounters`.

Each instruction is "once" when it ran at most --once-factor times the count of the
kernel's first instruction divided by --roles, the block's warpgroups (3 for the ping-pong
kernel, 2 for the single-warpgroup one): code a role's warps run once per block
(prologues, epilogues, the first tile before a loop). Every other executed instruction is
"loop". The report gives the split of all samples between the two, then every stretch of
once code (consecutive once instructions in address order, unexecuted ones skipped; an
unpredicated EXIT ends one) that holds at least --min-share of the samples: its first
address, its executed instructions, the 128-byte instruction-cache lines they span, its
samples, the stall reasons that dominate them and what it contains (HGMMA, LDGSTS, STG,
EXIT, SETMAXREG), so that a reader can tell the roles' prologues and epilogues apart.
Standard library only.

usage: ncu_regions.py CSV [CSV ...] [--roles 3] [--once-factor 2] [--min-share 0.005]
"""
import argparse
import collections
import csv
import gzip
import sys

MARKERS = ("HGMMA", "LDGSTS", "STG", "EXIT", "SETMAXREG")


def read_rows(path):
    """(header, rows) of the source page: the kernel-name line comes first, then the
    header, then one row per instruction."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", newline="") as f:
        lines = list(csv.reader(f))
    start = next(i for i, line in enumerate(lines) if "Address" in line and "Source" in line)
    return lines[start], lines[start + 1:]


def number(text):
    try:
        return float(text.replace(",", "")) if text else 0.0
    except ValueError:
        return 0.0


def analyse(header, rows, roles=3, once_factor=2.0):
    """Per instruction: address, source, executed, samples, stall counts; plus the
    once / loop classification and the stretches of once code."""
    col = {name: i for i, name in enumerate(header)}
    reasons = [h for h in header if h.startswith("stall_") and "Not Issued" not in h]
    insts = []
    for row in rows:
        if len(row) < len(header):
            continue
        insts.append({
            "address": int(row[col["Address"]], 16),
            "source": row[col["Source"]].strip(),
            "executed": number(row[col["Instructions Executed"]]),
            "samples": number(row[col["Warp Stall Sampling (All Samples)"]]),
            "stalls": {r[len("stall_"):]: number(row[col[r]]) for r in reasons},
        })
    # The kernel's first instruction runs on every warp of every block; a role's once
    # code on its own warps, 1 / roles of them.
    entry = next((i["executed"] for i in insts if i["executed"] > 0), 0.0)
    limit = once_factor * entry / roles
    for inst in insts:
        inst["kind"] = "none" if inst["executed"] == 0 else ("once" if inst["executed"] <= limit else "loop")
    stretches, current = [], None
    for inst in insts:
        if inst["kind"] == "once":
            if current is None:
                current = []
                stretches.append(current)
            current.append(inst)
            if inst["source"].startswith("EXIT"):
                current = None  # an unpredicated EXIT ends a role's code
        elif inst["kind"] == "loop":
            current = None  # unexecuted code (other branches) does not end a stretch
    return insts, stretches


def summarize(insts):
    total = collections.Counter()
    for inst in insts:
        total["samples"] += inst["samples"]
        total["executed"] += inst["executed"] > 0
        for reason, count in inst["stalls"].items():
            total[reason] += count
    return total


def top_reasons(total, n=3):
    reasons = sorted(((v, k) for k, v in total.items() if k not in ("samples", "executed")), reverse=True)
    return ", ".join(f"{k} {v:.0f}" for v, k in reasons[:n] if v > 0)


def report(path, roles, once_factor, min_share, out=None):
    out = out or sys.stdout
    header, rows = read_rows(path)
    insts, stretches = analyse(header, rows, roles, once_factor)
    all_samples = sum(i["samples"] for i in insts) or 1.0
    print(f"{path}: {len(insts)} instructions, {all_samples:.0f} samples", file=out)
    for kind in ("once", "loop"):
        total = summarize([i for i in insts if i["kind"] == kind])
        print(f"  {kind}: {total['executed']} executed instructions, {total['samples']:.0f} samples "
              f"({100 * total['samples'] / all_samples:.1f}%): {top_reasons(total)}", file=out)
    for stretch in stretches:
        total = summarize(stretch)
        if total["samples"] < min_share * all_samples:
            continue
        lines = {i["address"] // 128 for i in stretch}
        marks = sorted({m for i in stretch for m in MARKERS if m in i["source"]})
        print(f"  once from {stretch[0]['address']:#x}: {len(stretch)} instructions, {len(lines)} lines, "
              f"{total['samples']:.0f} samples ({100 * total['samples'] / all_samples:.1f}%): "
              f"{top_reasons(total)}{' [' + ' '.join(marks) + ']' if marks else ''}", file=out)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("csv", nargs="+")
    parser.add_argument("--roles", type=int, default=3)
    parser.add_argument("--once-factor", type=float, default=2.0)
    parser.add_argument("--min-share", type=float, default=0.005)
    args = parser.parse_args(argv)
    for path in args.csv:
        report(path, args.roles, args.once_factor, args.min_share)
    return 0


if __name__ == "__main__":
    sys.exit(main())
