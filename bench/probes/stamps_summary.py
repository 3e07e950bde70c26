"""Per-block phases of an sm_90a verify kernel from a stamps build's STAMP lines
(-DKDTREE_SM90A_STAMPS=ON; src/verify/verify_paged_sm90a_stamps.cuh names the 32
points by number). Each line is one block: %globaltimer at its entry (0) and at
warpgroup 0's end (9), %clock64 at its entry (8) and at every other point. The
SM clock's rate comes from each block's two pairs; every point is printed as the
median, min and max over the blocks of the microseconds since the block's entry.

    python3 bench/probes/stamps_summary.py LOG [--tiles N] [--kernel single|merge|pairs] [--by-arrival K]
(--tiles: the blocks' tiles, for warpgroup 0's loop time per tile; --by-arrival:
the ping-pong's blocks ranked by when warpgroup 0 passes the row sums' barrier,
in K groups, with its epilogue's time after that barrier: the same code runs
slower in the blocks that get there first, docs/perf_notes.md session 28; --kernel
single: the single-warpgroup kernel's points, verify_paged_sm90a.cu, which
records a subset of the numbers with its own meaning; --kernel merge: the split
merge's MSTAMP lines, verify_paged_merge.cu, and, when the log also has the
same call's STAMP lines, its blocks' entry, wait and end after the verify
kernel's last block end; --kernel pairs: the ping-pong's PSTAMP lines, one
steady pair k and the next pair's waits and copies, in clocks after warpgroup
0's QK of pair k is done, and per stage half the path from its free to the
wait for its refill)
"""

import argparse
import statistics
import sys
from typing import Dict, List, Optional, Sequence

# Point numbers (verify_paged_sm90a_stamps.cuh) and what the report calls them.
NUM_POINTS = 32  # verify_paged_sm90a_stamps.cuh's kPoints
ENTRY_GLOBAL, ENTRY_CLOCK, WG0_END_GLOBAL = 0, 8, 9
POINTS = [
    (10, "prologue: request loaded"),
    (11, "block barrier passed"),
    (25, "wg0: setmaxnreg done"),
    (24, "gather: setmaxnreg done"),
    (12, "gather: its role begun (view in hand)"),
    (13, "gather: pair 0's rows computed"),
    (1, "gather: pair 0, copy 1 issued"),
    (16, "gather: pair 0, copy 2 issued"),
    (17, "gather: pair 0, copy 3 issued"),
    (18, "gather: pair 0, copy 4 issued"),
    (26, "wg0: Q in shared memory"),
    (27, "wg0: at its first half's wait"),
    (28, "wg1: at its first half's wait"),
    (2, "wg0: first half landed"),
    (14, "wg1: first half landed"),
    (22, "wg0: pair 0's maxima handed to wg1"),
    (23, "wg1: pair 0's scores done (wg0's maxima next)"),
    (15, "wg0: pair 0's maxima from wg1"),
    (19, "gather: pair 1, copy 1 issued"),
    (20, "gather: pair 1, copy 2's half free"),
    (21, "gather: pair 1, copy 2 issued"),
    (3, "wg0: loop end"),
    (5, "wg1: loop end"),
    (7, "gather: end"),
    (29, "wg0: past allow_dependent_launch"),
    (30, "wg0: past the row sums' barrier"),
    (31, "wg1: past the row sums' barrier"),
    (4, "wg0: epilogue end"),
    (6, "wg1: epilogue end"),
]
# The single-warpgroup kernel's points (--kernel single): both warpgroups
# share its barriers, so one loop end and one first tile stand for both.
SINGLE_POINTS = [
    (10, "request loaded"),
    (11, "first block barrier passed (slot entries zeroed)"),
    (26, "tiles 0 and 1's slot ids landed (second barrier)"),
    (1, "gather: tile 0's rows issued"),
    (2, "tile 0 landed (the loop's first barrier)"),
    (3, "loop end"),
    (29, "past allow_dependent_launch"),
    (4, "wg0: epilogue end"),
    (6, "wg1: epilogue end"),
]
# The split merge's points (--kernel merge; thread 0 of each block): its entry
# and end in the slots of the verify kernels' (0, 8; 4, 9).
MERGE_POINTS = [
    (10, "request loaded"),
    (11, "past the wait for the split kernel"),
    (14, "thread 0's splits summed"),
    (15, "split parts added"),
    (4, "stores issued (end)"),
]
# The ping-pong's steady-pair points (--kernel pairs; the PairPoint numbers of
# verify_paged_sm90a_stamps.cuh), in clocks after PAIR_ORIGIN.
PAIR_POINTS = [
    (0, "wg0: QK of pair k done"),
    (2, "wg0: maxima handed over (kMaxA)"),
    (1, "wg1: QK of pair k done"),
    (3, "wg1: past kMaxA"),
    (4, "wg1: maxima handed over (kMaxB)"),
    (5, "wg0: past kMaxB"),
    (6, "wg0: P handed over (kP0)"),
    (7, "wg0: own P V done, frees stage 0 low"),
    (8, "wg1: P handed over (kP1)"),
    (9, "wg1: past kP0"),
    (10, "wg0: past kP1"),
    (11, "wg1: own P V done, frees stage 1 high"),
    (12, "wg1: other P V done, frees stage 0 high"),
    (21, "wg0: other P V done, frees stage 1 low"),
    (13, "gather: past stage 0 low's free"),
    (14, "gather: stage 0 low's copies issued"),
    (15, "gather: past stage 1 high's free"),
    (16, "gather: stage 1 high's copies issued"),
    (17, "gather: past stage 0 high's free"),
    (18, "gather: stage 0 high's copies issued"),
    (19, "gather: past stage 1 low's free"),
    (20, "gather: stage 1 low's copies issued"),
    (22, "wg0: at pair k+1's stage 0 low wait"),
    (23, "wg0: past pair k+1's stage 0 low wait"),
    (24, "wg0: at pair k+1's stage 0 high wait"),
    (25, "wg0: past pair k+1's stage 0 high wait"),
    (26, "wg1: at pair k+1's stage 1 high wait"),
    (27, "wg1: past pair k+1's stage 1 high wait"),
    (28, "wg1: at pair k+1's stage 1 low wait"),
    (29, "wg1: past pair k+1's stage 1 low wait"),
]
PAIR_ORIGIN = 0
# Per stage half: its free, the gather past that free, its copies issued, the
# refill's reader at its wait, and past that wait (PairPoint numbers).
PAIR_HALVES = [
    ("stage 0 low (wg0's first)", 7, 13, 14, 22, 23),
    ("stage 1 high (wg1's first)", 11, 15, 16, 26, 27),
    ("stage 0 high (wg0's second)", 12, 17, 18, 24, 25),
    ("stage 1 low (wg1's second)", 21, 19, 20, 28, 29),
]

