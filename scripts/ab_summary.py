#!/usr/bin/env python3
"""Summarizes the ab.txt that `scripts/ab_bench.sh run` writes.

For each shape and version it prints:
- the mean time over the rounds;
- the change of that mean against the baseline (the first version named in the run);
- the change position by position: the version's time when it was timed k-th against the
  baseline's time when the baseline was timed k-th.

Within a round, the version timed first reads up to ~5% faster (docs/perf_notes.md, session 13).
So only comparisons at the same position, or means over a full rotation (as many rounds as
versions), say anything.

    scripts/ab_summary.py ab.txt [--base NAME]

Python 3 standard library only (it runs on the lent GPU machine after the timing and in CI's
tests).
"""

import argparse
import re
import sys
from collections import defaultdict
from typing import Dict, List, Optional, TextIO, Tuple

ROUND = re.compile(r"^round \d+: ours = (\S+)")
SHAPE = re.compile(r"^\[(S\d+)\].*?; ours ([0-9.]+) ms(.*)$")
OTHER = re.compile(r"; (\S+) ([0-9.]+) ms")

# times[shape][version] = [(position, ms), ...] in round order
Times = Dict[str, Dict[str, List[Tuple[int, float]]]]


def parse(lines) -> Tuple[Times, List[str], List[str]]:
    """The times per shape and version, the versions in the order the first round timed them,
    and every line that reported a failed check."""
    times: Times = defaultdict(lambda: defaultdict(list))
    order: List[str] = []
    failures: List[str] = []
    first: Optional[str] = None
    for line in lines:
        line = line.rstrip("\n")
        m = ROUND.match(line)
        if m:
            first = m.group(1)
            continue
        m = SHAPE.match(line)
        if not m or first is None:
            continue
        if "FAIL" in line:
            failures.append(line)
        shape, rest = m.group(1), m.group(3)
        timed = [(first, float(m.group(2)))] + [(n, float(t)) for n, t in OTHER.findall(rest)]
        for position, (name, ms) in enumerate(timed):
            times[shape][name].append((position, ms))
            if name not in order:
                order.append(name)
    return times, order, failures


def pct(a: float, b: float) -> str:
    return f"{(a / b - 1) * 100:+.1f}%"


def summarize(times: Times, order: List[str], base: str, out: TextIO) -> None:
    for shape in sorted(times, key=lambda s: int(s[1:])):
        per = times[shape]
        if base not in per:
            continue
        base_mean = sum(ms for _, ms in per[base]) / len(per[base])
        base_at = dict(per[base])  # position -> ms (the last round at that position)
        for name in [base] + [n for n in order if n != base]:
            if name not in per:
                continue
            runs = per[name]
            mean = sum(ms for _, ms in runs) / len(runs)
            if name == base:
                out.write(f"{shape:4} {name:12} {mean:8.4f} ms  (base, {len(runs)} rounds)\n")
                continue
            positions = " ".join(
                f"{pos + 1}:{pct(ms, base_at[pos])}" if pos in base_at else f"{pos + 1}:-"
                for pos, ms in sorted(runs))
            out.write(f"{shape:4} {name:12} {mean:8.4f} ms  {pct(mean, base_mean):>7}  "
                      f"by position {positions}\n")


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("ab_txt", help="the ab.txt of an ab_bench.sh run")
    ap.add_argument("--base", help="the version the others are compared with (default: the first named)")
    args = ap.parse_args(argv)
    with open(args.ab_txt) as f:
        times, order, failures = parse(f)
    if not order:
        print(f"ab_summary: no timings in {args.ab_txt}", file=sys.stderr)
        return 1
    base = args.base or order[0]
    if base not in order:
        print(f"ab_summary: no version '{base}' in {args.ab_txt} (versions: {', '.join(order)})", file=sys.stderr)
        return 2
    summarize(times, order, base, sys.stdout)
    for line in failures:
        print(f"FAILED CHECK: {line}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
