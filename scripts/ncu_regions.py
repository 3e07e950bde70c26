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

With --waits it also lists where the warps wait on their hand-offs: each mbarrier wait
site (a try-wait, the branch to its out-of-line retry loop and that loop, summed) with its
barrier's shared-memory offset, each arrival on a barrier (SYNCS.ARRIVE, and the
cp.async arrivals ARRIVES.LDGSTSBAR), and each wgmma wait (WARPGROUP.DEPBAR), every one
with its samples, in address order. --barrier-names 0x38680=full0.lo,... names the
offsets (the ping-pong kernel's mbarriers sit at kOffBarriers + 8 i, i in the order of its
full[2][2], free[2][2] and Hand enum). Session 26 read warpgroup 0 as the loop's critical
path this way (docs/perf_notes.md).

With --by-role it also splits the ping-pong kernel's code where its roles' code lies in
the binary: the prologue up to the gather's register release (USETMAXREG.DEALLOC), the
gather up to its PREEXIT, then the score warpgroups; for each its samples, stall reasons
and the no-instruction samples per --block-kb of its code (what moves when the code moves:
session 30 compared two placements of the same score code this way).

usage: ncu_regions.py CSV [CSV ...] [--roles 3] [--once-factor 2] [--min-share 0.005]
                      [--waits] [--barrier-names OFFSET=NAME,...] [--by-role [--block-kb 2]]
"""
import argparse
import collections
import csv
import gzip
import re
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
    """Prints the path's once / loop split and its once stretches; returns its instructions."""
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
    return insts


BARRIER = re.compile(r"\[[^\]]*?(?:\+(0x[0-9a-f]+))?\]")
BRANCH = re.compile(r"^@!?U?P\d+\s+BRA\s+(0x[0-9a-f]+)")


def barrier_offset(source):
    """The shared-memory offset in an instruction's [reg+offset] operand (0 without one)."""
    m = BARRIER.search(source)
    return int(m.group(1), 16) if m and m.group(1) else 0


def hand_offs(insts):
    """(waits, arrivals, wgmma waits): each mbarrier wait site as (address, barrier offset,
    samples) with the samples of its try-wait, its branch to the out-of-line retry loop and
    that loop (from the branch target to its first unconditional BRA); each arrival and
    each WARPGROUP.DEPBAR as (address, offset, samples) or (address, samples)."""
    at = {inst["address"]: k for k, inst in enumerate(insts)}
    waits, arrivals, depbars = [], [], []
    retry = set()
    for k, inst in enumerate(insts):
        m = BRANCH.match(inst["source"])
        if not m or int(m.group(1), 16) <= inst["address"] or int(m.group(1), 16) not in at:
            continue
        t = at[int(m.group(1), 16)]
        if "TRYWAIT" not in insts[t]["source"]:
            continue
        samples = inst["samples"]
        if k > 0 and "TRYWAIT" in insts[k - 1]["source"]:
            samples += insts[k - 1]["samples"]
            retry.add(k - 1)
        for j in range(t, min(t + 8, len(insts))):
            samples += insts[j]["samples"]
            retry.add(j)
            if insts[j]["source"].startswith("BRA "):
                break
        waits.append((inst["address"], barrier_offset(insts[t]["source"]), samples))
    for k, inst in enumerate(insts):
        src = inst["source"]
        if "TRYWAIT" in src and k not in retry:  # a try-wait without a retry branch
            waits.append((inst["address"], barrier_offset(src), inst["samples"]))
        elif "SYNCS.ARRIVE" in src or "ARRIVES." in src:
            arrivals.append((inst["address"], barrier_offset(src), inst["samples"]))
        elif "WARPGROUP.DEPBAR" in src:
            depbars.append((inst["address"], inst["samples"]))
    return sorted(waits), arrivals, depbars