WG0_LOOP_END, WG0_EPILOGUE_END, WG1_LOOP_END, WG1_EPILOGUE_END, GATHER_END = 3, 4, 5, 6, 7
WG0_FIRST_HALF = 2
WG0_SUMS_PASSED = 30
MERGE_WAITED = 11


def parse(lines: Sequence[str], tag: str = "STAMP") -> List[List[int]]:
    """The NUM_POINTS values of every `tag` line (STAMP: a verify kernel's, MSTAMP: the merge's)."""
    rows = []
    for line in lines:
        if line.startswith(tag + " "):
            values = [int(v) for v in line.split()[2:]]
            if len(values) != NUM_POINTS:
                raise ValueError(f"a STAMP line with {len(values)} values, not {NUM_POINTS}: {line.strip()}")
            rows.append(values)
    return rows


def clock_us(rows: List[List[int]]):
    """The SM clock's rate (GHz: each block's clocks over its global-timer nanoseconds, entry
    to end) and the function that turns clocks into microseconds at that rate."""
    ghz = statistics.median((r[WG0_EPILOGUE_END] - r[ENTRY_CLOCK]) / max(r[WG0_END_GLOBAL] - r[ENTRY_GLOBAL], 1)
                            for r in rows)
    return ghz, lambda clocks: clocks / ghz / 1e3


def stats(values: List[float]) -> List[float]:
    return [statistics.median(values), min(values), max(values)]


def since_entry(rows: List[List[int]], points, us) -> Dict[str, Optional[List[float]]]:
    """Each block's entry after the first block's, then each named point after the block's own
    entry. A value before its block's entry is an earlier launch's (a point this launch's path
    does not pass, e.g. the merge's parts with one part) and is left out; a point no block
    recorded maps to None."""
    t0 = min(r[ENTRY_GLOBAL] for r in rows)
    out: Dict[str, Optional[List[float]]] = {
        "entry after the first block's": stats([(r[ENTRY_GLOBAL] - t0) / 1e3 for r in rows])}
    for point, name in points:
        values = [us(r[point] - r[ENTRY_CLOCK]) for r in rows if r[point] >= r[ENTRY_CLOCK]]
        out[name] = stats(values) if values else None
    return out


def summarize_merge(rows: List[List[int]], verify_rows: Sequence[List[int]] = ()) -> Dict[str, object]:
    """The merge's blocks (those that reached their end): clock rate, per point [median, min, max]
    in us since entry, and with the same call's verify rows, entry / wait / end in us after the
    verify kernel's last warpgroup-0 end (global timer)."""
    # Blocks past a request's rows return at once: their end stamps are missing
    # or a previous launch's (before this entry by the global timer).
    rows = [r for r in rows if r[WG0_END_GLOBAL] > r[ENTRY_GLOBAL]]
    ghz, us = clock_us(rows)
    t0 = min(r[ENTRY_GLOBAL] for r in rows)
    out = {"blocks": len(rows), "ghz": ghz, "span_us": (max(r[WG0_END_GLOBAL] for r in rows) - t0) / 1e3,
           "points": since_entry(rows, MERGE_POINTS, us)}
    if verify_rows:
        verify_end = max(r[WG0_END_GLOBAL] for r in verify_rows)
        out["after_verify"] = {
            "entry": stats([(r[ENTRY_GLOBAL] - verify_end) / 1e3 for r in rows]),
            "past the wait": stats([(r[ENTRY_GLOBAL] - verify_end) / 1e3 + us(r[MERGE_WAITED] - r[ENTRY_CLOCK])
                                    for r in rows]),
            "end": stats([(r[WG0_END_GLOBAL] - verify_end) / 1e3 for r in rows]),
        }
    return out


def summarize(rows: List[List[int]], tiles: int = 0, kernel: str = "pingpong") -> Dict[str, object]:
    """Clock rate (GHz), kernel span (us), and per point [median, min, max] in us since entry."""
    ghz, us = clock_us(rows)
    t0 = min(r[ENTRY_GLOBAL] for r in rows)
    ends = [(r[ENTRY_GLOBAL] - t0) / 1e3 + us(max(r[WG0_EPILOGUE_END], r[WG1_EPILOGUE_END], r[GATHER_END])
                                                - r[ENTRY_CLOCK]) for r in rows]
    single = kernel == "single"
    points = since_entry(rows, SINGLE_POINTS if single else POINTS, us)
    points["wg0: epilogue (from its loop end)"] = stats([us(r[WG0_EPILOGUE_END] - r[WG0_LOOP_END]) for r in rows])
    wg1_loop_end = WG0_LOOP_END if single else WG1_LOOP_END
    points["wg1: epilogue (from its loop end)"] = stats([us(r[WG1_EPILOGUE_END] - r[wg1_loop_end]) for r in rows])
    out = {"blocks": len(rows), "ghz": ghz, "span_us": max(ends), "points": points}
    if tiles:
        out["loop_us_per_tile"] = statistics.median(us(r[WG0_LOOP_END] - r[WG0_FIRST_HALF]) / tiles for r in rows)
    return out