def report_waits(path, insts, names, out=None):
    """--waits: the hand-offs of `insts`, the path's instructions as report() read them."""
    out = out or sys.stdout
    all_samples = sum(i["samples"] for i in insts) or 1.0
    waits, arrivals, depbars = hand_offs(insts)

    def name(offset):
        return f"{offset:#x}" + (f" ({names[offset]})" if offset in names else "")

    print(f"{path}: mbarrier waits (try-wait, retry branch and loop):", file=out)
    for address, offset, samples in waits:
        print(f"  {address:#x} on {name(offset)}: {samples:.0f} samples ({100 * samples / all_samples:.1f}%)",
              file=out)
    print("  arrivals:", file=out)
    for address, offset, samples in arrivals:
        print(f"  {address:#x} on {name(offset)}: {samples:.0f} samples", file=out)
    print("  wgmma waits (WARPGROUP.DEPBAR):", file=out)
    for address, samples in depbars:
        print(f"  {address:#x}: {samples:.0f} samples ({100 * samples / all_samples:.1f}%)", file=out)


def split_roles(insts):
    """{"prologue", "gather", "score"}: the ping-pong kernel's instructions by where each
    role's code lies (the gather's USETMAXREG.DEALLOC and the first PREEXIT after it),
    or None when the kernel has no such release (another kernel)."""
    dealloc = next((k for k, i in enumerate(insts) if "USETMAXREG.DEALLOC" in i["source"]), None)
    if dealloc is None:
        return None
    end = next((k for k in range(dealloc, len(insts)) if insts[k]["source"].startswith("PREEXIT")), len(insts) - 1)
    return {"prologue": insts[:dealloc], "gather": insts[dealloc:end + 1], "score": insts[end + 1:]}


def report_roles(path, insts, block_kb=2, out=None):
    """--by-role: samples and stall reasons of each role's code, and the score code's
    no-instruction samples per block_kb KB from its first instruction."""
    out = out or sys.stdout
    roles = split_roles(insts)
    if roles is None:
        print(f"{path}: no USETMAXREG.DEALLOC: not the ping-pong kernel", file=out)
        return
    all_samples = sum(i["samples"] for i in insts) or 1.0
    print(f"{path}: by role", file=out)
    for name, part in roles.items():
        total = summarize(part)
        first = f"{part[0]['address']:#x}" if part else "-"
        print(f"  {name} from {first}: {len(part)} instructions, {total['samples']:.0f} samples "
              f"({100 * total['samples'] / all_samples:.1f}%): {top_reasons(total, 4)}; "
              f"no_inst {total['no_inst']:.0f}", file=out)
    score = roles["score"]
    if score:
        size = int(block_kb * 1024)
        blocks = collections.Counter()
        for inst in score:
            blocks[(inst["address"] - score[0]["address"]) // size] += inst["stalls"].get("no_inst", 0)
        print(f"  score no_inst by {block_kb:g} KB: " +
              ", ".join(f"+{b * block_kb:g} KB {v:.0f}" for b, v in sorted(blocks.items()) if v > 0), file=out)


def parse_names(text):
    names = {}
    for item in filter(None, (text or "").split(",")):
        offset, _, label = item.partition("=")
        names[int(offset, 16)] = label
    return names


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("csv", nargs="+")
    parser.add_argument("--roles", type=int, default=3)
    parser.add_argument("--once-factor", type=float, default=2.0)
    parser.add_argument("--min-share", type=float, default=0.005)
    parser.add_argument("--waits", action="store_true", help="also list the hand-offs' waits and arrivals")
    parser.add_argument("--barrier-names", default="", help="OFFSET=NAME,... for --waits")
    parser.add_argument("--by-role", action="store_true",
                        help="also split the ping-pong kernel's code by role (prologue, gather, score)")
    parser.add_argument("--block-kb", type=float, default=2.0,
                        help="with --by-role: the score code's no-instruction samples per this many KB")
    args = parser.parse_args(argv)
    names = parse_names(args.barrier_names)
    for path in args.csv:
        insts = report(path, args.roles, args.once_factor, args.min_share)
        if args.waits:
            report_waits(path, insts, names)
        if args.by_role:
            report_roles(path, insts, args.block_kb)
    return 0


if __name__ == "__main__":
    sys.exit(main())