def epilogue_by_arrival(rows: List[List[int]], groups: int = 5) -> List[tuple]:
    """Warpgroup 0's epilogue after the row sums' barrier (us, to its stores issued) of the blocks
    ranked by when they pass that barrier (us after the first block's entry), in `groups` groups
    of equal size: [(first arrival, last arrival, [median, min, max])]."""
    _, us = clock_us(rows)
    t0 = min(r[ENTRY_GLOBAL] for r in rows)
    ranked = sorted(((r[ENTRY_GLOBAL] - t0) / 1e3 + us(r[WG0_SUMS_PASSED] - r[ENTRY_CLOCK]),
                     us(r[WG0_EPILOGUE_END] - r[WG0_SUMS_PASSED])) for r in rows if r[WG0_SUMS_PASSED] >= r[ENTRY_CLOCK])
    n = len(ranked)
    parts = [ranked[g * n // groups:(g + 1) * n // groups] for g in range(groups)]
    return [(part[0][0], part[-1][0], stats([e for _, e in part])) for part in parts if part]


def summarize_pairs(rows: List[List[int]], pair_rows: List[List[int]]) -> Dict[str, object]:
    """The blocks that recorded every pair point in this launch (each value at or after the
    block's entry clock, from its STAMP row): per point [median, min, max] in clocks after
    PAIR_ORIGIN, and per stage half the medians of free -> gather past it -> copies issued,
    free -> the reader at its wait, and that wait."""
    used = [(r, p) for r, p in zip(rows, pair_rows)
            if all(p[point] >= r[ENTRY_CLOCK] for point, _ in PAIR_POINTS)]
    out: Dict[str, object] = {"blocks": len(used), "points": {}, "halves": []}
    if not used:
        return out
    for point, name in PAIR_POINTS:
        out["points"][name] = stats([p[point] - p[PAIR_ORIGIN] for _, p in used])

    def med(a: int, b: int) -> float:  # median clocks from point a to point b
        return statistics.median(p[b] - p[a] for _, p in used)

    for name, free, woke, issued, at, past in PAIR_HALVES:
        out["halves"].append((name, med(free, woke), med(woke, issued), med(free, at), med(at, past),
                              med(free, past)))
    return out


def print_points(points: Dict[str, Optional[List[float]]], prefix: str = "") -> None:
    for name, values in points.items():
        if values is None:
            print(f"  {prefix + name:42s} not recorded in this launch")
            continue
        med, lo, hi = values
        print(f"  {prefix + name:42s} median {med:7.2f}  min {lo:7.2f}  max {hi:7.2f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("log")
    ap.add_argument("--tiles", type=int, default=0)
    ap.add_argument("--kernel", choices=["pingpong", "single", "merge", "pairs"], default="pingpong")
    ap.add_argument("--by-arrival", type=int, default=0, metavar="K",
                    help="the ping-pong's epilogue after the row sums' barrier by arrival, in K groups")
    args = ap.parse_args()
    with open(args.log) as f:
        lines = f.readlines()
    if args.kernel == "merge":
        return print_merge(args.log, parse(lines, "MSTAMP"), parse(lines))
    rows = parse(lines)
    if not rows:
        print(f"{args.log}: no STAMP lines (a build with -DKDTREE_SM90A_STAMPS=ON and KDTREE_PROBE_STAMPS=n?)")
        return 1
    if args.kernel == "pairs":
        return print_pairs(args.log, rows, parse(lines, "PSTAMP"))
    s = summarize(rows, args.tiles, args.kernel)
    print(f"{s['blocks']} blocks, SM clock {s['ghz']:.3f} GHz; kernel span (first entry to last block's end) "
          f"{s['span_us']:.1f} us; us after each block's entry:")
    print_points(s["points"])
    if args.tiles:
        print(f"  wg0's loop per tile ({args.tiles} tiles, from its first half) {s['loop_us_per_tile']:.3f}")
    if args.by_arrival and args.kernel == "pingpong":
        print("  wg0's epilogue after the row sums' barrier, blocks by when they pass it:")
        for first, last, (med, lo, hi) in epilogue_by_arrival(rows, args.by_arrival):
            print(f"    arriving {first:7.2f}-{last:7.2f} us: median {med:6.2f}  min {lo:6.2f}  max {hi:6.2f}")
    return 0


def print_pairs(log: str, rows: List[List[int]], pair_rows: List[List[int]]) -> int:
    s = summarize_pairs(rows, pair_rows)
    if not s["blocks"]:
        print(f"{log}: no block recorded every pair point (the ping-pong kernel, blocks of at least "
              "2 (k + 2) tiles?)")
        return 1
    print(f"steady pair: {s['blocks']} blocks; clocks after warpgroup 0's QK of pair k is done:")
    for name, (med, lo, hi) in sorted(s["points"].items(), key=lambda item: item[1][0]):
        print(f"  {name:46s} median {med:7.0f}  min {lo:7.0f}  max {hi:7.0f}")
    print("  per stage half, medians in clocks: free -> gather past it, -> copies issued; "
          "free -> reader at its wait; the wait; free -> past it")
    for name, woke, issue, slack, wait, total in s["halves"]:
        print(f"    {name:28s} {woke:6.0f} {issue:6.0f}   {slack:6.0f}   {wait:6.0f}   {total:6.0f}")
    return 0


def print_merge(log: str, rows: List[List[int]], verify_rows: List[List[int]]) -> int:
    if not rows:
        print(f"{log}: no MSTAMP lines (a call with several splits, a build with -DKDTREE_SM90A_STAMPS=ON?)")
        return 1
    s = summarize_merge(rows, verify_rows)
    print(f"split merge: {s['blocks']} blocks, SM clock {s['ghz']:.3f} GHz; span (first entry to last end) "
          f"{s['span_us']:.1f} us; us after each block's entry:")
    print_points(s["points"])
    if "after_verify" in s:
        print("  us after the verify kernel's last block end (warpgroup 0's, global timer):")
        print_points(s["after_verify"], "merge block ")
    return 0


if __name__ == "__main__":
    sys.exit(main())
